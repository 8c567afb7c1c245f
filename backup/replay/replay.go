// Package replay brings a full snapshot forward with its delta snapshots: the full snapshot is
// restored into a temporary etcd (embedded, on loopback), every delta's events are applied in
// revision order, one transaction per original revision, with the revision checked after each, and
// the result is snapshotted into a new raw DB file that `hactl restore` then restores as usual
// (revisions bumped, marked compacted).
//
// Leases: the full snapshot's Leases are kept alive in the temporary etcd for the whole replay (a
// Lease that ran out there would delete its keys and add revisions the chain does not have). A put
// keeps its Lease: one of the full snapshot's, or one granted after it, which the replay grants with
// the same ID and ReplayLeaseTTL (the original TTL is not in the events; Kubernetes' Events, the
// usual holders, live an hour). The backup agents' election keys are deleted at the end, in one more
// revision.
package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"filippo.io/age"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/internal/exitcode"
)

// Options say what to replay.
type Options struct {
	// Snapshot is the verified raw full snapshot (a file), Revision its revision (etcdutl's
	// snapshot status: deltas are applied from Revision+1).
	Snapshot string
	Revision int64
	// Deltas is the chain (backup.Chain from Revision), Store where they are, Identities decrypt
	// them.
	Deltas     []backup.Delta
	Store      backup.Store
	Identities []age.Identity
	// SkipPrefix is the backup agents' election prefix: deleted at the end.
	SkipPrefix string
	// Out is the new raw snapshot file (created; must not exist).
	Out string
	// TempDir holds the temporary etcd's data dir ("": the system's).
	TempDir string
	// Progress, when set, gets a line per delta.
	Progress func(format string, args ...any)
}

// Result is the replayed snapshot.
type Result struct {
	// Path is Options.Out; SHA256 its sha256 (hex), Revision the revision it holds: the last
	// delta's ToRevision (plus one when election keys were deleted).
	Path     string
	SHA256   string
	Revision int64
	// Events counts the events applied (of revisions past Options.Revision).
	Events int
}

// ReplayLeaseTTL is the TTL, in seconds, of a Lease granted after the full snapshot that a replayed
// put names.
const ReplayLeaseTTL = 3600

// ErrRevision is wrapped when the temporary etcd's revision is not the one the delta says: the
// chain does not carry the snapshot forward exactly (an event is missing or extra).
var ErrRevision = errors.New("the replay did not reach the revision the delta records")

