package probe

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Modes of the test server.
const (
	serveOK     = iota // 200 "ok"
	serve500           // 500 with a readyz-like body
	serveHangUp        // close the connection without a response
	serveHang          // answer nothing until the client gives up
)

// readyzServer is a TLS server whose behaviour is switched at run time, counting its
// connections and the requests that reached the handler.
type readyzServer struct {
	*httptest.Server
	mode    atomic.Int32
	conns   atomic.Int64  // StateNew
	release chan struct{} // closed at the end of the test: serveHang handlers return
	hits    atomic.Int64  // handler calls
}

func newReadyzServer(t *testing.T) *readyzServer {
	t.Helper()
	s := &readyzServer{release: make(chan struct{})}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		switch s.mode.Load() {
		case serveOK:
			w.Write([]byte("ok"))
		case serve500:
			http.Error(w, "[+]ping ok\n[-]etcd failed: reason withheld\nreadyz check failed", http.StatusInternalServerError)
		case serveHangUp:
			c, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				c.Close()
			}
		case serveHang:
			<-s.release // not r.Context(): a server that noticed the client leave could still answer
		}
	}))
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake errors of the untrusted-client test
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.StartTLS()
	t.Cleanup(s.Close)
	t.Cleanup(func() { close(s.release) }) // before Close, which waits for the handlers
	return s
}

