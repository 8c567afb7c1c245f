//go:build tools

// Package tools pins the etcd release binaries hactl's lab and e2e tests use. It is a module of its
// own so that etcd's dependency graph stays out of hactl's go.mod; hack/build-etcd.sh builds
// bin/etcd, bin/etcdctl and bin/etcdutl from the versions pinned here (v3.6.16).
package tools

import (
	_ "go.etcd.io/etcd/etcdctl/v3"
	_ "go.etcd.io/etcd/etcdutl/v3"
	_ "go.etcd.io/etcd/server/v3"
)
