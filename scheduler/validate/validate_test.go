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
		"percentage > 100":      {"- schedulerName: hactl-scheduler\n", "- schedulerName: hactl-scheduler\n  percentageOfNodesToScore: 101\n", "percentageOfNodesToScore"},
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
