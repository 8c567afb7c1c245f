package app

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/kubeadm/images"
	"github.com/hactl/hactl/kubeapi"
	"github.com/hactl/hactl/kubesched"
	"github.com/hactl/hactl/status"
	"github.com/hactl/hactl/ui"
)

func newSchedulerCommand(s Streams, g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "scheduler",
		Short: "hactl-scheduler: render its configuration, deploy it HA (static pods or a Deployment), show its Lease",
		Long: `hactl-scheduler is kube-scheduler with hactl's plugins (ZonePreference, MaintenanceGuard,
RecordingBinder), for pods that set schedulerName: hactl-scheduler (spec.scheduler.schedulerName).
Its replicas elect a leader on their own Lease (kube-system/hactl-scheduler by default).

Two ways to run it: static pods on the control planes hactl built (over SSH, -f cluster.yaml), or
a Deployment in any cluster (--kubeconfig; e.g. kind in CI, with spec.scheduler from -f when the
file exists, else the defaults and the flags).

  hactl scheduler config -f cluster.yaml          # the KubeSchedulerConfiguration spec.scheduler gives
  make scheduler-image                            # bin/hactl-scheduler-image.tar, FROM scratch
  hactl scheduler deploy -f cluster.yaml --image-archive bin/hactl-scheduler-image.tar
  hactl scheduler status -f cluster.yaml          # replicas, Lease holder, renew time, transitions
  kind load image-archive bin/hactl-scheduler-image.tar
  hactl scheduler deploy --kubeconfig kind.conf --image-archive bin/hactl-scheduler-image.tar --replicas 1`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newSchedulerConfigCommand(s, g), newSchedulerDeployCommand(s, g), newSchedulerStatusCommand(s, g), newSchedulerRemoveCommand(s, g))
	return cmd
}

// schedulerFlags are the settings of a deploy through a kubeconfig without a spec file.
type schedulerFlags struct {
	kubeFlags
	replicas int
	zones    []string
}

func (f *schedulerFlags) add(cmd *cobra.Command, deploy bool) {
	f.addKube(cmd.Flags(), "reach the cluster through this kubeconfig (the Deployment mode) instead of over SSH")
	if deploy {
		cmd.Flags().IntVar(&f.replicas, "replicas", 0, "with --kubeconfig and no spec file: replicas (default 3)")
		cmd.Flags().StringSliceVar(&f.zones, "preferred-zone", nil, "with --kubeconfig and no spec file: ZONE=WEIGHT (repeatable), e.g. az-a=100")
	}
}

