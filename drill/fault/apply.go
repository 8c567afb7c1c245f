package fault

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hactl/hactl/internal/shell"
)

// restoreEOF delimits the restore script inside the apply script (a quoted here-document).
const restoreEOF = "HACTL_DRILL_RESTORE_EOF"

// ApplyScript validates f and returns the script that applies it on the host. In order:
//
//  1. Checks, changing nothing: systemctl and systemd-run (and iptables when rules are needed)
//     exist; the host is clean — no marker, no HACTL-DRILL chain, no active deadman — else exit
//     [ExitNotClean] (3) with the reason on stderr; every unit to kill or stop is loaded (exit 1
//     if not). A unit that is not running (is-active not active/activating/reloading) is left
//     alone: "skipped kill <unit>: <state>", and not started again by the restore. ip6tables is
//     used when it can list its filter table, else "skipped ip6tables: <why>".
//  2. The marker, write-ahead: MarkerDir created with mkdir (atomic: a concurrent apply loses
//     and exits 3), restore.sh (the [RestoreScript] text), id, started (host time, date
//     +%s.%N), faults (one line each, e.g. "kill etcd.service"), units (the units to start
//     again, one per line), iptables (the families whose rules are about to be added: v4, v6),
//     deadline (unix seconds when the deadman fires).
//  3. The deadman: systemd-run --unit=hactl-drill-restore --on-active=<n>s
//     --timer-property=AccuracySec=1s /bin/sh MarkerDir/restore.sh --deadman.
//  4. The fault: chain HACTL-DRILL built (loopback returned first; with Isolate, TCP to and from
//     the SSH port returned, then everything dropped); "time fault-start <host time>"; jumps
//     inserted at position 1 of INPUT and OUTPUT ("applied iptables v4", "... v6"); units
//     killed with SIGKILL ("applied kill <unit>"), then units stopped ("applied stop <unit>");
//     "time fault-end <host time>"; then the killed units are stopped so that Restart= does not
//     bring them back ("applied hold <unit>").
//
// When a step after the marker fails, the script runs the saved restore script (its tag lines
// follow a "rollback <why>" line) and exits 1: the host is put back, or its "left" lines say
// what is not. The rules return (not accept) what they let through, so the host's own firewall
// still applies to it: a drill never opens anything. [ParseApply] reads the output.
func ApplyScript(f Fault) (string, error) { return applyScript(f, hostPaths) }

func applyScript(f Fault, p paths) (string, error) {
	if err := f.Validate(); err != nil {
		return "", err
	}
	var b strings.Builder
	kills, stops := unitVars(f)
	writeApplyChecks(&b, f, p, kills, stops)
	writeApplyMarker(&b, f, p, kills, stops)
	writeApplyDeadman(&b, f)
	writeApplyFault(&b, f, kills, stops)
	b.WriteString("exit 0\n")
	return b.String(), nil
}

// unitVar is a unit the script kills or stops: its name, the shell variable saying whether it was
// active ("k1", "s1", ...) and the verb of its "skipped" line.
type unitVar struct{ name, v, verb string }

// unitVars names f's units to kill and to stop, in order.
func unitVars(f Fault) (kills, stops []unitVar) {
	for i, u := range f.KillUnits {
		kills = append(kills, unitVar{u, fmt.Sprintf("k%d", i+1), "kill"})
	}
	for i, u := range f.StopUnits {
		stops = append(stops, unitVar{u, fmt.Sprintf("s%d", i+1), "stop"})
	}
	return kills, stops
}

