package workload

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hactl/hactl/internal/etcdtest"
)

func TestConfigValidate(t *testing.T) {
	cli := &clientv3.Client{} // never used: validation fails before any request
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // "" = valid
	}{
		{"defaults", Config{Client: cli, Prefix: "/hactl-drill/d1/"}, ""},
		{"explicit", Config{Client: cli, Prefix: "drill/", Rate: 1000, ReadRate: -1, RequestTimeout: time.Second}, ""},
		{"nil client", Config{Prefix: "/hactl-drill/d1/"}, "no client"},
		{"empty prefix", Config{Client: cli}, "prefix is empty"},
		{"prefix without slash", Config{Client: cli, Prefix: "/hactl-drill/d1"}, `does not end in "/"`},
		{"prefix root", Config{Client: cli, Prefix: "/"}, "only slashes"},
		{"prefix slashes", Config{Client: cli, Prefix: "///"}, "only slashes"},
		{"negative rate", Config{Client: cli, Prefix: "/p/", Rate: -1}, "rate -1 is not in 1..1000"},
		{"rate too high", Config{Client: cli, Prefix: "/p/", Rate: 1001}, "rate 1001"},
		{"read rate too high", Config{Client: cli, Prefix: "/p/", ReadRate: 5000}, "read rate 5000"},
		{"negative timeout", Config{Client: cli, Prefix: "/p/", RequestTimeout: -time.Second}, "request timeout -1s is negative"},
		{"all at once", Config{Rate: -5}, "no client"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error %v, want %q wrapping ErrInvalidConfig", err, tc.want)
			}
			if _, serr := Start(t.Context(), tc.cfg); serr == nil || serr.Error() != err.Error() {
				t.Errorf("Start: %v, want %v", serr, err)
			}
		})
	}
	if err := (Config{Rate: -5}).Validate(); strings.Count(err.Error(), "\n") != 2 {
		t.Errorf("not every problem reported: %v", err)
	}
	if _, err := Cleanup(t.Context(), cli, "/"); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("Cleanup(/): %v", err)
	}
	if _, err := Verify(t.Context(), nil, &Record{Prefix: "/p/"}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("Verify without client: %v", err)
	}
}

func TestMaxInFlight(t *testing.T) {
	if got := maxInFlight(DefaultRate, DefaultRequestTimeout); got != 7 {
		t.Errorf("default bound %d, want ceil(50 × 0.1) + 2 = 7", got)
	}
	if got := maxInFlight(10, 150*time.Millisecond); got != 4 {
		t.Errorf("bound %d, want ceil(1.5) + 2 = 4", got)
	}
}

