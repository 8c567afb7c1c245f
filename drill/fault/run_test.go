package fault

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSandboxKillRestore: kill-leader --method process on one member, then the put-back, twice.
func TestSandboxKillRestore(t *testing.T) {
	s := newSandbox(t)
	s.setUnit("etcd.service", "active")
	before := time.Now().Add(-time.Second)
	out, code := s.apply(killFault())
	if code != 0 {
		t.Fatalf("apply exited %d:\n%s", code, out)
	}
	r, err := ParseApply(out)
	if err != nil {
		t.Fatalf("ParseApply: %v\n%s", err, out)
	}
	if r.DrillID != testID || r.MarkerDir != s.p.dir || r.DeadmanTimer != "hactl-drill-restore.timer" ||
		!slices.Equal(r.Killed, []string{"etcd.service"}) || !slices.Equal(r.Held, []string{"etcd.service"}) ||
		len(r.Stopped) != 0 || len(r.IPTables) != 0 || len(r.Skipped) != 0 {
		t.Errorf("ParseApply = %+v\n%s", r, out)
	}
	if r.FaultStart.Before(before) || r.FaultEnd.Before(r.FaultStart) || time.Since(r.FaultEnd) < 0 {
		t.Errorf("fault times %v .. %v", r.FaultStart, r.FaultEnd)
	}
	if d := r.DeadmanAt.Sub(r.FaultStart); d < 128*time.Second || d > 132*time.Second {
		t.Errorf("deadman fires %v after the fault, want ~130s", d)
	}
	log := s.log()
	// Write-ahead: the marker listed the unit and the deadman was armed when the kill ran.
	if i := indexOf(log, "marker-at-kill"); i < 0 || log[i] != "marker-at-kill units=etcd.service, deadman=active" {
		t.Errorf("at the kill: %q", log)
	}
	mustOrder(t, log, "systemd-run --unit=hactl-drill-restore --description=hactl drill "+testID+": deadman put-back --on-active=130s --timer-property=AccuracySec=1s /bin/sh "+s.p.dir+"/restore.sh --deadman",
		"systemctl kill --signal=SIGKILL etcd.service", "systemctl stop etcd.service")
	if s.unit("etcd.service") != "inactive" {
		t.Errorf("etcd.service is %s during the hold", s.unit("etcd.service"))
	}
	for f, want := range map[string]string{"id": testID + "\n", "units": "etcd.service\n", "faults": "kill etcd.service\n", "iptables": ""} {
		b, err := os.ReadFile(filepath.Join(s.p.dir, f))
		if err != nil || string(b) != want {
			t.Errorf("marker %s = %q, %v; want %q", f, b, err, want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(s.p.dir, "restore.sh")); string(b) != restoreScript(s.p) {
		t.Error("marker restore.sh is not the restore script")
	}

	l := s.inspect("etcd.service")
	if !l.Any() || l.Marker == nil || l.Marker.DrillID != testID || l.DeadmanTimer != "active" ||
		!slices.Equal(l.Marker.Units, []string{"etcd.service"}) || !slices.Equal(l.Marker.Faults, []string{"kill etcd.service"}) ||
		l.Marker.Started.IsZero() || l.Marker.Deadline.IsZero() {
		t.Errorf("inspect = %+v", l)
	}
	d := strings.Join(l.Describe(), "\n")
	for _, want := range []string{"drill marker /run/hactl-drill present: drill " + testID + " started ", "kill etcd.service; starts etcd.service again on put-back",
		"deadman hactl-drill-restore.timer active: the host puts itself back at ", "etcd.service inactive (stopped by drill " + testID + ")"} {
		if !strings.Contains(d, want) {
			t.Errorf("Describe lacks %q:\n%s", want, d)
		}
	}

	// A second drill is refused while this one is on the host.
	_, stderr, code := s.shErr(mustApply(t, killFault(), s.p))
	if code != ExitNotClean || !strings.Contains(stderr, "drill "+testID+" left its marker") {
		t.Errorf("second apply: exit %d, stderr %q", code, stderr)
	}

	out, code = s.restore()
	if code != 0 {
		t.Fatalf("restore exited %d:\n%s", code, out)
	}
	for _, want := range []string{"restored deadman hactl-drill-restore.timer stopped", "restored start etcd.service", "restored marker removed (drill " + testID + ")"} {
		if !hasLine(out, want) {
			t.Errorf("restore output lacks %q:\n%s", want, out)
		}
	}
	if rr := ParseRestore(out); len(rr.Left) != 0 || rr.NothingToDo || len(rr.Restored) != 3 {
		t.Errorf("ParseRestore = %+v", rr)
	}
	log = s.log()
	mustOrder(t, log, "systemctl stop hactl-drill-restore.timer", "systemctl reset-failed etcd.service", "systemctl start etcd.service")
	if s.unit("etcd.service") != "active" || s.markerExists() {
		t.Errorf("after restore: etcd %s, marker exists %v", s.unit("etcd.service"), s.markerExists())
	}

	// Idempotent: the second run finds nothing.
	out, code = s.restore()
	if code != 0 || strings.TrimSpace(out) != "nothing-to-do" {
		t.Errorf("second restore: exit %d:\n%s", code, out)
	}
	if l := s.inspect("etcd.service"); l.Any() {
		t.Errorf("leftovers after restore: %q", l.Describe())
	}
}

func mustApply(t *testing.T, f Fault, p paths) string {
	t.Helper()
	s, err := applyScript(f, p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSandboxIsolate: the iptables chain and jumps, inspected and removed (v4 and v6).
func TestSandboxIsolate(t *testing.T) {
	s := newSandbox(t)
	// Rules of the host's own, which must stay.
	s.write("iptables/builtin-INPUT", "-A INPUT -p tcp --dport 22 -j ACCEPT\n")
	s.write("ip6tables/builtin-INPUT", "")
	out, code := s.apply(isolateFault())
	if code != 0 {
		t.Fatalf("apply exited %d:\n%s", code, out)
	}
	r, err := ParseApply(out)
	if err != nil || !slices.Equal(r.IPTables, []string{"v4", "v6"}) || len(r.Killed)+len(r.Stopped) != 0 {
		t.Fatalf("ParseApply = %+v, %v\n%s", r, err, out)
	}
	in, _ := s.table("iptables", "INPUT")
	if in != "-A INPUT -j HACTL-DRILL\n-A INPUT -p tcp --dport 22 -j ACCEPT\n" {
		t.Errorf("INPUT = %q: the jump is not first", in)
	}
	chain6, _ := s.table("ip6tables", Chain)
	want6 := strings.Join([]string{
		"-A HACTL-DRILL -i lo -j RETURN", "-A HACTL-DRILL -o lo -j RETURN",
		"-A HACTL-DRILL -p tcp --dport 22 -j RETURN", "-A HACTL-DRILL -p tcp --sport 22 -j RETURN",
		"-A HACTL-DRILL -p icmpv6 --icmpv6-type 133 -j RETURN", "-A HACTL-DRILL -p icmpv6 --icmpv6-type 134 -j RETURN",
		"-A HACTL-DRILL -p icmpv6 --icmpv6-type 135 -j RETURN", "-A HACTL-DRILL -p icmpv6 --icmpv6-type 136 -j RETURN",
		"-A HACTL-DRILL -j DROP", ""}, "\n")
	if chain6 != want6 {
		t.Errorf("ip6tables chain:\n%s\nwant:\n%s", chain6, want6)
	}
	l := s.inspect()
	if len(l.Chains) != 2 || l.Chains[0] != (ChainState{"v4", "present", 5, 2}) || l.Chains[1] != (ChainState{"v6", "present", 9, 2}) {
		t.Errorf("inspect chains = %+v", l.Chains)
	}
	if d := l.Describe(); !slices.Contains(d, "iptables chain HACTL-DRILL present: 5 rules, 2 jumps from INPUT/OUTPUT (drill "+testID+")") {
		t.Errorf("Describe = %q", d)
	}
	if !slices.Equal(l.Marker.IPTables, []string{"v4", "v6"}) || !slices.Equal(l.Marker.Faults, []string{"isolate except ssh port 22"}) {
		t.Errorf("marker = %+v", l.Marker)
	}

	out, code = s.restore()
	if code != 0 || !hasLine(out, "restored iptables v4") || !hasLine(out, "restored iptables v6") {
		t.Fatalf("restore exited %d:\n%s", code, out)
	}
	in, _ = s.table("iptables", "INPUT")
	out4, _ := s.table("iptables", "OUTPUT")
	if in != "-A INPUT -p tcp --dport 22 -j ACCEPT\n" || out4 != "" {
		t.Errorf("after restore INPUT = %q, OUTPUT = %q", in, out4)
	}
	for _, tool := range []string{"iptables", "ip6tables"} {
		if _, ok := s.table(tool, Chain); ok {
			t.Errorf("%s chain still there", tool)
		}
	}
	if l := s.inspect(); l.Any() {
		t.Errorf("leftovers: %q", l.Describe())
	}
	if out, code := s.restore(); code != 0 || strings.TrimSpace(out) != "nothing-to-do" {
		t.Errorf("second restore: %d\n%s", code, out)
	}
}

// TestSandboxLeftChainWithoutMarker: a chain with doubled jumps and no marker (e.g. a crash
// before the marker was cleaned up by hand) is refused by apply and removed by restore.
func TestSandboxLeftChainWithoutMarker(t *testing.T) {
	s := newSandbox(t)
	s.write("iptables/chain-HACTL-DRILL", "-A HACTL-DRILL -j DROP\n")
	s.write("iptables/builtin-INPUT", "-A INPUT -j HACTL-DRILL\n-A INPUT -j HACTL-DRILL\n")
	s.write("iptables/builtin-OUTPUT", "-A OUTPUT -j HACTL-DRILL\n")
	l := s.inspect()
	if d := l.Describe(); !slices.Equal(d, []string{"iptables chain HACTL-DRILL present: 1 rules, 3 jumps from INPUT/OUTPUT (no drill marker)"}) {
		t.Errorf("Describe = %q", d)
	}
	_, stderr, code := s.shErr(mustApply(t, portsFault(), s.p))
	if code != ExitNotClean || !strings.Contains(stderr, "iptables chain HACTL-DRILL is present") || s.markerExists() {
		t.Errorf("apply on a dirty host: exit %d, %q", code, stderr)
	}
	out, code := s.restore()
	if code != 0 || strings.TrimSpace(out) != "restored iptables v4" {
		t.Errorf("restore: %d\n%s", code, out)
	}
	in, _ := s.table("iptables", "INPUT")
	if in != "" {
		t.Errorf("INPUT = %q", in)
	}
}

// TestSandboxStartFails: a unit that does not start again is a "left" line, exit 1, and the marker
// is kept so that a second restore retries it.
func TestSandboxStartFails(t *testing.T) {
	s := newSandbox(t)
	s.setUnit("etcd.service", "active")
	s.setUnit("haproxy.service", "active")
	f := killFault()
	f.KillUnits = append(f.KillUnits, "haproxy.service")
	f.DropPorts = []int{2379, 2380}
	if out, code := s.apply(f); code != 0 {
		t.Fatalf("apply: %d\n%s", code, out)
	}
	s.write("units/etcd.service.failstart", "")
	s.write("iptables.fail", "-w -X HACTL-DRILL")
	out, code := s.restore()
	if code != 1 {
		t.Fatalf("restore exited %d, want 1:\n%s", code, out)
	}
	r := ParseRestore(out)
	if len(r.Left) != 2 || !strings.HasPrefix(r.Left[0], "iptables v4: chain HACTL-DRILL still present: iptables: injected failure") ||
		!strings.HasPrefix(r.Left[1], "unit etcd.service: systemctl start failed (exit 1): Job for etcd.service failed") || !r.KeptMarker {
		t.Errorf("ParseRestore = %+v\n%s", r, out)
	}
	if !slices.Contains(r.Restored, "start haproxy.service") || !slices.Contains(r.Restored, "iptables v6") {
		t.Errorf("restored = %q", r.Restored)
	}
	b, _ := os.ReadFile(filepath.Join(s.p.dir, "units"))
	if string(b) != "etcd.service\n" {
		t.Errorf("kept units = %q", b)
	}
	l := s.inspect("etcd.service", "haproxy.service")
	d := strings.Join(l.Describe(), "\n")
	for _, want := range []string{"iptables chain HACTL-DRILL present", "starts etcd.service again", "etcd.service failed (stopped by drill " + testID + ")"} {
		if !strings.Contains(d, want) {
			t.Errorf("Describe lacks %q:\n%s", want, d)
		}
	}
	if strings.Contains(d, "haproxy.service active") || strings.Contains(d, "starts etcd.service, haproxy") {
		t.Errorf("haproxy reported:\n%s", d)
	}

	s.remove("units/etcd.service.failstart")
	s.remove("iptables.fail")
	out, code = s.restore()
	if code != 0 || !hasLine(out, "restored start etcd.service") || !hasLine(out, "restored iptables v4") || hasLine(out, "restored start haproxy.service") ||
		!hasLine(out, "restored marker removed (drill "+testID+")") {
		t.Errorf("second restore: %d\n%s", code, out)
	}
	if l := s.inspect("etcd.service", "haproxy.service"); l.Any() {
		t.Errorf("leftovers: %q", l.Describe())
	}
}

// TestSandboxDeadman: the saved restore script run as the deadman puts the host back and leaves
// its own timer alone; a later manual restore then has nothing to do.
func TestSandboxDeadman(t *testing.T) {
	s := newSandbox(t)
	s.setUnit("keepalived.service", "active")
	if out, code := s.apply(stopFault()); code != 0 {
		t.Fatalf("apply: %d\n%s", code, out)
	}
	if s.unit("keepalived.service") != "inactive" {
		t.Fatal("keepalived not stopped")
	}
	s.log()
	out, code := s.sh(`exec /bin/sh "$1/restore.sh" --deadman`, s.p.dir)
	if code != 0 || !hasLine(out, "restored start keepalived.service") || !hasLine(out, "restored marker removed (drill "+testID+")") {
		t.Fatalf("deadman restore: %d\n%s", code, out)
	}
	for _, l := range s.log() {
		if strings.Contains(l, "hactl-drill-restore") {
			t.Errorf("the deadman touched its own units: %q", l)
		}
	}
	// Its timer is still "active" in the fake (systemd ends it when the service exits); a manual
	// restore stops it.
	out, code = s.restore()
	if code != 0 || strings.TrimSpace(out) != "restored deadman hactl-drill-restore.timer stopped" {
		t.Errorf("manual restore after the deadman: %d\n%s", code, out)
	}
}

// TestSandboxRollback: a failure after the marker puts everything back and exits 1.
func TestSandboxRollback(t *testing.T) {
	for name, setup := range map[string]func(*sandbox){
		"iptables":    func(s *sandbox) { s.write("ip6tables.fail", "-w -A HACTL-DRILL -j DROP") },
		"systemd-run": func(s *sandbox) { s.write("systemd-run.fail", "") },
		"stop":        func(s *sandbox) { s.write("units/etcd.service.failstart", "") }, // restore cannot start it
	} {
		t.Run(name, func(t *testing.T) {
			s := newSandbox(t)
			s.setUnit("etcd.service", "active")
			setup(s)
			f := isolateFault()
			f.KillUnits = []string{"etcd.service"}
			if name == "stop" {
				f.StopUnits = []string{"missing.service"} // fails at the check: nothing changed
				s.write("units/missing.service.notfound", "")
			}
			out, stderr, code := s.shErr(mustApply(t, f, s.p))
			if code != 1 {
				t.Fatalf("apply exited %d, want 1:\n%s\n%s", code, out, stderr)
			}
			if name == "stop" {
				if !strings.Contains(stderr, `unit missing.service is not loaded (LoadState not-found)`) || s.markerExists() || out != "" {
					t.Errorf("check failure changed something or said nothing: %q %q", out, stderr)
				}
				return
			}
			r, err := ParseApply(out)
			if err == nil || r.Rollback == "" || len(r.Restore.Left) != 0 || !slices.Contains(r.Restore.Restored, "marker removed (drill "+testID+")") {
				t.Errorf("ParseApply = %+v, %v\n%s", r, err, out)
			}
			if s.markerExists() || s.unit("etcd.service") != "active" || s.unit("hactl-drill-restore.timer") == "active" {
				t.Errorf("after rollback: marker %v, etcd %s, timer %s", s.markerExists(), s.unit("etcd.service"), s.unit("hactl-drill-restore.timer"))
			}
			for _, tool := range []string{"iptables", "ip6tables"} {
				if _, ok := s.table(tool, Chain); ok {
					t.Errorf("%s chain left", tool)
				}
			}
			if l := s.inspect("etcd.service"); l.Any() {
				t.Errorf("leftovers: %q", l.Describe())
			}
		})
	}
}

// TestSandboxSkips: a unit that was not running is neither killed nor started again; a broken or
// missing ip6tables is skipped with a tag line and the IPv4 rules still apply.
func TestSandboxSkips(t *testing.T) {
	s := newSandbox(t)
	s.setUnit("etcd.service", "failed")
	s.write("ip6tables.broken", "")
	f := portsFault()
	f.KillUnits = []string{"etcd.service"}
	out, code := s.apply(f)
	if code != 0 {
		t.Fatalf("apply: %d\n%s", code, out)
	}
	r, err := ParseApply(out)
	if err != nil || len(r.Killed) != 0 || !slices.Equal(r.IPTables, []string{"v4"}) || len(r.Skipped) != 2 ||
		r.Skipped[0] != "kill etcd.service: failed" || !strings.HasPrefix(r.Skipped[1], "ip6tables: ip6tables v1.8.9 (legacy): can't initialize") {
		t.Errorf("ParseApply = %+v, %v\n%s", r, err, out)
	}
	// apply always writes the list (empty here): a missing one is not "nothing recorded".
	if b, err := os.ReadFile(filepath.Join(s.p.dir, "units")); err != nil || len(b) != 0 {
		t.Errorf("units = %q (%v), want an empty list", b, err)
	}
	l := s.inspect()
	if l.Chains[1].State != "unreadable" || !slices.Equal(l.Unchecked(), []string{"ip6tables: unreadable"}) {
		t.Errorf("inspect = %+v", l)
	}
	out, code = s.restore()
	if code != 0 || strings.Contains(out, "start") {
		t.Errorf("restore: %d\n%s", code, out)
	}

	// No ip6tables at all.
	if err := os.Remove(filepath.Join(s.bin, "ip6tables")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/usr/bin/ip6tables"); err == nil {
		t.Skip("/usr/bin/ip6tables exists: the sandbox cannot hide it")
	}
	out, code = s.apply(portsFault())
	if code != 0 || !hasLine(out, "skipped ip6tables: not found") || !hasLine(out, "applied iptables v4") {
		t.Errorf("apply without ip6tables: %d\n%s", code, out)
	}
	if l := s.inspect(); l.Chains[1].State != "absent" {
		t.Errorf("inspect = %+v", l.Chains)
	}
	if out, code := s.restore(); code != 0 || !hasLine(out, "restored iptables v4") {
		t.Errorf("restore: %d\n%s", code, out)
	}
}

// TestSandboxLock: a restore waits for the lock another drill command holds.
func TestSandboxLock(t *testing.T) {
	s := newSandbox(t)
	out, code := s.sh(`(exec 9>>"$1"; flock 9; touch "$1.held"; sleep 1) &
while [ ! -e "$1.held" ]; do sleep 0.05; done
start=$(date +%s%N)
sh -c "$2"; rc=$?
end=$(date +%s%N)
echo "rc=$rc waited=$(( (end - start) / 1000000 ))"`, s.p.lock, restoreScript(s.p))
	if code != 0 || !strings.Contains(out, "nothing-to-do") || !strings.Contains(out, "rc=0") {
		t.Fatalf("restore: %d\n%s", code, out)
	}
	_, ms, _ := strings.Cut(strings.TrimSpace(out[strings.LastIndex(out, "waited="):]), "=")
	if n, err := strconv.Atoi(ms); err != nil || n < 500 {
		t.Errorf("the restore did not wait for the lock: %s", out)
	}
}