// writeApplyChecks writes the script's prelude and step 1, the checks (nothing changes).
func writeApplyChecks(b *strings.Builder, f Fault, p paths, kills, stops []unitVar) {
	q := shell.Quote
	w := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	b.WriteString(prelude(p, "apply: checks, then the marker and the deadman, then the fault"))
	w("id=%s\n", q(f.DrillID))
	w(`fail() { say "hactl drill: $1" >&2; exit 1; }
notclean() { say "hactl drill: $1" >&2; exit %d; }
# rollback undoes everything with the saved restore script (after the marker exists).
rollback() {
  say "hactl drill: $1" >&2
  say "rollback $(oneline "$1")"
  exec 9>&-
  if [ -f "$dir/restore.sh" ]; then /bin/sh "$dir/restore.sh"; fi
  exit 1
}
x() { "$@" || rollback "$* failed (exit $?)"; }

# 1. Checks (nothing changes).
have systemctl || fail "systemctl not found: drills need systemd"
have systemd-run || fail "systemd-run not found: it schedules the deadman"
`, ExitNotClean)
	if f.usesIPTables() {
		b.WriteString(`have iptables || fail "iptables not found"
`)
	}
	w(`if have flock; then
  command exec 9>>"$lock" || fail "cannot open $lock"
  flock -w %d 9 || notclean "another hactl drill command holds $lock"
fi
if [ -e "$dir" ]; then
  other=$(head -n 1 "$dir/id" 2>/dev/null)
  notclean "drill ${other:-(unknown)} left its marker $dir on this host: put the host back first"
fi
for ipt in iptables ip6tables; do
  if have "$ipt" && "$ipt" -w -n -L "$chain" >/dev/null 2>&1; then
    notclean "$ipt chain $chain is present (without a drill marker): put the host back first"
  fi
done
st=$(systemctl is-active "$unit.timer" 2>/dev/null)
case "$st" in active|activating|reloading|refreshing) notclean "the deadman timer $unit.timer is $st: put the host back first";; esac
st=$(systemctl is-active "$unit.service" 2>/dev/null)
case "$st" in active|activating|deactivating|reloading|refreshing) notclean "the deadman $unit.service is $st (a put-back is running)";; esac
systemctl reset-failed "$unit.timer" "$unit.service" >/dev/null 2>&1
`, int(lockWait.Seconds()))
	for _, u := range append(kills[:len(kills):len(kills)], stops...) {
		w(`load=$(systemctl show -p LoadState %[1]s 2>/dev/null); load=${load#LoadState=}
[ "$load" = loaded ] || fail "unit "%[1]s" is not loaded (LoadState ${load:-unknown})"
st=$(systemctl is-active %[1]s 2>/dev/null)
case "$st" in active|activating|reloading|refreshing) %[2]s=yes ;; *) %[2]s=no; say "skipped %[3]s "%[1]s": ${st:-unknown}" ;; esac
`, q(u.name), u.v, u.verb)
	}
	if f.usesIPTables() {
		b.WriteString(`out=$(iptables -w -n -L INPUT 2>&1) || fail "iptables cannot list the filter table: $(oneline "$out")"
v6=no
if ! have ip6tables; then
  say "skipped ip6tables: not found"
elif out=$(ip6tables -w -n -L INPUT 2>&1); then
  v6=yes
else
  say "skipped ip6tables: $(oneline "$out")"
fi
`)
	}
}

// writeApplyMarker writes step 2, the marker (write-ahead: before anything changes).
func writeApplyMarker(b *strings.Builder, f Fault, p paths, kills, stops []unitVar) {
	q := shell.Quote
	w := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	// 2. The marker.
	w(`
# 2. The marker, before anything changes (write-ahead).
if ! mkdir -m 0700 "$dir" 2>/dev/null; then
  [ -e "$dir" ] && notclean "another drill created $dir just now"
  fail "cannot create $dir: $(oneline "$(mkdir -m 0700 "$dir" 2>&1)")"
fi
if ! cat >"$dir/restore.sh" <<'%[1]s'
%[2]s%[1]s
then
  rm -f "$dir/restore.sh"; rmdir "$dir"; fail "cannot write $dir/restore.sh"
fi
{ printf '%%s\n' "$id" >"$dir/id" &&
  date +%%s.%%N >"$dir/started" &&
  printf '%%s\n'`, restoreEOF, restoreScript(p))
	for _, l := range f.faultLines() {
		w(" %s", q(l))
	}
	b.WriteString(` >"$dir/faults" &&
  : >"$dir/units" &&
  : >"$dir/iptables"; } || rollback "cannot write the marker in $dir"
`)
	for _, u := range append(kills[:len(kills):len(kills)], stops...) {
		w(`if [ "$%s" = yes ]; then printf '%%s\n' %s >>"$dir/units" || rollback "cannot write $dir/units"; fi
`, u.v, q(u.name))
	}
	if f.usesIPTables() {
		b.WriteString(`say v4 >>"$dir/iptables" || rollback "cannot write $dir/iptables"
if [ "$v6" = yes ]; then say v6 >>"$dir/iptables" || rollback "cannot write $dir/iptables"; fi
`)
	}
	b.WriteString(`say "marker $dir drill $id"
`)
}

