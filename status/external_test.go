package status

import (
	"context"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/internal/testcert"
)

// TestCollectExternalLB: readyz through spec.loadBalancer.external, verified against
// healthCheck.caFile when set; a failed readyz or a wrong CA is a problem.
func TestCollectExternalLB(t *testing.T) {
	var code atomic.Int32
	code.Store(http.StatusOK)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(int(code.Load()))
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	dir := t.TempDir()
	goodCA := filepath.Join(dir, "ca.crt")
	os.WriteFile(goodCA, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644)
	wrongCA := filepath.Join(dir, "wrong.crt") // another CA (every httptest server shares one certificate)
	testcert.WriteCA(t, wrongCA)

	spec := func(ca string) *v1alpha1.Cluster {
		return &v1alpha1.Cluster{Spec: v1alpha1.ClusterSpec{LoadBalancer: &v1alpha1.LoadBalancer{
			External: &v1alpha1.ExternalLoadBalancer{Address: host, Port: p}, HealthCheck: v1alpha1.LBHealthCheck{CAFile: ca}}}}
	}
	for _, tc := range []struct {
		name     string
		ca       string
		code     int
		readyz   string // prefix
		verified bool
	}{
		{"verified", goodCA, 200, "ok", true},
		{"not verified without caFile", "", 200, "ok", false},
		{"readyz 500", goodCA, 500, "500 Internal Server Error: ok", true},
		{"wrong CA", wrongCA, 200, "Get \"https://", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code.Store(int32(tc.code))
			st := collectExternalLB(context.Background(), spec(tc.ca), 5*time.Second, nil)
			if st == nil || !strings.HasPrefix(st.Readyz, tc.readyz) || st.Verified != tc.verified || st.Endpoint != srv.Listener.Addr().String() {
				t.Fatalf("status %+v; want readyz %q…, verified %v", st, tc.readyz, tc.verified)
			}
			r := &Report{}
			r.addExternalLB(st)
			if healthy := tc.readyz == "ok"; r.Healthy != healthy || (len(r.Problems) == 0) != healthy {
				t.Errorf("healthy %v problems %v", r.Healthy, r.Problems)
			}
			var b strings.Builder
			printExternalLB(&b, st)
			if !strings.Contains(b.String(), st.Endpoint) {
				t.Errorf("printed %q", b.String())
			}
		})
	}
	// A dial function (the bastion's) is used for the connection.
	var dialed atomic.Bool
	st := collectExternalLB(context.Background(), spec(goodCA), 5*time.Second, func(ctx context.Context, addr string) (net.Conn, error) {
		dialed.Store(true)
		return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	})
	if !dialed.Load() || st.Readyz != "ok" {
		t.Errorf("through a dial function: dialed %v, %+v", dialed.Load(), st)
	}
	// Hactl's own load balancer, or none: no external section.
	if st := collectExternalLB(context.Background(), &v1alpha1.Cluster{Spec: v1alpha1.ClusterSpec{LoadBalancer: &v1alpha1.LoadBalancer{VIP: "10.0.0.100/24"}}}, time.Second, nil); st != nil {
		t.Errorf("managed load balancer: %+v", st)
	}
}
