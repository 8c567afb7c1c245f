package app

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/drill"
	"github.com/hactl/hactl/drill/fault"
	"github.com/hactl/hactl/drill/lease"
)

// drillOptions are the flags every drill shares, plus each drill's own.
type drillOptions struct {
	method       string
	component    string
	backend      string
	zone         string
	expectOutage bool
	down, up     string
	hold         time.Duration
	count        int
	maxRTO       time.Duration
	rate         int
	reqTimeout   time.Duration
	caFile       string
	report       string
	force        bool
	yes          bool
	dryRun       bool
	output       string
	// kill-leader --target lease/...: the Lease drill.
	kubeFlags
	target, schedulerName, podImage string
	podRate                         int
}

func newDrillCommand(s Streams, g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "drill",
		Short: "Failover drills: kill the etcd leader, lose a zone, fail the VIP holder; measured RTO, proven zero loss",
		Long: `Each drill takes down exactly the part that holds a role, measures how long the control plane
was unavailable while a workload runs, puts everything back and proves that no acknowledged write
was lost. Every drill first refuses on an unhealthy cluster (--force overrides) or on an earlier
drill's leftovers (see 'hactl drill cleanup'), shows its plan and asks for confirmation (--yes in
scripts; --dry-run only shows the plan).

The system is always put back, also on error and on Ctrl-C; the fault is recorded first in
<stateDir>/drill/active.json and on the host, and each host puts itself back (a systemd timer) if
hactl dies. Exit codes: 0 drill done and no failure; 3 refused by preflight, an acknowledged write
lost, a stale read, an RTO over --max-rto or a prediction not met; 2 bad flags (nothing touched); 1 a
runtime failure (what is left broken is named).

  hactl drill kill-leader --yes                    SIGKILL the etcd leader, hold it down 10s, measure, put back
  hactl drill kill-leader --method network         partition the leader (iptables on its peer and client ports)
  hactl drill az-outage --zone az-b --yes          take every member and LB host of az-b down
  hactl drill lb-failover --ca-file ca.crt --yes   stop HAProxy on the VIP holder, poll readyz through the VIP
  hactl drill restore --yes                        stop every member, restore from the newest snapshot: RTO and RPO
  hactl drill cleanup --yes                        put back what an interrupted drill left`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(
		newDrillKindCommand(s, g, drill.KillLeader),
		newDrillKindCommand(s, g, drill.AZOutage),
		newDrillKindCommand(s, g, drill.LBFailover),
		newDrillRestoreCommand(s, g),
		newDrillCleanupCommand(s, g),
	)
	return cmd
}

