package probe

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of [ReadyzConfig].
const (
	DefaultReadyzInterval = 20 * time.Millisecond
	DefaultReadyzTimeout  = 500 * time.Millisecond
)

// maxErrBody bounds the part of a non-200 response body kept in [Sample.Err] (readyz lists the
// failed checks there).
const maxErrBody = 256

// ReadyzConfig configures [StartReadyz].
type ReadyzConfig struct {
	// URL is the endpoint, e.g. "https://172.28.0.100:6443/readyz" or
	// "https://[fd00::100]:6443/readyz". Required; the scheme must be https.
	URL string
	// TLS verifies the server: RootCAs is the kube CA (the VIP must be among the serving
	// certificate's IP SANs, Go's usual check). Required; it is cloned, and its
	// ClientSessionCache dropped so that every request makes a full handshake. Nothing sets
	// InsecureSkipVerify: a caller that wants it says so here.
	TLS *tls.Config
	// Interval is the time between the starts of two requests: one starts every Interval
	// whether or not the previous ones have finished (open loop), so a hanging server does not
	// slow the probe down. Default DefaultReadyzInterval (20 ms).
	Interval time.Duration
	// Timeout bounds each request: dial, TLS handshake, response and body. Default
	// DefaultReadyzTimeout (500 ms). At most Timeout/Interval+2 requests are in flight; a tick
	// that finds that many is skipped (counted by [ReadyzRun.Skipped]).
	Timeout time.Duration
}

// Sample is the outcome of one GET.
type Sample struct {
	// Sent is when the request started (before the dial); Done when it ended: the body read,
	// an error, or Timeout. Both carry Go's monotonic clock reading, which [Outage] uses.
	Sent time.Time `json:"sent"`
	Done time.Time `json:"done"`
	// OK reports an HTTP 200 whose body was read in full (up to Timeout).
	OK bool `json:"ok"`
	// Code is the HTTP status, 0 when no response arrived.
	Code int `json:"code,omitempty"`
	// Err says why the sample is not OK: the transport error (dial, TLS, timeout, reset), or
	// "HTTP <code>: <start of the body>". Empty when OK.
	Err string `json:"err,omitempty"`
}

// ReadyzRun is a running prober; end it with [ReadyzRun.Stop].
type ReadyzRun struct {
	url      string
	client   *http.Client
	tr       *http.Transport
	interval time.Duration
	timeout  time.Duration
	base     context.Context // requests' parent: ctx's values, not its cancellation
	sem      chan struct{}   // bounds the requests in flight

	stop     chan struct{}
	loopDone chan struct{}
	inflight sync.WaitGroup
	skipped  atomic.Int64
	stopOnce sync.Once

	mu      sync.Mutex
	samples []Sample
	final   []Sample // set by Stop
}

// StartReadyz starts probing cfg.URL and returns at once; the first request starts
// immediately. Each request opens a new TCP connection and a new TLS session and closes them
// afterwards (HTTP/1.1, no keep-alive, no proxy), so a connection to the old VIP holder cannot
// hide a failover, and every sample pays for a dial and a full handshake as a new client would.
//
// The prober stops starting requests when ctx is done or [ReadyzRun.Stop] is called. Requests
// already in flight are not cancelled by ctx: they end by themselves within Timeout, so that no
// sample is a failure of the prober's own making.
//
// It returns an error, and starts nothing, when cfg is invalid (no TLS config, a URL that is
// not https, a negative Interval or Timeout) or ctx is already done.
func StartReadyz(ctx context.Context, cfg ReadyzConfig) (*ReadyzRun, error) {
	u, err := url.Parse(cfg.URL)
	switch {
	case err != nil:
		return nil, fmt.Errorf("readyz probe: URL: %w", err)
	case u.Scheme != "https" || u.Host == "":
		return nil, fmt.Errorf("readyz probe: URL %q: want https://host:port/path", cfg.URL)
	case cfg.TLS == nil:
		return nil, errors.New("readyz probe: no TLS config (its RootCAs must hold the kube CA)")
	case cfg.Interval < 0 || cfg.Timeout < 0:
		return nil, fmt.Errorf("readyz probe: negative interval %v or timeout %v", cfg.Interval, cfg.Timeout)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("readyz probe: %w", context.Cause(ctx))
	}
	interval, timeout := cfg.Interval, cfg.Timeout
	if interval == 0 {
		interval = DefaultReadyzInterval
	}
	if timeout == 0 {
		timeout = DefaultReadyzTimeout
	}
	tlsConf := cfg.TLS.Clone()
	tlsConf.ClientSessionCache = nil
	tr := &http.Transport{
		Proxy:                  nil, // straight to the VIP, whatever HTTPS_PROXY says
		DialContext:            (&net.Dialer{Timeout: timeout, KeepAlive: -1}).DialContext,
		TLSClientConfig:        tlsConf,
		TLSHandshakeTimeout:    timeout,
		DisableKeepAlives:      true,
		DisableCompression:     true,
		MaxResponseHeaderBytes: 64 << 10,
	}
	r := &ReadyzRun{
		url:      u.String(),
		client:   &http.Client{Transport: tr, CheckRedirect: noRedirect},
		tr:       tr,
		interval: interval,
		timeout:  timeout,
		base:     context.WithoutCancel(ctx),
		sem:      make(chan struct{}, int(timeout/interval)+2),
		stop:     make(chan struct{}),
		loopDone: make(chan struct{}),
	}
	go r.loop(ctx)
	return r, nil
}

