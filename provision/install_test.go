package provision

import (
	"strings"
	"testing"
)

func TestInstallCommand(t *testing.T) {
	for pm, want := range map[string]string{
		"apt-get": "DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends haproxy curl || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends haproxy curl; }",
		"dnf":     "dnf install -y haproxy curl",
		"yum":     "yum install -y haproxy curl",
		// kube runtime packages (kubenode.Packages) on RPM distributions
	} {
		got, err := InstallCommand(pm, []string{"haproxy", "curl"})
		if err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", pm, got, err, want)
		}
	}
	if _, err := InstallCommand("", []string{"haproxy"}); err == nil || !strings.Contains(err.Error(), "no supported package manager") {
		t.Errorf("no package manager: %v", err)
	}
}
