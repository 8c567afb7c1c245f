// Command kube-probe is the lab's test workload (image hactl-lab.local/probe, built by the lab into
// an image archive the Kubernetes specs import): every 2 s it asks the API server, from inside a
// pod, for /readyz twice — at the kubernetes Service's ClusterIP (KUBERNETES_SERVICE_HOST: through
// kube-proxy's rules) and at kubernetes.default.svc (through CoreDNS, then kube-proxy) — with the
// pod's service account token and CA. It serves /healthz on :8080: 200 once both answered "ok"
// (the pod's readiness probe), 503 before and after three failures in a row (one slow apiserver
// behind the Service is not the Service failing). Each result is one log line.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

func main() {
	log.SetFlags(log.LstdFlags | log.LUTC)
	var healthy atomic.Bool
	failures := 0
	go func() {
		mux := http.NewServeMux()
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
			if healthy.Load() {
				fmt.Fprintln(w, "ok")
				return
			}
			http.Error(w, "not yet", http.StatusServiceUnavailable)
		})
		log.Fatal(http.ListenAndServe(":8080", mux))
	}()
	for {
		err := probe()
		if err != nil {
			log.Printf("FAIL %v", err)
		} else {
			log.Printf("ok: /readyz through the ClusterIP and through kubernetes.default.svc")
		}
		if err == nil {
			failures = 0
			healthy.Store(true)
		} else if failures++; failures >= 3 {
			healthy.Store(false)
		}
		time.Sleep(2 * time.Second)
	}
}

func probe() error {
	token, err := os.ReadFile(saDir + "/token")
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(saDir + "/ca.crt")
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return fmt.Errorf("no CA in %s/ca.crt", saDir)
	}
	c := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "kubernetes.default.svc"}}}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupHost(ctx, "kubernetes.default.svc.cluster.local")
	if err != nil {
		return fmt.Errorf("DNS: %w", err)
	}
	for _, host := range []string{os.Getenv("KUBERNETES_SERVICE_HOST"), "kubernetes.default.svc"} {
		if host == "" {
			return fmt.Errorf("KUBERNETES_SERVICE_HOST is not set")
		}
		req, _ := http.NewRequest(http.MethodGet, "https://"+net.JoinHostPort(host, "443")+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
		resp, err := c.Do(req)
		if err != nil {
			return fmt.Errorf("%s: %w", host, err)
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != "ok" {
			return fmt.Errorf("%s: %d %q (dns %v)", host, resp.StatusCode, body, addrs)
		}
	}
	return nil
}