// schedulerTarget resolves spec.scheduler and how the cluster is reached. With --kubeconfig: the
// spec file when it exists or -f names it (spec.scheduler only: no host, binary or SSH check, the
// hosts are not contacted), else the defaults and the flags. Over SSH (hosts: true) the spec with
// its local files and SSH environment, as every command that contacts hosts; without (dry runs) the
// spec only. --replicas and --preferred-zone go with no spec file only (exit 2 otherwise).
func schedulerTarget(cmd *cobra.Command, s Streams, g *globalOptions, f *schedulerFlags, hosts bool) (*ui.Printer, *v1alpha1.Cluster, *v1alpha1.Scheduler, func(), error) {
	p := ui.New(s.Err, g.verbose, false)
	fl := cmd.Flags()
	// A kubeconfig that does not load is bad input (exit 2), found before any plan is shown.
	if err := f.check(); err != nil {
		return nil, nil, nil, nil, err
	}
	// Through a kubeconfig without -f, the flags are the spec when the default spec file is absent
	// or when --replicas/--preferred-zone are given (they say which is meant: a cluster.yaml that
	// happens to be in the working directory, e.g. a CI workspace, is not read then).
	_, statErr := os.Stat(g.file)
	flagged := fl.Lookup("replicas") != nil && (fl.Changed("replicas") || fl.Changed("preferred-zone"))
	if f.kubeconfig != "" && !fl.Changed("file") && (statErr != nil || flagged) {
		if fl.Changed("replicas") && f.replicas < 1 {
			return nil, nil, nil, nil, &UsageError{Err: fmt.Errorf("--replicas %d: at least 1", f.replicas)}
		}
		sch := &v1alpha1.Scheduler{Replicas: f.replicas}
		for _, z := range f.zones {
			name, w, ok := strings.Cut(z, "=")
			n, err := strconv.ParseInt(w, 10, 32)
			if !ok || err != nil || name == "" {
				return nil, nil, nil, nil, &UsageError{Err: fmt.Errorf("--preferred-zone %q: ZONE=WEIGHT with a weight 1-100, e.g. az-a=100", z)}
			}
			sch.PreferredZones = append(sch.PreferredZones, v1alpha1.PreferredZone{Zone: name, Weight: int32(n)})
		}
		v1alpha1.DefaultScheduler(sch)
		if errs := v1alpha1.ValidateStandaloneScheduler(sch, field.NewPath("--")); len(errs) > 0 {
			return nil, nil, nil, nil, &UsageError{Err: errors.New(flagPaths(errs.ToAggregate().Error()))}
		}
		return p, nil, sch, func() {}, nil
	}
	for _, name := range []string{"replicas", "preferred-zone"} {
		if fl.Lookup(name) != nil && fl.Changed(name) {
			return nil, nil, nil, nil, &UsageError{Err: fmt.Errorf("--%s is for --kubeconfig without -f; with the spec %s set spec.scheduler there instead", name, g.file)}
		}
	}
	var c *v1alpha1.Cluster
	closeLog := func() {}
	var err error
	if hosts && f.kubeconfig == "" {
		if p, c, _, closeLog, err = hostRun(s, g); err != nil {
			return nil, nil, nil, nil, err
		}
	} else if c, err = loadSpec(g.file, p, false); err != nil {
		return nil, nil, nil, nil, err
	}
	if c.Spec.Scheduler == nil {
		closeLog()
		return nil, nil, nil, nil, &UsageError{Err: fmt.Errorf("%s: spec.scheduler: the spec has no scheduler section: replace `scheduler: null` with the mapping below it in `hactl init`'s example (uncommented), e.g. scheduler: {imageArchive: bin/hactl-scheduler-image.tar}", g.file)}
	}
	if f.kubeconfig == "" && c.Spec.Kubernetes == nil {
		closeLog()
		return nil, nil, nil, nil, &UsageError{Err: fmt.Errorf("%s: spec.kubernetes: over SSH hactl-scheduler runs as static pods on the control planes hactl built; for another cluster pass --kubeconfig FILE", g.file)}
	}
	return p, c, c.Spec.Scheduler, closeLog, nil
}

var flagPathRE = regexp.MustCompile(`--\.preferredZones\[(\d+)\]\.(zone|weight)|--\.replicas|--\.`)

// flagPaths names the flags in the field paths of a standalone spec.scheduler ("--" root): the N-th
// --preferred-zone, --replicas.
func flagPaths(msg string) string {
	return flagPathRE.ReplaceAllStringFunc(msg, func(m string) string {
		switch sub := flagPathRE.FindStringSubmatch(m); {
		case sub[1] != "":
			n, _ := strconv.Atoi(sub[1])
			return fmt.Sprintf("--preferred-zone #%d (%s)", n+1, sub[2])
		case m == "--.replicas":
			return "--replicas"
		}
		return "spec.scheduler."
	})
}

// apiClient is the client of --kubeconfig/--context, or the spec's over SSH.
func apiClient(cmd *cobra.Command, s Streams, c *v1alpha1.Cluster, kf kubeFlags) (*kubeapi.Client, error) {
	if kf.kubeconfig != "" {
		return kf.connect(cmd.Context())
	}
	return kubeapi.FromSpec(cmd.Context(), c, terminalPrompter(s.In, s.Err))
}

func newSchedulerConfigCommand(s Streams, g *globalOptions) *cobra.Command {
	var inCluster bool
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Print the KubeSchedulerConfiguration (v1) of spec.scheduler",
		Long: `Prints the KubeSchedulerConfiguration hactl deploys: profile spec.scheduler.schedulerName with
ZonePreference (spec.scheduler.preferredZones), MaintenanceGuard and RecordingBinder, NodeResourcesFit
scoring by spec.scheduler.binPacking (NodeResourcesBalancedAllocation disabled, no default
PodTopologySpread constraints), and Lease leader election with spec.scheduler.leaderElection. hactl
checks spec.scheduler itself (exit 2 with the field path); the scheduler's own check of the file is
'hactl-scheduler validate --config FILE', which 'hactl scheduler deploy' runs on the hosts before it
swaps a configuration in.

  hactl scheduler config -f cluster.yaml > config.yaml && bin/hactl-scheduler validate --config config.yaml`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			p := ui.New(s.Err, g.verbose, false)
			c, err := loadSpec(g.file, p, false)
			if err != nil {
				return err
			}
			if c.Spec.Scheduler == nil {
				return &UsageError{Err: fmt.Errorf("%s: spec.scheduler: the spec has no scheduler section: add one (hactl init shows it)", g.file)}
			}
			kc := kubesched.KubeconfigFile
			if inCluster {
				kc = ""
			}
			out, err := kubesched.ConfigYAML(c.Spec.Scheduler, kc)
			if err != nil {
				return err
			}
			_, err = s.Out.Write(out)
			return err
		},
	}
	cmd.Flags().BoolVar(&inCluster, "in-cluster", false, "render for a pod (no kubeconfig file: the in-cluster configuration)")
	return cmd
}

