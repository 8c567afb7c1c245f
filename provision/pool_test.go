package provision_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/provision/internal/sshtest"
)

// TestPoolDialsOnceAndRedialsADeadConnection: one connection per host across uses; when the host
// goes away and comes back on the same address, Run fails on the dead connection, forgets it and
// runs the command once more on a new one.
func TestPoolDialsOnceAndRedialsADeadConnection(t *testing.T) {
	e := newEnv(t)
	e.trust()
	d, err := provision.NewDialer(e.config())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	p := provision.NewPool(d)
	defer p.Close()
	ctx := ctxTimeout(t, 30*time.Second)

	a, err := p.Client(ctx, e.target())
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Client(ctx, e.target())
	if err != nil || a != b {
		t.Fatalf("second Client = %p, %v; want the first connection %p", b, err, a)
	}
	if res, err := p.Run(ctx, e.target(), "test/echo", "echo one"); err != nil || string(res.Stdout) != "one\n" {
		t.Fatalf("Run = %q, %v", res.Stdout, err)
	}
	if n := e.srv.Conns(); n != 1 {
		t.Fatalf("%d connections, want 1", n)
	}

	// The host goes down and comes back (same address, same host key).
	e.srv.Close()
	again := sshtest.New(t, e.key.Public(), sshtest.ListenOn(net.JoinHostPort(e.srv.Host, strconv.Itoa(e.srv.Port))), sshtest.WithHostKey(e.srv.HostKey))
	res, err := p.Run(ctx, e.target(), "test/echo", "echo two")
	if err != nil || string(res.Stdout) != "two\n" {
		t.Fatalf("Run after the host came back = %q, %v; want a redial", res.Stdout, err)
	}
	if n := again.Conns(); n != 1 {
		t.Errorf("%d new connections, want 1", n)
	}
	if c, ok := p.Get("h1"); !ok || c == a {
		t.Errorf("Get after the redial = %p, %v; want a new connection", c, ok)
	}

	// Forget drops it: the next use dials.
	p.Forget("h1")
	if _, ok := p.Get("h1"); ok {
		t.Error("Get after Forget found a connection")
	}
	if _, err := p.Run(ctx, e.target(), "test/true", "true"); err != nil {
		t.Fatal(err)
	}
	if n := again.Conns(); n != 2 {
		t.Errorf("%d connections after Forget and Run, want 2", n)
	}
}

// fakeConn is a Conn whose Run returns err, counting its closes.
type fakeConn struct {
	name   string
	err    error
	runs   atomic.Int32
	closes atomic.Int32
}

func (f *fakeConn) Run(ctx context.Context, step, command string, opts ...provision.RunOption) (provision.Result, error) {
	f.runs.Add(1)
	return provision.Result{}, f.err
}

func (f *fakeConn) Close() error {
	f.closes.Add(1)
	return fmt.Errorf("close %s", f.name)
}

func TestPoolRunRedialsOnceOnly(t *testing.T) {
	dead := &provision.CommandError{Host: "h", Step: "s", ExitCode: -1, Err: errors.New("open session: EOF")}
	failed := &provision.CommandError{Host: "h", Step: "s", ExitCode: 1, Err: errors.New("exit status 1")}
	for _, tc := range []struct {
		name       string
		err        error
		wantDials  int32
		wantCloses int32
	}{
		{"dead connection: one redial, then its error", dead, 2, 1},
		{"command failed: no redial", failed, 1, 0},
		{"success", nil, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var dials atomic.Int32
			var conns []*fakeConn
			p := provision.NewPoolFunc(func(ctx context.Context, tg provision.Target) (*fakeConn, error) {
				dials.Add(1)
				c := &fakeConn{name: tg.Name, err: tc.err}
				conns = append(conns, c)
				return c, nil
			})
			_, err := p.Run(context.Background(), provision.Target{Name: "h"}, "s", "true")
			if !errors.Is(err, tc.err) {
				t.Errorf("Run = %v, want %v", err, tc.err)
			}
			if dials.Load() != tc.wantDials || conns[0].closes.Load() != tc.wantCloses {
				t.Errorf("%d dials, first connection closed %d times; want %d, %d", dials.Load(), conns[0].closes.Load(), tc.wantDials, tc.wantCloses)
			}
		})
	}
	// A cancelled context is not a dead connection to redial.
	var dials atomic.Int32
	p := provision.NewPoolFunc(func(ctx context.Context, tg provision.Target) (*fakeConn, error) {
		dials.Add(1)
		return &fakeConn{err: dead}, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Run(ctx, provision.Target{Name: "h"}, "s", "true"); err == nil || dials.Load() != 1 {
		t.Errorf("Run on a cancelled context: %v after %d dials; want the error after 1", err, dials.Load())
	}
}

func TestPoolConcurrentFirstUseKeepsOneAndCloseJoinsErrors(t *testing.T) {
	var mu sync.Mutex
	var made []*fakeConn
	start := make(chan struct{})
	p := provision.NewPoolFunc(func(ctx context.Context, tg provision.Target) (*fakeConn, error) {
		<-start
		c := &fakeConn{name: tg.Name}
		mu.Lock()
		made = append(made, c)
		mu.Unlock()
		return c, nil
	})
	var wg sync.WaitGroup
	got := make([]*fakeConn, 4)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _ = p.Client(context.Background(), provision.Target{Name: "a"})
		}()
	}
	close(start)
	wg.Wait()
	for _, c := range got[1:] {
		if c != got[0] {
			t.Fatalf("concurrent first uses got different connections")
		}
	}
	closed := 0
	for _, c := range made {
		closed += int(c.closes.Load())
	}
	if closed != len(made)-1 {
		t.Errorf("%d of %d dialled connections closed, want all but the kept one", closed, len(made))
	}

	if _, err := p.Client(context.Background(), provision.Target{Name: "b"}); err != nil {
		t.Fatal(err)
	}
	p.Set("c", &fakeConn{name: "c"})
	err := p.Close()
	for _, want := range []string{"close a", "close b", "close c"} {
		if err == nil || !slices.Contains(strings.Split(err.Error(), "\n"), want) {
			t.Errorf("Close = %v, want it to hold %q", err, want)
		}
	}
	if _, ok := p.Get("a"); ok {
		t.Error("Close left a connection")
	}
	dialErr := errors.New("no route")
	q := provision.NewPoolFunc(func(ctx context.Context, tg provision.Target) (*fakeConn, error) { return nil, dialErr })
	if c, err := q.Client(context.Background(), provision.Target{Name: "a"}); !errors.Is(err, dialErr) || c != nil {
		t.Errorf("Client with a failing dial = %v, %v", c, err)
	}
}

func TestTargetOfUnmapsIPv4MappedAddresses(t *testing.T) {
	for addr, want := range map[string]string{"::ffff:10.0.0.1": "10.0.0.1", "10.0.0.1": "10.0.0.1", "FD00::1": "fd00::1", "node-a": "node-a"} {
		if got := provision.TargetOf(v1alpha1.Host{Name: "h", Address: addr}).Address; got != want {
			t.Errorf("TargetOf(%s).Address = %s, want %s", addr, got, want)
		}
	}
}

func TestIsDeadConnection(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&provision.CommandError{ExitCode: -1}, true},
		{fmt.Errorf("wrapped: %w", &provision.CommandError{ExitCode: -1}), true},
		{&provision.CommandError{ExitCode: 255}, false},
		{errors.New("other"), false},
		{nil, false},
	} {
		if got := provision.IsDeadConnection(tc.err); got != tc.want {
			t.Errorf("isDeadConnection(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
