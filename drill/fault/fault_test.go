package fault

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hactl/hactl/internal/golden"
	"github.com/hactl/hactl/provision"
)

const testID = "20261201-051144-a3f9"

func killFault() Fault {
	return Fault{DrillID: testID, KillUnits: []string{"etcd.service"}, Deadman: 2*time.Minute + 10*time.Second}
}

func isolateFault() Fault {
	return Fault{DrillID: testID, Isolate: true, SSHPort: 22, Deadman: 130 * time.Second}
}

func portsFault() Fault {
	return Fault{DrillID: testID, DropPorts: []int{2380, 2379}, Deadman: 130 * time.Second}
}

func stopFault() Fault {
	return Fault{DrillID: testID, StopUnits: []string{"keepalived.service"}, Deadman: 130 * time.Second}
}

// everyScript is every script shape the package renders, by name.
func everyScript(t *testing.T) map[string]string {
	t.Helper()
	all := Fault{DrillID: testID, KillUnits: []string{"etcd.service", "haproxy.service"}, StopUnits: []string{"keepalived.service"},
		DropPorts: []int{2379, 2380}, Isolate: true, SSHPort: 2222, Deadman: 1500 * time.Millisecond}
	out := map[string]string{
		"restore":       RestoreScript(),
		"inspect":       provision.FactsScript(InspectRequest([]string{"etcd.service", "haproxy.service"})),
		"inspect-none":  provision.FactsScript(InspectRequest(nil)),
		"inspect-quote": provision.FactsScript(InspectRequest([]string{`weird'name\x2d.service`})),
	}
	for name, f := range map[string]Fault{"kill": killFault(), "isolate": isolateFault(), "ports": portsFault(), "stop": stopFault(), "all": all} {
		s, err := ApplyScript(f)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out["apply-"+name] = s
	}
	return out
}

// TestScriptsParse: every rendered script is valid for sh (dash here) and bash. A shell this
// machine lacks is logged as not checked, or fails the test with HACTL_REQUIRE_BASH=1 (make unit
// sets it: its recipes run bash anyway).
func TestScriptsParse(t *testing.T) {
	for name, s := range everyScript(t) {
		for _, shell := range []string{"/bin/sh", "bash"} {
			path, err := exec.LookPath(shell)
			if err != nil {
				if os.Getenv("HACTL_REQUIRE_BASH") == "1" {
					t.Fatalf("%s not found: the scripts are not checked with it (HACTL_REQUIRE_BASH=1)", shell)
				}
				t.Logf("%s not found: skipped", shell)
				continue
			}
			cmd := exec.Command(path, "-n")
			cmd.Stdin = strings.NewReader(s)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s -n %s: %v\n%s\n--- script:\n%s", shell, name, err, out, s)
			}
		}
	}
}

// TestGolden compares the rendered scripts with testdata/*.golden (go test -update rewrites them).
func TestGolden(t *testing.T) {
	for name, s := range everyScript(t) {
		if strings.HasPrefix(name, "inspect-") || name == "apply-stop" || name == "apply-ports" {
			continue
		}
		golden.Check(t, filepath.Join("testdata", name+".golden"), []byte(s), "go test ./drill/fault -update")
	}
}

// lines returns s's non-empty trimmed lines.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// mustOrder fails unless each of subs appears in lines, each after the one before it.
func mustOrder(t *testing.T, ls []string, subs ...string) {
	t.Helper()
	last := -1
	for _, sub := range subs {
		i := slices.IndexFunc(ls[last+1:], func(l string) bool { return strings.Contains(l, sub) })
		if i < 0 {
			t.Fatalf("%q not found after line %d (%q)", sub, last, subs)
		}
		last += 1 + i
	}
}

