package app

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/bootstrap/restore"
)

type restoreOptions struct {
	from         string
	force        bool
	yes          bool
	output       string
	identityFile string
	tempDir      string
	noDeltas     bool
	noHostFetch  bool
}

func newRestoreCommand(s Streams, g *globalOptions) *cobra.Command {
	o := &restoreOptions{}
	cmd := &cobra.Command{
		Use:   "restore --from SOURCE",
		Short: "Restore the whole etcd cluster from a snapshot (every member; data dirs moved aside, never deleted)",
		Long: `Restores every member of the cluster from one snapshot. SOURCE is explicit, never guessed:

  ./file.db | /path/file.db   a raw etcd snapshot on this machine (etcdctl snapshot save, or a
                              decrypted, decompressed hactl backup)
  s3://BUCKET/KEY             a complete hactl backup (KEY: its data or metadata object, or the
                              name hactl backup list shows) in spec.backup's object store
  latest                      the newest complete snapshot under this cluster's prefix

With latest, the newest full snapshot is brought forward with the delta snapshots that continue it
('hactl backup agent'): replayed here, revision by revision, into a temporary etcd whose snapshot is
what is restored; a chain with a gap is refused naming the missing revisions (--no-deltas restores
the full snapshot alone). A snapshot named explicitly (s3://) is restored as it is: it is usually
chosen to go back to before a change.

A backup of a cluster with another member count than the spec's is refused without --force. An
encrypted backup, a local file and a snapshot brought forward with deltas are verified here before
any member is touched: downloaded, decrypted (--identity-file; the identity never leaves this
machine), decompressed, its sha256 checked against the metadata, etcd's sha256 trailer and etcd's
integrity check (etcdutl's snapshot package: bbolt consistency, hash, revision). An unencrypted
backup restored as it is, is not downloaded here: every member fetches it from the object store
itself (below). Then the plan is shown and confirmed (--yes in scripts), and:

  restore/ship    the snapshot is put on every member while the cluster still runs, its sha256
                  checked on each host against the metadata's before any data dir is touched:
                  fetched by the members themselves, in parallel, when they can (curl with a
                  presigned URL passed on stdin, valid 30 minutes; zstd on the host for a
                  compressed backup; the store's CA file, if any, sent along); else, and with
                  --no-host-fetch, sent from here to every member at once, the copy verified here
  restore/hold    with control-plane hosts in the spec (Kubernetes' etcd restore procedure: stop
                  every API server first): on each, kubelet stopped and kubeadm's kube-apiserver,
                  kube-controller-manager and kube-scheduler containers killed
  restore/stop    etcd killed (SIGKILL: a graceful stop of every member at once takes seconds) and
                  held stopped on ALL members
  restore/data    each data dir moved aside as <dataDir>.pre-restore-<time> (kept), rebuilt with
                  etcdutl snapshot restore: the member's own name and peer URL, the full initial
                  cluster, a NEW cluster token, --bump-revision 1000000000 --mark-compacted (so
                  kube-apiserver watches can't silently miss events); new units and markers. If any
                  member fails, every member gets its previous data dir back and etcd is started again.
  restore/start   all members started together
  etcd/wait       quorum, a write and a linearizable read, the new cluster ID recorded
  restore/verify  the revision is past the snapshot's + the bump
  restore/release kubelet started again on every control plane (it starts the containers at once),
                  each kube-apiserver waited for until it answers /readyz (4 minutes each). A restore
                  that fails after restore/hold starts kubelet again too: no control plane is left
                  stopped.

A healthy cluster is not restored without --force: a restore rolls every write since the snapshot back.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRestore(cmd, s, g, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.from, "from", "", "the snapshot: a local file (./snap.db), s3://BUCKET/KEY or latest")
	_ = cmd.RegisterFlagCompletionFunc("from", completeSnapshots(true))
	f.StringVar(&o.identityFile, "identity-file", "", "age identity file for encrypted backups (default $"+identityEnv+")")
	f.StringVar(&o.tempDir, "temp-dir", "", "where a downloaded snapshot is verified and kept during the restore (default the system's temp dir)")
	f.BoolVar(&o.noDeltas, "no-deltas", false, "restore the full snapshot alone, without the delta snapshots after it")
	f.BoolVar(&o.noHostFetch, "no-host-fetch", false, noHostFetchUsage)
	f.BoolVar(&o.force, "force", false, "restore even though every member is healthy (rolls back every write since the snapshot)")
	f.BoolVar(&o.yes, "yes", false, "do not ask for confirmation (scripts, CI)")
	outputFlag(cmd, &o.output, "summary", " (progress goes to stderr)")
	return cmd
}

func runRestore(cmd *cobra.Command, s Streams, g *globalOptions, o *restoreOptions) error {
	if err := outputFormat(o.output); err != nil {
		return err
	}
	src, err := backup.ParseSource("--from", o.from)
	if err != nil {
		return err
	}
	p, c, logPath, closeLog, err := hostRun(s, g)
	if err != nil {
		return err
	}
	defer closeLog()
	confirm, err := confirmer(s, o.yes, "")
	if err != nil {
		return err
	}
	res, runErr := restore.FromBackup(cmd.Context(), restore.FromBackupOptions{Cluster: c, SpecFile: g.file, Source: src, From: o.from, Flag: "--from",
		IdentityFile: o.identityFile, TempDir: o.tempDir, HostFetch: !o.noHostFetch, NoDeltas: o.noDeltas, AnyMemberCount: o.force,
		Force: o.force, Confirm: confirm, Printer: p, Prompt: terminalPrompter(s.In, s.Err)})
	if res == nil || res.Report == nil {
		return runErr
	}
	rep := res.Report
	if runErr != nil && logPath != "" {
		fmt.Fprintf(s.Err, "debug log: %s\n", logPath)
	}
	if machineOutput(o.output) || runErr == nil {
		if err := writeReport(s.Out, o.output, rep, func(w io.Writer) {
			fmt.Fprintf(w, "\ncluster %s restored from %s: cluster ID %s, revision %d; took %s\n", rep.Cluster, src, rep.ClusterID, rep.RestoredRevision, rep.Duration)
		}); err != nil {
			return err
		}
	}
	return runErr
}

// noHostFetchUsage is the --no-host-fetch flag's help, the same on every command that restores.
const noHostFetchUsage = "send the snapshot to the members from here even when they could fetch it from the object store themselves (an unencrypted backup)"
