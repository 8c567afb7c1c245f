//go:build tools

// Package tools pins controller-gen (sigs.k8s.io/controller-tools), which generates the operator
// API's deepcopy methods and CRDs (operator/api/v1alpha1 → operator/crds). A module of its own so
// controller-tools' dependency graph stays out of hactl's go.mod; hack/build-controller-gen.sh
// builds bin/controller-gen from it, `make generate` runs it.
package tools

import (
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
