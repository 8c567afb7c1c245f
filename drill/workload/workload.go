// Package workload drives an etcd workload during a failover drill and judges it afterwards.
//
// Start issues Puts of unique keys under a drill prefix at a fixed rate (open loop: a slow or failing
// request never delays the next one) and, alongside, linearizable reads of writes already
// acknowledged. Stop returns a Record of every request: when it was sent, when it completed, and what
// etcd answered. From the Record alone, Stats measures availability (recovery time, longest gap
// between acknowledgements, latency); Verify reads the prefix back and proves that no acknowledged
// write was lost and that etcd's guarantees held; Cleanup deletes the keys.
//
// The rules checked are etcd's documented API guarantees
// (https://etcd.io/docs/v3.6/learning/api_guarantees/):
//   - Durability: "Any completed operations are durable": an acknowledged Put is never lost.
//   - Strict serializability: "KV Service operations are atomic and occur in a total order,
//     consistent with real-time order of those operations. Total order is implied through
//     revision": every modifying operation gets its own revision (two acknowledged Puts with the
//     same revision mean two leaders acknowledged writes: a split brain), and a Put acknowledged
//     before another was sent has the lower revision.
//   - Linearizable reads (the default for Range): a read sent after a write was acknowledged
//     returns that write (or a later one).
//   - A request that timed out may or may not have been applied ("the client may be uncertain
//     about the status of an operation if it times out"), so unacknowledged writes found in the
//     store are reported, not held against etcd.
package workload

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Defaults and limits of Config.
const (
	// DefaultRate is the default number of Puts per second: one every 20 ms.
	DefaultRate = 50
	// DefaultReadRate is the default number of read-after-ack checks per second.
	DefaultReadRate = 10
	// DefaultRequestTimeout is the default deadline of each request.
	DefaultRequestTimeout = 100 * time.Millisecond
	// MaxRate bounds Rate and ReadRate: the ticker period must stay at or above 1 ms.
	MaxRate = 1000
	// PrefixCheckTimeout bounds Start's check that the prefix is empty.
	PrefixCheckTimeout = 5 * time.Second
)

// ErrInvalidConfig is wrapped by every Config validation error.
var ErrInvalidConfig = errors.New("invalid workload config")

// ErrPrefixNotEmpty is returned by Start when keys already exist under the prefix: Verify could not
// tell them from the run's own writes.
var ErrPrefixNotEmpty = errors.New("workload prefix already holds keys")

// Config is a workload's configuration. The zero values of Rate, ReadRate and RequestTimeout mean
// their defaults.
type Config struct {
	// Client is the etcd client (typically etcd.NewClient with every member's endpoint); required.
	// The caller owns it and closes it after Stop (and Verify).
	Client *clientv3.Client
	// Prefix is the key prefix of every key written, e.g. "/hactl-drill/<drill-id>/"; required, it
	// must end in "/" and hold something besides slashes (see ValidatePrefix).
	Prefix string
	// Rate is the number of Puts issued per second, open loop (0: DefaultRate; at most MaxRate).
	Rate int
	// ReadRate is the number of linearizable read-after-ack checks per second (0: DefaultReadRate;
	// negative: no reads; at most MaxRate).
	ReadRate int
	// RequestTimeout is the deadline of each request (0: DefaultRequestTimeout). A request that
	// misses it is recorded as failed at that moment, so a slow client never inflates the figures
	// by more than this.
	RequestTimeout time.Duration
}

// ValidatePrefix checks a drill key prefix: not empty, ending in "/", and not made of slashes only
// (Cleanup deletes everything under it; "/" would be every key of a Kubernetes etcd).
func ValidatePrefix(prefix string) error {
	switch {
	case prefix == "":
		return fmt.Errorf("%w: prefix is empty", ErrInvalidConfig)
	case !strings.HasSuffix(prefix, "/"):
		return fmt.Errorf("%w: prefix %q does not end in \"/\"", ErrInvalidConfig, prefix)
	case strings.Trim(prefix, "/") == "":
		return fmt.Errorf("%w: prefix %q is only slashes", ErrInvalidConfig, prefix)
	}
	return nil
}

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.Rate == 0 {
		c.Rate = DefaultRate
	}
	if c.ReadRate == 0 {
		c.ReadRate = DefaultReadRate
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	return c
}

