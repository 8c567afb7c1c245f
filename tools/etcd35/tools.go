//go:build tools

// Package tools pins the etcd v3.5 release binaries the lab upgrades from (issue 14's rolling
// upgrade, v3.5 → the v3.6 of tools/etcd). It is a module of its own: etcd v3.5 and v3.6 must not
// share one dependency graph, and etcd's own v3.5 go.mod files carry replace directives, so `go
// install go.etcd.io/etcd/server/v3@v3.5.x` is refused; this module requires every etcd module at
// the same version instead. hack/build-etcd.sh tools/etcd35 bin/etcd-v3.5 builds etcd, etcdctl
// and etcdutl from it.
package tools

import (
	_ "go.etcd.io/etcd/etcdctl/v3"
	_ "go.etcd.io/etcd/etcdutl/v3"
	_ "go.etcd.io/etcd/server/v3"
)
