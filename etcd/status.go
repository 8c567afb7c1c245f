package etcd

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// DefaultRequestTimeout bounds each request Status makes to one endpoint (status, health read,
// member and alarm lists), as etcdctl's default command timeout.
const DefaultRequestTimeout = 5 * time.Second

// healthKey is the key of the health read (the key etcdctl's `endpoint health` reads).
const healthKey = "health"

// ErrNoEndpointReachable is returned (wrapped, with every endpoint's error) by Status when not one
// endpoint answered.
var ErrNoEndpointReachable = errors.New("no etcd endpoint reachable")

// ClusterStatus is the state of an etcd cluster as seen from its endpoints (`hactl status -o json`).
// IDs are lowercase hex, as etcdctl prints them.
type ClusterStatus struct {
	ClusterID string `json:"clusterID,omitempty"`
	// LeaderID is the leader's member ID: the one an endpoint reports being leader, else the one most
	// endpoints report. Empty when no endpoint knows a leader.
	LeaderID   string `json:"leaderID,omitempty"`
	LeaderName string `json:"leaderName,omitempty"`
	// QuorumReachable: at least one endpoint served a linearizable read, which needs a quorum.
	QuorumReachable bool `json:"quorumReachable"`
	// Members is the member list (linearizable when the quorum is reachable, else one endpoint's
	// local view), sorted by name then ID.
	Members         []MemberInfo `json:"members"`
	MemberListError string       `json:"memberListError,omitempty"`
	// Endpoints are in the order Status was given them.
	Endpoints      []EndpointStatus `json:"endpoints"`
	Alarms         []Alarm          `json:"alarms"`
	AlarmListError string           `json:"alarmListError,omitempty"`
	// ClusterVersion is the cluster version ("3.6.0": the lowest minor among the members, decided
	// by the leader; MemberVersions) as one healthy, else reachable, endpoint answered it; "" when
	// its /version did not answer.
	ClusterVersion string `json:"clusterVersion,omitempty"`
}

// MemberInfo is one entry of the member list.
type MemberInfo struct {
	Name       string   `json:"name"` // empty for a member added but not started yet
	ID         string   `json:"id"`
	PeerURLs   []string `json:"peerURLs"`
	ClientURLs []string `json:"clientURLs"`
	IsLearner  bool     `json:"isLearner"`
}

// Alarm is an active cluster alarm (etcdctl alarm list).
type Alarm struct {
	MemberID string `json:"memberID"`
	Alarm    string `json:"alarm"` // NOSPACE, CORRUPT
}

// EndpointStatus is what one endpoint reported. A failure to reach it is data (Error), not an error
// of Status.
type EndpointStatus struct {
	Endpoint string `json:"endpoint"`
	// Reachable: the endpoint answered a Status request over TLS.
	Reachable bool   `json:"reachable"`
	Error     string `json:"error,omitempty"` // why it is not reachable
	// Healthy: a linearizable read (of key "health") succeeded within the request timeout.
	Healthy     bool   `json:"healthy"`
	HealthError string `json:"healthError,omitempty"`

	MemberID   string `json:"memberID,omitempty"`
	MemberName string `json:"memberName,omitempty"`
	IsLeader   bool   `json:"isLeader"`
	IsLearner  bool   `json:"isLearner"`
	// LatencyMs is the round trip of one Status request on an open connection, in milliseconds.
	LatencyMs        float64 `json:"latencyMs"`
	Version          string  `json:"version,omitempty"`
	RaftTerm         uint64  `json:"raftTerm"`
	RaftIndex        uint64  `json:"raftIndex"`
	RaftAppliedIndex uint64  `json:"raftAppliedIndex"`
	DBSizeBytes      int64   `json:"dbSizeBytes"`
	DBSizeInUseBytes int64   `json:"dbSizeInUseBytes"`
	// FragmentationPercent is the share of the database file not in use, 0-100: what a
	// defragmentation would give back (Fragmentation).
	FragmentationPercent float64 `json:"fragmentationPercent"`
	// Errors are the errors the member itself reports (e.g. an alarm).
	Errors []string `json:"errors,omitempty"`

	// CertNotAfter is the expiry of the certificate the endpoint presented in a TLS handshake
	// verified against the CA; zero (omitted) if the handshake failed (CertError).
	CertNotAfter time.Time `json:"certNotAfter,omitzero"`
	CertError    string    `json:"certError,omitempty"`
}

