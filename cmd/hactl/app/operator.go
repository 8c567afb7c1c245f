package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/kubeadm/images"
	"github.com/hactl/hactl/kubeapi"
	"github.com/hactl/hactl/operator/deploy"
	"github.com/hactl/hactl/state"
	"github.com/hactl/hactl/ui"
)

func newOperatorCommand(s Streams, g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "operator",
		Short: "Deploy or remove hactl-operator, which watches the etcd cluster from inside Kubernetes",
		Long: `hactl-operator keeps an EtcdCluster (hactl.io/v1alpha1) true to the etcd cluster hactl built:
members, leader, conditions (Available, QuorumAtRisk, Degraded), events on every transition. Its
replicas elect a leader through a Lease; only the leader acts.

The cluster is reached over SSH (the admin kubeconfig of the first control plane that answers, as
hactl kubeconfig does) or through --kubeconfig.`,
		Example: `  make operator-image
  hactl operator deploy -f cluster.yaml --image-archive bin/hactl-operator-image.tar
  hactl operator deploy -f cluster.yaml --kubeconfig kind.conf --image ghcr.io/hactl/hactl-operator:v0.1.0
  hactl operator adopt -f cluster.yaml             # after a heal: hactl's state dir records the new member
  hactl operator remove -f cluster.yaml --yes`,
	}
	cmd.AddCommand(newOperatorDeployCommand(s, g), newOperatorRemoveCommand(s, g), newOperatorAdoptCommand(s, g))
	return cmd
}

type operatorFlags struct {
	kubeFlags
	namespace string
}

