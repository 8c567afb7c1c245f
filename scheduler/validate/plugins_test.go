package validate

import (
	"os"
	"slices"
	"strings"
	"testing"

	intree "k8s.io/kubernetes/pkg/scheduler/framework/plugins"
)

// TestPluginListMatchesRegistry: the root module's list of plugin names (which hactl checks
// spec.scheduler.plugins against, without importing k8s.io/kubernetes) is exactly the in-tree registry
// plus hactl's, and names no removed plugin that exists.
func TestPluginListMatchesRegistry(t *testing.T) {
	data, err := os.ReadFile("../../api/v1alpha1/scheduler_plugins.txt")
	if err != nil {
		t.Fatal(err)
	}
	var inTree, hactl, removed []string
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "removed "):
			name, _, _ := strings.Cut(strings.TrimPrefix(line, "removed "), ":")
			removed = append(removed, name)
		case strings.HasPrefix(line, "hactl "):
			hactl = append(hactl, strings.TrimPrefix(line, "hactl "))
		default:
			inTree = append(inTree, line)
		}
	}
	var want []string
	for name := range intree.NewInTreeRegistry() {
		want = append(want, name)
	}
	slices.Sort(want)
	slices.Sort(inTree)
	if !slices.Equal(inTree, want) {
		t.Errorf("api/v1alpha1/scheduler_plugins.txt lists in-tree plugins\n%v\nthe registry has\n%v", inTree, want)
	}
	var ours []string
	for name := range registry {
		ours = append(ours, name)
	}
	slices.Sort(ours)
	slices.Sort(hactl)
	if !slices.Equal(hactl, ours) {
		t.Errorf("hactl plugins listed %v, registered %v", hactl, ours)
	}
	for _, r := range removed {
		if slices.Contains(want, r) {
			t.Errorf("%s is listed as removed but is in the registry", r)
		}
	}
}