// Run replays o.Deltas onto o.Snapshot into o.Out. Errors: the temporary etcd's, a delta's
// (backup.ReadDelta: *backup.MismatchError, identity errors), ErrRevision (wrapped).
func Run(ctx context.Context, o Options) (*Result, error) {
	progress := o.Progress
	if progress == nil {
		progress = func(string, ...any) {}
	}
	dir, err := os.MkdirTemp(o.TempDir, "hactl-replay-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	peer, client, err := loopbackURLs()
	if err != nil {
		return nil, err
	}
	const name = "replay"
	dataDir := filepath.Join(dir, "data")
	lg := zap.NewNop()
	if err := snapshot.NewV3(lg).Restore(snapshot.RestoreConfig{SnapshotPath: o.Snapshot, Name: name, OutputDataDir: dataDir,
		PeerURLs: []string{peer.String()}, InitialCluster: name + "=" + peer.String(), InitialClusterToken: "hactl-replay"}); err != nil {
		return nil, fmt.Errorf("replay: restoring the full snapshot into a temporary etcd: %w", err)
	}
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = name, dataDir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = name + "=" + peer.String()
	cfg.ClusterState = embed.ClusterStateFlagExisting
	cfg.MaxTxnOps = 1 << 20
	cfg.MaxRequestBytes = 64 << 20
	cfg.QuotaBackendBytes = 64 << 30
	// Its own logs say nothing to a user (and at Close report the listeners closing as errors).
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(lg)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("replay: starting the temporary etcd: %w", err)
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(time.Minute):
		return nil, errors.New("replay: the temporary etcd was not ready within a minute")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client.String()}, DialTimeout: 10 * time.Second, Logger: lg, MaxCallSendMsgSize: 64 << 20, MaxCallRecvMsgSize: 64 << 20})
	if err != nil {
		return nil, err
	}
	defer cli.Close()

	at := o.Revision
	if resp, err := cli.Get(ctx, "\x00", clientv3.WithCountOnly()); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	} else if resp.Header.Revision != at {
		return nil, fmt.Errorf("replay: the full snapshot holds revision %d, not %d", resp.Header.Revision, at)
	}
	// Keep the snapshot's Leases alive (keep-alives add no revision).
	leases, err := cli.Leases(ctx)
	if err != nil {
		return nil, fmt.Errorf("replay: listing the snapshot's leases: %w", err)
	}
	kctx, kcancel := context.WithCancel(ctx)
	defer kcancel()
	known := map[int64]bool{}
	keepAlive := func(id clientv3.LeaseID) error {
		ch, err := cli.KeepAlive(kctx, id)
		if err != nil {
			return fmt.Errorf("replay: keeping lease %x alive: %w", int64(id), err)
		}
		go func() {
			for range ch { // drain: the client sends a keep-alive every TTL/3
			}
		}()
		known[int64(id)] = true
		return nil
	}
	for _, l := range leases.Leases {
		if err := keepAlive(l.ID); err != nil {
			return nil, err
		}
	}
	leaseClient := pb.NewLeaseClient(cli.ActiveConnection())
	res := &Result{Path: o.Out}
	var group []*mvccpb.Event
	apply := func() error {
		if len(group) == 0 {
			return nil
		}
		rev := group[0].Kv.ModRevision
		if rev != at+1 {
			return fmt.Errorf("%w: the next events are of revision %d, the temporary etcd is at %d (revisions %d to %d have no events)", ErrRevision, rev, at, at+1, rev-1)
		}
		ops := make([]clientv3.Op, 0, len(group))
		for _, ev := range group {
			if ev.Type == mvccpb.DELETE {
				ops = append(ops, clientv3.OpDelete(string(ev.Kv.Key)))
				continue
			}
			var opts []clientv3.OpOption
			if id := ev.Kv.Lease; id != 0 {
				if !known[id] {
					if _, err := leaseClient.LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: id, TTL: ReplayLeaseTTL}); err != nil {
						return fmt.Errorf("replay: granting lease %x (named by %s at revision %d): %w", id, ev.Kv.Key, rev, err)
					}
					if err := keepAlive(clientv3.LeaseID(id)); err != nil {
						return err
					}
				}
				opts = append(opts, clientv3.WithLease(clientv3.LeaseID(id)))
			}
			ops = append(ops, clientv3.OpPut(string(ev.Kv.Key), string(ev.Kv.Value), opts...))
		}
		resp, err := cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return fmt.Errorf("replay: revision %d: %w", rev, err)
		}
		if resp.Header.Revision != rev {
			return fmt.Errorf("%w: applying revision %d's %d events left the temporary etcd at %d", ErrRevision, rev, len(group), resp.Header.Revision)
		}
		at = rev
		res.Events += len(group)
		group = group[:0]
		return nil
	}
	for _, d := range o.Deltas {
		err := backup.ReadDelta(ctx, o.Store, d, o.Identities, func(ev *mvccpb.Event) error {
			if ev.Kv.ModRevision <= at {
				return nil // in the full snapshot, or in the delta before (an overlap)
			}
			if len(group) > 0 && ev.Kv.ModRevision != group[0].Kv.ModRevision {
				if err := apply(); err != nil {
					return err
				}
			}
			group = append(group, ev)
			return nil
		})
		if err == nil {
			err = apply()
		}
		if err != nil {
			return nil, fmt.Errorf("delta %s: %w", d.Data.Key, err)
		}
		if at != d.Metadata.ToRevision {
			return nil, fmt.Errorf("delta %s: %w: it ends at revision %d, the replay reached %d", d.Data.Key, ErrRevision, d.Metadata.ToRevision, at)
		}
		progress("delta %s applied: revisions %d-%d", d.Data.Key, d.Metadata.FromRevision+1, d.Metadata.ToRevision)
	}
	if o.SkipPrefix != "" && strings.HasSuffix(o.SkipPrefix, "/") {
		if resp, err := cli.Delete(ctx, o.SkipPrefix, clientv3.WithPrefix()); err != nil {
			return nil, fmt.Errorf("replay: deleting %s: %w", o.SkipPrefix, err)
		} else if resp.Deleted > 0 {
			at = resp.Header.Revision
		}
	}
	res.Revision = at
	if err := writeSnapshot(ctx, cli, o.Out); err != nil {
		return nil, err
	}
	fc, err := backup.CheckFile(o.Out)
	if err != nil {
		os.Remove(o.Out)
		return nil, fmt.Errorf("replay: the new snapshot: %w", err)
	}
	if fc.Revision != at {
		os.Remove(o.Out)
		return nil, fmt.Errorf("replay: %w: the new snapshot holds revision %d, want %d", ErrRevision, fc.Revision, at)
	}
	res.SHA256 = fc.SHA256
	return res, nil
}

// writeSnapshot streams the temporary etcd's snapshot into out (0600, created; removed on error).
func writeSnapshot(ctx context.Context, cli *clientv3.Client, out string) (err error) {
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(out)
		}
	}()
	rc, err := cli.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("replay: snapshot of the temporary etcd: %w", err)
	}
	defer rc.Close()
	if _, err := io.Copy(f, rc); err != nil {
		return fmt.Errorf("replay: snapshot of the temporary etcd: %w", err)
	}
	return f.Sync()
}