// writeApplyDeadman writes step 3, the deadman timer.
func writeApplyDeadman(b *strings.Builder, f Fault) {
	w := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	// 3. The deadman.
	secs := f.deadmanSeconds()
	w(`
# 3. The deadman: the host puts itself back after %[1]ds even if hactl is gone.
deadline=$(( $(date +%%s) + %[1]d ))
say "$deadline" >"$dir/deadline" || rollback "cannot write $dir/deadline"
out=$(systemd-run --unit="$unit" --description="hactl drill $id: deadman put-back" --on-active=%[1]ds --timer-property=AccuracySec=1s /bin/sh "$dir/restore.sh" --deadman 2>&1 </dev/null) ||
  rollback "systemd-run (the deadman) failed: $(oneline "$out")"
say "deadman $unit.timer %[1]ds at $deadline"
`, secs)
}

// writeApplyFault writes step 4, the fault.
func writeApplyFault(b *strings.Builder, f Fault, kills, stops []unitVar) {
	q := shell.Quote
	w := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	// 4. The fault.
	b.WriteString("\n# 4. The fault.\n")
	if f.usesIPTables() {
		for _, fam := range []string{"v4", "v6"} {
			rules := chainRules(f, fam)
			if fam == "v6" {
				b.WriteString("if [ \"$v6\" = yes ]; then\n")
			}
			for _, r := range rules {
				w("x %s\n", r)
			}
			if fam == "v6" {
				b.WriteString("fi\n")
			}
		}
	}
	b.WriteString(`say "time fault-start $(date +%s.%N)"
`)
	if f.usesIPTables() {
		w(`x iptables -w -I INPUT 1 -j %[1]s
x iptables -w -I OUTPUT 1 -j %[1]s
say "applied iptables v4"
if [ "$v6" = yes ]; then
x ip6tables -w -I INPUT 1 -j %[1]s
x ip6tables -w -I OUTPUT 1 -j %[1]s
say "applied iptables v6"
fi
`, Chain)
	}
	for _, u := range kills {
		w(`if [ "$%s" = yes ]; then x systemctl kill --signal=SIGKILL %s; say "applied kill "%[2]s; fi
`, u.v, q(u.name))
	}
	for _, u := range stops {
		w(`if [ "$%s" = yes ]; then x systemctl stop %s; say "applied stop "%[2]s; fi
`, u.v, q(u.name))
	}
	b.WriteString(`say "time fault-end $(date +%s.%N)"
`)
	for _, u := range kills {
		w(`if [ "$%s" = yes ]; then x systemctl stop %s; say "applied hold "%[2]s; fi
`, u.v, q(u.name))
	}
}

// chainRules returns the commands that build the chain of family fam ("v4" or "v6"), in order:
// create, loopback returned, SSH returned (Isolate), neighbour discovery returned (Isolate, v6),
// dropped ports, everything else dropped (Isolate).
func chainRules(f Fault, fam string) []string {
	ipt := "iptables"
	if fam == "v6" {
		ipt = "ip6tables"
	}
	c := ipt + " -w "
	out := []string{
		c + "-N " + Chain,
		c + "-A " + Chain + " -i lo -j RETURN",
		c + "-A " + Chain + " -o lo -j RETURN",
	}
	if f.Isolate {
		out = append(out,
			fmt.Sprintf("%s-A %s -p tcp --dport %d -j RETURN", c, Chain, f.SSHPort),
			fmt.Sprintf("%s-A %s -p tcp --sport %d -j RETURN", c, Chain, f.SSHPort))
		if fam == "v6" {
			for _, t := range []int{133, 134, 135, 136} { // router/neighbour solicitation/advertisement
				out = append(out, fmt.Sprintf("%s-A %s -p icmpv6 --icmpv6-type %d -j RETURN", c, Chain, t))
			}
		}
	}
	for _, p := range f.DropPorts {
		out = append(out,
			fmt.Sprintf("%s-A %s -p tcp --dport %d -j DROP", c, Chain, p),
			fmt.Sprintf("%s-A %s -p tcp --sport %d -j DROP", c, Chain, p))
	}
	if f.Isolate {
		out = append(out, c+"-A "+Chain+" -j DROP")
	}
	return out
}

