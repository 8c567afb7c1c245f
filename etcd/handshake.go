package etcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"time"
)

// dialTLS connects to ep (https://host:port) through opts' dialer (or directly) and completes a
// TLS handshake verifying the server against cfg's CA. The caller closes the connection.
func dialTLS(ctx context.Context, ep string, cfg *tls.Config, timeout time.Duration, opts ...Option) (*tls.Conn, error) {
	hostPort, host, err := endpointHost(ep)
	if err != nil {
		return nil, err
	}
	c := cfg.Clone()
	c.ServerName = host
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if dial := collect(opts).dial; dial != nil {
		raw, err := dial(dctx, hostPort)
		if err != nil {
			return nil, err
		}
		conn := tls.Client(raw, c)
		if err := conn.HandshakeContext(dctx); err != nil {
			raw.Close()
			return nil, err
		}
		return conn, nil
	}
	d := tls.Dialer{NetDialer: &net.Dialer{}, Config: c}
	nc, err := d.DialContext(dctx, "tcp", hostPort)
	if err != nil {
		return nil, err
	}
	return nc.(*tls.Conn), nil
}

// Handshake checks that the member at ep accepts hactl's TLS credentials files: a TLS handshake
// (server verified against files.CA, client certificate presented), then up to timeout for the
// server's first bytes — with TLS 1.3 a server that refuses the client certificate says so with an
// alert only after the client's handshake has completed (RFC 8446 §4.4.2.4), and etcd's gRPC
// server speaks first once it accepts. It returns nil when the member accepts, or the typed error:
// see IsTLSRejection for the ones that mean "not trusted".
func Handshake(ctx context.Context, ep string, files TLSFiles, timeout time.Duration, opts ...Option) error {
	cfg, err := files.Config()
	if err != nil {
		return err
	}
	conn, err := dialTLS(ctx, ep, cfg, timeout, opts...)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	var b [1]byte
	if _, err := conn.Read(b[:]); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil // nothing refused within the timeout: accepted (the server is merely quiet)
		}
		return err
	}
	return nil
}

// IsTLSRejection reports whether err (from Handshake, or a dial outside gRPC) is a failure of trust
// between hactl and a member rather than of the network: the member's certificate does not verify
// against hactl's CA (*tls.CertificateVerificationError, x509.UnknownAuthorityError,
// x509.CertificateInvalidError, x509.HostnameError), hactl sent an alert during the handshake
// (tls.AlertError), or the member answered with a TLS alert — it refused hactl's client
// certificate (a *net.OpError whose Op is "remote error", the form crypto/tls gives a peer's alert).
func IsTLSRejection(err error) bool {
	var verr *tls.CertificateVerificationError
	var alert tls.AlertError
	var uae x509.UnknownAuthorityError
	var cie x509.CertificateInvalidError
	var hne x509.HostnameError
	if errors.As(err, &verr) || errors.As(err, &alert) || errors.As(err, &uae) || errors.As(err, &cie) || errors.As(err, &hne) {
		return true
	}
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "remote error"
}
