package drill

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-multierror"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/drill/probe"
	"github.com/hactl/hactl/lb"
	"github.com/hactl/hactl/provision"
)

// readyzTimeout bounds each readyz request through the VIP.
const readyzTimeout = 500 * time.Millisecond

// vip returns spec.loadBalancer.vip's address.
func (e *env) vip() netip.Addr { return e.lbPlan.VIP.Addr() }

// readyzURL is https://VIP:frontendPort/readyz, or through spec.loadBalancer.external.
func (e *env) readyzURL() string {
	if e.lbPlan == nil {
		return externalURL(e.c)
	}
	return "https://" + netip.AddrPortFrom(e.vip(), uint16(e.lbPlan.FrontendPort)).String() + lb.ReadyzPath
}

// readyzTLS trusts the kube-apiserver CA (--ca-file or spec.loadBalancer.healthCheck.caFile).
func (e *env) readyzTLS() (*tls.Config, error) {
	raw, err := os.ReadFile(e.o.caFile())
	if err != nil {
		return nil, fmt.Errorf("reading the kube-apiserver CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(raw) {
		return nil, &InputError{Err: fmt.Errorf("--ca-file %s: no PEM certificate in it", e.o.caFile())}
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// checkReadyz asks readyz through the VIP once (preflight of lb-failover).
func (e *env) checkReadyz(ctx context.Context) error {
	cfg, err := e.readyzTLS()
	if err != nil {
		return err
	}
	c := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.readyzURL(), nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", e.readyzURL(), resp.Status)
	}
	return nil
}

// vipHolders asks every LB host over SSH whether it holds the VIP.
func (e *env) vipHolders(ctx context.Context) ([]string, error) {
	script := fmt.Sprintf("ip -o addr show | grep -F ' %s/' >/dev/null && echo held || echo free", e.vip())
	var mu sync.Mutex
	var holders []string
	err := provision.ForEach(ctx, e.c.LBHosts(), e.c.Spec.SSH.MaxParallel, func(h v1alpha1.Host) string { return h.Name }, func(ctx context.Context, h v1alpha1.Host) error {
		res, err := e.hosts.run(ctx, h.Name, "drill/vip", script)
		if err == nil && strings.TrimSpace(string(res.Stdout)) == "held" {
			mu.Lock()
			holders = append(holders, h.Name)
			mu.Unlock()
		}
		return err
	})
	slices.Sort(holders)
	return holders, err
}

// lbWatch watches the VIP on every LB host (and readyz through it when a CA is known).
type lbWatch struct {
	watches []*probe.VIPWatch
	rz      *probe.ReadyzRun
}

// lbObserved is what an lbWatch saw.
type lbObserved struct {
	events  []probe.VIPEvent
	samples []probe.Sample
	readyz  bool
	from    string
	err     error
}

// startLBWatch starts a VIP watcher on every LB host, and readyz when a CA is known (required when
// requireReadyz).
func (e *env) startLBWatch(ctx context.Context, requireReadyz bool) (*lbWatch, error) {
	w := &lbWatch{}
	for _, h := range e.c.LBHosts() {
		cli, err := e.hosts.client(ctx, h.Name)
		if err != nil {
			w.stop()
			return nil, fmt.Errorf("%s: %w", h.Name, err)
		}
		w.watches = append(w.watches, probe.WatchVIP(ctx, h.Name, cli, e.vip(), PollInterval))
	}
	// Every watcher must have reported its host's state before the fault, or a move is invisible.
	deadline := time.After(10 * time.Second)
	for _, vw := range w.watches {
		select {
		case <-vw.Ready():
			if err := vw.Err(); err != nil {
				w.stop()
				return nil, fmt.Errorf("watching the VIP on %s: %w", vw.Host(), err)
			}
		case <-deadline:
			w.stop()
			return nil, fmt.Errorf("watching the VIP on %s: no state reported within 10s", vw.Host())
		}
	}
	if e.o.caFile() != "" || requireReadyz {
		cfg, err := e.readyzTLS()
		if err != nil {
			w.stop()
			return nil, err
		}
		if w.rz, err = probe.StartReadyz(ctx, probe.ReadyzConfig{URL: e.readyzURL(), TLS: cfg, Interval: PollInterval, Timeout: readyzTimeout}); err != nil {
			w.stop()
			return nil, err
		}
	}
	return w, nil
}

// stop ends the watchers (nil-safe) and returns what they saw.
func (w *lbWatch) stop() *lbObserved {
	if w == nil {
		return nil
	}
	o := &lbObserved{}
	var merr *multierror.Error
	for _, vw := range w.watches {
		ev, err := vw.Stop()
		o.events = append(o.events, ev...)
		if err != nil {
			merr = multierror.Append(merr, err)
		}
	}
	slices.SortFunc(o.events, func(a, b probe.VIPEvent) int { return a.At.Compare(b.At) })
	if w.rz != nil {
		o.samples, o.readyz = w.rz.Stop(), true
	}
	o.err = merr.ErrorOrNil()
	return o
}

// holderAt is who held the VIP at t.
func (o *lbObserved) holderAt(t time.Time) []string { return probe.Holders(o.events, t) }

// after returns where the VIP went after t0 (from the holder before t0), when it got there, and
// how many readyz requests failed. Hosts in cut (the zone taken down) are not where clients can
// reach the VIP: a move to them does not count (an isolated backup hears no advertisement and
// makes itself master on its side of the partition, RFC 5798 §6.4.2); such claims are returned as
// notes.
func (o *lbObserved) after(t0 time.Time, cut map[string]bool) (string, *float64, int, []string) {
	before := o.holderAt(t0)
	failures := 0
	for _, s := range o.samples {
		if !s.OK && !s.Sent.Before(t0) {
			failures++
		}
	}
	var reachable []probe.VIPEvent
	var notes []string
	for _, e := range o.events {
		switch {
		case !cut[e.Host]:
			reachable = append(reachable, e)
		case e.Held && e.At.After(t0) && !slices.Contains(before, e.Host):
			notes = append(notes, fmt.Sprintf("%s (cut off) claimed the VIP on its side of the partition %s after t0: a backup that hears no advertisement becomes master (RFC 5798); clients cannot reach it", e.Host, fmtMs(msp(e.At.Sub(t0)))))
		}
	}
	if len(before) != 1 {
		return "", nil, failures, notes
	}
	to, at, ok := probe.FirstMove(reachable, before[0], t0)
	if !ok {
		return before[0], nil, failures, notes
	}
	return to, msp(at.Sub(t0)), failures, notes
}

// dualVIP returns the longest time after t0 during which two or more hosts outside cut held the
// VIP at once, and those hosts. VRRP allows a brief overlap while mastership changes hands (RFC
// 5798 §6.4.3); seconds of it mean two hosts answer ARP for the VIP (e.g. keepalived killed with
// SIGKILL leaves its address configured while the backup takes over).
func dualVIP(events []probe.VIPEvent, cut map[string]bool, t0 time.Time) (time.Duration, []string) {
	held := map[string]bool{}
	var longest time.Duration
	var who []string
	var since time.Time
	count := func() []string {
		var hs []string
		for h, ok := range held {
			if ok && !cut[h] {
				hs = append(hs, h)
			}
		}
		slices.Sort(hs)
		return hs
	}
	for _, e := range events { // sorted by time
		before := count()
		held[e.Host] = e.Held
		after := count()
		switch {
		case len(before) < 2 && len(after) >= 2:
			since = e.At
			if since.Before(t0) {
				since = t0
			}
		case len(before) >= 2 && len(after) < 2 && !since.IsZero():
			if d := e.At.Sub(since); e.At.After(t0) && d > longest {
				longest, who = d, before
			}
			since = time.Time{}
		}
	}
	return longest, who
}

// maxDualVIP is how long two reachable hosts may both hold the VIP before a drill fails.
const maxDualVIP = time.Second

// outage returns an error when readyz never answered 200 again after failing following t0.
func (o *lbObserved) outage(t0 time.Time) error {
	st := probe.Outage(o.samples, t0)
	if st.Failed > 0 && !st.Recovered {
		return fmt.Errorf("readyz through the VIP did not answer 200 again before the drill ended (%s)", failedSince(o.samples, t0))
	}
	return nil
}

// failedSince summarises the readyz samples sent at or after t0 that failed: how many, the first
// error and the last, e.g. "212 failed requests; first: dial tcp 172.28.0.100:6443: connect:
// connection refused; last: ...". It says why a failover did not complete.
func failedSince(samples []probe.Sample, t0 time.Time) string {
	var n int
	var first, last string
	for _, s := range samples {
		if s.OK || s.Sent.Before(t0) {
			continue
		}
		n++
		if first == "" {
			first = s.Err
		}
		last = s.Err
	}
	if n == 0 {
		return "no failed request"
	}
	what := fmt.Sprintf("%d failed requests", n)
	if n == 1 {
		what = "1 failed request"
	}
	if first == last {
		return what + ": " + first
	}
	return fmt.Sprintf("%s; first: %s; last: %s", what, first, last)
}

// masterDown is RFC 5798 §6.1's Master_Down_Interval of the best backup: 3 x Advertisement_Interval
// + Skew_Time, Skew_Time = ((256 - Priority) x Advertisement_Interval) / 256.
func masterDown(c *lb.Config) time.Duration {
	if c == nil || len(c.Nodes) < 2 {
		return 0
	}
	pr := slices.SortedFunc(slices.Values(c.Nodes), func(a, b lb.Node) int { return b.Priority - a.Priority })
	adv := c.AdvertInterval
	skew := time.Duration(256-pr[1].Priority) * adv / 256
	return 3*adv + skew
}

// expectedVIPMove is a rough expectation of the VIP's move: Keepalived stopped sends a
// priority-0 advertisement, so the backup waits only its skew time (about one advert interval at
// most); HAProxy stopped is noticed by the check after interval x fall, then the lowered priority is
// advertised (with a weight, the backup waits for the master-down interval, RFC 5798 §6.4.2; with
// weight 0, FAULT sends priority 0).
func expectedVIPMove(p *lb.Config, c Component) time.Duration {
	adv := p.AdvertInterval
	if c == ComponentKeepalived {
		return adv
	}
	detect := time.Duration(lb.ScriptInterval*p.ScriptFall) * time.Second
	if p.Weight == 0 {
		return detect + adv
	}
	return detect + masterDown(p)
}

// readyzSplit is what the readyz samples of one lb-failover iteration show: failed, the requests
// sent from t0 that failed and ended before the put-back's start; rto, from t0 until readyz answered
// 200 again after the first of them (0 when none failed; nil when it never did before the put-back,
// why says how they failed); failback, the longest run of failed requests sent once the put-back
// started (the VIP handed back by preemption; nil when none failed).
type readyzSplit struct {
	// held are the samples that ended before the put-back's start, heldStats their outage from t0.
	held      []probe.Sample
	heldStats probe.OutageStats
	failed    int
	rto       *float64
	why       string
	failback  *float64
}

// splitReadyz computes the [readyzSplit] of samples for a fault at t0 put back from tPut on.
// Samples that ended before tPut measure the outage, those sent from tPut on the failback, and
// those in flight at tPut neither: the put-back can hand the VIP back before it returns, and a
// failure then belongs to the failback, not to the outage being measured.
func splitReadyz(samples []probe.Sample, t0, tPut time.Time) readyzSplit {
	var held, after []probe.Sample
	for _, s := range samples {
		switch {
		case s.Done.Before(tPut):
			held = append(held, s)
		case !s.Sent.Before(tPut):
			after = append(after, s)
		}
		// A request in flight at tPut belongs to neither: its result may be the put-back's.
	}
	st := probe.Outage(held, t0)
	rs := readyzSplit{failed: st.Failed, held: held, heldStats: st}
	switch {
	case st.Failed == 0:
		zero := 0.0
		rs.rto = &zero
	case st.Recovered:
		rs.rto = msp(st.RecoveredAfter)
	default:
		rs.why = failedSince(held, t0)
	}
	if fb := probe.Outage(after, tPut); fb.Failed > 0 {
		rs.failback = msp(fb.LongestFailRun)
	}
	return rs
}

// settledAt is the last time after t that host took the VIP.
func settledAt(ev []probe.VIPEvent, host string, t time.Time) (time.Time, bool) {
	var at time.Time
	for _, e := range ev {
		if e.Host == host && e.Held && e.At.After(t) {
			at = e.At
		}
	}
	return at, !at.IsZero()
}