func (f *operatorFlags) add(cmd *cobra.Command) {
	f.addKube(cmd.Flags(), "reach the cluster through this kubeconfig instead of over SSH")
	cmd.Flags().StringVar(&f.namespace, "namespace", deploy.DefaultNamespace, "the operator's namespace (its RBAC is a Role there; the EtcdCluster lives there)")
}

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
			var platforms []images.Platform
			if archive != "" {
				refs, err := images.ArchiveImages(archive)
				if err != nil {
					return &UsageError{Err: fmt.Errorf("--image-archive: %w", err)}
				}
				if image == "" {
					image = refs[0]
				} else if !slices.Contains(refs, image) {
					return &UsageError{Err: fmt.Errorf("--image %s is not in --image-archive %s (it holds %s)", image, archive, strings.Join(refs, ", "))}
				}
				if platforms, err = images.ArchivePlatforms(archive); err != nil {
					return &UsageError{Err: fmt.Errorf("--image-archive: %w", err)}
				}
			}
			kind, err := checkKindFlags(kindCluster, f.kubeconfig, archive)
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
			plan, err := deploy.Build(deploy.Options{Cluster: c, Namespace: f.namespace, Image: image, Replicas: replicas, DryRun: dryRun, Backup: bk, Healing: ho, RequeuePeriod: rq})
			if err != nil {
				return err
			}
			if dryRun {
				out, err := plan.Print()
				if err != nil {
					return err
				}
				_, err = s.Out.Write(out)
				return err
			}
			if archive != "" && f.kubeconfig == "" {
				p.Infof("operator/image: %s into every Kubernetes node", image)
				if err := deploy.ImportArchive(cmd.Context(), c, terminalPrompter(s.In, s.Err), archive, p); err != nil {
					return err
				}
			}
			api, err := apiClient(cmd, s, c, f.kubeFlags)
			if err != nil {
				return err
			}
			defer api.Close()
			switch {
			case kindCluster != "":
				if err := kindLoad(cmd.Context(), api, kind, kindCluster, archive, platforms, p); err != nil {
					return err
				}
			case archive != "" && f.kubeconfig != "":
				// The nodes must have the image already (kind load image-archive): the archive names it
				// and says which nodes could run it.
				if err := checkNodePlatforms(cmd.Context(), api, archive, platforms); err != nil {
					return err
				}
			}
			p.Infof("operator/apply: through %s", api.Via)
			if err := plan.Apply(cmd.Context(), api.Config, func(kind, name string) { p.Debugf("operator/apply: %s %s", kind, name) }); err != nil {
				return api.Wrap(err)
			}
			p.Infof("operator/apply: %d objects applied", len(plan.Objects))
			if err := deploy.Record(c, &deploy.Location{Namespace: nsOrDefault(f.namespace), Kubeconfig: absKubeconfig(f.given())}); err != nil {
				return fmt.Errorf("operator/apply: recording where the operator runs in the state dir: %w", err)
			}
			ready, err := deploy.WaitReady(cmd.Context(), api.Config, nsOrDefault(f.namespace), c.Metadata.Name, timeout)
			if err != nil {
				return api.Wrap(err)
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

func newOperatorRemoveCommand(s Streams, g *globalOptions) *cobra.Command {
	var yes, purge bool
	f := &operatorFlags{}
	cmd := &cobra.Command{
		Use:   "remove",
		Short: "Delete the operator's Deployment, EtcdCluster, Secrets and RBAC; CRDs, EtcdSnapshots and the bucket stay unless --purge",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, c, closeLog, err := operatorTarget(s, g, f, false)
			if err != nil {
				return err
			}
			defer closeLog()
			ns := nsOrDefault(f.namespace)
			fmt.Fprintf(s.Err, "Plan: delete in %s the Deployment, Lease and PodDisruptionBudget %s, the EtcdCluster %s, the Secrets %s, %s, %s, %s and %s*, the Role, RoleBinding and ServiceAccount %s. ",
				ns, deploy.Name, c.Metadata.Name, deploy.ClientSecret, deploy.S3Secret, deploy.S3CASecret, deploy.SSHKeySecret, deploy.SpareSecretPrefix, deploy.Name)
			if purge {
				fmt.Fprintf(s.Err, "--purge: then every EtcdSnapshot of %s, each by its deletionPolicy (Delete: its snapshot is deleted from the bucket, never the newest verified one; Retain: the bucket is not touched), and the CRDs unless other EtcdClusters or EtcdSnapshots use them; etcd is not touched.\n", c.Metadata.Name)
			} else {
				fmt.Fprintln(s.Err, "The CRDs, every EtcdSnapshot and the snapshots in the bucket stay (--purge removes the EtcdSnapshots and CRDs); etcd is not touched.")
			}
			if err := confirmOrStop(s, yes, "", "Remove hactl-operator?"); err != nil {
				return err
			}
			api, err := apiClient(cmd, s, c, f.kubeFlags)
			if err != nil {
				return err
			}
			defer api.Close()
			removed, err := deploy.Remove(cmd.Context(), api.Config, ns, c.Metadata.Name)
			if err == nil {
				if loc := deploy.Where(c, nil); loc.Namespace == ns {
					err = deploy.Record(c, nil)
				}
			}
			if err == nil && purge {
				var more []deploy.Removed
				more, err = deploy.Purge(cmd.Context(), api.Config, ns, c.Metadata.Name, func(ctx context.Context, stem string) error {
					if c.Spec.Backup == nil {
						return errors.New("the spec has no spec.backup: hactl cannot reach the bucket to carry out deletionPolicy Delete")
					}
					store, err := backup.OpenStore(ctx, c, backup.StoreOptions{})
					if err != nil {
						return err
					}
					l, err := backup.ListCluster(ctx, store, c)
					if err != nil {
						return err
					}
					return backup.Delete(ctx, store, l, stem)
				})
				removed = append(removed, more...)
			}
			for _, r := range removed {
				if r.Note != "" {
					p.Infof("  %s %s: %s", r.Kind, r.Name, r.Note)
				} else if r.Gone {
					p.Infof("  %s %s: already gone", r.Kind, r.Name)
				} else {
					p.Infof("  %s %s: deleted", r.Kind, r.Name)
				}
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	cmd.Flags().BoolVar(&purge, "purge", false, "also delete every EtcdSnapshot of the cluster by its own deletionPolicy (only Delete touches the bucket) and the CRDs when nothing else uses them")
	f.add(cmd)
	return cmd
}

// adoptReport is what `hactl operator adopt` did (-o json).
type adoptReport struct {
	// Changes are the state dir's changes, in words; Drift what cluster.yaml must still change.
	Changes []string `json:"changes"`
	Drift   []string `json:"drift"`
	DryRun  bool     `json:"dryRun,omitempty"`
}

func newOperatorAdoptCommand(s Streams, g *globalOptions) *cobra.Command {
	var dryRun bool
	var output string
	f := &operatorFlags{}
	cmd := &cobra.Command{
		Use:   "adopt",
		Short: "Record in hactl's state dir the members hactl-operator's heals made, and say what cluster.yaml must change",
		Long: `After hactl-operator replaced a lost member onto a spare, hactl's state dir still records the lost
member and cluster.yaml still lists it. adopt reads the EtcdCluster's status.heals and, for each heal
that succeeded, drops the lost member's record from the state dir (cluster.json) and records the new
one (its ID, URLs and the --initial-cluster it was started with), written atomically. It does not
edit cluster.yaml: it says which spare to move from spec.etcd.spares into the etcd hosts in place of
which member. Until both are done, hactl status reports the drift and hactl bootstrap would be
working on a cluster that no longer exists.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(output); err != nil {
				return err
			}
			p, c, closeLog, err := operatorTarget(s, g, f, false)
			if err != nil {
				return err
			}
			defer closeLog()
			api, ns, err := locatedOperator(cmd, s, c, f)
			if err != nil {
				return err
			}
			defer api.Close()
			st, err := deploy.ReadStatus(cmd.Context(), api.Config, ns, c.Metadata.Name)
			if err != nil {
				return api.Wrap(err)
			}
			cur, err := state.Load(c.Spec.StateDir)
			if err != nil {
				return err
			}
			if cur == nil {
				return &UsageError{Err: fmt.Errorf("spec.stateDir %s holds no cluster.json: nothing to adopt into (hactl bootstrap recovers a lost state dir from the hosts)", c.Spec.StateDir)}
			}
			changes, err := deploy.Adopt(cur, st.Heals)
			if err != nil {
				return err
			}
			rep := adoptReport{Changes: changes, Drift: deploy.Drift(c, st.Heals), DryRun: dryRun}
			if len(changes) > 0 && !dryRun {
				if err := state.Save(c.Spec.StateDir, cur); err != nil {
					return err
				}
				p.Infof("operator/adopt: %s updated", filepath.Join(c.Spec.StateDir, state.FileName))
			}
			return writeReport(s.Out, output, rep, func(w io.Writer) {
				verb := "recorded"
				if dryRun {
					verb = "would record (dry run)"
				}
				if len(changes) == 0 {
					fmt.Fprintf(w, "state dir: nothing to adopt (%d heal(s) in EtcdCluster %s/%s)\n", len(st.Heals), ns, c.Metadata.Name)
				}
				for _, ch := range changes {
					fmt.Fprintf(w, "state dir %s: %s\n", verb, ch)
				}
				for _, d := range rep.Drift {
					fmt.Fprintf(w, "cluster.yaml: %s\n", d)
				}
			})
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "say what would be recorded and change nothing")
	outputFlag(cmd, &output, "output", "")
	f.add(cmd)
	return cmd
}

// operatorTarget loads the spec: with its local files and SSH environment when hosts are contacted
// over SSH (no --kubeconfig, not a dry run), else the spec alone. A kubeconfig that does not load is
// refused first (exit 2).
func operatorTarget(s Streams, g *globalOptions, f *operatorFlags, specOnly bool) (*ui.Printer, *v1alpha1.Cluster, func(), error) {
	if err := f.check(); err != nil {
		return nil, nil, nil, err
	}
	if specOnly || f.kubeconfig != "" {
		p := ui.New(s.Err, g.verbose, false)
		c, err := loadSpec(g.file, p, false)
		if err != nil {
			return nil, nil, nil, err
		}
		return p, c, func() {}, nil
	}
	p, c, _, closeLog, err := hostRun(s, g)
	if err != nil {
		return nil, nil, nil, err
	}
	if c.Spec.Kubernetes == nil {
		closeLog()
		return nil, nil, nil, &UsageError{Err: fmt.Errorf("%s: spec.kubernetes: over SSH hactl reaches the Kubernetes cluster it built; for another cluster pass --kubeconfig FILE", g.file)}
	}
	return p, c, closeLog, nil
}

func nsOrDefault(ns string) string {
	if ns == "" {
		return deploy.DefaultNamespace
	}
	return ns
}

// locatedOperator is the API and namespace of hactl-operator for adopt: --kubeconfig/--context and
// --namespace when given, else where operator deploy recorded it (deploy.Where), else over SSH.
func locatedOperator(cmd *cobra.Command, s Streams, c *v1alpha1.Cluster, f *operatorFlags) (*kubeapi.Client, string, error) {
	loc := deploy.Where(c, f.given())
	if cmd.Flags().Changed("namespace") {
		loc.Namespace = f.namespace
	}
	api, err := loc.Client(cmd.Context(), c, terminalPrompter(s.In, s.Err))
	return api, loc.Namespace, kubeErr(err)
}

// absKubeconfig makes the kubeconfig path absolute, for the state dir's record (nil stays nil).
func absKubeconfig(kc *kubeapi.Kubeconfig) *kubeapi.Kubeconfig {
	if kc == nil {
		return nil
	}
	if p, err := filepath.Abs(kc.Path); err == nil {
		kc.Path = p
	}
	return kc
}
