package app

import (
	"strings"
	"testing"
)

// TestCheckKindFlags: --kind-cluster needs --kubeconfig and an archive (exit 2 before anything).
func TestCheckKindFlags(t *testing.T) {
	for _, tc := range [][3]string{{"ci", "", "a.tar"}, {"ci", "k.conf", ""}} {
		if _, err := checkKindFlags(tc[0], tc[1], tc[2]); err == nil || !strings.Contains(err.Error(), "give both") {
			t.Errorf("%q: %v", tc, err)
		}
	}
	if kind, err := checkKindFlags("", "", ""); kind != "" || err != nil {
		t.Errorf("no --kind-cluster: %q, %v", kind, err)
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := checkKindFlags("ci", "k.conf", "a.tar"); err == nil || !strings.Contains(err.Error(), "kind is not on PATH") {
		t.Errorf("no kind: %v", err)
	}
}
