// Package v1alpha1 holds hactl-operator's API: the EtcdCluster and EtcdSnapshot custom resources of
// group hactl.io, version v1alpha1. The types only need apimachinery, so the root module carries
// them (hactl operator deploy builds the objects; the CRDs in operator/crds are generated from them by
// controller-gen) while the operator itself, built on controller-runtime, is a module of its own
// (cmd/hactl-operator; see docs/architecture.md for why).
//
// Admission is the API server's: the OpenAPI schema and CEL rules (x-kubernetes-validations) carry
// every rule, so the operator needs no webhook.
//
// +kubebuilder:object:generate=true
// +groupName=hactl.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is hactl.io/v1alpha1.
var GroupVersion = schema.GroupVersion{Group: "hactl.io", Version: "v1alpha1"}

var (
	schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme registers EtcdCluster, EtcdSnapshot and their lists with a scheme.
	AddToScheme = schemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &EtcdCluster{}, &EtcdClusterList{}, &EtcdSnapshot{}, &EtcdSnapshotList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
