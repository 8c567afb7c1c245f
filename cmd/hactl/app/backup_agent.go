package app

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/backup/agent"
	"github.com/hactl/hactl/backup/take"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/specload"
)

type backupAgentOptions struct {
	member  string
	timeout time.Duration
}

func newBackupAgentCommand(s Streams, g *globalOptions) *cobra.Command {
	o := &backupAgentOptions{}
	cmd := &cobra.Command{
		Use:   "agent --member NAME",
		Short: "Write delta snapshots: the changes since the last full snapshot or delta, every spec.backup.deltaEvery (a long-running service)",
		Long: `Runs until stopped (SIGTERM). One agent runs on every etcd member ('hactl backup schedule --deltas'
installs it as hactl-backup-agent.service); the agents elect one writer through etcd's election API
(clientv3/concurrency: a session Lease of 10s, so a writer that dies is replaced within about that).

The writer continues the chain of deltas under <prefix>/<cluster>/deltas/ from where it ends (the
newest delta's revision, or the newest full snapshot's when that is newer; with neither it takes a
full snapshot first), watches every key from there, and stores the changes as a delta every
spec.backup.deltaEvery (default 30s) or at 8 MiB of changes: the events object (zstd and age as
spec.backup says, sha256 of both forms), then its metadata, which makes it complete. A watch that
hits a compacted revision (its changes are gone) takes a new full snapshot instead of leaving a gap.

'hactl restore --from latest' applies the newest full snapshot's deltas; a chain with a gap is
refused, naming the missing revisions.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return runBackupAgent(cmd.Context(), s, g, o) },
	}
	cmd.Flags().StringVar(&o.member, "member", "", "this agent's name in the election and the deltas (its etcd host's name)")
	_ = cmd.RegisterFlagCompletionFunc("member", completeHosts(v1alpha1.RoleEtcd, false))
	cmd.Flags().DurationVar(&o.timeout, "timeout", 10*time.Second, "bound on connecting to the members")
	return cmd
}

func runBackupAgent(ctx context.Context, s Streams, g *globalOptions, o *backupAgentOptions) error {
	if o.member == "" {
		return &UsageError{Err: fmt.Errorf("--member is required: this agent's name (its etcd host's name)")}
	}
	if o.timeout <= 0 { // etcd.NewClient reads 0 as its 5s default
		return &UsageError{Err: fmt.Errorf("--timeout %s: must be a positive duration, e.g. 10s", o.timeout)}
	}
	env, err := openBackup(ctx, s, g)
	if err != nil {
		return err
	}
	c, p := env.c, env.p
	members, err := etcd.MembersFromSpec(c)
	if err != nil {
		return err
	}
	cli, err := etcd.NewClient(ctx, etcd.ClientURLs(members), etcd.HactlClientTLS(c), o.timeout)
	if err != nil {
		return fmt.Errorf("backup agent: connecting to the members: %w", err)
	}
	defer cli.Close()
	recipients, err := specload.BackupRecipients(c)
	if err != nil {
		return err
	}
	full := func(ctx context.Context) (int64, error) {
		rep, err := take.Run(ctx, take.Options{Cluster: c, Store: env.store, Timeout: o.timeout, Printer: p, HactlVersion: Version()})
		if err != nil {
			return 0, err
		}
		if rep.Snapshot == nil {
			return 0, fmt.Errorf("no snapshot taken: %s", rep.Skipped)
		}
		return rep.Snapshot.Revision, nil
	}
	p.Infof("backup agent %s: deltas of cluster %s every %s into %s", o.member, c.Metadata.Name, c.Spec.Backup.DeltaEvery.Duration, env.store)
	err = agent.Run(ctx, agent.Options{Cluster: c.Metadata.Name, Prefix: c.Spec.Backup.ObjectStore.Prefix, Compression: c.Spec.Backup.Compression,
		Recipients: recipients, Store: env.store, Client: cli, Identity: o.member, DeltaEvery: c.Spec.Backup.DeltaEvery.Duration,
		FullSnapshot: full, Logf: p.Infof, HactlVersion: Version()})
	if err == nil && ctx.Err() != nil {
		p.Infof("backup agent %s: stopped", o.member)
	}
	return err
}