func newDrillKindCommand(s Streams, g *globalOptions, kind drill.Kind) *cobra.Command {
	o := &drillOptions{}
	cmd := &cobra.Command{Use: string(kind), Args: usageArgs(cobra.NoArgs)}
	switch kind {
	case drill.KillLeader:
		cmd.Short = "Take down the etcd leader; measure the election, the RTO and the catch-up; prove no acknowledged write was lost"
		cmd.Long = `Finds the etcd leader and takes it down while writers put keys at --rate (each with a
--request-timeout deadline) and readers check linearizable reads, through hactl's TLS client.

  --method process   SIGKILL of etcd over SSH, the unit then held stopped for --hold (so systemd's
                     Restart= does not hide the failure), then started
  --method network   iptables on the leader drops its peer and client ports in and out for --hold:
                     a partitioned leader must step down, and no write may be acknowledged by both sides
  --method host      --down-command runs here to take the whole host down (a Go template: .Host,
                     .Address, .Zone; e.g. 'virsh destroy {{.Host}}'), --up-command brings it back

Measured every 20 ms: time until a new leader is elected, time until the first acknowledged write
(the RTO), the longest gap between acknowledged writes, write latency p50/p99, and after the put-back
the time until the member's applied index reaches the leader's commit index. Then every acknowledged
key is read back (any missing: data lost, exit 3), revisions must follow acknowledgement order and
no two acknowledged writes may share a revision.

With --target lease/NAMESPACE/NAME the drill takes down the holder of that Lease instead
(hactl-scheduler's, kube-scheduler's, kube-controller-manager's: any client-go leader election),
found from its holderIdentity, while --pod-rate pods per second are created for the scheduler
(--scheduler-name; none for kube-controller-manager) in namespace hactl-drill and deleted once bound.

  --method process   over SSH (-f cluster.yaml): SIGKILL of the holder's container on its host; the
                     others wait out the lease duration
  --method graceful  over SSH: SIGTERM; client-go's ReleaseOnCancel hands the Lease over at once
  --kubeconfig FILE  the holder's pod is deleted (a Deployment's replica): with no grace for
                     process, its grace period for graceful; kubelet sends SIGTERM first either way,
                     so both hand over at once - only the SSH mode crashes a replica. Static pods
                     cannot be stopped through the API: use the SSH mode for them.

Measured from watch events on this machine's clock (never the Lease's renewTime): time until another
identity holds the Lease, until the first pod is bound by another replica, the longest gap between
bindings, the pods pending at the peak. With hactl-scheduler every pod names the replica that bound
it (scheduler.hactl.io/bound-by): ordered by revision, the bindings of two identities must never
interleave. Exit 3 over --max-rto (default 30s for a Lease), with a pod never bound, or interleaved
bindings. Kubernetes puts the replica back (kubelet, the Deployment); the drill waits until it is
Ready again.

On hactl-operator's Lease (lease/hactl-system/hactl-operator, through --kubeconfig) no pods are
made: for every EtcdCluster with spec.backup the drill counts the operator's SnapshotTaken Events
per slot of spec.backup.every, from the fault's slot to the takeover's, and waits until each slot
has one (10s past the takeover at least): a slot taken twice (by the old and the new leader) or
not at all is exit 3.

  hactl drill kill-leader -f cluster.yaml --target lease/kube-system/hactl-scheduler --yes
  hactl drill kill-leader -f cluster.yaml --target lease/kube-system/hactl-scheduler --method graceful --count 10 --report takeover.json --yes
  hactl drill kill-leader --kubeconfig kind.conf --target lease/kube-system/hactl-scheduler --yes
  hactl drill kill-leader --kubeconfig admin.conf --target lease/hactl-system/hactl-operator --method graceful --yes`
	case drill.AZOutage:
		cmd.Short = "Take down every etcd member and LB host of one availability zone; prediction vs observation"
		cmd.Long = `Predicts from the spec what losing --zone must do ("losing az-b leaves 2 of 3 members: quorum
holds"; whether the leader and the VIP holder are in it), takes down every etcd member and LB host of
the zone by --method (default network: everything but SSH dropped; process: etcd, haproxy and
keepalived killed; host: --down-command/--up-command), measures as kill-leader does (and the VIP's
move; readyz through the VIP with --ca-file or spec.loadBalancer.healthCheck.caFile), puts the zone
back and reports prediction vs observation (exit 3 when they differ).

A zone whose loss breaks quorum is refused unless --expect-outage; the drill then measures the time
to recovery after the zone returns.`
	case drill.LBFailover:
		cmd.Short = "Stop HAProxy (or Keepalived) on the VIP holder, or cut a backend off your own load balancer; measure until readyz answers again"
		cmd.Long = `Finds the LB host holding the VIP, stops --component there (haproxy or keepalived) and polls
GET https://VIP:PORT/readyz every 20 ms on fresh connections (a pooled connection to the old holder
would hide the failover), while every LB host reports the VIP every 20 ms over SSH. Measured: time
until the VIP sits on another host, time until readyz answers 200 again (the RTO), failed requests.
After --hold the component is started again and the VIP must settle where the configuration puts it
(the highest priority, or where it is with nopreempt); the failback's own outage is reported.

With spec.loadBalancer.external (your own load balancer) there is no VIP holder: the drill cuts one
backend off instead (--backend, default the first control-plane host): iptables there drops TCP to
and from kube-apiserver's port, as a dead host looks to a load balancer, while GET /readyz is asked
through your load balancer every 20 ms. Measured: failed requests and the time until readyz answers
200 again, i.e. how long your load balancer's health check kept sending clients to the dead backend.

The kube-apiserver's certificate is verified: --ca-file (the cluster CA) or
spec.loadBalancer.healthCheck.caFile.`
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return runDrill(cmd, s, g, o, kind) }
	f := cmd.Flags()
	switch kind {
	case drill.KillLeader, drill.AZOutage:
		def := string(drill.MethodProcess)
		if kind == drill.AZOutage {
			def = string(drill.MethodNetwork)
		}
		methods := "process, network or host"
		if kind == drill.KillLeader {
			methods += "; with --target: process or graceful"
		}
		f.StringVar(&o.method, "method", def, "how to take hosts down: "+methods)
		ms := []string{}
		for _, m := range drill.Methods {
			ms = append(ms, string(m))
		}
		if kind == drill.KillLeader {
			ms = append(ms, "graceful") // with --target (drill/lease)
		}
		_ = cmd.RegisterFlagCompletionFunc("method", cobra.FixedCompletions(ms, cobra.ShellCompDirectiveNoFileComp))
		f.StringVar(&o.down, "down-command", "", "--method host: command run here to take a host down (Go template: {{.Host}} {{.Address}} {{.Zone}})")
		f.StringVar(&o.up, "up-command", "", "--method host: command run here to bring the host back (same template fields)")
		f.IntVar(&o.rate, "rate", drill.DefaultRate, "workload puts per second (the RTO's resolution is 1/rate)")
		f.DurationVar(&o.reqTimeout, "request-timeout", drill.DefaultRequestTimeout, "deadline of each workload request")
	}
	if kind == drill.KillLeader {
		f.StringVar(&o.target, "target", "", "lease/NAMESPACE/NAME: take down the holder of that Lease instead of the etcd leader (e.g. lease/kube-system/hactl-scheduler; --method process or graceful)")
		o.addKube(f, "--target: reach the cluster through this kubeconfig (the holder's pod is deleted) instead of over SSH")
		f.StringVar(&o.schedulerName, "scheduler-name", "", "--target: the workload pods' schedulerName (default: default-scheduler for kube-scheduler's Lease, none for kube-controller-manager's, else the Lease's name)")
		f.StringVar(&o.podImage, "pod-image", "", "--target: the workload pods' image (default spec.kubernetes' pause image, else "+defaultPodImage+")")
		f.IntVar(&o.podRate, "pod-rate", lease.DefaultRate, "--target: workload pods created per second")
	}
	if kind == drill.AZOutage {
		f.StringVar(&o.zone, "zone", "", "the availability zone to take down (spec.hosts[*].zone)")
		_ = cmd.RegisterFlagCompletionFunc("zone", completeZones)
		f.BoolVar(&o.expectOutage, "expect-outage", false, "run even though losing the zone loses quorum; measure the recovery after it returns")
	}
	if kind == drill.LBFailover {
		f.StringVar(&o.component, "component", "", "what to stop on the VIP holder: haproxy (default) or keepalived; kube-apiserver (the only one) with spec.loadBalancer.external")
		_ = cmd.RegisterFlagCompletionFunc("component", cobra.FixedCompletions([]string{string(drill.ComponentHAProxy), string(drill.ComponentKeepalived), string(drill.ComponentAPIServer)}, cobra.ShellCompDirectiveNoFileComp))
		f.StringVar(&o.backend, "backend", "", "spec.loadBalancer.external: the control-plane host cut off your load balancer (default: the first)")
		_ = cmd.RegisterFlagCompletionFunc("backend", completeHosts(v1alpha1.RoleControlPlane, false))
	}
	if kind != drill.KillLeader {
		f.StringVar(&o.caFile, "ca-file", "", "kube-apiserver CA for readyz through the VIP or your load balancer (default spec.loadBalancer.healthCheck.caFile)")
	}
	f.DurationVar(&o.hold, "hold", drill.DefaultHold, "how long the fault is held before everything is put back")
	f.IntVar(&o.count, "count", 1, "iterations; the report gives min/median/max")
	f.DurationVar(&o.maxRTO, "max-rto", 0, "fail (exit 3) when any iteration's RTO exceeds this (e.g. 5s; default none, with --target 30s)")
	f.StringVar(&o.report, "report", "", "also write the JSON report to this file")
	f.BoolVar(&o.force, "force", false, "run although preflight found the cluster unhealthy (never with an earlier drill's leftovers)")
	f.BoolVar(&o.yes, "yes", false, "do not ask for confirmation (scripts, CI)")
	f.BoolVar(&o.dryRun, "dry-run", false, "show the plan (after the read-only preflight) and stop")
	outputFlag(cmd, &o.output, "report", " on stdout (progress goes to stderr)")
	return cmd
}