func (s *readyzServer) tlsConfig() *tls.Config {
	return &tls.Config{RootCAs: s.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
}

func (s *readyzServer) url() string { return s.URL + "/readyz" }

// waitSample waits until run has a finished sample for which ok returns true.
func waitSample(t *testing.T, run *ReadyzRun, what string, ok func(Sample) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !slices.ContainsFunc(run.Samples(), ok) {
		if time.Now().After(deadline) {
			t.Fatalf("no sample %s after 10 s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestReadyzFailover(t *testing.T) {
	srv := newReadyzServer(t)
	run, err := StartReadyz(context.Background(), ReadyzConfig{URL: srv.url(), TLS: srv.tlsConfig(), Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// Each phase lasts until a request sent during it has been served, however slow the machine.
	waitSample(t, run, "OK", func(s Sample) bool { return s.OK })
	srv.mode.Store(serve500)
	t0 := time.Now() // after the switch: every request sent from now on meets the fault
	waitSample(t, run, "500 sent after t0", func(s Sample) bool { return s.Code == 500 && !s.Sent.Before(t0) })
	srv.mode.Store(serveHangUp)
	tHangUp := time.Now()
	waitSample(t, run, "hung up", func(s Sample) bool { return s.Code == 0 && !s.Sent.Before(tHangUp) })
	tOK := time.Now()
	srv.mode.Store(serveOK)
	waitSample(t, run, "OK after the fault", func(s Sample) bool { return s.OK && s.Sent.After(tOK) })
	samples := run.Stop()

	// Timing under load (slow handshakes, overlapping requests) moves samples between phases,
	// so only what holds whatever the timing is checked exactly.
	if len(samples) < 4 {
		t.Fatalf("%d samples", len(samples))
	}
	if got, want := srv.conns.Load(), srv.hits.Load(); got != want || got != int64(len(samples)) {
		t.Errorf("server saw %d connections and %d requests for %d samples: want one new connection per request", got, want, len(samples))
	}
	var n500, nHangUp int
	for i, s := range samples {
		if i > 0 && s.Sent.Before(samples[i-1].Sent) {
			t.Errorf("samples not ordered by Sent at %d", i)
		}
		if s.Done.Before(s.Sent) {
			t.Errorf("sample %d: Done before Sent", i)
		}
		switch {
		case s.OK:
			if s.Code != 200 || s.Err != "" {
				t.Errorf("OK sample %+v", s)
			}
		case s.Code == 500:
			n500++
			if !strings.HasPrefix(s.Err, "HTTP 500: [+]ping ok [-]etcd failed") {
				t.Errorf("500 sample Err %q", s.Err)
			}
		case s.Code == 0 && s.Err != "":
			nHangUp++
		default:
			t.Errorf("unexpected sample %+v", s)
		}
	}
	if n500 == 0 || nHangUp == 0 {
		t.Errorf("%d HTTP 500 and %d hung-up samples, want some of each", n500, nHangUp)
	}

	st := Outage(samples, t0)
	t.Logf("%d samples (%d skipped ticks); outage %+v", len(samples), run.Skipped(), st)
	if !st.HasOKBefore || st.LastOKBefore > 0 {
		t.Errorf("last OK before t0: %v %v", st.HasOKBefore, st.LastOKBefore)
	}
	if st.NoFailure || st.FirstFailAfter < 0 || st.FirstFailAfter > tHangUp.Sub(t0) {
		t.Errorf("first failure after t0: NoFailure %v, %v", st.NoFailure, st.FirstFailAfter)
	}
	// The first OK sample sent after a failure sent after t0 was served after the fault ended.
	if !st.Recovered || st.RecoveredAfter < tOK.Sub(t0) || st.RecoveredAfter > 10*time.Second {
		t.Errorf("recovered %v after %v, want more than %v", st.Recovered, st.RecoveredAfter, tOK.Sub(t0))
	}
	if !st.Settled || st.SettledAfter < tOK.Sub(t0) || st.SettledAfter > 10*time.Second {
		t.Errorf("settled %v after %v, want more than %v", st.Settled, st.SettledAfter, tOK.Sub(t0))
	}
	if st.Failed+st.FailedBeforeT0 != n500+nHangUp || st.Failed == 0 {
		t.Errorf("failed %d (+%d before t0), want %d in all", st.Failed, st.FailedBeforeT0, n500+nHangUp)
	}
	if st.LongestFailRun <= 0 || st.LongestFailRun > 10*time.Second || st.LongestFailRunOpen || st.LongestFailRunSamples == 0 {
		t.Errorf("longest fail run %v (%d samples, open %v)", st.LongestFailRun, st.LongestFailRunSamples, st.LongestFailRunOpen)
	}
}

func TestReadyzTimeout(t *testing.T) {
	srv := newReadyzServer(t)
	srv.mode.Store(serveHang)
	cfg := ReadyzConfig{URL: srv.url(), TLS: srv.tlsConfig(), Interval: 10 * time.Millisecond, Timeout: 50 * time.Millisecond}
	run, err := StartReadyz(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	samples := run.Stop()
	if waited := time.Since(start); waited > cfg.Timeout+time.Second {
		t.Errorf("Stop waited %v for requests bounded by %v", waited, cfg.Timeout)
	}
	if len(samples) < 5 {
		t.Fatalf("%d samples", len(samples))
	}
	for _, s := range samples {
		// The deadline or, when the handshake is what hangs (a loaded machine), its timeout.
		if s.OK || s.Code != 0 || !strings.Contains(s.Err, "deadline exceeded") && !strings.Contains(s.Err, "TLS handshake timeout") {
			t.Errorf("sample %+v, want a timeout", s)
		}
		if d := s.Done.Sub(s.Sent); d < cfg.Timeout || d > cfg.Timeout+time.Second {
			t.Errorf("timed-out request took %v, want about %v", d, cfg.Timeout)
		}
	}
}

func TestReadyzRefusedAndUntrusted(t *testing.T) {
	srv := newReadyzServer(t)
	t.Run("untrusted", func(t *testing.T) {
		// A server certificate the pool does not vouch for: no request reaches the handler.
		run, err := StartReadyz(context.Background(), ReadyzConfig{URL: srv.url(), TLS: &tls.Config{RootCAs: x509.NewCertPool()}})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(60 * time.Millisecond)
		samples := run.Stop()
		if len(samples) == 0 || srv.hits.Load() != 0 {
			t.Fatalf("%d samples, %d requests reached the server", len(samples), srv.hits.Load())
		}
		for _, s := range samples {
			if s.OK || !strings.Contains(s.Err, "certificate") {
				t.Errorf("sample %+v, want a certificate error", s)
			}
		}
	})
	t.Run("refused", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		run, err := StartReadyz(context.Background(), ReadyzConfig{URL: "https://" + addr + "/readyz", TLS: srv.tlsConfig()})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(60 * time.Millisecond)
		samples := run.Stop()
		if len(samples) == 0 {
			t.Fatal("no samples")
		}
		for _, s := range samples {
			if s.OK || !strings.Contains(s.Err, "connection refused") {
				t.Errorf("sample %+v, want connection refused", s)
			}
		}
		st := Outage(samples, samples[0].Sent)
		if st.HasOKBefore || st.NoFailure || st.Recovered || !st.LongestFailRunOpen || st.Failed != len(samples) {
			t.Errorf("outage of a dead endpoint: %+v", st)
		}
	})
}

func TestReadyzContextStopsProbing(t *testing.T) {
	srv := newReadyzServer(t)
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), struct{}{}, 1))
	run, err := StartReadyz(ctx, ReadyzConfig{URL: srv.url(), TLS: srv.tlsConfig()})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(60 * time.Millisecond)
	cancel()
	time.Sleep(50 * time.Millisecond) // in-flight requests finish
	n := len(run.Samples())
	time.Sleep(100 * time.Millisecond)
	samples := run.Stop()
	if len(samples) != n || n == 0 {
		t.Errorf("%d samples after cancel, %d at Stop: probing went on", n, len(samples))
	}
	for _, s := range samples {
		if !s.OK {
			t.Errorf("sample %+v: cancellation must not fail requests", s)
		}
	}
	if again := run.Stop(); len(again) != len(samples) {
		t.Errorf("second Stop returned %d samples, first %d", len(again), len(samples))
	}
}

func TestStartReadyzErrors(t *testing.T) {
	tlsConf := &tls.Config{}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		cfg  ReadyzConfig
		want string
	}{
		{"no TLS", context.Background(), ReadyzConfig{URL: "https://10.0.0.1:6443/readyz"}, "no TLS config"},
		{"http", context.Background(), ReadyzConfig{URL: "http://10.0.0.1:6443/readyz", TLS: tlsConf}, "want https"},
		{"no host", context.Background(), ReadyzConfig{URL: "https:///readyz", TLS: tlsConf}, "want https"},
		{"bad URL", context.Background(), ReadyzConfig{URL: "https://[::1", TLS: tlsConf}, "URL"},
		{"negative interval", context.Background(), ReadyzConfig{URL: "https://10.0.0.1:6443/readyz", TLS: tlsConf, Interval: -1}, "negative"},
		{"negative timeout", context.Background(), ReadyzConfig{URL: "https://10.0.0.1:6443/readyz", TLS: tlsConf, Timeout: -1}, "negative"},
		{"context done", done, ReadyzConfig{URL: "https://10.0.0.1:6443/readyz", TLS: tlsConf}, "canceled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run, err := StartReadyz(tt.ctx, tt.cfg)
			if err == nil || run != nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("StartReadyz = %v, %v; want an error containing %q", run, err, tt.want)
			}
			if tt.name == "context done" && !errors.Is(err, context.Canceled) {
				t.Errorf("error %v does not wrap context.Canceled", err)
			}
		})
	}
}
