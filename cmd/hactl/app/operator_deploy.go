package app

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/operator/deploy"
)

func newOperatorDeployCommand(s Streams, g *globalOptions) *cobra.Command {
	var image, archive, kindCluster, output string
	var replicas int32
	var dryRun, noBackups bool
	var timeout, every, requeue time.Duration
	heal := &deploy.HealingOptions{}
	var policy backup.Policy
	f := &operatorFlags{}
	cmd := &cobra.Command{
		Use:   "deploy",
		Short: "Install the CRDs, RBAC, the operator's etcd client certificate, the EtcdCluster and the Deployment",
		Long: `Applies, server-side (a re-run converges): the CRDs EtcdCluster and EtcdSnapshot; the namespace;
a ServiceAccount with a Role there only (its custom resources and their status, get on its one
Secret, its Lease, events); a Secret with a client certificate issued for the operator from the
state dir's etcd CA (the CA key never leaves the state dir); the EtcdCluster built from the spec
(members' client URLs) and the state dir (the cluster ID); a Deployment of --replicas (never two on
one node, spread over zones) and a PodDisruptionBudget. Then it waits until a replica runs and has
looked at the cluster.

With spec.backup in the spec the operator snapshots etcd into that object store at every slot of
--backup-every (default 5m; slots are 00:00 UTC + k x interval, the rule of hactl backup schedule's
timers, and one object per slot whichever replica takes it), prunes with --keep-last/--keep-hourly/
--keep-daily after each (none given: nothing is deleted), and keeps BackupFresh false once the
newest snapshot is older than two intervals. The access key is read as hactl backup reads it and
put into a Secret. Use either the operator's schedule or the members' timers, never both: the
operator takes no snapshot while the timers' keep appearing and says so.

With spec.etcd.spares the operator may heal: deploy issues each spare's etcd server and peer
certificates from the state dir's CA into a Secret (the CA key stays here) and pins the spares'
host keys from spec.ssh.knownHostsFile in the EtcdCluster. Without --auto-replace the operator only
reports a member lost for longer than --grace-period and the spare it would move it onto; with it,
it replaces the member itself over SSH (the key from --ssh-key, put into a Secret).

--image-archive imports the image into every Kubernetes node of the spec over SSH first (its
reference is the archive's unless --image says otherwise). Through --kubeconfig the nodes must have
the image already (kind load image-archive, a registry): --image-archive then only names it, and
deploy refuses when a node's architecture is not one the archive holds; --kind-cluster NAME loads
it into that kind cluster first, once its nodes are the kubeconfig's and each can run the image.
--dry-run prints the manifests (Secrets redacted) and changes nothing.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(output); err != nil {
				return err
			}
			// Refused before anything is contacted: a value given is never read as a default.
			if err := deploy.CheckReplicas(replicas); err != nil {
				return err
			}
			if err := checkKeepFlags(cmd, policy); err != nil {
				return err
			}
			if cmd.Flags().Changed("grace-period") {
				if err := deploy.CheckGracePeriod(heal.GracePeriod); err != nil {
					return err
				}
			}
			if cmd.Flags().Changed("backup-every") {
				if err := deploy.CheckBackupEvery(every); err != nil {
					return err
				}
			}
			img, err := deploy.ResolveImage(deploy.ImageFlags{Image: image, Archive: archive, KindCluster: kindCluster, Kubeconfig: f.kubeconfig})
			if err != nil {
				return err
			}
			var rq time.Duration // 0: the operator's own default, and no flag in its Deployment
			if cmd.Flags().Changed("requeue-period") {
				if err := deploy.CheckRequeuePeriod(requeue); err != nil {
					return err
				}
				rq = requeue
			}
			p, c, closeLog, err := operatorTarget(s, g, f, dryRun)
			if err != nil {
				return err
			}
			defer closeLog()
			var bk *deploy.BackupOptions
			switch {
			case noBackups && cmd.Flags().Changed("backup-every"):
				return &UsageError{Err: errors.New("--no-backups and --backup-every: give one")}
			case noBackups:
			case c.Spec.Backup != nil || cmd.Flags().Changed("backup-every"):
				bk = &deploy.BackupOptions{Every: every, Policy: policy}
			default:
				p.Infof("operator: the spec has no spec.backup: the operator takes no snapshots")
			}
			var ho *deploy.HealingOptions
			switch fl := cmd.Flags(); {
			case fl.Changed("ssh-key") && !heal.AutoReplace:
				return &UsageError{Err: errors.New("--ssh-key is the key the operator logs in to the spares with: it goes with --auto-replace")}
			case heal.AutoReplace || fl.Changed("grace-period"):
				ho = heal
			}
			ready, err := deploy.Run(cmd.Context(), deploy.RunOptions{
				Options:      deploy.Options{Cluster: c, Namespace: f.namespace, Image: img.Image, Replicas: replicas, DryRun: dryRun, Backup: bk, Healing: ho, RequeuePeriod: rq},
				ImageArchive: archive, Kubeconfig: f.given(), Nodes: img.Nodes(p),
				Prompt: terminalPrompter(s.In, s.Err), Printer: p, Out: s.Out, Wait: timeout,
			})
			if err != nil || ready == nil { // ready nil: a dry run printed the manifests
				return err
			}
			return writeReport(s.Out, output, ready, func(w io.Writer) {
				fmt.Fprintf(w, "hactl-operator: %d replica(s) available; EtcdCluster %s/%s: %s, leader %s\n", ready.AvailableReplicas, nsOrDefault(f.namespace), c.Metadata.Name, ready.Phase, cmp.Or(ready.Leader, "-"))
				for _, cond := range ready.Conditions {
					fmt.Fprintf(w, "  %s\n", cond)
				}
			})
		},
	}
	cmd.Flags().StringVar(&image, "image", "", "the operator image reference")
	cmd.Flags().StringVar(&kindCluster, "kind-cluster", "", kindClusterUsage)
	cmd.Flags().StringVar(&archive, "image-archive", "", "an image archive (make operator-image: bin/hactl-operator-image.tar) imported into every node over SSH; with --kubeconfig it names the image the nodes already have (kind load image-archive)")
	cmd.Flags().Int32Var(&replicas, "replicas", 2, "replicas (one holds the Lease, the others wait)")
	cmd.Flags().DurationVar(&every, "backup-every", 5*time.Minute, "the operator snapshots etcd into spec.backup's object store at every slot of this interval (whole minutes dividing an hour, or whole hours dividing a day)")
	cmd.Flags().BoolVar(&noBackups, "no-backups", false, "the operator takes no snapshots even though the spec has spec.backup")
	cmd.Flags().IntVar(&policy.KeepLast, "keep-last", 0, "after each snapshot, prune all but the newest N (with --keep-hourly/--keep-daily: kept when any rule keeps it; default: prune nothing)")
	cmd.Flags().IntVar(&policy.KeepHourly, "keep-hourly", 0, "after each snapshot, keep the newest snapshot of each of the N most recent hours")
	cmd.Flags().IntVar(&policy.KeepDaily, "keep-daily", 0, "after each snapshot, keep the newest snapshot of each of the N most recent days")
	cmd.Flags().BoolVar(&heal.AutoReplace, "auto-replace", false, "let the operator replace a member unhealthy past --grace-period onto a free spare of spec.etcd.spares (without it the operator only reports what it would do)")
	cmd.Flags().DurationVar(&heal.GracePeriod, "grace-period", deploy.DefaultGracePeriod, "how long a member must stay unhealthy before it is replaced (at least 3 x spec.etcd.electionTimeout)")
	cmd.Flags().StringVar(&heal.SSHKeyFile, "ssh-key", "", "with --auto-replace: the unencrypted private key the operator logs in to the spares with, put into a Secret (default spec.ssh.identityFile; best a key authorized on the spares only)")
	cmd.Flags().DurationVar(&requeue, "requeue-period", deploy.DefaultRequeuePeriod, "how often the operator looks at the cluster again: how soon it notices a lost member or quorum (at least 5s; each look asks every member)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the manifests (Secrets redacted) and change nothing")
	cmd.Flags().DurationVar(&timeout, "wait", 3*time.Minute, "how long to wait for a replica to run and observe the cluster")
	outputFlag(cmd, &output, "output", "")
	f.add(cmd)
	return cmd
}

// checkKeepFlags refuses --keep-last/--keep-hourly/--keep-daily given only as 0 (exit 2): the zero
// policy is the operator's "prune nothing", while the flags say "keep no snapshot". Given beside a
// rule of 1 or more, a 0 means what it says (that rule keeps none; the union is the other's).
func checkKeepFlags(cmd *cobra.Command, policy backup.Policy) error {
	if policy != (backup.Policy{}) {
		return nil
	}
	var given []string
	for _, name := range []string{"keep-last", "keep-hourly", "keep-daily"} {
		if cmd.Flags().Changed(name) {
			given = append(given, "--"+name+" 0")
		}
	}
	if len(given) == 0 {
		return nil
	}
	return &UsageError{Err: fmt.Errorf("%s: %w; or leave the --keep flags out and the operator prunes nothing", strings.Join(given, " "), backup.ErrKeepsNothing)}
}
