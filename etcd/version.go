package etcd

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// Versions is a member's answer on its client URL's /version (etcd's version.Versions): Server is
// the version the member runs ("3.6.16"), Cluster the cluster version ("3.6.0"): the lowest minor
// among the members, decided by the leader and raised by it only once every member runs the new
// one ("not_decided" right after a start). etcd's upgrade guide checks an upgrade with it.
type Versions struct {
	Server  string `json:"etcdserver"`
	Cluster string `json:"etcdcluster"`
}

// MemberVersions asks the member at clientURL (an https URL) for its Versions over TLS with files
// (the client certificate is needed where client-cert-auth is on), through opts' dialer when set,
// within timeout (0: DefaultDialTimeout). Errors: TLS or connection failures, a status other than
// 200, or a body that is not etcd's version JSON.
func MemberVersions(ctx context.Context, clientURL string, files TLSFiles, timeout time.Duration, opts ...Option) (Versions, error) {
	cfg, err := files.Config()
	if err != nil {
		return Versions{}, err
	}
	return memberVersions(ctx, clientURL, cfg, timeout, opts...)
}

func memberVersions(ctx context.Context, clientURL string, cfg *tls.Config, timeout time.Duration, opts ...Option) (Versions, error) {
	var v Versions
	if timeout <= 0 {
		timeout = DefaultDialTimeout
	}
	tr := &http.Transport{TLSClientConfig: cfg.Clone(), DisableKeepAlives: true}
	if dial := collect(opts).dial; dial != nil {
		tr.DialContext = func(ctx context.Context, _, addr string) (net.Conn, error) { return dial(ctx, addr) }
	}
	defer tr.CloseIdleConnections()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, strings.TrimSuffix(clientURL, "/")+"/version", nil)
	if err != nil {
		return v, err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return v, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return v, fmt.Errorf("%s/version: %w", clientURL, err)
	}
	if resp.StatusCode != http.StatusOK {
		return v, fmt.Errorf("%s/version: %s", clientURL, resp.Status)
	}
	if err := json.Unmarshal(body, &v); err != nil || v.Server == "" {
		return v, fmt.Errorf("%s/version: not etcd's version answer: %q", clientURL, body)
	}
	return v, nil
}
