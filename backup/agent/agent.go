// Package agent is `hactl backup agent`: the writer of delta snapshots. An agent runs on every etcd
// member (a systemd service `hactl backup schedule --deltas` installs); the agents elect one writer
// through etcd's own election API (clientv3/concurrency, a session Lease per agent), and the writer
// watches the cluster from the revision the stored chain ends at, cutting a delta every DeltaEvery
// or at SizeBound bytes of events (backup.PutDelta: events object first, metadata last).
//
// The chain never has a gap by construction: a new writer continues from the last complete delta's
// revision (or a newer full snapshot's), and a watch that hits a compacted revision (its events are
// gone) takes a new full snapshot and continues from it. Every event goes into the deltas, the
// agents' own election keys (ElectionPrefix) too, so that each revision of the chain has its events
// and a replay can check it reaches every delta's revision; the replay deletes those keys at the
// end (their Lease is not replayed, so they would never expire).
package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/hactl/hactl/backup"
)

// Defaults.
const (
	// DefaultDeltaEvery is how often the writer cuts a delta (the 30 s).
	DefaultDeltaEvery = 30 * time.Second
	// DefaultSizeBound cuts a delta early at this many bytes of encoded events.
	DefaultSizeBound = 8 << 20
	// DefaultSessionTTL is the election session's Lease TTL in seconds: a writer that dies is
	// replaced after at most this long.
	DefaultSessionTTL = 10
	// retryDelay is the pause before campaigning again after an error.
	retryDelay = 2 * time.Second
)

// ElectionPrefix is the election's key prefix for cluster (a replay deletes its keys).
func ElectionPrefix(cluster string) string { return "/hactl/backup-agent/" + cluster + "/" }

// Options configure an agent.
type Options struct {
	// Cluster is metadata.name; Prefix spec.backup.objectStore.prefix; Compression and Recipients
	// spec.backup's.
	Cluster, Prefix string
	Compression     string
	Recipients      []string
	// Store is the object store, Client an etcd client of every member.
	Store  backup.Store
	Client *clientv3.Client
	// Identity names this agent in the election and in the deltas' metadata (its host).
	Identity string
	// DeltaEvery, SizeBound and SessionTTL: see the defaults.
	DeltaEvery time.Duration
	SizeBound  int
	SessionTTL int
	// FullSnapshot takes a full snapshot now and returns its revision (metadata revision): used
	// when there is none to start from, and when the watch hits a compacted revision.
	FullSnapshot func(ctx context.Context) (int64, error)
	// Logf gets one line per decision (campaign, elected, delta stored, full snapshot).
	Logf         func(format string, args ...any)
	HactlVersion string
}

