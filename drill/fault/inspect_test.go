package fault

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/hactl/hactl/internal/golden"
)

// inspectView is what TestInspectSameLeftovers compares: the Leftovers (times in UTC) and what
// the drill prints of them.
type inspectView struct {
	Leftovers Leftovers
	Any       bool
	Describe  []string
	Unchecked []string
}

func viewOf(l Leftovers) inspectView {
	if m := l.Marker; m != nil {
		c := *m
		c.Started, c.Deadline = c.Started.UTC(), c.Deadline.UTC()
		l.Marker = &c
	}
	return inspectView{Leftovers: l, Any: l.Any(), Describe: l.Describe(), Unchecked: l.Unchecked()}
}

// writeMarker writes a marker directory by hand: files maps a marker file (id, started, units...)
// to its content.
func (s *sandbox) writeMarker(files map[string]string) {
	s.t.Helper()
	if err := os.MkdirAll(s.p.dir, 0o700); err != nil {
		s.t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(s.p.dir, name), []byte(content), 0o600); err != nil {
			s.t.Fatal(err)
		}
	}
}

// TestInspectSameLeftovers runs the inspection against hand-made host states in the sandbox and
// compares the Leftovers, Describe and Unchecked with testdata/inspect/<case>.json, recorded
// from the line parser (InspectScript, ParseInspect) that the facts probe replaced: the probe's
// output through provision.FactsScript and ParseFacts gives the same Leftovers (go test -update
// rewrites the files).
func TestInspectSameLeftovers(t *testing.T) {
	fullMarker := map[string]string{
		"id": testID + "\n", "started": "1764565904.123456789\n", "deadline": "1764566034\n",
		"units": "etcd.service\nhaproxy.service\n", "faults": "kill etcd.service\n  drop tcp ports 2379,2380  \n\nkill haproxy.service\n",
		"iptables": "v4\nv6\n",
	}
	chains := func(s *sandbox) {
		for _, tool := range []string{"iptables", "ip6tables"} {
			s.write(tool+"/chain-HACTL-DRILL", "-A HACTL-DRILL -i lo -j RETURN\n-A HACTL-DRILL -p tcp --dport 2379 -j DROP\n")
			s.write(tool+"/builtin-INPUT", "-A INPUT -j HACTL-DRILL\n-A INPUT -p tcp --dport 22 -j ACCEPT\n")
			s.write(tool+"/builtin-OUTPUT", "-A OUTPUT -j HACTL-DRILL\n")
		}
	}
	for _, tc := range []struct {
		name  string
		units []string
		setup func(*sandbox)
		// hide are fakes removed from the sandbox (the case is skipped when the machine has the
		// real command in /usr/bin or /bin).
		hide []string
	}{
		{name: "clean", units: []string{"etcd.service", "haproxy.service"}, setup: func(s *sandbox) {
			s.setUnit("etcd.service", "active")
			s.write("units/haproxy.service.notfound", "")
		}},
		{name: "clean-no-units", setup: func(*sandbox) {}},
		{name: "full", units: []string{"etcd.service", "haproxy.service", "keepalived.service"}, setup: func(s *sandbox) {
			chains(s)
			s.writeMarker(fullMarker)
			s.setUnit("hactl-drill-restore.timer", "active")
			s.setUnit("etcd.service", "failed")
			s.setUnit("keepalived.service", "active")
		}},
		{name: "marker-empty", units: []string{"etcd.service"}, setup: func(s *sandbox) {
			s.writeMarker(map[string]string{"id": "", "units": "etcd.service\n"})
		}},
		{name: "marker-words", units: []string{"etcd.service"}, setup: func(s *sandbox) {
			s.writeMarker(map[string]string{"id": "a id b\nsecond line\n", "faults": "kill etcd.service\n", "units": "\n  etcd.service\n"})
			s.setUnit("etcd.service", "activating")
		}},
		{name: "chain-no-marker", setup: func(s *sandbox) {
			s.write("iptables/chain-HACTL-DRILL", "-A HACTL-DRILL -j DROP\n")
			s.write("iptables/builtin-INPUT", "-A INPUT -j HACTL-DRILL\n-A INPUT -j HACTL-DRILL\n")
			s.write("iptables/builtin-OUTPUT", "-A OUTPUT -j HACTL-DRILL\n")
		}},
		{name: "chain-empty", setup: func(s *sandbox) { s.write("ip6tables/chain-HACTL-DRILL", "") }},
		{name: "deadman-failed", setup: func(s *sandbox) { s.setUnit("hactl-drill-restore.service", "failed") }},
		{name: "deadman-running", setup: func(s *sandbox) {
			s.writeMarker(fullMarker)
			s.setUnit("hactl-drill-restore.timer", "active")
			s.setUnit("hactl-drill-restore.service", "activating")
		}},
		{name: "deadman-deactivating", setup: func(s *sandbox) { s.setUnit("hactl-drill-restore.service", "deactivating") }},
		{name: "ip6tables-unreadable", setup: func(s *sandbox) { s.write("ip6tables.broken", "") }},
		{name: "iptables-unreadable", setup: func(s *sandbox) { s.write("iptables.broken", ""); s.write("ip6tables.broken", "") }},
		{name: "ip6tables-absent", hide: []string{"ip6tables"}, setup: func(*sandbox) {}},
		{name: "iptables-absent", hide: []string{"iptables", "ip6tables"}, setup: func(s *sandbox) { s.writeMarker(fullMarker) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSandbox(t)
			for _, c := range tc.hide {
				for _, d := range []string{"/usr/bin", "/bin"} {
					if _, err := os.Stat(filepath.Join(d, c)); err == nil {
						t.Skipf("%s/%s exists: the sandbox cannot hide it", d, c)
					}
				}
				if err := os.Remove(filepath.Join(s.bin, c)); err != nil {
					t.Fatal(err)
				}
			}
			tc.setup(s)
			got, err := json.MarshalIndent(viewOf(s.inspect(tc.units...)), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, filepath.Join("testdata", "inspect", tc.name+".json"), append(got, '\n'), "go test ./drill/fault -update")
		})
	}
}