// Status asks every endpoint (concurrently) for its status, health and serving certificate, and one
// reachable endpoint for the member list and alarms. Each request is bounded by
// DefaultRequestTimeout, each connection by DefaultDialTimeout, and all by ctx.
//
// Per-endpoint failures are recorded in the result. The error is non-nil only when TLS files cannot
// be loaded, endpoints are invalid, or no endpoint is reachable (wrapping ErrNoEndpointReachable and
// every endpoint's error); in the last case the partial status is returned too.
func Status(ctx context.Context, endpoints []string, files TLSFiles, opts ...Option) (*ClusterStatus, error) {
	return status(ctx, endpoints, files, DefaultDialTimeout, DefaultRequestTimeout, opts...)
}

type probe struct {
	es      EndpointStatus
	err     error
	cli     *clientv3.Client
	id      uint64
	leader  uint64
	cluster uint64
}

// StatusWithTimeout is Status with each connection bounded by dialTimeout and each request by
// reqTimeout (both > 0), for callers that want a faster answer when members are down.
func StatusWithTimeout(ctx context.Context, endpoints []string, files TLSFiles, dialTimeout, reqTimeout time.Duration, opts ...Option) (*ClusterStatus, error) {
	if dialTimeout <= 0 || reqTimeout <= 0 {
		return nil, fmt.Errorf("status timeouts must be positive (dial %s, request %s)", dialTimeout, reqTimeout)
	}
	return status(ctx, endpoints, files, dialTimeout, reqTimeout, opts...)
}

// StatusWithConfig is StatusWithTimeout with a client tls.Config (ConfigFromPEM) instead of files.
func StatusWithConfig(ctx context.Context, endpoints []string, cfg *tls.Config, dialTimeout, reqTimeout time.Duration, opts ...Option) (*ClusterStatus, error) {
	if dialTimeout <= 0 || reqTimeout <= 0 {
		return nil, fmt.Errorf("status timeouts must be positive (dial %s, request %s)", dialTimeout, reqTimeout)
	}
	return statusConfig(ctx, endpoints, cfg, dialTimeout, reqTimeout, opts...)
}

func status(ctx context.Context, endpoints []string, files TLSFiles, dialTimeout, reqTimeout time.Duration, opts ...Option) (*ClusterStatus, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("etcd status: no endpoints")
	}
	cfg, err := configOf(files, opts)
	if err != nil {
		return nil, err
	}
	return statusConfig(ctx, endpoints, cfg, dialTimeout, reqTimeout, opts...)
}

