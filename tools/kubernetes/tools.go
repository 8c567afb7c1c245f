//go:build tools

// Package tools pins the Kubernetes release binaries hactl's lab uses for its kubeadm control plane
// (kubeadm, kubelet, kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy, kubectl).
// It is a module of its own so that k8s.io/kubernetes' dependency graph stays out of hactl's go.mod;
// hack/build-kubernetes.sh builds them into bin/ from the version pinned here (v1.37.2).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubeadm"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
