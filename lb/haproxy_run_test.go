package lb

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeAPIServer serves /readyz over TLS with a certificate for 127.0.0.1 signed by a test CA. It can
// answer 500 (not ready) or hang: accept connections and never answer, as a SIGSTOPped apiserver
// does (the kernel still completes the TCP handshake).
type fakeAPIServer struct {
	ln      net.Listener
	conns   chan net.Conn
	ready   atomic.Bool
	hung    atomic.Bool
	mu      sync.Mutex
	held    []net.Conn
	closing chan struct{}
}

func (f *fakeAPIServer) Accept() (net.Conn, error) {
	select {
	case c := <-f.conns:
		return c, nil
	case <-f.closing:
		return nil, net.ErrClosed
	}
}
func (f *fakeAPIServer) Close() error   { return nil }
func (f *fakeAPIServer) Addr() net.Addr { return f.ln.Addr() }

func (f *fakeAPIServer) port() int { return f.ln.Addr().(*net.TCPAddr).Port }

func startFakeAPIServer(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey) *fakeAPIServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeAPIServer{ln: ln, conns: make(chan net.Conn), closing: make(chan struct{})}
	f.ready.Store(true)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if f.hung.Load() {
				f.mu.Lock()
				f.held = append(f.held, c)
				f.mu.Unlock()
				continue
			}
			select {
			case f.conns <- c:
			case <-f.closing:
				c.Close()
				return
			}
		}
	}()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/readyz" || !f.ready.Load() {
				http.Error(w, "not ready", http.StatusInternalServerError)
				return
			}
			fmt.Fprint(w, "ok")
		}),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}},
		ErrorLog:  log.New(io.Discard, "", 0), // handshakes HAProxy aborts, by design
	}
	go func() { _ = srv.ServeTLS(f, "", "") }()
	t.Cleanup(func() {
		close(f.closing)
		_ = srv.Close()
		_ = ln.Close()
		f.mu.Lock()
		for _, c := range f.held {
			c.Close()
		}
		f.mu.Unlock()
	})
	return f
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// showStat returns "status/check_status" per server of BackendName from HAProxy's runtime API.
func showStat(socket string) (map[string]string, error) {
	c, err := net.DialTimeout("unix", socket, time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(c, "show stat\n"); err != nil {
		return nil, err
	}
	out := map[string]string{}
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		f := strings.Split(sc.Text(), ",")
		if len(f) > 36 && f[0] == BackendName && f[1] != "BACKEND" {
			out[f[1]] = f[17] + "/" + f[36]
		}
	}
	return out, sc.Err()
}

// TestHAProxyRun runs the real HAProxy with a rendered haproxy.cfg (ports and paths moved to a temp
// dir; chroot and user dropped so it runs unprivileged) in front of fake apiservers, and checks what
// the configuration promises: a ready apiserver is UP with its certificate verified against the CA,
// one answering 500 is DOWN, one that hangs is DOWN within HealthCheck.EjectionBound (plus slack),
// traffic passes through to the apiservers, and the loopback endpoint serves /healthz and /metrics.
func TestHAProxyRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs HAProxy for about 10 s")
	}
	haproxy := realTool(t, "haproxy")
	dir := t.TempDir()

	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubernetes"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		t.Fatal(err)
	}

	good, unready, hangs := startFakeAPIServer(t, ca, caKey), startFakeAPIServer(t, ca, caKey), startFakeAPIServer(t, ca, caKey)
	unready.ready.Store(false)
	hangs.hung.Store(true)
	// An apiserver whose certificate another CA signed: verify required refuses it.
	otherKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	otherDER, _ := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &otherKey.PublicKey, otherKey)
	otherCA, _ := x509.ParseCertificate(otherDER)
	stranger := startFakeAPIServer(t, otherCA, otherKey)

	cfg := plan(t, cases[1].spec) // CA file, inter 1s, fall 2, rise 3
	cfg.HealthCheck.CAFile = caFile
	cfg.Bind = "127.0.0.1"
	cfg.FrontendPort = freePort(t)
	lo := netip.MustParseAddr("127.0.0.1")
	cfg.Backends = []Backend{{"good", lo, good.port()}, {"unready", lo, unready.port()}, {"hangs", lo, hangs.port()}, {"stranger", lo, stranger.port()}}
	data, err := RenderHAProxy(cfg, "lb-a")
	if err != nil {
		t.Fatal(err)
	}
	localPort, socket := runHAProxy(t, haproxy, dir, data)

	waitFor := func(what string, d time.Duration, ok func(map[string]string) bool) map[string]string {
		t.Helper()
		deadline := time.Now().Add(d)
		var st map[string]string
		for time.Now().Before(deadline) {
			if st, err = showStat(socket); err == nil && ok(st) {
				return st
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("%s: not within %v; last stats %v (%v)", what, d, st, err)
		return nil
	}
	st := waitFor("good UP; unready, hangs and stranger DOWN", 30*time.Second, func(st map[string]string) bool {
		return st["good"] == "UP/L7OK" && strings.HasPrefix(st["unready"], "DOWN/L7STS") && strings.HasPrefix(st["hangs"], "DOWN") &&
			strings.HasPrefix(st["stranger"], "DOWN/L6")
	})
	t.Logf("stats: %v", st)

	// Traffic passes through (TLS end to end: the client verifies the apiserver's certificate).
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Get(fmt.Sprintf("https://127.0.0.1:%d/readyz", cfg.FrontendPort))
	if err != nil {
		t.Fatalf("through HAProxy: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "ok" {
		t.Errorf("through HAProxy: %d %q", resp.StatusCode, body)
	}

	// Keepalived's check and Prometheus.
	for path, want := range map[string]string{HealthPath: "", MetricsPath: "haproxy_backend_active_servers"} {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", localPort, path))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Errorf("%s: %d, body lacks %q", path, resp.StatusCode, want)
		}
	}

	// A ready apiserver that hangs is DOWN within the bound (generous slack: this is not a benchmark).
	good.hung.Store(true)
	start := time.Now()
	waitFor("good DOWN after it hangs", cfg.HealthCheck.EjectionBound()+5*time.Second, func(st map[string]string) bool {
		return strings.HasPrefix(st["good"], "DOWN")
	})
	t.Logf("hung apiserver DOWN after %v (bound %v)", time.Since(start).Round(10*time.Millisecond), cfg.HealthCheck.EjectionBound())
	good.hung.Store(false)
	waitFor("good UP again", 30*time.Second, func(st map[string]string) bool { return st["good"] == "UP/L7OK" })
}

// runHAProxy runs the real HAProxy in the foreground (-db) with a rendered haproxy.cfg made runnable
// unprivileged: the loopback port and the stats socket moved to a free port and into dir, no chroot
// or user switch. It is stopped when the test ends (its output logged if the test failed). It returns
// the loopback port (/healthz, /metrics, /stats) and the socket path.
func runHAProxy(t *testing.T, haproxy, dir string, data []byte) (localPort int, socket string) {
	t.Helper()
	localPort, socket = freePort(t), filepath.Join(dir, "admin.sock")
	text := strings.NewReplacer(
		fmt.Sprintf("127.0.0.1:%d", LocalPort), fmt.Sprintf("127.0.0.1:%d", localPort),
		StatsSocket, socket,
		"  chroot /var/lib/haproxy\n", "", "  user haproxy\n", "", "  group haproxy\n", "",
	).Replace(string(data))
	f := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, haproxy, "-db", "-f", f)
	var output strings.Builder
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("haproxy output:\n%s", output.String())
		}
	})
	return localPort, socket
}