// TestLoopBound runs the issuing loop with requests that never finish on their own: it issues
// exactly the bound, records every later tick as skipped, and waits for the pending ones.
func TestLoopBound(t *testing.T) {
	r := &Run{cfg: Config{RequestTimeout: 100 * time.Millisecond}}
	bound := maxInFlight(100, r.cfg.RequestTimeout) // 12
	var issued, finished atomic.Int64
	release := make(chan struct{})
	ctx, cancel := context.WithCancel(t.Context())
	r.loops.Add(1)
	done := make(chan struct{})
	go func() {
		r.loop(ctx, t.Context(), 100, func(_ context.Context, n int64) {
			issued.Add(1)
			<-release
			finished.Add(1)
		}, &r.skippedW)
		close(done)
	}()
	time.Sleep(300 * time.Millisecond) // ~30 ticks at 100/s
	cancel()
	select {
	case <-done:
		t.Fatal("loop returned with requests pending")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-done
	r.mu.Lock()
	skipped := len(r.skippedW)
	r.mu.Unlock()
	if issued.Load() != int64(bound) || finished.Load() != int64(bound) || skipped < 5 {
		t.Errorf("issued %d finished %d (bound %d), skipped %d", issued.Load(), finished.Load(), bound, skipped)
	}
}

// TestKillLeader is the drill in miniature: a 3-member cluster, the workload for ~1 s, the leader
// killed (no leadership transfer), ~3 s more. Timing figures are only checked for sanity.
func TestKillLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-member etcd cluster")
	}
	c := etcdtest.Start(t, 3)
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
	defer cancel()
	const prefix = "/hactl-drill/kill-leader/"

	run, err := Start(ctx, Config{Client: cli, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	lead := c.LeaderIndex(ctx)
	if lead < 0 {
		t.Fatal("no leader")
	}
	t0 := time.Now()
	c.Kill(lead)
	time.Sleep(3 * time.Second)
	// On a slow machine the election may take longer: wait (bounded) for writes to succeed again.
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if p := run.Progress(); p.LastAck.After(t0.Add(time.Second)) {
			break
		}
	}
	if p := run.Progress(); p.Sent < 100 || p.Acked == 0 || p.Acked > p.Sent || p.LastAckSent.IsZero() || p.LastAckSent.After(p.LastAck) {
		t.Errorf("progress %+v", p)
	}
	rec := run.Stop()
	if again := run.Stop(); again != rec {
		t.Error("second Stop returned another record")
	}

	st := rec.Stats(t0)
	js, _ := json.Marshal(st)
	t.Logf("stats: %s", js)
	if !st.RTOObserved || st.RTO <= 0 || st.RTO > 15*time.Second {
		t.Errorf("RTO %s (recovered %v)", st.RTO, st.RTOObserved)
	}
	if st.LongestGap <= 0 || st.GapEnd-st.GapStart != st.LongestGap {
		t.Errorf("longest gap %s (%s..%s)", st.LongestGap, st.GapStart, st.GapEnd)
	}
	if st.Sent < 100 || st.Acked < 50 || st.Sent != st.Acked+st.Failed || st.LatencyP50 <= 0 || st.LatencyMax < st.LatencyP99 {
		t.Errorf("implausible stats %+v", st)
	}
	if st.ReadsOK == 0 || st.ReadsStale != 0 {
		t.Errorf("reads: %d ok, %d failed, %d stale", st.ReadsOK, st.ReadsFailed, st.ReadsStale)
	}
	for i, w := range rec.Writes {
		if w.Seq != int64(i+1) || !strings.HasPrefix(w.Key, prefix) || w.Done.Before(w.Sent) || w.Acked == (w.Err != "") {
			t.Fatalf("write %d: %+v", i, w)
		}
	}
	if d := rec.Window(t0, time.Time{}).Stats(t0); d.RTO != st.RTO || d.Sent >= st.Sent || d.Sent == 0 {
		t.Errorf("drill window: %+v", d)
	}

	v, err := Verify(ctx, cli, rec)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(v.Summary)
	if !v.OK() || v.Lost != 0 || v.Intact != st.Acked || v.Foreign != 0 || v.Keys != v.Intact+v.CommittedUnacked {
		t.Errorf("verification: %+v", v)
	}

	// The same prefix cannot be reused while it holds keys.
	if _, err := Start(ctx, Config{Client: cli, Prefix: prefix}); !errors.Is(err, ErrPrefixNotEmpty) {
		t.Errorf("Start on a used prefix: %v", err)
	}

	// Pagination gives the same snapshot as one page. Writes that timed out may still be applied
	// after Stop (a proposal outlives its client's deadline), so both listings must be at the same
	// revision to compare; retried until they are.
	for attempt := 0; ; attempt++ {
		one, rev1, err := list(ctx, cli, prefix, 100000)
		if err != nil {
			t.Fatal(err)
		}
		small, rev, err := list(ctx, cli, prefix, 7)
		if err != nil {
			t.Fatal(err)
		}
		if rev != rev1 && attempt < 50 {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if len(small) != len(one) || rev < v.Revision {
			t.Errorf("paginated listing: %d keys at %d, want %d (one page at %d)", len(small), rev, len(one), rev1)
		}
		break
	}

	// Verify fails when an acknowledged write disappears.
	var victim Write
	for _, w := range rec.Writes {
		if w.Acked {
			victim = w
		}
	}
	if _, err := cli.Delete(ctx, victim.Key); err != nil {
		t.Fatal(err)
	}
	v, err = Verify(ctx, cli, rec)
	if err != nil {
		t.Fatal(err)
	}
	if v.OK() || v.Lost != 1 || len(v.Violations) != 1 || v.Violations[0].Key != victim.Key || v.Violations[0].Revision != victim.Revision {
		t.Errorf("after deleting %s: %+v", victim.Key, v)
	}

	n, err := Cleanup(ctx, cli, prefix)
	if err != nil || n != int64(v.Keys) {
		t.Errorf("Cleanup: %d deleted, %v; want %d", n, err, v.Keys)
	}
	if resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 0 {
		t.Errorf("after cleanup: %v, %v", resp, err)
	}

	// A cancelled context stops the run; Stop still returns what was done.
	rctx, rcancel := context.WithCancel(ctx)
	run, err = Start(rctx, Config{Client: cli, Prefix: "/hactl-drill/cancelled/", ReadRate: -1})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	rcancel()
	rec = run.Stop()
	if len(rec.Writes) == 0 || len(rec.Reads) != 0 {
		t.Errorf("cancelled run: %d writes, %d reads", len(rec.Writes), len(rec.Reads))
	}
	if _, err := Cleanup(ctx, cli, "/hactl-drill/cancelled/"); err != nil {
		t.Error(err)
	}
}
