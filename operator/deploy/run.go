package deploy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/hactl/hactl/internal/exitcode"
	"github.com/hactl/hactl/kubeapi"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/ui"
)

// RunOptions are one `hactl operator deploy`: the manifests' Options (Cluster, Namespace, Image,
// Replicas, DryRun, Backup, Healing, RequeuePeriod) and how they reach the cluster.
type RunOptions struct {
	Options
	// ImageArchive, with Kubeconfig nil, is imported into every Kubernetes node over SSH before
	// anything is applied (ImportArchive); through a kubeconfig the nodes must have the image
	// (Nodes checks or loads it).
	ImageArchive string
	// Kubeconfig is the --kubeconfig/--context the API is reached through; nil: over SSH to a
	// control plane of Cluster (kubeapi.FromSpec).
	Kubeconfig *kubeapi.Kubeconfig
	// Nodes, when set, runs once the API answers and before anything is applied: the image put on
	// or checked against the nodes (kind load, the archive's platforms). Its errors are returned
	// as they are.
	Nodes func(context.Context, *kubeapi.Client) error
	// Prompt answers SSH's questions (passphrases); Printer gets the progress lines.
	Prompt  provision.Prompter
	Printer *ui.Printer
	// Out gets the manifests of a dry run (Secrets redacted, Plan.Print).
	Out io.Writer
	// Wait bounds the wait for a replica to run and observe the cluster (WaitReady).
	Wait time.Duration
}

// Run deploys hactl-operator as o says: the manifests built (Build), with DryRun printed to o.Out
// and nothing else done (nil Ready); else the image archive imported over SSH, the API connected,
// o.Nodes, the objects applied server-side, where the operator runs recorded in the state dir
// (Record, the kubeconfig's path made absolute) and WaitReady. Errors: Build's (*UsageError), the
// import's, the connection's (a kubeconfig that does not load: *exitcode.UsageError naming
// --kubeconfig) and Nodes' as they are, the API's wrapped with how it was reached, the
// state dir's ("operator/apply: recording where ...").
func Run(ctx context.Context, o RunOptions) (*Ready, error) {
	plan, err := Build(o.Options)
	if err != nil {
		return nil, err
	}
	if o.DryRun {
		out, err := plan.Print()
		if err != nil {
			return nil, err
		}
		_, err = o.Out.Write(out)
		return nil, err
	}
	p := o.Printer
	if o.ImageArchive != "" && o.Kubeconfig == nil {
		p.Infof("operator/image: %s into every Kubernetes node", o.Image)
		if err := ImportArchive(ctx, o.Cluster, o.Prompt, o.ImageArchive, p); err != nil {
			return nil, err
		}
	}
	api, err := connect(ctx, o)
	if err != nil {
		return nil, err
	}
	defer api.Close()
	if o.Nodes != nil {
		if err := o.Nodes(ctx, api); err != nil {
			return nil, err
		}
	}
	p.Infof("operator/apply: through %s", api.Via)
	if err := plan.Apply(ctx, api.Config, func(kind, name string) { p.Debugf("operator/apply: %s %s", kind, name) }); err != nil {
		return nil, api.Wrap(err)
	}
	p.Infof("operator/apply: %d objects applied", len(plan.Objects))
	ns := cmp.Or(o.Namespace, DefaultNamespace)
	if err := Record(o.Cluster, &Location{Namespace: ns, Kubeconfig: absKubeconfig(o.Kubeconfig)}); err != nil {
		return nil, fmt.Errorf("operator/apply: recording where the operator runs in the state dir: %w", err)
	}
	ready, err := WaitReady(ctx, api.Config, ns, o.Cluster.Metadata.Name, o.Wait)
	if err != nil {
		return nil, api.Wrap(err)
	}
	return &ready, nil
}

// absKubeconfig makes the kubeconfig path absolute, for the state dir's record (nil stays nil).
func absKubeconfig(kc *kubeapi.Kubeconfig) *kubeapi.Kubeconfig {
	if kc == nil {
		return nil
	}
	abs := *kc
	if p, err := filepath.Abs(kc.Path); err == nil {
		abs.Path = p
	}
	return &abs
}

// connect is Location.Client of o.Kubeconfig, else of o.Cluster over SSH; a kubeconfig file that
// does not load is a usage error naming --kubeconfig (exit 2).
func connect(ctx context.Context, o RunOptions) (*kubeapi.Client, error) {
	api, err := Location{Kubeconfig: o.Kubeconfig}.Client(ctx, o.Cluster, o.Prompt)
	if le := (*kubeapi.LoadError)(nil); o.Kubeconfig != nil && errors.As(err, &le) {
		return api, &exitcode.UsageError{Err: fmt.Errorf("--kubeconfig: %w", err)}
	}
	return api, err
}