// Validate checks c (after defaults) and returns every problem found, joined; each wraps
// ErrInvalidConfig.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.Client == nil {
		errs = append(errs, fmt.Errorf("%w: no client", ErrInvalidConfig))
	}
	if err := ValidatePrefix(c.Prefix); err != nil {
		errs = append(errs, err)
	}
	if c.Rate < 0 || c.Rate > MaxRate {
		errs = append(errs, fmt.Errorf("%w: rate %d is not in 1..%d", ErrInvalidConfig, c.Rate, MaxRate))
	}
	if c.ReadRate > MaxRate {
		errs = append(errs, fmt.Errorf("%w: read rate %d is above %d", ErrInvalidConfig, c.ReadRate, MaxRate))
	}
	if c.RequestTimeout < 0 {
		errs = append(errs, fmt.Errorf("%w: request timeout %s is negative", ErrInvalidConfig, c.RequestTimeout))
	}
	return errors.Join(errs...)
}

// maxInFlight is how many requests at rate per second, each lasting at most timeout, can be pending
// at once, plus 2 for requests that complete a little after their deadline.
func maxInFlight(rate int, timeout time.Duration) int {
	return int(math.Ceil(float64(rate)*timeout.Seconds())) + 2
}

// Write is one Put of the workload.
type Write struct {
	// Seq numbers the writes from 1 in the order they were issued.
	Seq int64 `json:"seq"`
	// Key is Prefix followed by Seq zero-padded to 10 digits, so keys sort in issue order.
	Key string `json:"key"`
	// Value identifies the run and the write ("hactl-drill run=<start unix ns> seq=<seq>").
	Value string `json:"value"`
	// Sent is taken just before the request, Done just after it returned (both carry the monotonic
	// clock reading while in memory, so Done.Sub(Sent) is immune to wall-clock jumps).
	Sent time.Time `json:"sent"`
	Done time.Time `json:"done"`
	// Acked is true when etcd acknowledged the Put; Revision is then the response header's
	// revision, which is the key's ModRevision.
	Acked    bool  `json:"acked"`
	Revision int64 `json:"revision,omitempty"`
	// Err is the request's error when not acknowledged (typically a deadline or no leader).
	Err string `json:"err,omitempty"`
}

// Read is one linearizable Get of a key whose Put had been acknowledged before the Get was sent.
type Read struct {
	Key string `json:"key"`
	// WantRevision is the acknowledged revision of the Put of Key.
	WantRevision int64     `json:"wantRevision"`
	Sent         time.Time `json:"sent"`
	Done         time.Time `json:"done"`
	// Found and GotModRevision describe the answer; meaningless when Err is set.
	Found          bool   `json:"found"`
	GotModRevision int64  `json:"gotModRevision,omitempty"`
	Err            string `json:"err,omitempty"`
}

// Stale reports whether the read succeeded yet did not return the acknowledged write: the key was
// missing or had another ModRevision. Each key is written once, so for a linearizable read this is
// a violation of etcd's guarantees.
func (r Read) Stale() bool {
	return r.Err == "" && (!r.Found || r.GotModRevision != r.WantRevision)
}

// Record is everything a run did. Writes are ordered by Seq, Reads by Sent.
type Record struct {
	Prefix string `json:"prefix"`
	// Rate, ReadRate and RequestTimeout are the run's configuration after defaults (ReadRate < 0:
	// no reads).
	Rate           int           `json:"rate"`
	ReadRate       int           `json:"readRate"`
	RequestTimeout time.Duration `json:"-"` // requestTimeoutMs in JSON
	// Started is when Start began issuing, Stopped when Stop was called.
	Started time.Time `json:"started"`
	Stopped time.Time `json:"stopped"`
	Writes  []Write   `json:"writes"`
	Reads   []Read    `json:"reads"`
	// SkippedWrites and SkippedReads are the ticks at which no request was issued because the
	// maximum number of requests (ceil(rate × RequestTimeout) + 2) were already pending.
	SkippedWrites []time.Time `json:"skippedWrites,omitempty"`
	SkippedReads  []time.Time `json:"skippedReads,omitempty"`
}

