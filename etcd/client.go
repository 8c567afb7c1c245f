package etcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// DefaultDialTimeout bounds connecting to one endpoint.
const DefaultDialTimeout = 5 * time.Second

// TLSFiles are local PEM files for talking to etcd: the CA that signed the servers' certificates and
// a client certificate and key (pki.HactlClient). Cert and Key are both set or both empty; without
// them no client certificate is offered (and a server with client-cert-auth refuses the client).
type TLSFiles struct {
	CA   string `json:"ca"`
	Cert string `json:"cert,omitempty"`
	Key  string `json:"key,omitempty"`
}

// Config returns a client tls.Config: TLS 1.2 or later, server certificates verified against CA
// only (not the system roots), the client certificate when set.
func (f TLSFiles) Config() (*tls.Config, error) {
	if f.CA == "" {
		return nil, errors.New("etcd TLS: no CA file")
	}
	caPEM, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("etcd TLS: read CA: %w", err)
	}
	var certPEM, keyPEM []byte
	switch {
	case f.Cert != "" && f.Key != "":
		if certPEM, err = os.ReadFile(f.Cert); err != nil {
			return nil, fmt.Errorf("etcd TLS: load client certificate: %w", err)
		}
		if keyPEM, err = os.ReadFile(f.Key); err != nil {
			return nil, fmt.Errorf("etcd TLS: load client certificate: %w", err)
		}
	case f.Cert != "" || f.Key != "":
		return nil, errors.New("etcd TLS: client certificate and key must be given together")
	}
	cfg, err := ConfigFromPEM(caPEM, certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%w (CA %s)", err, f.CA)
	}
	return cfg, nil
}

// ConfigFromPEM is TLSFiles.Config from PEM bytes instead of files (e.g. a Kubernetes Secret's
// ca.crt, tls.crt and tls.key): TLS 1.2 or later, servers verified against caPEM only, the client
// certificate when certPEM and keyPEM are both given. Errors: no certificate in caPEM, only one of
// certPEM and keyPEM, or a pair that does not parse or match.
func ConfigFromPEM(caPEM, certPEM, keyPEM []byte) (*tls.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("etcd TLS: the CA holds no PEM certificate")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	switch {
	case len(certPEM) > 0 && len(keyPEM) > 0:
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("etcd TLS: load client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	case len(certPEM) > 0 || len(keyPEM) > 0:
		return nil, errors.New("etcd TLS: client certificate and key must be given together")
	}
	return cfg, nil
}

// NewClient returns an etcd v3 client for endpoints (https URLs, see URL) using files. The client
// lives until ctx is done or Close is called; the caller must Close it. Connections are made lazily:
// an unreachable endpoint shows as an error of the first request, bounded by dialTimeout (0 means
// DefaultDialTimeout). Endpoints that are not https are refused so nothing is sent in clear text.
func NewClient(ctx context.Context, endpoints []string, files TLSFiles, dialTimeout time.Duration, opts ...Option) (*clientv3.Client, error) {
	cfg, err := configOf(files, opts)
	if err != nil {
		return nil, err
	}
	return newClient(ctx, endpoints, cfg, dialTimeout, opts...)
}

// configOf is WithTLSConfig's configuration when given, else files'.
func configOf(files TLSFiles, opts []Option) (*tls.Config, error) {
	if o := collect(opts); o.tls != nil {
		return o.tls, nil
	}
	return files.Config()
}

// NewClientWithConfig is NewClient with a ready TLS configuration (ConfigFromPEM: hactl-operator
// has its certificate from a Secret, not files). cfg is cloned by gRPC's credentials; errors are
// NewClient's.
func NewClientWithConfig(ctx context.Context, endpoints []string, cfg *tls.Config, dialTimeout time.Duration, opts ...Option) (*clientv3.Client, error) {
	return newClient(ctx, endpoints, cfg, dialTimeout, opts...)
}

// ContextDialer opens a TCP connection to addr ("host:port"), e.g. through an SSH bastion.
type ContextDialer func(ctx context.Context, addr string) (net.Conn, error)

// Option changes how clients connect.
type Option func(*options)

type options struct {
	dial ContextDialer
	tls  *tls.Config
}

// WithTLSConfig makes the functions taking TLSFiles (NewClient, Status, and so the membership and
// maintenance packages) use cfg instead (hactl-operator has its certificate from a Secret, not
// files); the files are then ignored.
func WithTLSConfig(cfg *tls.Config) Option {
	return func(o *options) { o.tls = cfg }
}

// WithDialer makes every connection (gRPC and the certificate probe) go through dial instead of a
// direct TCP connection; nil keeps direct connections. TLS still runs end to end with the members.
func WithDialer(dial ContextDialer) Option {
	return func(o *options) { o.dial = dial }
}

func collect(opts []Option) options {
	var o options
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	return o
}

func newClient(ctx context.Context, endpoints []string, cfg *tls.Config, dialTimeout time.Duration, opts ...Option) (*clientv3.Client, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("etcd client: no endpoints")
	}
	for _, e := range endpoints {
		u, err := url.Parse(e)
		if err != nil {
			return nil, fmt.Errorf("etcd client: endpoint %q: %w", e, err)
		}
		if u.Scheme != "https" || u.Host == "" {
			return nil, fmt.Errorf("etcd client: endpoint %q is not an https URL", e)
		}
	}
	if dialTimeout <= 0 {
		dialTimeout = DefaultDialTimeout
	}
	ccfg := clientv3.Config{
		Endpoints:   endpoints,
		TLS:         cfg.Clone(),
		DialTimeout: dialTimeout,
		Context:     ctx,
		Logger:      zap.NewNop(),
	}
	if o := collect(opts); o.dial != nil {
		ccfg.DialOptions = append(ccfg.DialOptions, grpc.WithContextDialer(o.dial))
	}
	cli, err := clientv3.New(ccfg)
	if err != nil {
		return nil, fmt.Errorf("etcd client for %v: %w", endpoints, err)
	}
	return cli, nil
}