func TestApplyScriptIsolate(t *testing.T) {
	s, err := ApplyScript(isolateFault())
	if err != nil {
		t.Fatal(err)
	}
	ls := lines(s)
	for _, fam := range []string{"iptables", "ip6tables"} {
		mustOrder(t, ls,
			`mkdir -m 0700 "$dir"`,
			"x "+fam+" -w -N HACTL-DRILL",
			"x "+fam+" -w -A HACTL-DRILL -i lo -j RETURN",
			"x "+fam+" -w -A HACTL-DRILL -o lo -j RETURN",
			"x "+fam+" -w -A HACTL-DRILL -p tcp --dport 22 -j RETURN",
			"x "+fam+" -w -A HACTL-DRILL -p tcp --sport 22 -j RETURN",
			"x "+fam+" -w -A HACTL-DRILL -j DROP",
			"time fault-start",
			"x "+fam+" -w -I INPUT 1 -j HACTL-DRILL",
			"x "+fam+" -w -I OUTPUT 1 -j HACTL-DRILL",
			"time fault-end")
	}
	mustOrder(t, ls, "x ip6tables -w -A HACTL-DRILL -p tcp --sport 22 -j RETURN",
		"x ip6tables -w -A HACTL-DRILL -p icmpv6 --icmpv6-type 135 -j RETURN",
		"x ip6tables -w -A HACTL-DRILL -j DROP")
	if strings.Contains(s, "iptables -w -A HACTL-DRILL -p icmpv6") {
		t.Error("IPv4 chain has ICMPv6 rules")
	}
	if strings.Contains(s, "-j ACCEPT") {
		t.Error("a rule accepts: the drill must never open what the host's firewall closes")
	}
	mustOrder(t, ls, `mkdir -m 0700 "$dir"`, `>"$dir/id"`, `>"$dir/units"`, `say v4 >>"$dir/iptables"`, "systemd-run", "time fault-start")
}

func TestApplyScriptPorts(t *testing.T) {
	s, err := ApplyScript(portsFault())
	if err != nil {
		t.Fatal(err)
	}
	ls := lines(s)
	for _, fam := range []string{"iptables", "ip6tables"} {
		mustOrder(t, ls,
			"x "+fam+" -w -A HACTL-DRILL -i lo -j RETURN",
			"x "+fam+" -w -A HACTL-DRILL -p tcp --dport 2380 -j DROP",
			"x "+fam+" -w -A HACTL-DRILL -p tcp --sport 2380 -j DROP",
			"x "+fam+" -w -A HACTL-DRILL -p tcp --dport 2379 -j DROP",
			"x "+fam+" -w -A HACTL-DRILL -p tcp --sport 2379 -j DROP",
			"time fault-start",
			"x "+fam+" -w -I INPUT 1 -j HACTL-DRILL",
			"x "+fam+" -w -I OUTPUT 1 -j HACTL-DRILL")
	}
	if strings.Contains(s, "-A HACTL-DRILL -j DROP") {
		t.Error("ports fault drops everything")
	}
	if strings.Contains(s, "x systemctl") {
		t.Error("ports fault touches units")
	}
}

func TestApplyScriptKill(t *testing.T) {
	s, err := ApplyScript(killFault())
	if err != nil {
		t.Fatal(err)
	}
	ls := lines(s)
	mustOrder(t, ls,
		"systemctl show -p LoadState etcd.service",
		"systemctl is-active etcd.service",
		`mkdir -m 0700 "$dir"`,
		`cat >"$dir/restore.sh" <<'HACTL_DRILL_RESTORE_EOF'`,
		"HACTL_DRILL_RESTORE_EOF",
		`printf '%s\n' "$id" >"$dir/id"`,
		`printf '%s\n' etcd.service >>"$dir/units"`,
		`say "marker $dir drill $id"`,
		"systemd-run --unit=\"$unit\"",
		"time fault-start",
		"x systemctl kill --signal=SIGKILL etcd.service",
		"time fault-end",
		"x systemctl stop etcd.service",
		"exit 0")
	for _, want := range []string{
		"--on-active=130s --timer-property=AccuracySec=1s /bin/sh \"$dir/restore.sh\" --deadman",
		"id=20261201-051144-a3f9",
		"dir=/run/hactl-drill",
		"lock=/run/hactl-drill.lock",
		"unit=hactl-drill-restore",
		`PATH="$PATH:/usr/sbin:/sbin"`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("apply script lacks %q", want)
		}
	}
	if strings.Contains(s, "iptables -w -N") {
		t.Error("kill fault adds iptables rules")
	}
	// The saved restore script is RestoreScript's text, and no line of it ends the here-document.
	r := RestoreScript()
	if !strings.Contains(s, "<<'"+restoreEOF+"'\n"+r+restoreEOF+"\n") {
		t.Error("the apply script does not save RestoreScript() verbatim")
	}
	if slices.Contains(strings.Split(r, "\n"), restoreEOF) {
		t.Error("the restore script contains the here-document delimiter")
	}
}

