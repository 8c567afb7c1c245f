package etcd_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/internal/etcdtest"
	"github.com/hactl/hactl/pki"
)

// TestHandshake: against a real member with client-certificate auth, hactl's credentials are
// accepted; a client certificate of another CA and a CA that did not sign the member are typed
// rejections; a member that is down is not a rejection.
func TestHandshake(t *testing.T) {
	c := etcdtest.Start(t, 1)
	ep := c.Endpoints()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := etcd.Handshake(ctx, ep, c.Files(), 2*time.Second); err != nil {
		t.Fatalf("hactl's own credentials: %v", err)
	}

	other := filepath.Join(t.TempDir(), "pki")
	ca, _, err := pki.LoadOrCreateCA(other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ca.EnsureClient(other, "intruder", "intruder"); err != nil {
		t.Fatal(err)
	}
	foreignClient := etcd.TLSFiles{CA: c.Files().CA, Cert: pki.CertPath(other, "intruder"), Key: pki.KeyPath(other, "intruder")}
	err = etcd.Handshake(ctx, ep, foreignClient, 2*time.Second)
	if err == nil || !etcd.IsTLSRejection(err) {
		t.Errorf("a client certificate of another CA: err = %v, want a TLS rejection", err)
	}
	foreignCA := etcd.TLSFiles{CA: pki.CertPath(other, "ca"), Cert: c.Files().Cert, Key: c.Files().Key}
	err = etcd.Handshake(ctx, ep, foreignCA, 2*time.Second)
	if err == nil || !etcd.IsTLSRejection(err) {
		t.Errorf("a CA that did not sign the member: err = %v, want a TLS rejection", err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := fmt.Sprintf("https://%s", l.Addr())
	l.Close()
	err = etcd.Handshake(ctx, down, c.Files(), 2*time.Second)
	if err == nil || etcd.IsTLSRejection(err) {
		t.Errorf("a member that is down: err = %v, want a network error, not a rejection", err)
	}
}

// TestIsTLSRejection: typed errors, wrapped, whatever their text; network errors and timeouts are
// not rejections, even when their text mentions certificates.
func TestIsTLSRejection(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("dial: %w", x509.UnknownAuthorityError{}),
		fmt.Errorf("handshake: %w", tls.AlertError(42)), // bad_certificate, sent by hactl
		fmt.Errorf("verify: %w", &tls.CertificateVerificationError{Err: errors.New("expired")}),
		fmt.Errorf("read: %w", &net.OpError{Op: "remote error", Net: "tcp", Err: errors.New("tls: bad certificate")}),
		x509.HostnameError{Host: "10.0.0.1"},
	} {
		if !etcd.IsTLSRejection(err) {
			t.Errorf("IsTLSRejection(%v) = false", err)
		}
	}
	for _, err := range []error{
		errors.New("x509: certificate signed by unknown authority"), // text only: not typed
		&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")},
		context.DeadlineExceeded,
	} {
		if etcd.IsTLSRejection(err) {
			t.Errorf("IsTLSRejection(%v) = true", err)
		}
	}
}

// TestMemberVersions: a real member answers its server and cluster version over TLS with hactl's
// client certificate; a client certificate of no CA the member trusts is refused, and so is a URL
// that is not etcd.
func TestMemberVersions(t *testing.T) {
	c := etcdtest.Start(t, 1)
	ep := c.Endpoints()[0]
	ctx := t.Context()
	var v etcd.Versions
	var err error
	deadline := time.Now().Add(20 * time.Second)
	for {
		v, err = etcd.MemberVersions(ctx, ep, c.Files(), 2*time.Second)
		if err != nil || v.Cluster != "not_decided" || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil || v.Server != "3.6.16" || v.Cluster != "3.6.0" {
		t.Fatalf("MemberVersions = %+v, %v; want server 3.6.16, cluster 3.6.0", v, err)
	}
	noCert := etcd.TLSFiles{CA: c.Files().CA}
	if _, err := etcd.MemberVersions(ctx, ep, noCert, 2*time.Second); err == nil {
		t.Error("without a client certificate: no error")
	}
	if _, err := etcd.MemberVersions(ctx, ep+"/nothing-here", c.Files(), 2*time.Second); err == nil {
		t.Error("a path that is not etcd's: no error")
	}
}
