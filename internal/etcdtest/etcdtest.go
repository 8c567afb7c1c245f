// Package etcdtest runs a real n-member etcd cluster (go.etcd.io/etcd/server/v3/embed) inside a
// test process, on 127.0.0.1, with hactl's PKI: TLS on the client and peer ports, client
// certificates required on both, exactly as hactl configures production members. Members can be
// stopped gracefully, killed (no leadership transfer) and restarted on the same data directory and
// ports, so failover code can be unit-tested without the lab.
//
// Only tests import it. Package etcd's own tests cannot (etcdtest imports etcd); they keep their
// own copy.
package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/pki"
)

// ReadyTimeout bounds how long Start and Restart wait for a member to be ready.
const ReadyTimeout = 60 * time.Second

// Cluster is a running embedded cluster. Its methods are safe for concurrent use. Every member still
// running when the test ends is stopped by a t.Cleanup registered by Start.
type Cluster struct {
	pkiDir  string
	files   etcd.TLSFiles
	members []etcd.Member
	dirs    []string // data directory of member i, kept across restarts
	ids     []uint64 // raft member ID of member i, stable across restarts

	mu    sync.Mutex
	etcds []*embed.Etcd // nil while member i is stopped
}

// Start starts an n-member cluster (n >= 1) named m0..m<n-1> and waits until every member is ready.
// It fails the test (t.Fatal) on any error, so it must be called from the test's goroutine.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("etcdtest: %d members", n)
	}
	c := &Cluster{pkiDir: filepath.Join(t.TempDir(), "pki")}
	ca, _, err := pki.LoadOrCreateCA(c.pkiDir)
	if err != nil {
		t.Fatal(err)
	}
	ports, err := freePorts(2 * n)
	if err != nil {
		t.Fatal(err)
	}
	lo := netip.MustParseAddr("127.0.0.1")
	for i := range n {
		m := etcd.Member{Name: fmt.Sprintf("m%d", i), Address: lo, ClientPort: ports[2*i], PeerPort: ports[2*i+1]}
		if _, err := ca.EnsureMember(c.pkiDir, m.Name, []netip.Addr{m.Address}); err != nil {
			t.Fatal(err)
		}
		c.members = append(c.members, m)
		c.dirs = append(c.dirs, filepath.Join(t.TempDir(), m.Name+".etcd"))
	}
	if _, err := ca.EnsureClient(c.pkiDir, pki.HactlClient, pki.HactlClientCN); err != nil {
		t.Fatal(err)
	}
	c.files = etcd.TLSFiles{
		CA:   pki.CertPath(c.pkiDir, pki.CABase),
		Cert: pki.CertPath(c.pkiDir, pki.HactlClient),
		Key:  pki.KeyPath(c.pkiDir, pki.HactlClient),
	}
	c.etcds = make([]*embed.Etcd, n)
	c.ids = make([]uint64, n)
	t.Cleanup(func() {
		for i := range n {
			c.Stop(i)
		}
	})
	// Founding members must start together: each waits for its peers before it is ready.
	for i := range n {
		e, err := embed.StartEtcd(c.config(i))
		if err != nil {
			t.Fatalf("etcdtest: start %s: %v", c.members[i].Name, err)
		}
		c.mu.Lock()
		c.etcds[i] = e
		c.mu.Unlock()
	}
	for i := range n {
		if err := c.waitReady(i); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// freePorts returns n distinct ports that were free a moment ago (embed cannot bind peers to :0).
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("etcdtest: free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// config returns a fresh embed configuration for member i (embed mutates the one it is given, so a
// restart builds a new one). ClusterState "new" is ignored by etcd when the data dir already holds a
// WAL, which is what makes Restart work.
func (c *Cluster) config(i int) *embed.Config {
	m := c.members[i]
	md := pki.MemberDir(c.pkiDir, m.Name)
	cfg := embed.NewConfig()
	cfg.Name = m.Name
	cfg.Dir = c.dirs[i]
	cfg.ListenClientUrls = []url.URL{mustURL(m.ClientURL())}
	cfg.AdvertiseClientUrls = cfg.ListenClientUrls
	cfg.ListenPeerUrls = []url.URL{mustURL(m.PeerURL())}
	cfg.AdvertisePeerUrls = cfg.ListenPeerUrls
	cfg.InitialCluster = etcd.InitialCluster(c.members)
	cfg.InitialClusterToken = "hactl-etcdtest"
	cfg.ClusterState = embed.ClusterStateFlagNew
	cfg.ClientTLSInfo = transport.TLSInfo{
		CertFile: pki.CertPath(md, pki.ServerBase), KeyFile: pki.KeyPath(md, pki.ServerBase),
		TrustedCAFile: c.files.CA, ClientCertAuth: true,
	}
	cfg.PeerTLSInfo = transport.TLSInfo{
		CertFile: pki.CertPath(md, pki.PeerBase), KeyFile: pki.KeyPath(md, pki.PeerBase),
		TrustedCAFile: c.files.CA, ClientCertAuth: true,
	}
	cfg.TlsMinVersion = etcd.TLSMinVersion
	cfg.Logger = "zap"
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{"stderr"}
	return cfg
}

func mustURL(s string) url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(fmt.Sprintf("etcdtest: member URL %q: %v", s, err))
	}
	return *u
}