func newSchedulerDeployCommand(s Streams, g *globalOptions) *cobra.Command {
	o := kubesched.DeployOptions{}
	var kindCluster string
	f := &schedulerFlags{}
	cmd := &cobra.Command{
		Use:   "deploy",
		Short: "Run hactl-scheduler HA: static pods on the control planes (over SSH) or a Deployment (--kubeconfig)",
		Long: fmt.Sprintf(`Over SSH (-f cluster.yaml): a static pod %s on every control-plane host: the
image (imported into containerd from --image-archive or spec.scheduler.imageArchive when a host
lacks it, else pulled), %s with a kubeconfig for the user %s made on the host
(kubeadm kubeconfig user: the CA key stays there), the configuration (checked by
'hactl-scheduler validate' in that image before it replaces the running one), and the RBAC a second
scheduler needs (kube-scheduler's ClusterRoles, its own Lease, the authentication reader).

Through a kubeconfig (--kubeconfig): a ServiceAccount with that RBAC, the configuration in a
ConfigMap, a Deployment (replicas one per node by required anti-affinity, spread across zones,
system-cluster-critical, the control planes' taint tolerated, probes on the secure port) and a
PodDisruptionBudget; the nodes must have the image (kind load image-archive; --image-archive only
reads the reference and the platform from the archive, and nodes of another architecture are refused).
--kind-cluster NAME loads the archive into that kind cluster first, once its nodes are the
kubeconfig's and each can run the image.

Either way it then waits until every replica runs the configuration and one holds the Lease. A
re-run with the same settings changes nothing.

  hactl scheduler deploy -f cluster.yaml --image-archive bin/hactl-scheduler-image.tar
  hactl scheduler deploy -f cluster.yaml --dry-run      # the files and the RBAC, no host contacted
  hactl scheduler deploy --kubeconfig kind.conf --image-archive bin/hactl-scheduler-image.tar --kind-cluster kind --preferred-zone az-a=100`,
			kubesched.ManifestFile, kubesched.Dir, kubesched.User),
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, c, sch, closeLog, err := schedulerTarget(cmd, s, g, f, !o.DryRun)
			if err != nil {
				return err
			}
			defer closeLog()
			if f.kubeconfig == "" {
				o.Cluster, o.Out, o.Printer, o.Prompt = c, s.Out, p, terminalPrompter(s.In, s.Err)
				return kubesched.Deploy(cmd.Context(), o)
			}
			// The nodes must have the image already (kind load image-archive): an archive only names it.
			image, archive, flag := o.Image, o.ImageArchive, "--image-archive"
			if image == "" && archive == "" {
				image, archive, flag = sch.Image, sch.ImageArchive, "spec.scheduler.imageArchive"
			}
			if image == "" && archive != "" {
				refs, err := images.ArchiveImages(archive)
				if err != nil || len(refs) != 1 {
					return &UsageError{Err: fmt.Errorf("%s %s: want an archive of one image (%v, %v)", flag, archive, refs, err)}
				}
				image = refs[0]
			}
			var platforms []images.Platform
			if archive != "" {
				var err error
				if platforms, err = images.ArchivePlatforms(archive); err != nil {
					return &UsageError{Err: fmt.Errorf("%s %s: %w", flag, archive, err)}
				}
			}
			kind, err := checkKindFlags(kindCluster, f.kubeconfig, archive)
			if err != nil {
				return err
			}
			field := "spec.scheduler"
			if c == nil {
				field = "--"
			}
			opts := kubesched.APIDeployOptions{Scheduler: sch, Field: field, Image: image, Platforms: platforms, DryRun: o.DryRun, Wait: o.Wait, Out: s.Out, Printer: p}
			if o.DryRun {
				return kubesched.DeployThroughAPI(cmd.Context(), nil, opts)
			}
			api, err := f.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer api.Close()
			if kindCluster != "" {
				if err := kindLoad(cmd.Context(), api, kind, kindCluster, archive, platforms, p); err != nil {
					return err
				}
			}
			err = kubesched.DeployThroughAPI(cmd.Context(), api, opts)
			var ue *kubesched.UsageError
			if c == nil && errors.As(err, &ue) {
				return &UsageError{Err: errors.New(flagPaths(ue.Msg))}
			}
			return api.Wrap(err)
		},
	}
	cmd.Flags().StringVar(&o.ImageArchive, "image-archive", "", "a docker save / OCI archive of the image (make scheduler-image writes bin/hactl-scheduler-image.tar)")
	cmd.Flags().StringVar(&kindCluster, "kind-cluster", "", kindClusterUsage)
	cmd.Flags().StringVar(&o.Image, "image", "", "the image reference (default spec.scheduler.image, or the one the archive holds)")
	cmd.Flags().BoolVar(&o.DryRun, "dry-run", false, "print what it would write and apply; contact nothing")
	cmd.Flags().DurationVar(&o.Wait, "wait", 3*time.Minute, "how long to wait for every replica and a Lease holder")
	f.add(cmd, true)
	return cmd
}