// Run is a running workload. Call Stop when done (until then, or until Start's ctx ends, it keeps
// issuing); its methods are safe for concurrent use.
type Run struct {
	cfg     Config
	runID   string
	started time.Time
	cancel  context.CancelFunc
	loops   sync.WaitGroup

	mu       sync.Mutex
	writes   []Write
	acked    int // acknowledged writes so far
	reads    []Read
	skippedW []time.Time
	skippedR []time.Time
	last     *Write // the acknowledged write with the latest Done

	client *clientv3.Client // the cluster written to (cfg.Client until Retarget)

	stopOnce sync.Once
	record   *Record
}

// Start validates cfg, checks that nothing exists under cfg.Prefix (a linearizable count, bounded by
// PrefixCheckTimeout; ErrPrefixNotEmpty otherwise), then starts issuing: a Put at once and one per
// 1/Rate tick, each in its own goroutine with its own RequestTimeout deadline; reads likewise at
// ReadRate, beginning after the first acknowledgement. Ticks at which the in-flight bound is
// reached are recorded as skipped.
//
// Issuing stops at Stop or when ctx ends; requests derive from ctx, so cancelling ctx also fails the
// requests in flight. Errors: ErrInvalidConfig, ErrPrefixNotEmpty, or the check's request error.
func Start(ctx context.Context, cfg Config) (*Run, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	cctx, cancel := context.WithTimeout(ctx, PrefixCheckTimeout)
	resp, err := cfg.Client.Get(cctx, cfg.Prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	cancel()
	if err != nil {
		return nil, fmt.Errorf("workload: check prefix %s: %w", cfg.Prefix, err)
	}
	if resp.Count != 0 {
		return nil, fmt.Errorf("%w: %d keys under %s", ErrPrefixNotEmpty, resp.Count, cfg.Prefix)
	}

	r := &Run{cfg: cfg, started: time.Now(), client: cfg.Client}
	r.runID = fmt.Sprint(r.started.UnixNano())
	loopCtx, stop := context.WithCancel(ctx)
	r.cancel = stop
	r.loops.Add(1)
	go r.loop(loopCtx, ctx, cfg.Rate, r.put, &r.skippedW)
	if cfg.ReadRate > 0 {
		r.loops.Add(1)
		go r.loop(loopCtx, ctx, cfg.ReadRate, r.read, &r.skippedR)
	}
	return r, nil
}

// loop calls issue(reqCtx, n) in a new goroutine at once and at every tick of 1/rate until loopCtx
// ends, n counting the calls from 1, with at most maxInFlight calls pending (a tick finding them all
// pending is appended to skipped), then waits for the pending calls.
func (r *Run) loop(loopCtx, reqCtx context.Context, rate int, issue func(context.Context, int64), skipped *[]time.Time) {
	defer r.loops.Done()
	var pending sync.WaitGroup
	defer pending.Wait()
	slots := make(chan struct{}, maxInFlight(rate, r.cfg.RequestTimeout))
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	var n int64
	for {
		select {
		case slots <- struct{}{}:
			n++
			pending.Add(1)
			go func(n int64) {
				defer pending.Done()
				defer func() { <-slots }()
				issue(reqCtx, n)
			}(n)
		default:
			now := time.Now()
			r.mu.Lock()
			*skipped = append(*skipped, now)
			r.mu.Unlock()
		}
		select {
		case <-loopCtx.Done():
			return
		case <-tick.C:
			if loopCtx.Err() != nil {
				return
			}
		}
	}
}

// put issues Put number seq and records it.
func (r *Run) put(ctx context.Context, seq int64) {
	w := Write{Seq: seq, Key: fmt.Sprintf("%s%010d", r.cfg.Prefix, seq)}
	w.Value = fmt.Sprintf("hactl-drill run=%s seq=%d", r.runID, seq)
	cctx, cancel := context.WithTimeout(ctx, r.cfg.RequestTimeout)
	w.Sent = time.Now()
	resp, err := r.target().Put(cctx, w.Key, w.Value)
	w.Done = time.Now()
	cancel()
	if err != nil {
		w.Err = err.Error()
	} else {
		w.Acked = true
		w.Revision = resp.Header.Revision
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, w)
	if w.Acked {
		r.acked++
		if r.last == nil || w.Done.After(r.last.Done) {
			r.last = &w
		}
	}
}

// Retarget sends every request issued from now on to cli instead (the cluster the workload's data
// was restored onto: hactl drill restore --onto); requests in flight finish on the old client. The
// caller owns cli and closes it after Stop.
func (r *Run) Retarget(cli *clientv3.Client) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.client = cli
}

