package status

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/lb"
)

// ExternalLBStatus is the user's own load balancer (spec.loadBalancer.external) as this machine
// sees it: one GET /readyz through it (kube-apiserver's readiness; anonymous access is allowed by
// the default system:public-info-viewer role).
type ExternalLBStatus struct {
	// Endpoint is address:port, the load balancer's frontend.
	Endpoint string `json:"endpoint"`
	// Readyz is "ok" when /readyz answered 200, else what went wrong (the error, or the status and
	// the body's start).
	Readyz string `json:"readyz"`
	// LatencyMs is how long the request took, in milliseconds.
	LatencyMs float64 `json:"latencyMs"`
	// Verified is true when the apiserver's certificate was verified against
	// spec.loadBalancer.healthCheck.caFile; false: not verified (no caFile set).
	Verified bool `json:"verified"`
}

// dialFunc opens a TCP connection (directly, or through the bastion: provision.Dialer.DialTCP).
type dialFunc func(ctx context.Context, addr string) (net.Conn, error)

// collectExternalLB asks GET https://address:port/readyz once through the external load balancer,
// within timeout, dialling with dial (nil: directly). The certificate is verified against
// spec.loadBalancer.healthCheck.caFile when it is set. It returns nil without an external load
// balancer.
func collectExternalLB(ctx context.Context, c *v1alpha1.Cluster, timeout time.Duration, dial dialFunc) *ExternalLBStatus {
	host, port, ok := c.APIEndpoint()
	if c.ExternalLB() == nil || !ok {
		return nil
	}
	ep := net.JoinHostPort(host, strconv.Itoa(port))
	st := &ExternalLBStatus{Endpoint: ep}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: true} //nolint:gosec // said in the report (Verified false)
	if f := c.Spec.LoadBalancer.HealthCheck.CAFile; f != "" {
		raw, err := os.ReadFile(f)
		if err != nil {
			st.Readyz = fmt.Sprintf("reading spec.loadBalancer.healthCheck.caFile: %v", err)
			return st
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(raw) {
			st.Readyz = fmt.Sprintf("spec.loadBalancer.healthCheck.caFile %s: no PEM certificate in it", f)
			return st
		}
		cfg = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
		st.Verified = true
	}
	tr := &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}
	if dial != nil {
		tr.DialContext = func(ctx context.Context, _, addr string) (net.Conn, error) { return dial(ctx, addr) }
	}
	defer tr.CloseIdleConnections()
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	url := "https://" + ep + lb.ReadyzPath
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, url, nil)
	if err != nil {
		st.Readyz = err.Error()
		return st
	}
	start := time.Now()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	st.LatencyMs = float64(time.Since(start).Microseconds()) / 1000
	if err != nil {
		st.Readyz = err.Error()
		return st
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	if resp.StatusCode != http.StatusOK {
		st.Readyz = fmt.Sprintf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
		return st
	}
	st.Readyz = "ok"
	return st
}

// addExternalLB puts the external load balancer's status into the report; a readyz that is not ok
// is a problem.
func (r *Report) addExternalLB(s *ExternalLBStatus) {
	if s == nil {
		return
	}
	r.ExternalLB = s
	if s.Readyz != "ok" {
		r.Problems = append(r.Problems, fmt.Sprintf("load balancer: GET https://%s%s through your load balancer (spec.loadBalancer.external) from this machine: %s", s.Endpoint, lb.ReadyzPath, s.Readyz))
	}
	r.Healthy = len(r.Problems) == 0
}

// printExternalLB prints the external load balancer's line.
func printExternalLB(w io.Writer, s *ExternalLBStatus) {
	verified := "certificate verified with healthCheck.caFile"
	if !s.Verified {
		verified = "certificate NOT verified: set spec.loadBalancer.healthCheck.caFile to the cluster CA"
	}
	readyz := s.Readyz
	if readyz == "ok" {
		readyz = fmt.Sprintf("ok (%.0f ms)", s.LatencyMs)
	} else {
		readyz = "FAILED: " + readyz
	}
	fmt.Fprintf(w, "\nload balancer (external, not run by hactl): %s  readyz %s; %s\n", s.Endpoint, readyz, verified)
}