func newSchedulerStatusCommand(s Streams, g *globalOptions) *cobra.Command {
	var output string
	f := &schedulerFlags{}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show hactl-scheduler's replicas and its Lease (holder, renew time, transitions)",
		Long: `Reads hactl-scheduler's Lease (holderIdentity, renewTime, leaseTransitions) and its pods (static
pods or the Deployment's, label app.kubernetes.io/name=hactl-scheduler in kube-system): over SSH
through a control plane (-f cluster.yaml), or through --kubeconfig. A replica is the leader when the
holderIdentity's hostname is its node (static pods) or its pod name (Deployment). Exit 3 when
replicas are deployed but none holds the Lease, the holder stopped renewing (no renewal for twice the
lease duration), or a replica is not Ready; hactl status shows the same section.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(output); err != nil {
				return err
			}
			_, c, sch, closeLog, err := schedulerTarget(cmd, s, g, f, true)
			if err != nil {
				return err
			}
			defer closeLog()
			api, err := apiClient(cmd, s, c, f.kubeFlags)
			if err != nil {
				return err
			}
			defer api.Close()
			st, err := kubesched.ReadStatus(cmd.Context(), api, sch)
			if err != nil {
				return api.Wrap(err)
			}
			problems := status.SchedulerProblems(st, sch, time.Now())
			verdict := func() error {
				if len(problems) == 0 {
					return nil
				}
				return &VerdictError{Err: fmt.Errorf("hactl-scheduler is degraded: %s", strings.Join(problems, "; "))}
			}
			if machineOutput(output) {
				if err := writeReport(s.Out, output, st, nil); err != nil {
					return err
				}
				return verdict()
			}
			l := st.Lease
			renew := "-"
			if !l.RenewTime.IsZero() {
				renew = fmt.Sprintf("%s (%s ago)", l.RenewTime.Format(time.RFC3339), time.Since(l.RenewTime).Round(time.Second))
			}
			fmt.Fprintf(s.Out, "Lease %s/%s: holder %s, renewed %s, %d transitions\n\n", l.Namespace, l.Name, orDefault(l.Holder, "none"), renew, l.Transitions)
			tw := tabwriter.NewWriter(s.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "POD\tNODE\tREADY\tRESTARTS\tLEADER")
			for _, r := range st.Replicas {
				fmt.Fprintf(tw, "%s\t%s\t%t\t%d\t%t\n", r.Pod, r.Node, r.Ready, r.Restarts, r.Leader)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if len(st.Replicas) == 0 {
				fmt.Fprintln(s.Out, "not deployed: hactl scheduler deploy")
			}
			return verdict()
		},
	}
	outputFlag(cmd, &output, "output", "")
	f.add(cmd, false)
	return cmd
}

func newSchedulerRemoveCommand(s Streams, g *globalOptions) *cobra.Command {
	var yes bool
	f := &schedulerFlags{}
	cmd := &cobra.Command{
		Use:   "remove",
		Short: "Take hactl-scheduler out: static pods' files moved aside on the control planes, or the Deployment and its objects deleted",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, c, sch, closeLog, err := schedulerTarget(cmd, s, g, f, true)
			if err != nil {
				return err
			}
			defer closeLog()
			what := "the Deployment (its pods gone first), its Lease, the PodDisruptionBudget, ConfigMap, ServiceAccount and RBAC of hactl-scheduler in kube-system (through " + f.kubeconfig + ")"
			if f.kubeconfig == "" {
				what = "hactl-scheduler's static pod on every control plane (manifest and " + kubesched.Dir + " moved to " + kubesched.BackupDir + "), then its Lease and RBAC"
			}
			fmt.Fprintf(s.Err, "Plan: remove %s. Pods with schedulerName %s stay Pending until it is back.\n", what, sch.SchedulerName)
			if err := confirmOrStop(s, yes, "", "Remove hactl-scheduler?"); err != nil {
				return err
			}
			if f.kubeconfig == "" {
				return kubesched.RemoveStatic(cmd.Context(), c, terminalPrompter(s.In, s.Err), p, time.Now())
			}
			api, err := f.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer api.Close()
			if err := kubesched.RemoveThroughAPI(cmd.Context(), api, sch); err != nil {
				return api.Wrap(err)
			}
			p.Infof("hactl-scheduler removed")
			return nil
		},
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	f.add(cmd, false)
	return cmd
}

func newMaintenanceCommand(s Streams, g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "maintenance",
		Short: "Mark a node for maintenance (hactl-scheduler places no new pod on it) or clear the mark",
		Long: `hactl maintenance start NODE sets the maintenance label on the Node (spec.scheduler.maintenanceLabel,
default hactl.io/maintenance; any value marks it) with the annotations hactl.io/maintenance-since and
-reason. hactl-scheduler's MaintenanceGuard then places no new pod there, and the pods' unschedulable
reason names the node; pods already there stay (drain them separately). A pod that tolerates a
NoSchedule taint of the label's key is let through (as DaemonSets tolerate unschedulable nodes).
Over SSH the node must be a Kubernetes node of the spec (checked before any host is contacted); with
--kubeconfig the API must have it. Both exit 2 otherwise.

  hactl maintenance start w-b -f cluster.yaml --reason "kernel upgrade"
  hactl maintenance end w-b -f cluster.yaml`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	var reason string
	var kf kubeFlags // start and end share their flags' variables
	cmd.AddCommand(newMaintenanceMarkCommand(s, g, true, &reason, &kf), newMaintenanceMarkCommand(s, g, false, &reason, &kf))
	return cmd
}

// newMaintenanceMarkCommand is `hactl maintenance start NODE` (on) or `end NODE`; both bind their
// flags to reason and kf.
func newMaintenanceMarkCommand(s Streams, g *globalOptions, on bool, reason *string, kf *kubeFlags) *cobra.Command {
	use, short := "end NODE", "Clear the maintenance mark of NODE"
	if on {
		use, short = "start NODE", "Mark NODE for maintenance: label spec.scheduler.maintenanceLabel (default hactl.io/maintenance) =true, annotations since and reason"
	}
	c := &cobra.Command{
		Use: use, Short: short,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			p := ui.New(s.Err, g.verbose, false)
			if err := kf.check(); err != nil {
				return err
			}
			var cluster *v1alpha1.Cluster
			if _, err := os.Stat(g.file); kf.kubeconfig != "" && (err == nil || cmd.Flags().Changed("file")) {
				// The spec names the label (spec.scheduler.maintenanceLabel); the API names the nodes.
				if cluster, err = loadSpec(g.file, p, false); err != nil {
					return err
				}
			}
			if kf.kubeconfig == "" {
				var closeLog func()
				var err error
				if p, cluster, _, closeLog, err = hostRun(s, g); err != nil {
					return err
				}
				defer closeLog()
				if err := kubesched.CheckSpecNode(cluster, args[0]); err != nil {
					return err
				}
			}
			api, err := apiClient(cmd, s, cluster, *kf)
			if err != nil {
				return err
			}
			defer api.Close()
			if err := kubesched.SetMaintenance(cmd.Context(), api, kubesched.MaintenanceLabel(cluster), args[0], on, *reason, time.Now()); err != nil {
				return api.Wrap(err)
			}
			state := "under maintenance: hactl-scheduler places no new pod on it (pods on it stay; drain them separately)"
			if !on {
				state = "out of maintenance"
			}
			p.Infof("%s is %s", args[0], state)
			return nil
		},
	}
	kf.addKube(c.Flags(), "reach the cluster through this kubeconfig instead of over SSH")
	if on {
		c.Flags().StringVar(reason, "reason", "", "why (shown in the pods' unschedulable reason)")
	}
	return c
}
