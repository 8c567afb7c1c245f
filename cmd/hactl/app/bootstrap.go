package app

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/bootstrap"
	"github.com/hactl/hactl/bootstrap/restore"
	"github.com/hactl/hactl/internal/exitcode"
	"github.com/hactl/hactl/internal/sumcache"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/report"
	"github.com/hactl/hactl/ui"
)

type bootstrapOptions struct {
	dryRun            bool
	acceptNewHostKeys bool
	skipPhases        []string
	ignorePreflight   []string
	allowForeign      bool
	waitTimeout       time.Duration
	output            string
	restoreFrom       string
	identityFile      string
	noHostFetch       bool
	replaceLost       []string
	detailedExitCode  bool // plan only
	kube              kubeFlags
}

func (o *bootstrapOptions) addFlags(cmd *cobra.Command, withDryRun bool) {
	if withDryRun {
		cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "stop after the plan: change nothing on any host or in the state dir")
	}
	cmd.Flags().BoolVar(&o.acceptNewHostKeys, "accept-new-host-keys", false, "append UNKNOWN SSH host keys to the known_hosts file (changed keys are always refused)")
	cmd.Flags().StringSliceVar(&o.skipPhases, "skip-phases", nil, "phases to skip (e.g. etcd/wait); a name ending in / skips the group")
	cmd.Flags().StringSliceVar(&o.ignorePreflight, "ignore-preflight-errors", nil, "preflight checks whose failures become warnings: "+strings.Join(bootstrap.Checks, ", ")+", or all")
	cmd.Flags().BoolVar(&o.allowForeign, "allow-foreign-overrides", false, "keep going where a drop-in, environment file or unit file hactl does not own overrides a unit it manages (etcd, HAProxy, Keepalived, kubelet, containerd); without it such a host is refused at preflight, naming the file and what it sets")
	if withDryRun { // plan stops before anything starts
		cmd.Flags().DurationVar(&o.waitTimeout, "wait", 2*time.Minute, "how long to wait for members to become healthy")
	}
	outputFlag(cmd, &o.output, "summary", " (progress goes to stderr)")
	cmd.Flags().StringVar(&o.restoreFrom, "restore-from", "", "build a NEW cluster whose data comes from this snapshot: ./file.db, s3://BUCKET/KEY or latest (disaster recovery onto new hosts; see hactl restore --help)")
	cmd.Flags().StringSliceVar(&o.replaceLost, "replace-lost", nil, "etcd members (host names) whose data dir was lost: remove each (quorum-guarded) and add it back as a new learner on the same host, instead of refusing")
	_ = cmd.RegisterFlagCompletionFunc("replace-lost", completeHosts(v1alpha1.RoleEtcd, true))
	_ = cmd.RegisterFlagCompletionFunc("ignore-preflight-errors", completeList(append([]string{"all"}, bootstrap.Checks...)))
	_ = cmd.RegisterFlagCompletionFunc("restore-from", completeSnapshots(true))
	cmd.Flags().StringVar(&o.identityFile, "identity-file", "", "age identity file for an encrypted --restore-from backup (default $"+identityEnv+")")
	cmd.Flags().BoolVar(&o.noHostFetch, "no-host-fetch", false, "with --restore-from: "+noHostFetchUsage)
	o.kube.addKube(cmd.Flags(), "read hactl-operator's heals through this kubeconfig (default: where operator deploy recorded it, else over SSH)")
}

