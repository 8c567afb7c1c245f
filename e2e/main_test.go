//go:build e2e

// Package e2e runs the real hactl binary against the lab (e2e/lab): systemd hosts in containers
// reached over real SSH. One lab per package run, shared by its tests, always torn down. Run with
// `make e2e` (go test -tags e2e -p 1 -timeout ...). The lab cannot be skipped: if this machine
// cannot run it, the suite fails and says why.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/e2e/harness"
	"github.com/hactl/hactl/e2e/lab"
)

var (
	suite  harness.Suite
	labDir string
)

func TestMain(m *testing.M) {
	root, err := lab.FindRepoRoot(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	labDir = filepath.Join(root, ".lab-e2e")
	os.Exit(harness.Main(m, "e2e", lab.Options{Members: 5, Dir: labDir}, &suite))
}

// result is one hactl invocation.
type result struct {
	stdout, stderr string
	code           int
}

// hactl runs the real binary and logs the command line and its output so a failure can be replayed.
func hactl(t *testing.T, args ...string) result {
	t.Helper()
	r := harness.Run(t, suite.Bin, nil, args...)
	return result{stdout: r.Stdout, stderr: r.Stderr, code: r.Code}
}

// mustHactl runs hactl and fails the test unless it exits 0.
func mustHactl(t *testing.T, args ...string) result {
	t.Helper()
	r := hactl(t, args...)
	if r.code != 0 {
		t.Fatalf("hactl %s: exit %d, want 0", strings.Join(args, " "), r.code)
	}
	return r
}

// writeSpec marshals a spec into dir and returns its path.
func writeSpec(t *testing.T, c *v1alpha1.Cluster, name string) string {
	t.Helper()
	raw, err := lab.MarshalSpec(c)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// labSpec returns the lab's spec for members members (a fresh copy to modify) without its load
// balancer: this suite is about etcd (e2e/lb covers the load balancer, with the kube-apiservers
// behind it; without them every backend is DOWN and hactl status reports the cluster degraded).
func labSpec(t *testing.T, members int) *v1alpha1.Cluster {
	t.Helper()
	root, err := lab.FindRepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	c, err := lab.BuildSpec(members, labDir, filepath.Join(root, "bin"))
	if err != nil {
		t.Fatal(err)
	}
	lab.WithoutLoadBalancer(c)
	return c
}

// specPath writes labSpec(members) to <labDir>/etcd-<members>.yaml (same state dir as the lab's own
// spec) and returns its path.
func specPath(t *testing.T, members int) string {
	t.Helper()
	raw, err := lab.MarshalSpec(labSpec(t, members))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(labDir, fmt.Sprintf("etcd-%d.yaml", members))
	if err := os.WriteFile(p, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func execOn(t *testing.T, host string, args ...string) string {
	t.Helper()
	out, err := suite.Lab.Exec(context.Background(), host, args...)
	if err != nil {
		t.Fatalf("on %s: %v\n%s", host, err, out)
	}
	return out
}
