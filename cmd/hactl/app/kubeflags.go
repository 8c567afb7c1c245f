package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/kubeapi"
)

// kindClusterUsage is --kind-cluster's help, the same on every deploy command.
const kindClusterUsage = "with --kubeconfig and --image-archive: load the archive into this kind cluster's nodes (kind load image-archive, kind from PATH) once its nodes are the kubeconfig's and each can run the image"

// kubeFlags are --kubeconfig and --context: a cluster reached through a kubeconfig (kind in users'
// CI, the lab's cluster, a managed one) instead of over SSH.
type kubeFlags struct {
	kubeconfig, context string
}

// addKube adds --kubeconfig (with usage) and --context to fs.
func (k *kubeFlags) addKube(fs *pflag.FlagSet, usage string) {
	fs.StringVar(&k.kubeconfig, "kubeconfig", "", usage)
	fs.StringVar(&k.context, "context", "", "with --kubeconfig: the kubeconfig's context to use (default its current-context)")
}

func (k kubeFlags) spec() kubeapi.Kubeconfig {
	return kubeapi.Kubeconfig{Path: k.kubeconfig, Context: k.context}
}

// check reads the kubeconfig without contacting its server. --context without --kubeconfig, or a
// file that does not load, is bad input (exit 2); a context the file does not have is
// *kubeapi.ContextError (exit 1, naming the contexts it has).
func (k kubeFlags) check() error {
	if k.kubeconfig == "" {
		if k.context != "" {
			return &UsageError{Err: errors.New("--context picks a context of --kubeconfig: give --kubeconfig FILE too")}
		}
		return nil
	}
	api, err := kubeapi.LoadKubeconfig(k.spec())
	if err != nil {
		return kubeErr(err)
	}
	return api.Close()
}

// connect is the client of --kubeconfig/--context once its server answered (check's errors, then
// *kubeapi.UnreachableError naming context and server: exit 1).
func (k kubeFlags) connect(ctx context.Context) (*kubeapi.Client, error) {
	if k.kubeconfig == "" { // only check's usage errors apply
		if err := k.check(); err != nil {
			return nil, err
		}
		return nil, &UsageError{Err: errors.New("--kubeconfig FILE is required here")}
	}
	api, err := kubeapi.FromKubeconfig(ctx, k.spec()) // loads the file once, as check would
	return api, kubeErr(err)
}

// kubeErr turns a kubeconfig that does not load into a usage error (--kubeconfig, exit 2).
func kubeErr(err error) error {
	if le := (*kubeapi.LoadError)(nil); errors.As(err, &le) {
		return &UsageError{Err: fmt.Errorf("--kubeconfig: %w", err)}
	}
	return err
}

// given is the kubeconfig of the flags, nil when --kubeconfig is not set.
func (k kubeFlags) given() *kubeapi.Kubeconfig {
	if k.kubeconfig == "" {
		return nil
	}
	kc := k.spec()
	return &kc
}

// apiClient is the client of --kubeconfig/--context, or the spec's over SSH.
func apiClient(cmd *cobra.Command, s Streams, c *v1alpha1.Cluster, kf kubeFlags) (*kubeapi.Client, error) {
	if kf.kubeconfig != "" {
		return kf.connect(cmd.Context())
	}
	return kubeapi.FromSpec(cmd.Context(), c, terminalPrompter(s.In, s.Err))
}