func statusConfig(ctx context.Context, endpoints []string, cfg *tls.Config, dialTimeout, reqTimeout time.Duration, opts ...Option) (*ClusterStatus, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("etcd status: no endpoints")
	}
	for _, e := range endpoints {
		if _, _, err := endpointHost(e); err != nil {
			return nil, err
		}
	}

	probes := make([]*probe, len(endpoints))
	var wg sync.WaitGroup
	for i, ep := range endpoints {
		wg.Go(func() { probes[i] = probeEndpoint(ctx, ep, cfg, dialTimeout, reqTimeout, opts...) })
	}
	wg.Wait()
	defer func() {
		for _, p := range probes {
			if p.cli != nil {
				_ = p.cli.Close()
			}
		}
	}()

	st := &ClusterStatus{Members: []MemberInfo{}, Alarms: []Alarm{}}
	var errs []error
	var healthy, reachable *probe
	for _, p := range probes {
		st.Endpoints = append(st.Endpoints, p.es)
		if p.err != nil {
			errs = append(errs, p.err)
			continue
		}
		if reachable == nil {
			reachable = p
		}
		if healthy == nil && p.es.Healthy {
			healthy = p
		}
		st.QuorumReachable = st.QuorumReachable || p.es.Healthy
	}
	if reachable == nil {
		return st, fmt.Errorf("%w: %w", ErrNoEndpointReachable, errors.Join(errs...))
	}
	st.ClusterID = hexID(reachable.cluster)
	if leader := pickLeader(probes); leader != 0 {
		st.LeaderID = hexID(leader)
	}

	src := cmp.Or(healthy, reachable)
	if v, err := memberVersions(ctx, src.es.Endpoint, cfg, reqTimeout, opts...); err == nil {
		st.ClusterVersion = v.Cluster
	}
	var mlOpts []clientv3.OpOption
	if healthy == nil {
		mlOpts = append(mlOpts, clientv3.WithSerializable()) // no quorum: the member's own view
	}
	rctx, cancel := context.WithTimeout(ctx, reqTimeout)
	ml, err := src.cli.MemberList(rctx, mlOpts...)
	cancel()
	if err != nil {
		st.MemberListError = fmt.Sprintf("member list from %s: %v", src.es.Endpoint, err)
	} else {
		for _, m := range ml.Members {
			st.Members = append(st.Members, MemberInfo{
				Name: m.Name, ID: hexID(m.ID), PeerURLs: nonNil(m.PeerURLs), ClientURLs: nonNil(m.ClientURLs), IsLearner: m.IsLearner,
			})
		}
		slices.SortFunc(st.Members, func(a, b MemberInfo) int {
			return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
		})
	}
	names := map[string]string{}
	for _, m := range st.Members {
		names[m.ID] = m.Name
	}
	st.LeaderName = names[st.LeaderID]
	for i := range st.Endpoints {
		ep := &st.Endpoints[i]
		if ep.MemberID == "" { // unreachable: identify it by the client URL the member list gives
			for _, m := range st.Members {
				if slices.Contains(m.ClientURLs, ep.Endpoint) {
					ep.MemberID = m.ID
				}
			}
		}
		ep.MemberName = names[ep.MemberID]
	}

	if healthy != nil { // AlarmList goes through raft: without a quorum it can only time out
		rctx, cancel := context.WithTimeout(ctx, reqTimeout)
		al, err := healthy.cli.AlarmList(rctx)
		cancel()
		if err != nil {
			st.AlarmListError = fmt.Sprintf("alarm list from %s: %v", healthy.es.Endpoint, err)
		} else {
			for _, a := range al.Alarms {
				st.Alarms = append(st.Alarms, Alarm{MemberID: hexID(a.MemberID), Alarm: a.Alarm.String()})
			}
		}
	} else {
		st.AlarmListError = "alarm list needs a quorum"
	}
	return st, nil
}

// pickLeader returns the member an endpoint reports being leader, else the leader most endpoints
// report, else 0.
func pickLeader(probes []*probe) uint64 {
	votes := map[uint64]int{}
	var best uint64
	for _, p := range probes {
		if p.err != nil || p.leader == 0 {
			continue
		}
		if p.leader == p.id {
			return p.id
		}
		votes[p.leader]++
		if votes[p.leader] > votes[best] || (votes[p.leader] == votes[best] && p.leader < best) {
			best = p.leader
		}
	}
	return best
}

