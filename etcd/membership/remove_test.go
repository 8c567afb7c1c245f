package membership

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/internal/etcdtest"
	"github.com/hactl/hactl/ui"
)

type fakeRetirer struct {
	mu      sync.Mutex
	retired []string
	err     error
	// stop, when set, stops the member's etcd as the real retirer does (an embedded etcd that was
	// removed panics on the next Status it serves).
	stop func(member string)
}

func (f *fakeRetirer) Retire(_ context.Context, member string, _ []string, stamp string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.retired = append(f.retired, member)
	if f.stop != nil {
		f.stop(member)
	}
	if f.err != nil {
		return "", f.err
	}
	return "/var/lib/etcd.removed-" + stamp, nil
}

func memberNames(t *testing.T, c *etcdtest.Cluster) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Client(t).MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range resp.Members {
		names = append(names, m.Name)
	}
	return names
}

func leaderName(t *testing.T, c *etcdtest.Cluster, endpoints []string) string {
	t.Helper()
	st, err := etcd.Status(context.Background(), endpoints, c.Files())
	if err != nil {
		t.Fatal(err)
	}
	return st.LeaderName
}

// TestRemoveAgainstRealEtcd: on a real 3-member cluster with hactl's TLS, a dead member's removal
// passes the guard, a second removal that would lose the quorum is refused without --force, an
// unknown name is refused, and removing the leader moves leadership first; every removal retires
// the host and keeps the writes committed.
func TestRemoveAgainstRealEtcd(t *testing.T) {
	c := etcdtest.Start(t, 5)
	cl := Cluster{Endpoints: c.Endpoints(), TLS: c.Files()}
	p := ui.New(&strings.Builder{}, false, false)
	ctx := context.Background()
	cli := c.Client(t)
	if _, err := cli.Put(ctx, "before", "1"); err != nil {
		t.Fatal(err)
	}

	if _, err := Remove(ctx, RemoveOptions{Cluster: cl, Name: "nosuch", Printer: p}); !errors.As(err, new(*NotMemberError)) {
		t.Fatalf("unknown member: %v, want a NotMemberError", err)
	}

	// A dry run plans and changes nothing.
	res, err := Remove(ctx, RemoveOptions{Cluster: cl, Name: "m4", DryRun: true, Printer: p, Host: &fakeRetirer{}})
	if err != nil || res.Removed || !strings.Contains(res.Plan, "remove voting member m4") {
		t.Fatalf("dry run: %+v %v", res, err)
	}
	if n := len(memberNames(t, c)); n != 5 {
		t.Fatalf("dry run changed the member list: %d members", n)
	}

	// Two members down of five: removing a dead one leaves 4 voters, 3 healthy: allowed.
	c.Kill(4)
	c.Kill(3)
	host := &fakeRetirer{}
	if res, err = Remove(ctx, RemoveOptions{Cluster: cl, Name: "m4", Host: host, Printer: p}); err != nil || !res.Removed {
		t.Fatalf("remove dead m4: %+v %v", res, err)
	}
	if fmt.Sprint(host.retired) != "[m4]" || !strings.HasPrefix(res.DataDirAside, "/var/lib/etcd.removed-") {
		t.Fatalf("retired %v, aside %q", host.retired, res.DataDirAside)
	}
	// Now 4 voters, 3 healthy (m0-m2), m3 dead: removing a healthy one leaves 3 voters, 2 healthy:
	// allowed; removing another then would leave 2 voters with 1 healthy: refused.
	if _, err = Remove(ctx, RemoveOptions{Cluster: cl, Name: "m2", Printer: p}); err != nil {
		t.Fatalf("remove m2: %v", err)
	}
	c.Stop(2)
	var qe *QuorumError
	if _, err = Remove(ctx, RemoveOptions{Cluster: cl, Name: "m1", Printer: p}); !errors.As(err, &qe) || !strings.Contains(err.Error(), "bring m3 back first") {
		t.Fatalf("remove m1 with m3 dead: %v, want a QuorumError naming m3", err)
	}
	if n := len(memberNames(t, c)); n != 3 {
		t.Fatalf("the refused removal changed the member list: %d members", n)
	}

	// Removing the dead m3 instead leaves m0 and m1, both healthy; then remove the leader of the two.
	if _, err = Remove(ctx, RemoveOptions{Cluster: cl, Name: "m3", Printer: p}); err != nil {
		t.Fatalf("remove dead m3: %v", err)
	}
	live := c.Endpoints()[:2]
	leader := leaderName(t, c, live)
	res, err = Remove(ctx, RemoveOptions{Cluster: Cluster{Endpoints: live, TLS: c.Files()}, Name: leader, Printer: p, Host: &fakeRetirer{}})
	if err != nil || !res.WasLeader || res.NewLeader == "" || res.NewLeader == leader {
		t.Fatalf("remove the leader %s: %+v %v", leader, res, err)
	}
	rest := c.Endpoints()[0]
	if leader == "m0" {
		rest = c.Endpoints()[1]
	}
	left := c.ClientTo(t, rest)
	gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	got, err := left.Get(gctx, "before")
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "1" {
		t.Fatalf("after the removals, the write made before: %v %v", got, err)
	}
	if _, err := left.Put(gctx, "after", "2"); err != nil {
		t.Fatalf("the one member left does not commit: %v", err)
	}
	// The only voter is never removed, not even with --force.
	if _, err = Remove(ctx, RemoveOptions{Cluster: Cluster{Endpoints: []string{rest}, TLS: c.Files()}, Name: res.NewLeader, Force: true, Printer: p}); !errors.As(err, &qe) {
		t.Fatalf("removing the only voter with --force: %v, want refused", err)
	}
}