// loopbackURLs returns a peer and a client URL on free loopback ports.
func loopbackURLs() (peer, client url.URL, err error) {
	var us []url.URL
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return url.URL{}, url.URL{}, err
		}
		us = append(us, url.URL{Scheme: "http", Host: l.Addr().String()})
		l.Close()
	}
	return us[0], us[1], nil
}

// ForwardOptions say how Forward finds and decrypts a backup's deltas.
type ForwardOptions struct {
	// Flag names the flag the source came from in errors; SpecFile the spec file.
	Flag, SpecFile string
	// IdentityFile decrypts encrypted deltas ("": $HACTL_AGE_IDENTITY_FILE).
	IdentityFile string
	// Getenv reads the environment (nil: os.Getenv).
	Getenv func(string) string
	// SkipPrefix is the backup agents' election prefix (deleted after the replay).
	SkipPrefix string
	// Progress, when set, gets progress lines.
	Progress func(format string, args ...any)
}

// Forward brings a resolved backup (backup.Resolve of s3:// or latest; a local file is left as it
// is) forward with the deltas that continue it: listed under the cluster's deltas prefix, chained
// from the verified revision (backup.Chain), replayed (Run) into a new file next to the
// snapshot (a Remote snapshot is downloaded here first), which then replaces snap's Path, SHA256
// and Revision and drops its Remote. It returns the deltas applied and
// the newest one's metadata (0 and nil: none continue it). Errors: a chain with a gap → *exitcode.VerdictError wrapping *backup.GapError
// (nothing touched; the message says how to restore the full snapshot alone); a delta that fails
// its checks → *exitcode.VerdictError wrapping the *backup.MismatchError; Run's others.
func Forward(ctx context.Context, c *v1alpha1.Cluster, snap *backup.Resolved, o ForwardOptions) (int, *backup.DeltaMetadata, error) {
	if snap.Metadata == nil {
		return 0, nil, nil
	}
	progress := o.Progress
	if progress == nil {
		progress = func(string, ...any) {}
	}
	store, err := backup.OpenStore(ctx, c, backup.StoreOptions{Source: o.SpecFile, Getenv: o.Getenv})
	if err != nil {
		return 0, nil, err
	}
	ds, err := backup.ListDeltas(ctx, store, c.Spec.Backup.ObjectStore.Prefix, c.Metadata.Name)
	if err != nil {
		return 0, nil, err
	}
	chainFrom := func() ([]backup.Delta, error) {
		chain, err := backup.Chain(ds, snap.Revision)
		var ge *backup.GapError
		if errors.As(err, &ge) {
			return nil, &exitcode.VerdictError{Err: fmt.Errorf("%s: refused before any member was touched: the deltas after %s: %w; add --no-deltas to restore the full snapshot alone (revision %d)",
				o.Flag, snap.Metadata.Key, err, snap.Revision)}
		}
		return chain, err
	}
	chain, err := chainFrom()
	if err != nil || len(chain) == 0 {
		return 0, nil, err
	}
	if snap.Path == "" { // the replay starts from the full snapshot here: download and verify it
		if _, err := snap.Local(ctx); err != nil {
			return 0, nil, err
		}
		// The verified revision can be past the metadata's (read before the snapshot was taken).
		if chain, err = chainFrom(); err != nil || len(chain) == 0 {
			return 0, nil, err
		}
	}
	ids, err := backup.IdentitiesFrom(o.IdentityFile, o.Getenv)
	if err != nil {
		return 0, nil, err
	}
	last := chain[len(chain)-1].Metadata
	progress("applying %d delta(s) after %s: revisions %d-%d (the newest stored %s)", len(chain), snap.Metadata.Key, snap.Revision+1, last.ToRevision, last.CompletedAt.Format(time.RFC3339))
	res, err := Run(ctx, Options{Snapshot: snap.Path, Revision: snap.Revision, Deltas: chain, Store: store, Identities: ids,
		SkipPrefix: o.SkipPrefix, Out: filepath.Join(filepath.Dir(snap.Path), "replayed.db"), TempDir: filepath.Dir(snap.Path), Progress: progress})
	var me *backup.MismatchError
	switch {
	case errors.As(err, &me), errors.Is(err, ErrRevision), errors.Is(err, backup.ErrBadEvents):
		return 0, nil, &exitcode.VerdictError{Err: fmt.Errorf("%s: refused before any member was touched: %w; add --no-deltas to restore the full snapshot alone", o.Flag, err)}
	case err != nil:
		return 0, nil, err
	}
	os.Remove(snap.Path)
	snap.Path, snap.SHA256, snap.Revision = res.Path, res.SHA256, res.Revision
	snap.Remote = nil // the members get the replayed file, not the stored object
	progress("snapshot brought forward to revision %d (%d events), sha256 %s", res.Revision, res.Events, res.SHA256)
	return len(chain), last, nil
}