func newBootstrapCommand(s Streams, g *globalOptions) *cobra.Command {
	o := &bootstrapOptions{}
	cmd := &cobra.Command{
		Use:   "bootstrap",
		Short: "Converge the hosts into a healthy TLS etcd cluster, its load balancer and Kubernetes",
		Long: `Bootstrap runs these phases in order:

  preflight     SSH to every host (host keys verified), gather facts with one command, check root,
                OS/arch, systemd, free ports, data dir, clock skew and free disk; report time sync
                (chrony, timesyncd, ...) and the data dir's fsync p50/p99 (warning above 10 ms).
                A drop-in (/etc, /run or /usr/lib/systemd/system/<unit>.d/*.conf), environment
                file or unit file hactl does not own that sets anything for a unit it manages
                (etcd, HAProxy, Keepalived, kubelet, containerd) refuses the host, naming the file
                and the setting: the spec is the one source of those settings. Remove the file
                (then systemctl daemon-reload), or pass --allow-foreign-overrides. 'hactl plan'
                lists them as warnings. kubeadm's 10-kubeadm.conf and kubeadm-flags.env are owned.
  pki           create or load the etcd CA and certificates in the state dir; check SANs. When the
                hosts carry the cluster but the state dir is gone, recover it from the members
                (same CA, token, unit flags and member certificates; never a second CA)
  detect        ask the members whether a cluster is already running
  plan          decide per host: create, resume, join, update, start or unchanged; refuse unsafe cases
  etcd/install  download the etcd release tarball on each host (spec.etcd.download: sha256 checked
                first) or upload the local binaries, then certificates and the systemd unit, atomically
  etcd/start    start new members together; restart changed members one at a time; join new ones as learners
  etcd/wait     wait for every member, check quorum with a write and a linearizable read

With control-plane, LB or worker hosts in the spec, these run among them (lb/preflight and
kube/preflight after preflight; lb/plan, kube/plan and kube/binaries after plan; lb/packages and
lb/install before etcd/install so that Keepalived's first election runs while etcd starts;
kube/etcd-certs and lb/wait after etcd/wait; then the rest of the Kubernetes phases):

  lb/preflight     the control-plane and LB hosts' facts (packages, files, units, addresses)
  kube/preflight   the Kubernetes nodes' facts: swap, br_netfilter, forwarding, free ports, architecture,
                   package manager, the resolver file CoreDNS gets
  lb/plan          plan the load balancer (priorities, check weight, the VIP's interface per host) and
                   compare every file; printed with the plan (also by 'hactl plan')
  kube/plan        per node: binaries, packages, files, images, kubeadm init / join / reset / nothing
  kube/binaries    kubelet, kubeadm, kubectl uploaded or downloaded, sha256 and version checked on the
                   host, then renamed in (a wrong one stops the run before anything is installed)
  kube/etcd-certs  the etcd CA and apiserver-etcd-client at kubeadm's paths on control-plane hosts
  lb/packages      install haproxy, keepalived, curl where missing (apt-get, dnf or yum)
  lb/install       upload haproxy.cfg / keepalived.conf next to the live ones, validate them on the host
                   (haproxy -c, keepalived --config-test), swap in keeping *.prev, reload or start,
                   check, and roll back to *.prev if the reload fails
  lb/wait          wait until exactly one LB host holds the VIP
  kube/runtime     containerd and the runtime packages (installed in the background from kube/binaries
                   on), containerd's configuration, kernel modules and sysctls
  kube/kubelet     kubelet's unit and kubeadm's drop-in; a stopped kubelet on a joined node is started
  kube/images      spec.kubernetes.imageArchives imported into containerd where images are missing
  kube/init        kubeadm init on the first control plane when none has joined
  kube/join        fresh join credentials (0600 files only); control planes one at a time, then workers;
                   a node whose join was interrupted is kubeadm reset first
  kube/cni         (cni bridge) each node's pod network and the routes between the nodes
  kube/wait        every node Ready, static pods, kube-proxy and CoreDNS Ready, through the VIP

Re-running on a healthy cluster changes nothing and restarts nothing.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBootstrap(cmd, s, g, o)
		},
	}
	o.addFlags(cmd, true)
	return cmd
}

func runBootstrap(cmd *cobra.Command, s Streams, g *globalOptions, o *bootstrapOptions) error {
	if err := outputFormat(o.output); err != nil {
		return err
	}
	if o.waitTimeout <= 0 {
		return &UsageError{Err: fmt.Errorf("--wait %s: must be a positive duration, e.g. 2m", o.waitTimeout)}
	}
	if err := bootstrap.CheckSkippable(splitList(o.skipPhases)); err != nil {
		return err
	}
	if err := o.kube.check(); err != nil {
		return err
	}
	var src *backup.Source
	if o.restoreFrom != "" {
		parsed, err := backup.ParseSource("--restore-from", o.restoreFrom)
		if err != nil {
			return err
		}
		src = &parsed
	}
	progress := s.Out
	if machineOutput(o.output) {
		progress = s.Err
	}
	p := ui.New(progress, g.verbose, false)
	logPath, closeLog := openLog(g, p, os.Args[1:])
	defer closeLog()
	c, err := loadForHosts(g, p)
	if err != nil {
		return err
	}
	b, cleanup, err := bootstrap.Prepare(cmd.Context(), bootstrap.PrepareOptions{
		Options: bootstrap.Options{
			Prompt:                terminalPrompter(s.In, s.Err),
			Cluster:               c,
			AcceptNewHostKeys:     o.acceptNewHostKeys,
			DryRun:                o.dryRun,
			SkipPhases:            splitList(o.skipPhases),
			IgnorePreflightErrors: splitList(o.ignorePreflight),
			AllowForeignOverrides: o.allowForeign,
			WaitTimeout:           o.waitTimeout,
			ReplaceLost:           splitList(o.replaceLost),
			SumCache:              sumcache.Default(),
			Printer:               p,
		},
		RestoreSource: src, SpecFile: g.file, IdentityFile: o.identityFile, HostFetch: !o.noHostFetch, Kubeconfig: o.kube.given(),
	})
	defer cleanup()
	if err != nil {
		return err
	}
	res, runErr := b.Run(cmd.Context())
	if runErr != nil && logPath != "" {
		fmt.Fprintf(s.Err, "debug log: %s\n", logPath)
	}
	if machineOutput(o.output) || runErr == nil { // the JSON summary is written on failure too
		if err := writeReport(s.Out, o.output, res, func(w io.Writer) { printSummary(w, res, g.file, c) }); err != nil {
			return err
		}
	}
	if runErr == nil && o.detailedExitCode {
		if pending := res.Pending(); len(pending) > 0 {
			return &exitcode.ChangesPendingError{Changes: pending}
		}
	}
	return runErr
}

func printSummary(w io.Writer, r *report.Cluster, file string, c *v1alpha1.Cluster) {
	if r.DryRun {
		pending := false
		for _, m := range r.Members {
			pending = pending || m.Action != report.ActionUnchanged
		}
		for _, h := range r.Hosts {
			pending = pending || h.Action != "unchanged"
		}
		if !pending {
			fmt.Fprintf(w, "\ndry run (%s): every host is up to date; bootstrap would change nothing.\n", r.Duration)
			return
		}
		fmt.Fprintf(w, "\ndry run: nothing was changed (%s). Apply with: %s bootstrap -f %s\n", r.Duration, self(), file)
		return
	}
	var rows [][]string
	for _, m := range r.Members {
		rows = append(rows, []string{m.Name, m.Zone, m.Address, m.ID, string(m.Action), fmt.Sprint(m.Commands)})
	}
	fmt.Fprintln(w)
	ui.Table(w, []string{"MEMBER", "ZONE", "ADDRESS", "ID", "ACTION", "SSH-COMMANDS"}, rows)
	if len(r.Hosts) > 0 {
		rows = rows[:0]
		for _, h := range r.Hosts {
			changes := "-"
			if len(h.Changes) > 0 {
				changes = strings.Join(h.Changes, ", ")
			}
			rows = append(rows, []string{h.Name, h.Zone, h.Address, strings.Join(h.Roles, ","), h.Action, changes})
		}
		fmt.Fprintln(w)
		ui.Table(w, []string{"HOST", "ZONE", "ADDRESS", "ROLES", "ACTION", "CHANGES"}, rows)
	}
	if r.VIPHolder != "" {
		fmt.Fprintf(w, "\nVIP %s is on %s.\n", r.VIP, r.VIPHolder)
	}
	if c != nil && c.ManagedLB() != nil && c.Spec.Kubernetes == nil && !r.DryRun {
		fmt.Fprintln(w, "The load balancer's backends are the kube-apiservers of the control-plane hosts: without spec.kubernetes hactl installs none, so they stay DOWN (and status says DEGRADED) until yours run.")
	}
	fmt.Fprintf(w, "\netcd cluster %s (ID %s) is healthy; took %s. Next: %s status -f %s\n", r.Cluster, r.ClusterID, r.Duration, self(), file)
}

// self is the command as the user invoked it (bin/hactl, hactl), for runnable hints.
func self() string {
	if len(os.Args) > 0 && strings.Contains(os.Args[0], "/") && !filepath.IsAbs(os.Args[0]) {
		return os.Args[0]
	}
	return "hactl"
}

// bootstrapSeeded runs bootstrap on c as `hactl bootstrap -f c --restore-from` does, with seed's
// verified snapshot (drill restore --onto), or only its checks with dryRun, and returns the new
// cluster's revision. Errors are bootstrap's (a host that is not new: *restore.SeedRefusedError).
func bootstrapSeeded(ctx context.Context, c *v1alpha1.Cluster, p *ui.Printer, prompt provision.Prompter, seed *restore.Options, dryRun bool) (int64, error) {
	b, err := bootstrap.New(bootstrap.Options{Cluster: c, DryRun: dryRun, Printer: p, Prompt: prompt, SumCache: sumcache.Default(),
		WaitTimeout: 2 * time.Minute, RestoreFrom: seed})
	if err != nil {
		return 0, err
	}
	res, err := b.Run(ctx)
	if err != nil {
		return 0, err
	}
	return res.RestoredRevision, nil
}