// ApplyResult is what an apply script reported. Times are the host's clock.
type ApplyResult struct {
	// DrillID and MarkerDir are from the "marker" line.
	DrillID, MarkerDir string
	// DeadmanTimer is the deadman's timer unit and DeadmanAt when it fires (whole seconds).
	DeadmanTimer string
	DeadmanAt    time.Time
	// FaultStart and FaultEnd bound the fault: the host's time just before the first fault
	// action (iptables jump, kill or stop) and just after the last (before the holds).
	FaultStart, FaultEnd time.Time
	// IPTables lists the families whose rules are in force ("v4", "v6").
	IPTables []string
	// Killed, Stopped and Held list units killed, stopped, and stopped after the kill.
	Killed, Stopped, Held []string
	// Skipped lists what was not done, e.g. "kill etcd.service: inactive", "ip6tables: not found".
	Skipped []string
	// Rollback is why the apply failed after writing its marker ("" when it did not); Restore
	// then holds what the rollback put back and what it left.
	Rollback string
	Restore  RestoreResult
}

// ParseApply reads an apply script's output. It returns an error when the output does not show
// a complete fault: a rollback, or no fault-end time (the script failed or was cut off); the
// result holds what was read in every case.
func ParseApply(out string) (ApplyResult, error) {
	var r ApplyResult
	var errs []error
	var restore strings.Builder
	var ended bool
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		tag, rest, _ := strings.Cut(l, " ")
		if r.Rollback != "" {
			restore.WriteString(l + "\n")
			continue
		}
		switch tag {
		case "marker":
			f := strings.Fields(rest)
			if len(f) == 3 && f[1] == "drill" {
				r.MarkerDir, r.DrillID = f[0], f[2]
			}
		case "deadman":
			f := strings.Fields(rest)
			if len(f) == 4 && f[2] == "at" {
				r.DeadmanTimer = f[0]
				t, err := parseHostTime(f[3])
				if err != nil {
					errs = append(errs, fmt.Errorf("deadman line %q: %w", l, err))
				}
				r.DeadmanAt = t
			}
		case "time":
			which, v, _ := strings.Cut(rest, " ")
			t, err := parseHostTime(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("time line %q: %w", l, err))
			}
			switch which {
			case "fault-start":
				r.FaultStart = t
			case "fault-end":
				r.FaultEnd, ended = t, err == nil
			}
		case "applied":
			what, name, _ := strings.Cut(rest, " ")
			switch what {
			case "iptables":
				r.IPTables = append(r.IPTables, name)
			case "kill":
				r.Killed = append(r.Killed, name)
			case "stop":
				r.Stopped = append(r.Stopped, name)
			case "hold":
				r.Held = append(r.Held, name)
			}
		case "skipped":
			r.Skipped = append(r.Skipped, rest)
		case "rollback":
			r.Rollback = rest
			if r.Rollback == "" {
				r.Rollback = "(no reason given)"
			}
		}
	}
	r.Restore = ParseRestore(restore.String())
	switch {
	case r.Rollback != "":
		errs = append(errs, fmt.Errorf("the fault was not applied and was rolled back: %s", r.Rollback))
	case !ended:
		errs = append(errs, errors.New("the output has no fault-end time: the fault was not (completely) applied"))
	}
	return r, errors.Join(errs...)
}

// parseHostTime parses `date +%s.%N` (or whole seconds) into a time.
func parseHostTime(s string) (time.Time, error) {
	sec, frac, hasFrac := strings.Cut(s, ".")
	secs, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("host time %q: not unix seconds", s)
	}
	var nanos int64
	if hasFrac {
		if frac == "" || len(frac) > 9 || strings.Trim(frac, "0123456789") != "" {
			return time.Time{}, fmt.Errorf("host time %q: bad fraction (date without %%N support?)", s)
		}
		nanos, _ = strconv.ParseInt(frac+strings.Repeat("0", 9-len(frac)), 10, 64)
	}
	return time.Unix(secs, nanos), nil
}