func runDrill(cmd *cobra.Command, s Streams, g *globalOptions, o *drillOptions, kind drill.Kind) error {
	if err := outputFormat(o.output); err != nil {
		return err
	}
	if o.target != "" {
		return runLeaseDrill(cmd, s, g, o)
	}
	for _, name := range []string{"kubeconfig", "context", "scheduler-name", "pod-image", "pod-rate"} {
		if fl := cmd.Flags().Lookup(name); fl != nil && fl.Changed {
			return &UsageError{Err: fmt.Errorf("--%s is for --target lease/NAMESPACE/NAME (the Lease drill); the etcd drills reach the members over SSH and write to etcd themselves", name)}
		}
	}
	p, c, logPath, closeLog, err := hostRun(s, g)
	if err != nil {
		return err
	}
	defer closeLog()
	do := &drill.Options{Cluster: c, Kind: kind, Zone: o.zone, ExpectOutage: o.expectOutage, Hold: o.hold, Count: o.count,
		MaxRTO: o.maxRTO, Rate: o.rate, RequestTimeout: o.reqTimeout, CAFile: o.caFile, Force: o.force, DryRun: o.dryRun,
		Report: o.report, Printer: p, Prompt: terminalPrompter(s.In, s.Err)}
	if kind != drill.LBFailover {
		if do.Method, err = drill.ParseMethod("--method", o.method); err != nil {
			return err
		}
	} else if do.Component, err = drill.ParseComponent("--component", o.component); err != nil {
		return err
	}
	do.Backend = o.backend
	if o.down != "" {
		if do.Down, err = fault.ParseHostCommand("--down-command", o.down); err != nil {
			return &UsageError{Err: err}
		}
	}
	if o.up != "" {
		if do.Up, err = fault.ParseHostCommand("--up-command", o.up); err != nil {
			return &UsageError{Err: err}
		}
	}
	f := cmd.Flags()
	if f.Changed("hold") && o.hold <= 0 {
		return &UsageError{Err: fmt.Errorf("--hold %s: must be a positive duration, e.g. 10s", o.hold)}
	}
	if f.Changed("rate") && o.rate <= 0 {
		return &UsageError{Err: fmt.Errorf("--rate %d: must be between 1 and 1000 puts per second", o.rate)}
	}
	if f.Changed("request-timeout") && o.reqTimeout <= 0 {
		return &UsageError{Err: fmt.Errorf("--request-timeout %s: must be positive, e.g. 100ms", o.reqTimeout)}
	}
	if err := do.Validate(); err != nil {
		return err
	}
	if !o.dryRun {
		if do.Confirm, err = confirmer(s, o.yes, ", or --dry-run to only see the plan"); err != nil {
			return err
		}
	}
	rep, runErr := drill.Run(cmd.Context(), do)
	if rep != nil {
		if err := writeReport(s.Out, o.output, rep, rep.Print); err != nil {
			return err
		}
	}
	if runErr != nil && logPath != "" {
		fmt.Fprintf(s.Err, "debug log: %s\n", logPath)
	}
	return runErr
}