func (o *Options) defaults() {
	if o.DeltaEvery == 0 {
		o.DeltaEvery = DefaultDeltaEvery
	}
	if o.SizeBound == 0 {
		o.SizeBound = DefaultSizeBound
	}
	if o.SessionTTL == 0 {
		o.SessionTTL = DefaultSessionTTL
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
}

// Run campaigns, writes deltas while elected, and campaigns again after losing the election or an
// error, until ctx ends (then it returns nil). Errors: only invalid options.
func Run(ctx context.Context, o Options) error {
	o.defaults()
	if o.Store == nil || o.Client == nil || o.Identity == "" || o.Cluster == "" || o.FullSnapshot == nil {
		return errors.New("backup agent: store, client, identity, cluster and full snapshot are required")
	}
	for ctx.Err() == nil {
		if err := term(ctx, o); err != nil && ctx.Err() == nil {
			o.Logf("%v; campaigning again in %s", err, retryDelay)
			select {
			case <-ctx.Done():
			case <-time.After(retryDelay):
			}
		}
	}
	return nil
}

// term is one campaign and, once elected, one term as the writer: until the session ends (its
// Lease lost), an error, or ctx.
func term(ctx context.Context, o Options) error {
	sess, err := concurrency.NewSession(o.Client, concurrency.WithTTL(o.SessionTTL), concurrency.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("election session: %w", err)
	}
	defer sess.Close()
	el := concurrency.NewElection(sess, ElectionPrefix(o.Cluster))
	o.Logf("campaigning for the delta writer of %s as %s", o.Cluster, o.Identity)
	if err := el.Campaign(ctx, o.Identity); err != nil {
		return fmt.Errorf("campaign: %w", err)
	}
	o.Logf("elected: %s writes the deltas (election key %s)", o.Identity, el.Key())
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var lost atomic.Bool // the session ended or the election key is gone: another agent may write
	go func() {
		select {
		case <-sess.Done():
			lost.Store(true)
			cancel()
		case <-lctx.Done():
		}
	}()
	// The election does not notice its own key deleted (a restore forgetting the restored election,
	// an operator by hand): then another agent is elected too, so this one stops writing at once.
	go func() {
		defer cancel()
		for resp := range o.Client.Watch(lctx, el.Key(), clientv3.WithRev(el.Rev()+1)) {
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypeDelete {
					lost.Store(true)
					o.Logf("election key %s deleted: no longer the writer", el.Key())
					return
				}
			}
		}
	}()
	err = (&writer{o: o, leader: func() bool { return !lost.Load() }}).run(lctx)
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer rcancel()
	_ = el.Resign(rctx)
	if ctx.Err() != nil {
		return nil
	}
	select {
	case <-sess.Done():
		return fmt.Errorf("lost the election (session expired): %w", errors.Join(err, errors.New("session done")))
	default:
	}
	return err
}

// writer is one term's delta writer.
type writer struct {
	o Options
	// leader reports whether this agent is still the elected writer (false once its session ended
	// or its key was deleted): only then are pending changes stored on the way out.
	leader func() bool
	base   int64 // the chain ends here: the next delta holds base+1..
	// pending events since base.
	buf     bytes.Buffer
	enc     *backup.EventWriter
	to      int64 // the highest revision the pending events cover (0: none)
	firstAt time.Time
	// clusterID is the etcd cluster ID the watch answers from (lowercase hex).
	clusterID string
}

// start finds where the chain ends: the newest complete delta's ToRevision, or the newest full
// snapshot's revision when that is newer (deltas before it are superseded), or a new full
// snapshot when there is neither.
func (w *writer) start(ctx context.Context) error {
	ds, err := backup.ListDeltas(ctx, w.o.Store, w.o.Prefix, w.o.Cluster)
	if err != nil {
		return err
	}
	l, err := backup.List(ctx, w.o.Store, w.o.Prefix, w.o.Cluster)
	if err != nil {
		return err
	}
	var full int64
	if sn := l.Latest(); sn != nil {
		full = sn.Metadata.Revision
	}
	var last int64
	if len(ds) > 0 {
		last = ds[len(ds)-1].Metadata.ToRevision
	}
	switch {
	case full == 0 && last == 0:
		w.o.Logf("no full snapshot and no delta yet: taking a full snapshot to start from")
		rev, err := w.o.FullSnapshot(ctx)
		if err != nil {
			return fmt.Errorf("full snapshot: %w", err)
		}
		w.base = rev
	case full > last:
		w.base = full
	default:
		w.base = last
	}
	// A chain that ends past the cluster's revision belongs to another history (the cluster was
	// bootstrapped again, or restored without a revision bump): watching from there would wait
	// for revisions that never carry these changes. Start a new chain from a full snapshot.
	resp, err := w.o.Client.Get(ctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		return fmt.Errorf("reading the cluster's revision: %w", err)
	}
	if cur := resp.Header.Revision; w.base > cur {
		w.o.Logf("the stored chain ends at revision %d, past the cluster's %d (another history): taking a full snapshot to start from", w.base, cur)
		rev, err := w.o.FullSnapshot(ctx)
		if err != nil {
			return fmt.Errorf("full snapshot: %w", err)
		}
		w.base = rev
	}
	return nil
}

func (w *writer) reset() {
	w.buf.Reset()
	w.enc = backup.NewEventWriter(&w.buf)
	w.to, w.firstAt = 0, time.Time{}
}

