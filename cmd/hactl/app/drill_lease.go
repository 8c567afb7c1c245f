package app

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/drill/lease"
	"github.com/hactl/hactl/kubeapi"
	"github.com/hactl/hactl/operator/deploy"
	"github.com/hactl/hactl/operator/observe"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/ui"
)

// defaultPodImage is the Lease drill's workload image when no spec names one (kubeadm 1.37's pause).
const defaultPodImage = "registry.k8s.io/pause:3.10.2"

// runLeaseDrill is kill-leader --target lease/NS/NAME: over SSH with the spec, or through --kubeconfig.
func runLeaseDrill(cmd *cobra.Command, s Streams, g *globalOptions, o *drillOptions) error {
	t, err := lease.ParseTarget(o.target)
	if err != nil {
		return err
	}
	f := cmd.Flags()
	lo := &lease.Options{Target: t, Method: o.method, Rate: o.podRate, Count: o.count, MaxRTO: o.maxRTO, DryRun: o.dryRun,
		Report: o.report, PodImage: o.podImage}
	switch {
	case f.Changed("scheduler-name"):
		lo.SchedulerName = o.schedulerName
	case t.Name == "kube-scheduler":
		lo.SchedulerName = "default-scheduler"
	case t.Name == "kube-controller-manager", t.Name == deploy.Name:
		// No pods to bind: the controller-manager's work and the operator's slots are checked instead.
	default:
		lo.SchedulerName = t.Name
	}
	for _, name := range []string{"hold", "down-command", "up-command", "rate", "request-timeout", "force"} {
		if f.Changed(name) {
			return &UsageError{Err: fmt.Errorf("--%s is for the etcd drills; a Lease drill's fault is put back by Kubernetes (kubelet, the Deployment)", name)}
		}
	}
	// Every flag is checked before the spec is read or a host or the API contacted.
	if err := lo.Validate(); err != nil {
		return err
	}
	if err := o.check(); err != nil {
		return err
	}
	p := ui.New(s.Err, g.verbose, false)
	var api *kubeapi.Client
	if o.kubeconfig != "" {
		if api, err = o.connect(cmd.Context()); err != nil {
			return err
		}
	} else {
		var c *v1alpha1.Cluster
		var closeLog func()
		if p, c, _, closeLog, err = hostRun(s, g); err != nil {
			return err
		}
		defer closeLog()
		if c.Spec.Kubernetes == nil {
			return &UsageError{Err: fmt.Errorf("%s: spec.kubernetes: a Lease drill over SSH needs the cluster hactl built; through another cluster use --kubeconfig", g.file)}
		}
		if lo.PodImage == "" {
			lo.PodImage = c.Spec.Kubernetes.PauseImage()
		}
		prompt := terminalPrompter(s.In, s.Err)
		d, err := provision.FromSpec(c, provision.SpecOptions{Prompt: prompt})
		if err != nil {
			return fmt.Errorf("ssh: %w", err)
		}
		defer d.Close()
		lo.Cluster, lo.Dialer = c, d
		if api, err = kubeapi.FromSpec(cmd.Context(), c, prompt); err != nil {
			return err
		}
	}
	defer api.Close()
	if lo.PodImage == "" {
		lo.PodImage = defaultPodImage
	}
	lo.API, lo.Via, lo.Printer = api, api.Via, p
	if t.Name == deploy.Name {
		if lo.Slots, err = operatorSlots(cmd.Context(), api, t.Namespace); err != nil {
			return api.Wrap(err)
		}
	}
	if !o.dryRun {
		if lo.Confirm, err = confirmer(s, o.yes, ", or --dry-run to only see the plan"); err != nil {
			return err
		}
	}
	rep, runErr := lease.Run(cmd.Context(), lo)
	if rep != nil {
		if err := writeReport(s.Out, o.output, rep, rep.Print); err != nil {
			return err
		}
	}
	return runErr
}

// operatorSlots is the slot check of a drill on hactl-operator's Lease: one per EtcdCluster in
// namespace with spec.backup, counting its SnapshotTaken Events per spec.backup.every slot (the
// operator's rule, observe.DueSlot). Errors: listing the EtcdClusters failed.
func operatorSlots(ctx context.Context, api *kubeapi.Client, namespace string) ([]lease.SlotCheck, error) {
	ecs, err := deploy.BackedUpClusters(ctx, api.Config, namespace)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", api.Via, err)
	}
	var out []lease.SlotCheck
	for _, ec := range ecs {
		every := observe.Every(ec.Spec.Backup)
		out = append(out, lease.SlotCheck{Namespace: ec.Namespace, Regarding: ec.Name, Reason: observe.EventSnapshotTaken,
			Every: every, SlotOf: func(t time.Time) string { return observe.DueSlot(t, every) }})
	}
	return out, nil
}