func TestFaultValidate(t *testing.T) {
	ok := killFault()
	for _, tc := range []struct {
		name string
		edit func(*Fault)
		want string
	}{
		{"id", func(f *Fault) { f.DrillID = "Drill 1" }, "drillID"},
		{"id-empty", func(f *Fault) { f.DrillID = "" }, "drillID"},
		{"id-dash", func(f *Fault) { f.DrillID = "-x" }, "drillID"},
		{"unit", func(f *Fault) { f.KillUnits = []string{"etcd"} }, `killUnits[0] "etcd"`},
		{"unit-dash", func(f *Fault) { f.KillUnits = []string{"-etcd.service"} }, "killUnits[0]"},
		{"unit-shell", func(f *Fault) { f.StopUnits = []string{"a;b.service"} }, "stopUnits[0]"},
		{"dup", func(f *Fault) { f.StopUnits = []string{"etcd.service"} }, "already in killUnits[0]"},
		{"deadman-unit", func(f *Fault) { f.StopUnits = []string{"hactl-drill-restore.timer"} }, "deadman"},
		{"port", func(f *Fault) { f.DropPorts = []int{0} }, "dropPorts[0]"},
		{"port-dup", func(f *Fault) { f.DropPorts = []int{2379, 2379} }, "dropPorts[1] 2379: listed twice"},
		{"port-ssh", func(f *Fault) { f.DropPorts = []int{22}; f.SSHPort = 22 }, "SSH port"},
		{"isolate-ssh", func(f *Fault) { f.Isolate = true }, "sshPort 0"},
		{"deadman", func(f *Fault) { f.Deadman = 0 }, "deadman"},
		{"nothing", func(f *Fault) { f.KillUnits = nil }, "nothing to do"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := ok
			tc.edit(&f)
			err := f.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tc.want)
			}
			if _, err := ApplyScript(f); err == nil {
				t.Error("ApplyScript accepted an invalid fault")
			}
		})
	}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := (Fault{Deadman: 1500 * time.Millisecond}).deadmanSeconds(); got != 2 {
		t.Errorf("deadmanSeconds(1.5s) = %d, want 2 (rounded up)", got)
	}
}

