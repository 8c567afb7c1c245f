package etcdtest

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-member etcd cluster")
	}
	c := Start(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if c.N() != 3 || len(c.Endpoints()) != 3 || c.Files().CA == "" || c.Files().Cert == "" || c.Files().Key == "" {
		t.Fatalf("cluster: %d members, endpoints %v, files %+v", c.N(), c.Endpoints(), c.Files())
	}
	cli := c.Client(t)
	if _, err := cli.Put(ctx, "/etcdtest/a", "1"); err != nil {
		t.Fatal(err)
	}

	lead := c.LeaderIndex(ctx)
	if lead < 0 {
		t.Fatal("no leader")
	}
	c.Kill(lead)
	c.Kill(lead) // a second kill does nothing
	if c.Running(lead) {
		t.Fatalf("member %d still running after Kill", lead)
	}
	next := c.LeaderIndex(ctx)
	if next < 0 || next == lead {
		t.Fatalf("leader after killing %d: %d", lead, next)
	}
	if _, err := cli.Put(ctx, "/etcdtest/b", "2"); err != nil {
		t.Fatalf("put with 2 of 3 members: %v", err)
	}

	if err := c.Restart(lead); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(lead); err == nil {
		t.Error("restarting a running member succeeded")
	}
	// The restarted member serves a linearizable read that sees the write made while it was down.
	one := c.ClientTo(t, c.Endpoints()[lead])
	resp, err := one.Get(ctx, "/etcdtest/b")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "2" {
		t.Errorf("restarted member reads %v", resp.Kvs)
	}

	// A graceful stop of the leader hands leadership over.
	lead = c.LeaderIndex(ctx)
	c.Stop(lead)
	if next := c.LeaderIndex(ctx); next < 0 || next == lead {
		t.Fatalf("leader after stopping %d: %d", lead, next)
	}

	// Without a quorum there is no leader.
	for i := range c.N() {
		if i != lead && c.Running(i) {
			c.Kill(i)
			break
		}
	}
	short, cancelShort := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancelShort()
	if i, err := c.Leader(short); i != -1 || !errors.Is(err, ErrNoLeader) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("one of three running: leader %d, %v", i, err)
	}
}
