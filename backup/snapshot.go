package backup

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hactl/hactl/ui"
)

// TakeOptions say what Take stores and how.
type TakeOptions struct {
	// Cluster is the spec's metadata.name; Prefix spec.backup.objectStore.prefix.
	Cluster, Prefix string
	// Member is the name of the member the client talks to (it names the object).
	Member string
	// Slot is the scheduled slot (TimeFormat), "" for an unscheduled run.
	Slot string
	// TakenBy is recorded in the metadata (TakenByOperator, or "" for hactl's CLI and timers).
	TakenBy string
	// Compression is "zstd" or "none".
	Compression string
	// Recipients are age recipients as written in the spec (age1...); none: not encrypted.
	Recipients []string
	// Threads is how many parts are in flight (0: as many as the DB's size fills, at most
	// DefaultThreads; see Threads).
	Threads uint
	// HactlVersion is recorded in the metadata.
	HactlVersion string
	// Progress, when set, gets progress lines (no trailing newline).
	Progress func(format string, args ...any)
	// Now is the clock (nil: time.Now).
	Now func() time.Time

	// partSize and maxParts override the computed part size and the store's limit (tests).
	partSize int64
	maxParts int
}

// Take snapshots the etcd member at endpoint (cli must talk to that endpoint only: the snapshot
// is that member's point-in-time state) into store, streaming it with Upload, then writes the
// metadata object that marks it complete. It returns the metadata.
//
// Errors: the member's status can't be read, the snapshot stream fails or is cut (etcd's trailing
// sha256 is checked on the fly), ErrPartLimit, or the store fails; after any of them no complete
// snapshot exists (there is no metadata object, and the upload is aborted).
func Take(ctx context.Context, cli *clientv3.Client, endpoint string, store Store, o TakeOptions) (*Metadata, error) {
	now := o.Now
	if now == nil {
		now = time.Now
	}
	progress := o.Progress
	if progress == nil {
		progress = func(string, ...any) {}
	}
	recipients, err := ParseRecipients(o.Recipients)
	if err != nil {
		return nil, err
	}
	st, err := cli.Status(ctx, endpoint)
	if err != nil {
		return nil, fmt.Errorf("status of %s (%s): %w", o.Member, endpoint, err)
	}
	voters := 0
	if ml, err := cli.MemberList(ctx); err == nil {
		for _, mm := range ml.Members {
			if !mm.IsLearner {
				voters++
			}
		}
	}
	started := now().UTC().Truncate(time.Second)
	partSize := o.partSize
	if partSize == 0 {
		maxParts := store.MaxParts()
		if o.maxParts > 0 {
			maxParts = o.maxParts
		}
		if partSize, err = PartSize(st.DbSize, maxParts); err != nil {
			return nil, err
		}
	}
	stem, err := Stem(started, st.Header.Revision, o.Member, o.Slot)
	if err != nil {
		return nil, err
	}
	dir := SnapshotsPrefix(o.Prefix, o.Cluster)
	m := &Metadata{
		Format:         MetadataFormat,
		Cluster:        o.Cluster,
		Key:            path.Join(dir, stem+DataExt(o.Compression, len(recipients) > 0)),
		MetadataKey:    path.Join(dir, stem+metaExt),
		ClusterID:      fmt.Sprintf("%x", st.Header.ClusterId),
		MemberID:       fmt.Sprintf("%x", st.Header.MemberId),
		MemberName:     o.Member,
		Revision:       st.Header.Revision,
		RaftTerm:       st.RaftTerm,
		RaftIndex:      st.RaftIndex,
		EtcdVersion:    st.Version,
		StorageVersion: st.StorageVersion,
		DBSizeBytes:    st.DbSize,
		Compression:    o.Compression,
		Recipients:     o.Recipients,
		PartSizeBytes:  partSize,
		StartedAt:      started,
		HactlVersion:   o.HactlVersion,
		Slot:           o.Slot,
		TakenBy:        o.TakenBy,
		ClusterMembers: voters,
	}
	if m.Compression == "" {
		m.Compression = "none"
	}
	progress("snapshot of %s (%s): revision %d, DB %s, part size %s → %s", o.Member, endpoint, m.Revision, ui.Size(m.DBSizeBytes), ui.Size(partSize), m.Key)

	snap, err := cli.SnapshotWithVersion(ctx)
	if err != nil {
		return nil, fmt.Errorf("snapshot of %s (%s): %w", o.Member, endpoint, err)
	}
	defer snap.Snapshot.Close()
	if snap.Version != "" {
		m.StorageVersion = snap.Version
	}
	t0 := now()
	res, err := Upload(ctx, store, m.Key, snap.Snapshot, UploadOptions{
		PartSize: partSize, Threads: cmp.Or(o.Threads, Threads(st.DbSize, partSize)), Compression: m.Compression, Recipients: recipients, EtcdTrailer: true,
		ProgressEvery: 5 * time.Second, maxParts: o.maxParts,
		Progress: func(n int64) {
			progress("  %s of ~%s read (%s)", ui.Size(n), ui.Size(m.DBSizeBytes), now().Sub(t0).Round(time.Second))
		},
	})
	if err != nil {
		if errors.Is(err, ErrPartLimit) || errors.Is(err, ErrTrailer) {
			return nil, err
		}
		return nil, fmt.Errorf("snapshot of %s (%s) into %s: %w", o.Member, endpoint, store, err)
	}
	m.RawSizeBytes, m.RawSHA256 = res.RawSizeBytes, res.RawSHA256
	m.StoredSizeBytes, m.StoredSHA256 = res.StoredSizeBytes, res.StoredSHA256
	m.CompletedAt = now().UTC()
	if err := putJSON(ctx, store, m.MetadataKey, m); err != nil {
		// The data object without metadata is an orphan prune removes after its grace period.
		return nil, fmt.Errorf("writing the metadata %s (the snapshot is incomplete without it): %w", m.MetadataKey, err)
	}
	progress("stored %s (%s, sha256 %s) in %s", m.Key, ui.Size(m.StoredSizeBytes), m.StoredSHA256[:12], m.CompletedAt.Sub(m.StartedAt).Round(time.Millisecond))
	return m, nil
}

// Threads returns how many parts of partSize bytes a snapshot of a DB of dbSize bytes uploads at
// once by default: as many as dbSize×1.1 (the growth PartSize allows for) fills, at least 1 and at
// most DefaultThreads. The upload buffers PartSize × threads bytes up front (minio-go's parallel
// streaming allocates every part's buffer at the start), so a DB smaller than a part costs one
// part of memory, not DefaultThreads of them.
func Threads(dbSize, partSize int64) uint {
	if partSize <= 0 {
		return DefaultThreads
	}
	need := (dbSize/growthDen*growthNum + partSize - 1) / partSize
	return uint(min(max(need, 1), DefaultThreads))
}