func TestParseHostTime(t *testing.T) {
	for in, want := range map[string]time.Time{
		"1764565904.123456789": time.Unix(1764565904, 123456789),
		"1764565904.5":         time.Unix(1764565904, 500000000),
		"1764565904":           time.Unix(1764565904, 0),
	} {
		got, err := parseHostTime(in)
		if err != nil || !got.Equal(want) {
			t.Errorf("parseHostTime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "abc", "1764565904.N", "1764565904.", "1.1234567890"} {
		if _, err := parseHostTime(in); err == nil {
			t.Errorf("parseHostTime(%q) did not fail", in)
		}
	}
}

func TestParseApplyIncomplete(t *testing.T) {
	r, err := ParseApply("marker /run/hactl-drill drill x\ntime fault-start 1.5\napplied kill etcd.service\n")
	if err == nil || !strings.Contains(err.Error(), "no fault-end") {
		t.Fatalf("err = %v", err)
	}
	if r.DrillID != "x" || len(r.Killed) != 1 || !r.FaultStart.Equal(time.Unix(1, 5e8)) {
		t.Errorf("partial result lost: %+v", r)
	}
}

// inspectOutput reads a facts command's output asking about units as InspectFrom does.
func inspectOutput(units []string, out string) (Leftovers, error) {
	f, err := provision.ParseFacts(InspectRequest(units), []byte(out), time.Now(), time.Now())
	if err != nil {
		return Leftovers{}, err
	}
	return InspectFrom(f, units)
}

// cleanFacts is the facts output of a clean host asked about etcd and haproxy: ip6tables absent,
// haproxy not installed.
const cleanFacts = "command=systemctl\n" +
	"unit=Id=hactl-drill-restore.timer\nunit=LoadState=not-found\nunit=ActiveState=inactive\nunit=\n" +
	"unit=Id=hactl-drill-restore.service\nunit=LoadState=not-found\nunit=ActiveState=inactive\nunit=\n" +
	"unit=Id=etcd.service\nunit=LoadState=loaded\nunit=ActiveState=inactive\nunit=\n" +
	"unit=Id=haproxy.service\nunit=LoadState=not-found\nunit=ActiveState=inactive\n" +
	"drill.iptables.v4=clean\ndrill.iptables.v6=absent\ndrill.marker=absent\nend=ok\n"

func TestInspectFromErrors(t *testing.T) {
	units := []string{"etcd.service"}
	for name, out := range map[string]string{
		"truncated": "drill.iptables.v4=clean\ndrill.marker=absent\n",
		"chain":     "drill.iptables.v4=present\ndrill.iptables.v4.rules=x\ndrill.iptables.v4.jumps=2\ndrill.iptables.v6=clean\ndrill.marker=absent\nend=ok\n",
		"family":    "drill.iptables.v5=clean\ndrill.iptables.v4=clean\ndrill.marker=absent\nend=ok\n",
		"state":     "drill.iptables.v4=chain\ndrill.iptables.v6=clean\ndrill.marker=absent\nend=ok\n",
		"unit":      "command=systemctl\nunit=Id=etcd.service\nunit=ActiveState=active\ndrill.iptables.v4=clean\ndrill.iptables.v6=clean\ndrill.marker=absent\nend=ok\n",
		"started":   "drill.iptables.v4=clean\ndrill.iptables.v6=clean\ndrill.marker=present\ndrill.marker.started=soon\nend=ok\n",
		"marker":    "drill.iptables.v4=clean\ndrill.iptables.v6=clean\ndrill.marker=maybe\nend=ok\n",
		"no probe":  "command=systemctl\nend=ok\n",
	} {
		if _, err := inspectOutput(units, out); err == nil {
			t.Errorf("%s: InspectFrom did not fail", name)
		}
	}
	// A cut-off command is provision's incomplete-output error.
	var ie *provision.IncompleteFactsError
	if _, err := inspectOutput(units, strings.TrimSuffix(cleanFacts, "end=ok\n")); !errors.As(err, &ie) {
		t.Errorf("truncated output: %v, want a *provision.IncompleteFactsError", err)
	}
	// What was read is returned with the error.
	l, err := inspectOutput(units, "drill.iptables.v4=present\ndrill.iptables.v4.rules=1\ndrill.iptables.v4.jumps=2\ndrill.marker=present\ndrill.marker.id=x\ndrill.marker.started=soon\nend=ok\n")
	if err == nil || !strings.Contains(err.Error(), "drill.marker.started") || !strings.Contains(err.Error(), "drill.iptables.v6") {
		t.Errorf("err = %v, want both malformed facts named", err)
	}
	if len(l.Chains) != 1 || l.Chains[0] != (ChainState{"v4", "present", 1, 2}) || l.Marker == nil || l.Marker.DrillID != "x" {
		t.Errorf("partial result lost: %+v", l)
	}

	l, err = inspectOutput([]string{"etcd.service", "haproxy.service"}, cleanFacts)
	if err != nil {
		t.Fatal(err)
	}
	if l.Any() {
		t.Errorf("clean host has leftovers (an inactive unit without a marker is not one): %q", l.Describe())
	}
	if len(l.Units) != 2 || l.Units[0] != (UnitState{"etcd.service", "inactive", "loaded"}) {
		t.Errorf("units = %+v", l.Units)
	}
	if got := l.Unchecked(); !slices.Equal(got, []string{"ip6tables: absent"}) {
		t.Errorf("Unchecked() = %q", got)
	}
}

// TestInspectFromSystemd: without systemctl no unit is reported and systemd is unchecked; a unit
// systemctl did not report is "unknown".
func TestInspectFromSystemd(t *testing.T) {
	const probe = "drill.iptables.v4=clean\ndrill.iptables.v6=clean\ndrill.marker=present\ndrill.marker.id=" + testID + "\ndrill.marker.unit=etcd.service\n"
	l, err := inspectOutput([]string{"etcd.service"}, probe+"end=ok\n")
	if err != nil {
		t.Fatal(err)
	}
	if l.DeadmanTimer != "" || l.DeadmanService != "" || len(l.Units) != 0 || !slices.Equal(l.Unchecked(), []string{"systemd: absent"}) {
		t.Errorf("without systemctl: %+v, Unchecked %q", l, l.Unchecked())
	}
	if d := l.Describe(); !slices.Equal(d, []string{"drill marker /run/hactl-drill present: drill " + testID + "; starts etcd.service again on put-back"}) {
		t.Errorf("Describe = %q", d)
	}
	l, err = inspectOutput([]string{"etcd.service"}, "command=systemctl\n"+probe+"end=ok\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []UnitState{{"etcd.service", "unknown", "unknown"}}
	if l.DeadmanTimer != "unknown" || l.DeadmanService != "unknown" || !slices.Equal(l.Units, want) || len(l.Unchecked()) != 0 {
		t.Errorf("systemctl reporting nothing: %+v", l)
	}
	if d := l.Describe(); !slices.Contains(d, "etcd.service unknown (stopped by drill "+testID+")") {
		t.Errorf("Describe = %q", d)
	}
}

// TestInspectRequest: one facts command asks for the deadman's and the units' states and carries
// the probe; merged with another request it is still one probe per name.
func TestInspectRequest(t *testing.T) {
	r := InspectRequest([]string{"etcd.service"})
	if !slices.Equal(r.Units, []string{"hactl-drill-restore.timer", "hactl-drill-restore.service", "etcd.service"}) ||
		!slices.Equal(r.Commands, []string{"systemctl"}) || len(r.Probes) != 1 {
		t.Errorf("InspectRequest = %+v", r)
	}
	m := r.Merge(InspectRequest([]string{"haproxy.service"}))
	if len(m.Probes) != 1 || !slices.Contains(m.Units, "haproxy.service") {
		t.Errorf("merged = %+v", m)
	}
	s := r.Probes[0].Script
	if !strings.HasPrefix(s, "(\n") || !strings.HasSuffix(s, ")\n") || !strings.Contains(s, `PATH="$PATH:/usr/sbin:/sbin"`) || !strings.Contains(s, "dir=/run/hactl-drill\n") {
		t.Errorf("probe script:\n%s", s)
	}
}

func TestParseRestore(t *testing.T) {
	r := ParseRestore("restored iptables v4\nleft unit etcd.service: systemctl start failed (exit 1): x\nkept marker /run/hactl-drill (drill a): run\nnoise\n")
	if !slices.Equal(r.Restored, []string{"iptables v4"}) || !slices.Equal(r.Left, []string{"unit etcd.service: systemctl start failed (exit 1): x"}) || !r.KeptMarker || r.NothingToDo {
		t.Errorf("ParseRestore = %+v", r)
	}
	if !ParseRestore("nothing-to-do\n").NothingToDo {
		t.Error("nothing-to-do not seen")
	}
}
