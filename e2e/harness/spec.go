package harness

import (
	"path/filepath"
	"testing"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/e2e/lab"
)

// Spec returns a fresh copy (to modify) of the lab's spec for members etcd members (3 or 5), load
// balancer included, with the state dir in the lab dir and the etcd binaries from <repo>/bin. An
// error fails the test (t.Fatal).
func (s *Suite) Spec(t *testing.T, members int) *v1alpha1.Cluster {
	t.Helper()
	c, err := lab.BuildSpec(members, s.Lab.Dir(), filepath.Join(s.RepoRoot, "bin"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// WriteSpec writes c as YAML to a file named name in a new temp dir of the test and returns its
// path. An error fails the test (t.Fatal).
func WriteSpec(t *testing.T, c *v1alpha1.Cluster, name string) string {
	t.Helper()
	return WriteSpecIn(t, t.TempDir(), c, name)
}

// WriteSpecIn is WriteSpec into dir (e.g. the lab dir, for a spec that must outlive the test),
// replacing any file of that name (lab.WriteSpec).
func WriteSpecIn(t *testing.T, dir string, c *v1alpha1.Cluster, name string) string {
	t.Helper()
	p, err := lab.WriteSpec(c, dir, name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