// probeEndpoint gathers one endpoint's status. p.err is set (and p.es.Error) when it is unreachable.
func probeEndpoint(ctx context.Context, ep string, cfg *tls.Config, dialTimeout, reqTimeout time.Duration, opts ...Option) *probe {
	p := &probe{es: EndpointStatus{Endpoint: ep}}
	p.es.CertNotAfter, p.es.CertError = serverCertNotAfter(ctx, ep, cfg, dialTimeout, opts...)

	fail := func(err error) *probe {
		p.err = fmt.Errorf("%s: %w", ep, err)
		p.es.Error = err.Error()
		return p
	}
	cli, err := newClient(ctx, []string{ep}, cfg, dialTimeout, opts...)
	if err != nil {
		return fail(err)
	}
	p.cli = cli
	// A plain gRPC stub (not clientv3's, which waits for the connection to become ready and retries)
	// on the client's connection: an unreachable endpoint fails fast, and a second call is timed
	// without the TLS handshake.
	mc := pb.NewMaintenanceClient(cli.ActiveConnection())
	call := func() (*pb.StatusResponse, time.Duration, error) {
		rctx, cancel := context.WithTimeout(ctx, reqTimeout)
		defer cancel()
		start := time.Now()
		resp, err := mc.Status(rctx, &pb.StatusRequest{})
		return resp, time.Since(start), err
	}
	if _, _, err := call(); err != nil {
		return fail(fmt.Errorf("status: %w", err))
	}
	resp, rtt, err := call()
	if err != nil {
		return fail(fmt.Errorf("status: %w", err))
	}
	p.es.Reachable = true
	p.es.LatencyMs = float64(rtt.Microseconds()) / 1000
	if h := resp.Header; h != nil {
		p.id, p.cluster = h.MemberId, h.ClusterId
		p.es.MemberID = hexID(h.MemberId)
	}
	p.leader = resp.Leader
	p.es.IsLeader = resp.Leader != 0 && resp.Leader == p.id
	p.es.IsLearner = resp.IsLearner
	p.es.Version = resp.Version
	p.es.RaftTerm = resp.RaftTerm
	p.es.RaftIndex = resp.RaftIndex
	p.es.RaftAppliedIndex = resp.RaftAppliedIndex
	p.es.DBSizeBytes = resp.DbSize
	p.es.DBSizeInUseBytes = resp.DbSizeInUse
	p.es.FragmentationPercent = Fragmentation(resp.DbSize, resp.DbSizeInUse)
	p.es.Errors = resp.Errors

	hctx, cancel := context.WithTimeout(ctx, reqTimeout)
	_, err = cli.Get(hctx, healthKey) // linearizable (clientv3's default)
	cancel()
	if err == nil || errors.Is(err, rpctypes.ErrPermissionDenied) { // denied still went through raft
		p.es.Healthy = true
	} else {
		p.es.HealthError = err.Error()
	}
	return p
}

// serverCertNotAfter does a TLS handshake with ep, verifying its certificate against cfg's CA, and
// returns the certificate's NotAfter, or an error text.
func serverCertNotAfter(ctx context.Context, ep string, cfg *tls.Config, timeout time.Duration, opts ...Option) (time.Time, string) {
	if _, _, err := endpointHost(ep); err != nil {
		return time.Time{}, err.Error()
	}
	conn, err := dialTLS(ctx, ep, cfg, timeout, opts...)
	if err != nil {
		return time.Time{}, fmt.Sprintf("TLS handshake: %v", err)
	}
	defer conn.Close()
	certs := conn.ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return time.Time{}, "TLS handshake: no server certificate"
	}
	return certs[0].NotAfter.UTC(), ""
}

// endpointHost splits an https endpoint URL into host:port and the bare host.
func endpointHost(ep string) (hostPort, host string, err error) {
	u, err := url.Parse(ep)
	if err != nil {
		return "", "", fmt.Errorf("endpoint %q: %w", ep, err)
	}
	if u.Scheme != "https" || u.Host == "" || u.Port() == "" {
		return "", "", fmt.Errorf("endpoint %q is not https://host:port", ep)
	}
	return u.Host, u.Hostname(), nil
}

func hexID(id uint64) string { return fmt.Sprintf("%x", id) }

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Fragmentation is the share of a database file of size bytes that is not in use (inUse bytes), in
// percent (0-100; 0 for an empty or unknown size): the free pages a defragmentation returns to the
// filesystem.
func Fragmentation(size, inUse int64) float64 {
	if size <= 0 || inUse >= size {
		return 0
	}
	return float64(size-inUse) / float64(size) * 100
}

// CheckQuorum writes key (a unique value) and reads it back with a linearizable read, failing unless
// the value read is the one written. Both requests need a quorum, so success proves the cluster
// commits and serves writes. Bound it with ctx. The key is left in place. A write refused because of
// an alarm is an *AlarmError (the alarms and the command that clears them).
func CheckQuorum(ctx context.Context, cli *clientv3.Client, key string) error {
	if key == "" {
		return errors.New("quorum check: empty key")
	}
	value := "hactl quorum check " + time.Now().UTC().Format(time.RFC3339Nano) + " " + rand.Text()
	if _, err := cli.Put(ctx, key, value); err != nil {
		return fmt.Errorf("quorum check: put %s: %w", key, ExplainAlarm(ctx, cli, err))
	}
	resp, err := cli.Get(ctx, key) // linearizable: no WithSerializable
	if err != nil {
		return fmt.Errorf("quorum check: get %s: %w", key, err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != value {
		return fmt.Errorf("quorum check: %s read back %d value(s), not the value written", key, len(resp.Kvs))
	}
	return nil
}