func (r *Run) target() *clientv3.Client {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.client
}

// read issues a linearizable Get of the latest acknowledged write and records it; nothing before
// the first acknowledgement.
func (r *Run) read(ctx context.Context, _ int64) {
	r.mu.Lock()
	last := r.last
	r.mu.Unlock()
	if last == nil {
		return
	}
	rd := Read{Key: last.Key, WantRevision: last.Revision}
	cctx, cancel := context.WithTimeout(ctx, r.cfg.RequestTimeout)
	rd.Sent = time.Now() // after the ack was recorded, hence after last.Done
	resp, err := r.target().Get(cctx, last.Key)
	rd.Done = time.Now()
	cancel()
	if err != nil {
		rd.Err = err.Error()
	} else if len(resp.Kvs) > 0 {
		rd.Found = true
		rd.GotModRevision = resp.Kvs[0].ModRevision
	}
	r.mu.Lock()
	r.reads = append(r.reads, rd)
	r.mu.Unlock()
}

// Progress is a running workload's counters so far, e.g. for a progress line.
type Progress struct {
	// Sent and Acked count the Puts completed so far (in flight ones are not counted); Skipped
	// counts write ticks skipped.
	Sent, Acked, Skipped int
	// LastAck is the Done time of the latest acknowledgement and LastAckSent the Sent time of that
	// write (both zero before the first).
	LastAck, LastAckSent time.Time
}

// Progress returns the counters so far (constant time).
func (r *Run) Progress() Progress {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := Progress{Sent: len(r.writes), Acked: r.acked, Skipped: len(r.skippedW)}
	if r.last != nil {
		p.LastAck, p.LastAckSent = r.last.Done, r.last.Sent
	}
	return p
}

// Stop stops issuing, waits for the requests in flight (each ends by its RequestTimeout) and returns
// the Record. Later calls return the same Record.
func (r *Run) Stop() *Record {
	r.stopOnce.Do(func() {
		stopped := time.Now()
		r.cancel()
		r.loops.Wait()
		r.mu.Lock()
		defer r.mu.Unlock()
		rec := &Record{
			Prefix:         r.cfg.Prefix,
			Rate:           r.cfg.Rate,
			ReadRate:       r.cfg.ReadRate,
			RequestTimeout: r.cfg.RequestTimeout,
			Started:        r.started,
			Stopped:        stopped,
			Writes:         slices.Clone(r.writes),
			Reads:          slices.Clone(r.reads),
			SkippedWrites:  slices.Clone(r.skippedW),
			SkippedReads:   slices.Clone(r.skippedR),
		}
		slices.SortFunc(rec.Writes, func(a, b Write) int { return cmpInt(a.Seq, b.Seq) })
		slices.SortStableFunc(rec.Reads, func(a, b Read) int { return a.Sent.Compare(b.Sent) })
		r.record = rec
	})
	return r.record
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
