package validate

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hactl/hactl/scheduler/apis/config"
	"github.com/hactl/hactl/scheduler/plugins"
)

var registry = plugins.Registry()

func TestValidFileDecodesTypedDefaultedArgs(t *testing.T) {
	cfg, err := File(context.Background(), "testdata/valid.yaml", registry)
	if err != nil {
		t.Fatal(err)
	}
	var zp *config.ZonePreferenceArgs
	var mg *config.MaintenanceGuardArgs
	for _, pc := range cfg.Profiles[0].PluginConfig {
		switch a := pc.Args.(type) {
		case *config.ZonePreferenceArgs:
			zp = a
		case *config.MaintenanceGuardArgs:
			mg = a
		}
	}
	if zp == nil || zp.TopologyKey != "topology.kubernetes.io/zone" || len(zp.PreferredZones) != 1 || zp.PreferredZones[0].Weight != 100 {
		t.Fatalf("ZonePreference args %+v: want typed, topologyKey defaulted", zp)
	}
	if mg == nil || mg.Label != "hactl.io/maintenance" {
		t.Fatalf("MaintenanceGuard args %+v: want typed and defaulted although the file has no pluginConfig for it", mg)
	}
}

func TestInvalidFiles(t *testing.T) {
	valid, err := os.ReadFile("testdata/valid.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct{ old, new, want string }{
		"unknown arg field":     {"weight: 100}", "weight: 100, bogus: 1}", `unknown field "preferredZones[0].bogus"`},
		"zero zone weight":      {"weight: 100}", "weight: 0}", "args.preferredZones[0].weight: Invalid value: 0"},
		"removed plugin":        {"name: MaintenanceGuard", "name: NodeResourcesMostAllocated", `"NodeResourcesMostAllocated" does not exist`},
		"renewDeadline too low": {"renewDeadline: 10s", "renewDeadline: 2s", "renewDeadline must be greater than retryPeriod*JitterFactor"},
		"lease <= renew":        {"leaseDuration: 15s", "leaseDuration: 10s", "leaseDuration"},
		"plugin twice":          {"      - name: MaintenanceGuard\n", "      - name: MaintenanceGuard\n      - name: MaintenanceGuard\n", "MaintenanceGuard"},
		"score weight negative": {"weight: 5", "weight: -1", "total score of Score plugins could overflow"},
		"multiPoint weight overridden at score": {"    score:\n      enabled:\n", "    multiPoint:\n      enabled:\n      - name: ImageLocality\n        weight: 3\n    score:\n      enabled:\n      - name: ImageLocality\n        weight: 4\n",
			"profiles[0].plugins.multiPoint.enabled[0].weight: Invalid value: 3: ImageLocality scores at score with weight 4"},
		"multiPoint weight, score without": {"    score:\n      enabled:\n", "    multiPoint:\n      enabled:\n      - name: ImageLocality\n        weight: 3\n    score:\n      enabled:\n      - name: ImageLocality\n",
			"ImageLocality scores at score with weight 1"},
		"weight on a plugin that does not score": {"    filter:\n", "    multiPoint:\n      enabled:\n      - name: NodePorts\n        weight: 2\n    filter:\n",
			"profiles[0].plugins.multiPoint.enabled[0].weight: Invalid value: 2: NodePorts does not score in this profile"},
		"enabled and disabled at one point": {"      - name: MaintenanceGuard\n", "      - name: MaintenanceGuard\n      - name: NodePorts\n      disabled:\n      - name: NodePorts\n",
			"profiles[0].plugins.filter.disabled[0]: Invalid value: \"NodePorts\": also enabled at filter"},
		"lease not whole seconds": {"leaseDuration: 15s", "leaseDuration: 15500ms", "leaderElection.leaseDuration 15.5s: must be whole seconds"},
		"percentage > 100":        {"- schedulerName: hactl-scheduler\n", "- schedulerName: hactl-scheduler\n  percentageOfNodesToScore: 101\n", "percentageOfNodesToScore"},
	} {
		t.Run(name, func(t *testing.T) {
			if !strings.Contains(string(valid), tc.old) {
				t.Fatalf("testdata/valid.yaml lacks %q", tc.old)
			}
			path := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(path, []byte(strings.Replace(string(valid), tc.old, tc.new, 1)), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := File(context.Background(), path, registry)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("File: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestWeightsNotDropped: a plugin at multiPoint without a weight and at score with one, and a
// default plugin's weight overridden at score, are the framework's documented uses: nothing the
// file gives is dropped.
func TestWeightsNotDropped(t *testing.T) {
	valid, err := os.ReadFile("testdata/valid.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Replace(string(valid), "    score:\n      enabled:\n", "    multiPoint:\n      enabled:\n      - name: ImageLocality\n    score:\n      enabled:\n      - name: ImageLocality\n        weight: 4\n      - name: TaintToleration\n        weight: 7\n", 1)
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := File(context.Background(), path, registry); err != nil {
		t.Fatalf("File: %v", err)
	}
}