// waitReady waits for member i to be ready to serve clients and records its member ID.
func (c *Cluster) waitReady(i int) error {
	c.mu.Lock()
	e := c.etcds[i]
	c.mu.Unlock()
	if e == nil {
		return fmt.Errorf("etcdtest: %s is stopped", c.members[i].Name)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		return fmt.Errorf("etcdtest: %s: %w", c.members[i].Name, err)
	case <-time.After(ReadyTimeout):
		return fmt.Errorf("etcdtest: %s not ready after %s", c.members[i].Name, ReadyTimeout)
	}
	c.mu.Lock()
	c.ids[i] = uint64(e.Server.MemberID())
	c.mu.Unlock()
	return nil
}

// N is the number of members.
func (c *Cluster) N() int { return len(c.members) }

// Members returns the members (names m0.., addresses and ports), in index order.
func (c *Cluster) Members() []etcd.Member { return append([]etcd.Member(nil), c.members...) }

// Endpoints returns every member's client URL (https://127.0.0.1:port), in index order, stopped
// members included.
func (c *Cluster) Endpoints() []string { return etcd.ClientURLs(c.members) }

// Files returns the CA and hactl's client certificate and key.
func (c *Cluster) Files() etcd.TLSFiles { return c.files }

// PKIDir is the directory of the cluster's CA and certificates (pki package layout).
func (c *Cluster) PKIDir() string { return c.pkiDir }

// Client returns a client over TLS to all members' endpoints (etcd.NewClient, default dial timeout),
// closed when t ends. It fails the test on error.
func (c *Cluster) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	return c.ClientTo(t, c.Endpoints()...)
}

// ClientTo is Client restricted to the given endpoints (e.g. one member's, to ask that member).
func (c *Cluster) ClientTo(t testing.TB, endpoints ...string) *clientv3.Client {
	t.Helper()
	cli, err := etcd.NewClient(context.Background(), endpoints, c.files, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// Running reports whether member i is running (started and neither stopped nor killed since).
func (c *Cluster) Running(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.etcds[i] != nil
}

// take marks member i stopped and returns its server, or nil when it already was.
func (c *Cluster) take(i int) *embed.Etcd {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.etcds[i]
	c.etcds[i] = nil
	return e
}

// Stop stops member i gracefully (embed's Close: a leader first transfers its leadership to a peer,
// so clients see little or no outage). Stopping a stopped member does nothing.
func (c *Cluster) Stop(i int) {
	if e := c.take(i); e != nil {
		e.Close()
	}
}

// Kill stops member i as a crash would, as far as embed allows: the raft server stops at once,
// without transferring leadership, so the others must wait for an election timeout (1 s, embed's
// default) before electing a new leader; then its listeners are closed. Killing a stopped member
// does nothing.
func (c *Cluster) Kill(i int) {
	e := c.take(i)
	if e == nil {
		return
	}
	e.Server.HardStop()
	// Close now finds the server stopped: its leadership transfer fails at once (no peer is
	// connected any more) and it only closes listeners and connections.
	e.Close()
}

// Restart starts stopped member i again on its data directory and ports and waits until it is ready
// (it has rejoined the cluster). It returns an error if the member is running or does not start;
// it does not fail the test itself, so any goroutine may call it.
func (c *Cluster) Restart(i int) error {
	c.mu.Lock()
	running := c.etcds[i] != nil
	c.mu.Unlock()
	if running {
		return fmt.Errorf("etcdtest: restart %s: still running", c.members[i].Name)
	}
	e, err := embed.StartEtcd(c.config(i))
	if err != nil {
		return fmt.Errorf("etcdtest: restart %s: %w", c.members[i].Name, err)
	}
	c.mu.Lock()
	if c.etcds[i] != nil { // raced with another Restart
		c.mu.Unlock()
		e.Close()
		return fmt.Errorf("etcdtest: restart %s: restarted concurrently", c.members[i].Name)
	}
	c.etcds[i] = e
	c.mu.Unlock()
	return c.waitReady(i)
}

// ErrNoLeader is returned by Leader when ctx ends before a leader is agreed on.
var ErrNoLeader = errors.New("etcdtest: no leader")

// LeaderIndex returns the index of the current leader, waiting until one running member is leader
// by its own account and a majority of all members (running ones) name it; -1 if ctx ends first.
func (c *Cluster) LeaderIndex(ctx context.Context) int {
	i, _ := c.Leader(ctx)
	return i
}

// Leader is LeaderIndex with an error (ErrNoLeader wrapping ctx's error) instead of -1.
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if i := c.agreedLeader(); i >= 0 {
			return i, nil
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("%w: %w", ErrNoLeader, ctx.Err())
		case <-tick.C:
		}
	}
}

func (c *Cluster) agreedLeader() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	votes := map[uint64]int{}
	for _, e := range c.etcds {
		if e != nil {
			if lead := e.Server.Lead(); lead != 0 {
				votes[lead]++
			}
		}
	}
	for i, e := range c.etcds {
		if e != nil && c.ids[i] != 0 && e.Server.Lead() == c.ids[i] && votes[c.ids[i]] >= v1alpha1.Quorum(len(c.members)) {
			return i
		}
	}
	return -1
}