func newDrillCleanupCommand(s Streams, g *globalOptions) *cobra.Command {
	var yes, dryRun bool
	var output string
	cmd := &cobra.Command{
		Use:   "cleanup",
		Short: "Put back what an interrupted drill left: stopped units, iptables rules, hosts taken down",
		Long: `Reads the drill journal (<stateDir>/drill/active.json) and inspects every etcd member and LB host
for a drill's marker, its iptables chain (HACTL-DRILL) and its deadman timer. Hosts taken down with
--method host are brought back with the journal's --up-command (run here); every other host runs the
restore script (chain removed, units the marker lists started, deadman stopped, marker removed). The
journal is removed when everything is back. Exit 0 when everything is clean, 1 when something could not
be put back (named).`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(output); err != nil {
				return err
			}
			p, c, logPath, closeLog, err := hostRun(s, g)
			if err != nil {
				return err
			}
			defer closeLog()
			var confirm func(string) (bool, error)
			if !dryRun {
				if confirm, err = confirmer(s, yes, ", or --dry-run to only see what is left"); err != nil {
					return err
				}
			}
			res, runErr := drill.Cleanup(cmd.Context(), drill.CleanupOptions{Cluster: c, Printer: p, Confirm: confirm, DryRun: dryRun,
				Prompt: terminalPrompter(s.In, s.Err)})
			if res != nil {
				if err := writeReport(s.Out, output, res, res.Print); err != nil {
					return err
				}
			}
			if runErr != nil && logPath != "" {
				fmt.Fprintf(s.Err, "debug log: %s\n", logPath)
			}
			return runErr
		},
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation (scripts, CI)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "only show what is left and what would be done")
	outputFlag(cmd, &output, "result", "")
	return cmd
}
