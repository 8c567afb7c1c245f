package main

import (
	_ "github.com/hashicorp/go-multierror"
	_ "github.com/pkg/sftp"
	_ "github.com/spf13/cobra"
	_ "go.etcd.io/etcd/client/v3"
	_ "go.etcd.io/etcd/server/v3/embed"
	_ "go.etcd.io/etcd/etcdutl/v3/snapshot"
	_ "go.yaml.in/yaml/v3"
	_ "golang.org/x/crypto/ssh"
	_ "golang.org/x/crypto/ssh/knownhosts"
	_ "golang.org/x/term"
	_ "k8s.io/apimachinery/pkg/util/validation/field"
	_ "sigs.k8s.io/yaml"
)

func main() {}
