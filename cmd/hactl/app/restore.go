package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/bootstrap/restore"
	"github.com/hactl/hactl/ui"
)

type restoreOptions struct {
	from         string
	force        bool
	yes          bool
	output       string
	identityFile string
	tempDir      string
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

Before any member is touched the snapshot is downloaded, decrypted (--identity-file), decompressed
and verified here: its sha256 against the metadata, etcd's sha256 trailer and etcd's integrity check
(etcdutl's snapshot package: bbolt consistency, hash, revision). A backup of a cluster with another
member count than the spec's is refused without --force. Then the plan is shown and confirmed (--yes in
scripts), and:

  restore/ship    the snapshot is copied to every member (sha256 checked on each host) while the
                  cluster still runs
  restore/stop    etcd stopped on ALL members
  restore/data    each data dir moved aside as <dataDir>.pre-restore-<time> (kept), rebuilt with
                  etcdutl snapshot restore: the member's own name and peer URL, the full initial
                  cluster, a NEW cluster token, --bump-revision 1000000000 --mark-compacted (so
                  kube-apiserver watches can't silently miss events); new units and markers. If any
                  member fails, every member gets its previous data dir back and etcd is started again.
  restore/start   all members started together
  etcd/wait       quorum, a write and a linearizable read, the new cluster ID recorded
  restore/verify  the revision is past the snapshot's + the bump; what to restart next

A healthy cluster is not restored without --force: a restore rolls every write since the snapshot back.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRestore(cmd, s, g, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.from, "from", "", "the snapshot: a local file (./snap.db), s3://BUCKET/KEY or latest")
	f.StringVar(&o.identityFile, "identity-file", "", "age identity file for encrypted backups (default $"+identityEnv+")")
	f.StringVar(&o.tempDir, "temp-dir", "", "where a downloaded snapshot is verified and kept during the restore (default the system's temp dir)")
	f.BoolVar(&o.force, "force", false, "restore even though every member is healthy (rolls back every write since the snapshot)")
	f.BoolVar(&o.yes, "yes", false, "do not ask for confirmation (scripts, CI)")
	f.StringVarP(&o.output, "output", "o", "table", "summary format: table or json (progress goes to stderr)")
	return cmd
}

// snapshotSource is a parsed --from / --restore-from: exactly one of local, key or latest.
type snapshotSource struct {
	local  string // a local file
	bucket string // s3://BUCKET/KEY
	key    string
	latest bool
}

// parseSource parses the value of flag (--from, --restore-from): "latest", s3://BUCKET/KEY, or a
// local path (with or without file://). Other schemes are usage errors.
func parseSource(flag, from string) (snapshotSource, error) {
	if from == "" {
		return snapshotSource{}, &UsageError{Err: fmt.Errorf("%s is required: a local snapshot file (./snapshot.db), s3://BUCKET/KEY or latest", flag)}
	}
	if from == "latest" {
		return snapshotSource{latest: true}, nil
	}
	if u, err := url.Parse(from); err == nil && u.Scheme != "" && len(u.Scheme) > 1 { // "C:" is not a scheme here
		switch u.Scheme {
		case "file":
			return snapshotSource{local: u.Path}, nil
		case "s3":
			key := strings.TrimPrefix(u.Path, "/")
			if u.Host == "" || key == "" {
				return snapshotSource{}, &UsageError{Err: fmt.Errorf("%s %s: want s3://BUCKET/KEY", flag, from)}
			}
			return snapshotSource{bucket: u.Host, key: key}, nil
		default:
			return snapshotSource{}, &UsageError{Err: fmt.Errorf("%s %s: unknown scheme %q: give a local file (./snapshot.db), s3://BUCKET/KEY or latest", flag, from, u.Scheme)}
		}
	}
	return snapshotSource{local: from}, nil
}

func (s snapshotSource) String() string {
	switch {
	case s.latest:
		return "latest"
	case s.key != "":
		return "s3://" + s.bucket + "/" + s.key
	}
	return s.local
}

// resolvedSnapshot is a verified raw snapshot file ready to ship, and how to clean it up.
type resolvedSnapshot struct {
	path     string
	sha256   string
	revision int64
	cleanup  func()
}

// resolveSnapshot verifies src here, before any host is contacted. A local file: etcd's trailer and
// integrity check (backup.CheckFile). A backup (s3:// or latest): listed under the cluster's prefix,
// member count compared with the spec (unless force), downloaded, decrypted, decompressed and fully
// verified (backup.Verify) into a file kept for the restore. A check that fails is a *VerdictError
// (exit 3); a missing file or snapshot, or another member count, a *UsageError (exit 2).
func resolveSnapshot(ctx context.Context, c *v1alpha1.Cluster, file, flag string, src snapshotSource, force bool, idFile, tempDir string, p *ui.Printer) (*resolvedSnapshot, error) {
	if src.local != "" {
		if _, err := os.Stat(src.local); err != nil {
			return nil, &UsageError{Err: fmt.Errorf("%s %s: %w", flag, src.local, err)}
		}
		fc, err := backup.CheckFile(src.local)
		var me *backup.MismatchError
		if errors.As(err, &me) {
			return nil, &VerdictError{Err: fmt.Errorf("%s %s: refused before any member was touched: %w", flag, src.local, err)}
		}
		if err != nil {
			return nil, err
		}
		p.Infof("snapshot %s verified here: revision %d, %d keys, sha256 %s", src.local, fc.Revision, fc.TotalKeys, fc.SHA256)
		return &resolvedSnapshot{path: src.local, sha256: fc.SHA256, revision: fc.Revision, cleanup: func() {}}, nil
	}
	ids, err := readIdentities(idFile)
	if err != nil {
		return nil, err
	}
	st, err := openStore(ctx, c, file, src.bucket)
	if err != nil {
		return nil, err
	}
	l, err := backup.List(ctx, st, c.Spec.Backup.ObjectStore.Prefix, c.Metadata.Name)
	if err != nil {
		return nil, err
	}
	sn := l.Latest()
	if !src.latest {
		sn = l.Find(src.key)
	}
	if sn == nil {
		return nil, &UsageError{Err: fmt.Errorf("%s %s: no complete snapshot (with its metadata) under %s in %s: see `hactl backup list`", flag, src, l.Prefix, st)}
	}
	m := sn.Metadata
	if n := len(c.EtcdHosts()); m.ClusterMembers != 0 && m.ClusterMembers != n && !force {
		return nil, &UsageError{Err: fmt.Errorf("%s %s: the snapshot is of a %d-member cluster, the spec has %d etcd hosts: add --force to restore it onto %d members", flag, src, m.ClusterMembers, n, n)}
	}
	dir, err := os.MkdirTemp(tempDir, "hactl-restore-")
	if err != nil {
		return nil, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	keep := filepath.Join(dir, "snapshot.db")
	p.Infof("downloading and verifying %s (revision %d, %d bytes stored, taken %s by %s)", m.Key, m.Revision, m.StoredSizeBytes, m.StartedAt.Format(time.RFC3339), m.MemberName)
	res, err := backup.Verify(ctx, st, sn, backup.VerifyOptions{Identities: ids, KeepAs: keep})
	var me *backup.MismatchError
	switch {
	case errors.As(err, &me):
		cleanup()
		return nil, &VerdictError{Err: fmt.Errorf("%s %s: refused before any member was touched: %w", flag, src, err)}
	case errors.Is(err, backup.ErrNoIdentity), errors.Is(err, backup.ErrWrongIdentity):
		cleanup()
		return nil, &UsageError{Err: err}
	case err != nil:
		cleanup()
		return nil, err
	}
	p.Infof("snapshot %s verified here: revision %d, %d keys, sha256 %s", m.Key, res.Revision, res.TotalKeys, m.RawSHA256)
	return &resolvedSnapshot{path: keep, sha256: m.RawSHA256, revision: res.Revision, cleanup: cleanup}, nil
}

func runRestore(cmd *cobra.Command, s Streams, g *globalOptions, o *restoreOptions) error {
	if err := outputFormat(o.output); err != nil {
		return err
	}
	src, err := parseSource("--from", o.from)
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
	snap, err := resolveSnapshot(cmd.Context(), c, g.file, "--from", src, o.force, o.identityFile, o.tempDir, p)
	if err != nil {
		return err
	}
	defer snap.cleanup()
	res, runErr := restore.Run(cmd.Context(), restore.Config{
		Prompt:  terminalPrompter(s.In, s.Err),
		Cluster: c,
		Printer: p,
		Options: restore.Options{Snapshot: snap.path, SHA256: snap.sha256, Revision: snap.revision, Force: o.force, Confirm: confirm},
	})
	if res == nil {
		return runErr
	}
	if runErr != nil && logPath != "" {
		fmt.Fprintf(s.Err, "debug log: %s\n", logPath)
	}
	if o.output == "json" || runErr == nil {
		if err := writeReport(s.Out, o.output, res, func(w io.Writer) {
			fmt.Fprintf(w, "\ncluster %s restored from %s: cluster ID %s, revision %d; took %s\n", res.Cluster, src, res.ClusterID, res.RestoredRevision, res.Duration)
		}); err != nil {
			return err
		}
	}
	return runErr
}