func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

func (r *ReadyzRun) loop(ctx context.Context) {
	defer close(r.loopDone)
	tick := time.NewTicker(r.interval)
	defer tick.Stop()
	for {
		r.fire()
		select {
		case <-ctx.Done():
			return
		case <-r.stop:
			return
		case <-tick.C:
		}
	}
}

// fire starts one request unless too many are in flight.
func (r *ReadyzRun) fire() {
	select {
	case r.sem <- struct{}{}:
	default:
		r.skipped.Add(1)
		return
	}
	r.inflight.Add(1)
	go func() {
		defer r.inflight.Done()
		s := r.get()
		<-r.sem
		r.mu.Lock()
		r.samples = append(r.samples, s)
		r.mu.Unlock()
	}()
}

// get makes one request on a new connection.
func (r *ReadyzRun) get() Sample {
	s := Sample{Sent: time.Now()}
	ctx, cancel := context.WithDeadline(r.base, s.Sent.Add(r.timeout))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url, nil)
	if err != nil {
		s.Done, s.Err = time.Now(), err.Error()
		return s
	}
	req.Close = true
	resp, err := r.client.Do(req)
	if err != nil {
		s.Done, s.Err = time.Now(), err.Error()
		return s
	}
	var body []byte
	if resp.StatusCode == http.StatusOK {
		_, err = io.Copy(io.Discard, resp.Body)
	} else {
		body, err = io.ReadAll(io.LimitReader(resp.Body, maxErrBody))
	}
	resp.Body.Close()
	s.Done, s.Code = time.Now(), resp.StatusCode
	switch {
	case err != nil:
		s.Err = fmt.Sprintf("HTTP %d: reading the body: %v", resp.StatusCode, err)
	case resp.StatusCode != http.StatusOK:
		s.Err = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, strings.Join(strings.Fields(string(body)), " "))
	default:
		s.OK = true
	}
	return s
}

// Samples returns a copy of the samples finished so far, ordered by Sent (requests still in
// flight are missing). It may be called while the prober runs, e.g. to wait for a steady state
// before injecting the fault.
func (r *ReadyzRun) Samples() []Sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.final != nil {
		return slices.Clone(r.final)
	}
	return sortedSamples(r.samples)
}

// Skipped returns how many ticks started no request because Timeout/Interval+2 requests were
// already in flight (only when requests outlive Timeout, e.g. on an overloaded client). Those
// instants have no sample.
func (r *ReadyzRun) Skipped() int { return int(r.skipped.Load()) }

// Stop stops starting requests, waits for those in flight (at most Timeout), and returns all
// samples ordered by Sent. It may be called more than once; later calls return the same samples.
func (r *ReadyzRun) Stop() []Sample {
	r.stopOnce.Do(func() {
		close(r.stop)
		<-r.loopDone
		r.inflight.Wait()
		r.tr.CloseIdleConnections()
		r.mu.Lock()
		r.final = sortedSamples(r.samples)
		if r.final == nil {
			r.final = []Sample{}
		}
		r.mu.Unlock()
	})
	return r.Samples()
}

func sortedSamples(s []Sample) []Sample {
	s = slices.Clone(s)
	slices.SortStableFunc(s, func(a, b Sample) int { return a.Sent.Compare(b.Sent) })
	return s
}
