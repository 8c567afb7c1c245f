package restore

import (
	"context"
	"os"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/backup/agent"
	"github.com/hactl/hactl/backup/replay"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/report"
	"github.com/hactl/hactl/ui"
)

// FromBackupOptions say where `hactl restore` and the restore drill take the snapshot from and
// what they do with it.
type FromBackupOptions struct {
	// Cluster is the loaded, defaulted and validated spec of the cluster restored (and whose
	// backups are read); SpecFile is its file, named in errors.
	Cluster  *v1alpha1.Cluster
	SpecFile string
	// Source is the parsed snapshot source and From the value as the user gave it (for messages);
	// Flag names the flag it came from in errors (--from, "drill restore").
	Source backup.Source
	From   string
	Flag   string
	// IdentityFile decrypts encrypted backups and deltas ("": $HACTL_AGE_IDENTITY_FILE); TempDir
	// is where a downloaded snapshot is verified and kept ("": the system's temp dir).
	IdentityFile, TempDir string
	// HostFetch lets the members fetch an unencrypted backup from the object store themselves.
	HostFetch bool
	// NoDeltas restores the full snapshot alone; deltas are only ever applied to Source latest.
	NoDeltas bool
	// AnyMemberCount accepts a backup of a cluster with another member count than the spec's.
	AnyMemberCount bool
	// Force restores even though every member is healthy; Confirm is asked after the plan (nil:
	// yes). Neither applies with Into.
	Force   bool
	Confirm func(question string) (bool, error)
	// Printer receives progress lines; Prompt asks for a key passphrase or the sudo password.
	Printer *ui.Printer
	Prompt  provision.Prompter
	// Into, when set, seeds another (new) cluster with the snapshot instead of restoring Cluster in
	// place (drill restore --onto: a bootstrap --restore-from) and returns its revision.
	Into func(ctx context.Context, seed Options) (int64, error)
}

// FromBackupResult is what FromBackup did.
type FromBackupResult struct {
	// Report is Run's report of the restore in place (nil with Into, or when Run failed to start).
	Report *report.Cluster
	// Revision is the revision the restored (or seeded) cluster reached.
	Revision int64
	// Snapshot is the snapshot restored (already cleaned up: its fields only), Deltas the deltas
	// applied to it and Last the newest one's metadata (nil: none).
	Snapshot *backup.Resolved
	Deltas   int
	Last     *backup.DeltaMetadata
	// Fetch is the time spent resolving and bringing the snapshot forward here, Restore the time
	// spent restoring (or seeding) the cluster after that.
	Fetch, Restore time.Duration
}

// FromBackup restores a cluster from a backup, the one chain of `hactl restore` and the restore
// drill: the snapshot resolved and verified here (backup.Resolve), brought forward with its deltas
// when the source is latest (replay.Forward, unless NoDeltas), then the whole cluster restored (Run)
// or, with Into, another cluster seeded. The backup agents' election keys are forgotten after
// either. The result is nil when nothing was restored yet (Resolve's and Forward's errors, as they
// are); after Run it is returned with Run's error (Report possibly partly filled); Into's error is
// returned as it is, with a nil result.
func FromBackup(ctx context.Context, o FromBackupOptions) (*FromBackupResult, error) {
	c, p := o.Cluster, o.Printer
	start := time.Now()
	snap, err := backup.Resolve(ctx, c, o.Source, backup.ResolveOptions{Flag: o.Flag, SpecFile: o.SpecFile, Force: o.AnyMemberCount,
		IdentityFile: o.IdentityFile, TempDir: o.TempDir, Getenv: os.Getenv, Progress: p.Infof, HostFetch: o.HostFetch})
	if err != nil {
		return nil, err
	}
	defer snap.Cleanup()
	forget := []string{agent.ElectionPrefix(c.Metadata.Name)}
	res := &FromBackupResult{Snapshot: snap}
	if !o.Source.Latest() {
		p.Infof("restoring %s as it is: deltas are applied only with --from latest (a snapshot named explicitly is usually chosen to go back before a change)", o.From)
	} else if !o.NoDeltas {
		if res.Deltas, res.Last, err = replay.Forward(ctx, c, snap, replay.ForwardOptions{Flag: o.Flag, SpecFile: o.SpecFile, IdentityFile: o.IdentityFile,
			Getenv: os.Getenv, SkipPrefix: forget[0], Progress: p.Infof}); err != nil {
			return nil, err
		}
	}
	fetched := time.Now()
	res.Fetch = fetched.Sub(start)
	seed := ResolvedOptions(snap)
	seed.ForgetPrefixes = forget
	if o.Into != nil {
		if res.Revision, err = o.Into(ctx, seed); err != nil {
			return nil, err
		}
		res.Restore = time.Since(fetched)
		return res, nil
	}
	seed.Force, seed.Confirm = o.Force, o.Confirm
	var runErr error
	res.Report, runErr = Run(ctx, Config{Prompt: o.Prompt, Cluster: c, Printer: p, Options: seed})
	res.Restore = time.Since(fetched)
	if res.Report != nil {
		res.Revision = res.Report.RestoredRevision
	}
	return res, runErr
}

// ResolvedOptions is Options for a resolved snapshot: the file verified here, or, for snap.Remote,
// the object every member fetches itself, with the download here as the fallback for the members
// that cannot.
func ResolvedOptions(snap *backup.Resolved) Options {
	o := Options{Snapshot: snap.Path, SHA256: snap.SHA256, Revision: snap.Revision}
	if r := snap.Remote; r != nil {
		o.Fetch = &HostFetch{Name: r.Key, Endpoint: r.Endpoint, Compression: r.Compression, StoredSize: r.StoredSizeBytes,
			CAPEM: r.CAPEM, Presign: r.Presign, Local: snap.Local}
	}
	return o
}