func (w *writer) run(ctx context.Context) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	w.o.Logf("continuing the delta chain after revision %d", w.base)
	tick := time.NewTicker(w.o.DeltaEvery)
	defer tick.Stop()
	for {
		w.reset()
		err := w.watch(ctx, tick.C)
		var ce *compactedError
		if !errors.As(err, &ce) {
			w.flushOnExit(ctx)
			return err
		}
		w.o.Logf("the watch from revision %d hit the compaction at %d (those events are gone): taking a full snapshot instead of leaving a gap", w.base+1, ce.rev)
		rev, err := w.o.FullSnapshot(ctx)
		if err != nil {
			return fmt.Errorf("full snapshot after compaction: %w", err)
		}
		w.base = rev
		w.o.Logf("continuing the delta chain after the new full snapshot's revision %d", rev)
	}
}

type compactedError struct{ rev int64 }

func (e *compactedError) Error() string { return fmt.Sprintf("watch compacted at revision %d", e.rev) }

// watch watches every key from base+1 and cuts deltas until an error, a compaction
// (*compactedError) or ctx.
func (w *writer) watch(ctx context.Context, tick <-chan time.Time) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := w.o.Client.Watch(wctx, "\x00", clientv3.WithFromKey(), clientv3.WithRev(w.base+1), clientv3.WithProgressNotify())
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick:
			if err := w.flush(ctx); err != nil {
				return err
			}
		case resp, ok := <-wch:
			if !ok {
				return fmt.Errorf("the watch from revision %d closed", w.base+1)
			}
			if resp.CompactRevision != 0 {
				return &compactedError{rev: resp.CompactRevision}
			}
			if err := resp.Err(); err != nil {
				return fmt.Errorf("watch: %w", err)
			}
			w.clusterID = fmt.Sprintf("%x", resp.Header.ClusterId)
			for i, ev := range resp.Events {
				if w.firstAt.IsZero() {
					w.firstAt = time.Now()
				}
				w.to = max(w.to, ev.Kv.ModRevision)
				if err := w.enc.Write((*mvccpb.Event)(ev)); err != nil {
					return err
				}
				// Cut at the size bound, but never inside a revision (a response may hold many).
				last := i == len(resp.Events)-1 || resp.Events[i+1].Kv.ModRevision != ev.Kv.ModRevision
				if last && w.buf.Len() >= w.o.SizeBound {
					if err := w.flush(ctx); err != nil {
						return err
					}
				}
			}
		}
	}
}

// flushOnExit stores the changes already received when the term ends while this agent is still the
// writer (stopped, or the watch failed: an etcd leader change, the cluster down), so they are not
// left to the next writer's watch, which may no longer reach them (a disaster). It is bounded by
// 10 s and only logs a failure.
func (w *writer) flushOnExit(ctx context.Context) {
	if w.to <= w.base || !w.leader() {
		return
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := w.flush(fctx); err != nil {
		w.o.Logf("storing the last changes on the way out: %v", err)
	}
}

// flush stores the pending events as the delta (base, to] and moves base to to. With nothing
// pending it does nothing.
func (w *writer) flush(ctx context.Context) error {
	if w.to <= w.base {
		return nil
	}
	m, err := backup.PutDelta(ctx, w.o.Store, w.base, w.to, w.buf.Bytes(), w.enc.Count(), backup.PutDeltaOptions{
		Prefix: w.o.Prefix, Cluster: w.o.Cluster, ClusterID: w.clusterID,
		Compression: w.o.Compression, Recipients: w.o.Recipients, Writer: w.o.Identity, HactlVersion: w.o.HactlVersion, StartedAt: w.firstAt})
	if err != nil {
		return err
	}
	w.o.Logf("stored delta %s: revisions %d-%d, %d events, %d bytes", m.Key, m.FromRevision+1, m.ToRevision, m.Events, m.StoredSizeBytes)
	w.base = w.to
	w.reset()
	return nil
}
