package membership

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/internal/etcdtest"
	"github.com/hactl/hactl/pki"
)

// joiner is a new member m3 on 127.0.0.1 with certificates from c's CA, not started.
func joiner(t *testing.T, c *etcdtest.Cluster) etcd.Member {
	t.Helper()
	ca, _, err := pki.LoadOrCreateCA(c.PKIDir())
	if err != nil {
		t.Fatal(err)
	}
	lo := netip.MustParseAddr("127.0.0.1")
	if _, err := ca.EnsureMember(c.PKIDir(), "m3", []netip.Addr{lo}); err != nil {
		t.Fatal(err)
	}
	port := func() int {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().(*net.TCPAddr).Port
	}
	return etcd.Member{Name: "m3", Address: lo, ClientPort: port(), PeerPort: port()}
}

// startJoiner starts m as a member joining c (--initial-cluster-state existing) with initialCluster;
// it is stopped when the test ends.
func startJoiner(t *testing.T, c *etcdtest.Cluster, m etcd.Member, initialCluster string) {
	t.Helper()
	md := pki.MemberDir(c.PKIDir(), m.Name)
	u := func(s string) []url.URL {
		p, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return []url.URL{*p}
	}
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = m.Name, filepath.Join(t.TempDir(), m.Name+".etcd")
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = u(m.ClientURL()), u(m.ClientURL())
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = u(m.PeerURL()), u(m.PeerURL())
	cfg.InitialCluster, cfg.ClusterState, cfg.InitialClusterToken = initialCluster, embed.ClusterStateFlagExisting, "hactl-etcdtest"
	cfg.ClientTLSInfo = transport.TLSInfo{CertFile: pki.CertPath(md, pki.ServerBase), KeyFile: pki.KeyPath(md, pki.ServerBase), TrustedCAFile: c.Files().CA, ClientCertAuth: true}
	cfg.PeerTLSInfo = transport.TLSInfo{CertFile: pki.CertPath(md, pki.PeerBase), KeyFile: pki.KeyPath(md, pki.PeerBase), TrustedCAFile: c.Files().CA, ClientCertAuth: true}
	cfg.Logger, cfg.LogLevel, cfg.LogOutputs = "zap", "error", []string{"stderr"}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
}

// TestLearnerJoin runs the learner join against a real 3-member cluster: add (twice: the second
// finds the first), start with the member list etcd returned, caught up, promote (twice: the second
// finds a voter), then remove (twice: the second finds no member).
func TestLearnerJoin(t *testing.T) {
	c := etcdtest.Start(t, 3)
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := cli.Put(ctx, "before", "join"); err != nil {
		t.Fatal(err)
	}
	m := joiner(t, c)

	var refusals int
	id, members, err := AddLearner(ctx, cli, m.PeerURL(), 20*time.Second, func(error) { refusals++ })
	if err != nil {
		t.Fatal(err)
	}
	if again, _, err := AddLearner(ctx, cli, m.PeerURL(), 0, nil); err != nil || again != id {
		t.Fatalf("the add again: %x, %v; want %x (no second learner)", again, err, id)
	}
	if len(members) != 4 || MemberByID(members, id) == nil || !MemberByID(members, id).IsLearner {
		t.Fatalf("member list after the add: %v", members)
	}
	ic, err := JoinInitialCluster(members, id, m.Name, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := etcd.InitialCluster(append(c.Members(), m))
	if ic != want {
		t.Errorf("initial cluster %q, want %q", ic, want)
	}
	startJoiner(t, c, m, ic)

	cu, err := WaitCaughtUp(ctx, cli, m.ClientURL(), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if cu.Leader || cu.Committed == 0 || cu.Applied < cu.Committed {
		t.Errorf("caught up %+v", cu)
	}
	for i, want := range []bool{true, false} {
		promoted, err := Promote(ctx, cli, id, 20*time.Second)
		if err != nil || promoted != want {
			t.Fatalf("promote #%d: %v, %v; want %v", i+1, promoted, err, want)
		}
	}
	ml, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if nm := MemberByID(ml.Members, id); nm == nil || nm.IsLearner || nm.Name != "m3" {
		t.Fatalf("m3 after the promotion: %v", nm)
	}
	// It serves what was written before it joined.
	mcli := c.ClientTo(t, m.ClientURL())
	var got string
	for range 20 {
		if r, err := mcli.Get(ctx, "before"); err == nil && len(r.Kvs) == 1 {
			got = string(r.Kvs[0].Value)
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if got != "join" {
		t.Errorf("read through m3: %q", got)
	}

	rcli := c.ClientTo(t, c.Endpoints()...)
	for i, want := range []bool{true, false} {
		removed, err := RemoveMember(ctx, rcli, id, 20*time.Second)
		if err != nil || removed != want {
			t.Fatalf("remove #%d: %v, %v; want %v", i+1, removed, err, want)
		}
	}
	if _, err := Promote(ctx, rcli, id, 0); !errors.As(err, new(*NoSuchMemberError)) || err.Error() != fmt.Sprintf("member %x is not in the member list", id) {
		t.Errorf("promoting a removed member: %v", err)
	}
}

// TestWaitCaughtUpLeaderAndTimeout: the leader is caught up at once; a member that does not answer
// times out with a *CatchUpError naming the member's own error.
func TestWaitCaughtUpLeaderAndTimeout(t *testing.T) {
	c := etcdtest.Start(t, 3)
	cli := c.Client(t)
	ctx := context.Background()
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cu, err := WaitCaughtUp(ctx, cli, c.Endpoints()[leader], time.Second); err != nil || !cu.Leader {
		t.Errorf("the leader: %+v, %v", cu, err)
	}
	follower := (leader + 1) % 3
	if cu, err := WaitCaughtUp(ctx, cli, c.Endpoints()[follower], 10*time.Second); err != nil || cu.Leader || cu.Applied < cu.Committed {
		t.Errorf("a follower: %+v, %v", cu, err)
	}
	c.Stop(follower)
	_, err = WaitCaughtUp(ctx, cli, c.Endpoints()[follower], time.Second)
	var ce *CatchUpError
	if !errors.As(err, &ce) || !ce.FromMember || ce.Err == nil || !strings.HasPrefix(err.Error(), "not caught up within 1s: ") {
		t.Errorf("a stopped member: %v", err)
	}
}

func TestJoinInitialCluster(t *testing.T) {
	members := []*etcdserverpb.Member{
		{ID: 1, Name: "b", PeerURLs: []string{"https://10.0.0.2:2380"}},
		{ID: 2, Name: "", PeerURLs: []string{"https://10.0.0.3:2380"}},
		{ID: 3, Name: "etcd-says", PeerURLs: []string{"https://10.0.0.1:2380"}},
	}
	got, err := JoinInitialCluster(members, 2, "c", map[string]string{"https://10.0.0.1:2380": "a"})
	if want := "a=https://10.0.0.1:2380,b=https://10.0.0.2:2380,c=https://10.0.0.3:2380"; err != nil || got != want {
		t.Errorf("got %q, %v; want %q", got, err, want)
	}
	if _, err := JoinInitialCluster(members, 1, "b", nil); err == nil || err.Error() != "member 2 has no name yet (added, never started): only one member may join at a time" {
		t.Errorf("an unnamed other member: %v", err)
	}
	if e := (&CatchUpError{CaughtUp: CaughtUp{Applied: 3, Committed: 9}, Timeout: time.Minute}); e.Error() != "not caught up within 1m0s: raft applied index 3, the leader had committed 9" {
		t.Errorf("CatchUpError: %v", e)
	}
}
