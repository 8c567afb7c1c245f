package validate

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/klog/v2"
	schedv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	intree "k8s.io/kubernetes/pkg/scheduler/framework/plugins"
)

// pluginLine is one plugin line of api/v1alpha1/scheduler_plugins.txt.
type pluginLine struct {
	hactl  bool
	points []string
}

func readPluginList(t *testing.T) (plugins map[string]pluginLine, removed, points []string) {
	t.Helper()
	data, err := os.ReadFile("../../api/v1alpha1/scheduler_plugins.txt")
	if err != nil {
		t.Fatal(err)
	}
	plugins = map[string]pluginLine{}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "points "):
			points = strings.Fields(strings.TrimPrefix(line, "points "))
		case strings.HasPrefix(line, "removed "):
			name, _, _ := strings.Cut(strings.TrimPrefix(line, "removed "), ":")
			removed = append(removed, name)
		default:
			f := strings.Fields(line)
			var pl pluginLine
			if f[0] == "hactl" {
				pl.hactl, f = true, f[1:]
			}
			pl.points = f[1:]
			plugins[f[0]] = pl
		}
	}
	return plugins, removed, points
}

// TestPluginListMatchesRegistry: the root module's list of plugins (which hactl checks
// spec.scheduler.plugins against, without importing k8s.io/kubernetes) is exactly the in-tree registry
// plus hactl's, each with the extension points the built scheduler expands it to at multiPoint, and
// names no removed plugin that exists.
func TestPluginListMatchesRegistry(t *testing.T) {
	listed, removed, points := readPluginList(t)
	if v1 := v1ExtensionPoints(); !slices.Equal(points, v1) {
		t.Errorf("the points line lists %v; KubeSchedulerConfiguration v1's Plugins has %v", points, v1)
	}
	var want []string
	for name := range intree.NewInTreeRegistry() {
		want = append(want, name)
	}
	for name := range registry {
		want = append(want, name)
	}
	slices.Sort(want)
	var have []string
	for name, pl := range listed {
		have = append(have, name)
		if _, ours := registry[name]; ours != pl.hactl {
			t.Errorf("%s: listed as hactl's %t, in hactl's registry %t", name, pl.hactl, ours)
		}
	}
	slices.Sort(have)
	if !slices.Equal(have, want) {
		t.Fatalf("api/v1alpha1/scheduler_plugins.txt lists\n%v\nthe registries have\n%v", have, want)
	}
	for _, r := range removed {
		if slices.Contains(want, r) {
			t.Errorf("%s is listed as removed but is in the registry", r)
		}
	}

	expanded := multiPointExpansion(t, want)
	for _, name := range want {
		if got := expanded[name]; !slices.Equal(listed[name].points, got) {
			t.Errorf("%s: listed with extension points %v, the scheduler expands it to %v; the line should read %q",
				name, listed[name].points, got, strings.Join(append([]string{name}, got...), " "))
		}
	}
}

// multiPointExpansion builds a profile with every plugin enabled at multiPoint (defaults off, args
// defaulted by the scheme) the way a run would, and returns each plugin's extension points as the
// framework expanded them, in KubeSchedulerConfiguration's order.
func multiPointExpansion(t *testing.T, names []string) map[string][]string {
	t.Helper()
	var b strings.Builder
	b.WriteString("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nleaderElection: {leaderElect: false}\n")
	b.WriteString("profiles:\n- schedulerName: all\n  plugins:\n    multiPoint:\n      disabled: [{name: '*'}]\n      enabled:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "      - name: %s\n", n)
	}
	b.WriteString("  pluginConfig:\n  - name: ZonePreference\n    args: {preferredZones: [{zone: az-a, weight: 1}]}\n")
	path := filepath.Join(t.TempDir(), "all.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := options.LoadConfigFromFile(klog.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	sched, err := frameworks(context.Background(), cfg, registry)
	if err != nil {
		t.Fatal(err)
	}
	plugins := sched.Profiles["all"].ListPlugins()
	v1Points := v1ExtensionPoints()
	out := map[string][]string{}
	v := reflect.ValueOf(plugins).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		set, ok := v.Field(i).Interface().(schedconfig.PluginSet)
		if !ok || f.Name == "MultiPoint" {
			continue
		}
		point := strings.ToLower(f.Name[:1]) + f.Name[1:]
		if !slices.Contains(v1Points, point) {
			continue
		}
		for _, p := range set.Enabled {
			out[p.Name] = append(out[p.Name], point)
		}
	}
	return out
}

// v1ExtensionPoints are the JSON names of KubeSchedulerConfiguration v1's Plugins fields, in order.
func v1ExtensionPoints() []string {
	var names []string
	for f := range reflect.TypeFor[schedv1.Plugins]().Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		names = append(names, name)
	}
	return names
}
