package provision_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hactl/hactl/provision"
	"github.com/hashicorp/go-multierror"
)

var errBoom = errors.New("boom")

func TestForEachAggregatesAndCaps(t *testing.T) {
	hosts := []string{"a", "b", "c", "d", "e", "f", "g"}
	var running, maxRunning atomic.Int32
	err := provision.ForEach(context.Background(), hosts, 3, func(h string) string { return h },
		func(ctx context.Context, h string) error {
			n := running.Add(1)
			defer running.Add(-1)
			for {
				m := maxRunning.Load()
				if n <= m || maxRunning.CompareAndSwap(m, n) {
					break
				}
			}
			time.Sleep(20 * time.Millisecond)
			switch h {
			case "b":
				return &provision.CommandError{Host: h, Step: "etcd/start", Command: "systemctl start etcd", ExitCode: 1, Stderr: "failed"}
			case "e":
				return fmt.Errorf("wrapped: %w", errBoom)
			}
			return nil
		})
	if got := maxRunning.Load(); got != 3 {
		t.Errorf("max concurrent = %d, want 3", got)
	}
	var merr *multierror.Error
	if !errors.As(err, &merr) || len(merr.Errors) != 2 {
		t.Fatalf("err = %v, want a multierror with 2 errors", err)
	}
	var he *provision.HostError
	if !errors.As(merr.Errors[0], &he) || he.Host != "b" {
		t.Errorf("first error %v, want host b", merr.Errors[0])
	}
	if !errors.As(merr.Errors[1], &he) || he.Host != "e" {
		t.Errorf("second error %v, want host e", merr.Errors[1])
	}
	var ce *provision.CommandError
	if !errors.As(err, &ce) || ce.Host != "b" {
		t.Errorf("errors.As(*CommandError) through the multierror failed: %v", err)
	}
	if !errors.Is(err, errBoom) {
		t.Error("errors.Is(errBoom) through the multierror failed")
	}
	msg := err.Error()
	if !strings.Contains(msg, "host e: wrapped: boom") || strings.Contains(msg, "host b: host b") {
		t.Errorf("message %q", msg)
	}
}

func TestForEachUnlimitedAndEmpty(t *testing.T) {
	if err := provision.ForEach(context.Background(), []int(nil), 0, strFn, okFn); err != nil {
		t.Fatal(err)
	}
	var running, maxRunning atomic.Int32
	release := make(chan struct{})
	go func() {
		for running.Load() < 5 {
			time.Sleep(time.Millisecond)
		}
		close(release)
	}()
	err := provision.ForEach(context.Background(), []int{1, 2, 3, 4, 5}, 0, strFn, func(ctx context.Context, i int) error {
		maxRunning.Store(max(maxRunning.Load(), running.Add(1)))
		<-release // deadlocks unless all five run at once
		return nil
	})
	if err != nil || maxRunning.Load() < 1 {
		t.Fatal(err)
	}
}

func strFn(i int) string              { return fmt.Sprint(i) }
func okFn(context.Context, int) error { return nil }

func TestForEachStopsLaunchingOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var started atomic.Int32
	err := provision.ForEach(ctx, []int{1, 2, 3, 4, 5}, 1, strFn, func(ctx context.Context, i int) error {
		started.Add(1)
		if i == 2 {
			cancel()
			return ctx.Err()
		}
		return nil
	})
	if got := started.Load(); got != 2 {
		t.Errorf("%d items started, want 2", got)
	}
	var merr *multierror.Error
	if !errors.As(err, &merr) || len(merr.Errors) != 4 {
		t.Fatalf("err = %v, want 4 errors (item 2 and 3 not started)", err)
	}
	if !errors.Is(err, context.Canceled) {
		t.Error("errors.Is(context.Canceled) failed")
	}
	var he *provision.HostError
	if !errors.As(merr.Errors[3], &he) || he.Host != "5" || !strings.Contains(he.Error(), "not started") {
		t.Errorf("last error = %v", merr.Errors[3])
	}
}

// TestForEachOverClients runs ForEach over real clients: the shape the
// bootstrap phases use.
func TestForEachOverClients(t *testing.T) {
	var clients []*provision.Client
	for range 3 {
		clients = append(clients, newEnv(t).dial())
	}
	err := provision.ForEach(context.Background(), clients, 2,
		func(c *provision.Client) string { return c.Target().Name },
		func(ctx context.Context, c *provision.Client) error {
			_, err := c.Run(ctx, "check", "test -e /nonexistent-hactl")
			return err
		})
	var ce *provision.CommandError
	if !errors.As(err, &ce) || ce.ExitCode != 1 {
		t.Fatalf("err = %v", err)
	}
	if n := len(err.(*multierror.Error).Errors); n != 3 {
		t.Errorf("%d errors, want 3", n)
	}
}
