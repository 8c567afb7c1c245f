package fault

import (
	"fmt"
	"strings"

	"github.com/hactl/hactl/internal/shell"
)

// prelude starts every script: PATH with sbin, the on-host names, and small helpers.
//
//	have CMD      CMD is on PATH
//	say WORDS     print one line (printf, not echo: no backslash escapes)
//	oneline TEXT  TEXT on one line, at most 300 characters (for tag lines)
func prelude(p paths, what string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# hactl drill %s (hactl drill/fault).\n", what)
	if p.extraPath != "" {
		fmt.Fprintf(&b, "PATH=\"$PATH:%s\"\n", p.extraPath)
	}
	fmt.Fprintf(&b, `dir=%s
lock=%s
chain=%s
unit=%s
have() { command -v "$1" >/dev/null 2>&1; }
say() { printf '%%s\n' "$*"; }
oneline() { printf '%%s' "$1" | tr '\n' ' ' | cut -c 1-300; }
`, shell.Quote(p.dir), shell.Quote(p.lock), Chain, DeadmanUnit)
	return b.String()
}

// RestoreScript returns the put-back script. It needs nothing but the marker directory
// ([MarkerDir]) and is idempotent; the deadman timer runs the same text (saved by the apply
// script as MarkerDir/restore.sh) with the argument --deadman. In order, it:
//
//  1. stops the deadman timer (not when it is the deadman), so it cannot fire mid-restore;
//  2. takes the lock (waits up to 2 minutes for an apply or another restore);
//  3. for iptables and ip6tables, whether or not the marker says rules were added: deletes
//     every jump to HACTL-DRILL from INPUT and OUTPUT, flushes and deletes the chain;
//  4. for each unit in the marker's units file: systemctl reset-failed, then systemctl start,
//     waiting at most [UnitStartWait] for the start job (after that the unit is reported still
//     activating and systemd goes on starting it);
//  5. (not when it is the deadman) stops a running deadman service and resets a failed one;
//  6. removes the marker, or, when something is left, keeps it with the units still to start
//     so that a second run retries them.
//
// Output, one tag line per action: "restored iptables v4", "restored start etcd.service",
// "restored start etcd.service: still activating after 30s", "restored deadman
// hactl-drill-restore.timer stopped", "restored marker removed (drill <id>)"; then one
// "left <what>: <why>" line per thing it could not put back (e.g. "left unit etcd.service:
// systemctl start failed (exit 1): ..."), a "kept marker ..." line, and exit status 1. On a clean
// host it prints "nothing-to-do" and exits 0. [ParseRestore] reads the output.
func RestoreScript() string { return restoreScript(hostPaths) }

func restoreScript(p paths) string {
	var b strings.Builder
	b.WriteString(prelude(p, "restore: put back what a drill changed on this host; reads only the marker directory; idempotent"))
	fmt.Fprintf(&b, `deadman=no
if [ "${1:-}" = --deadman ]; then deadman=yes; fi
did=0
left=0
# 1. The deadman timer must not fire while we work (the deadman itself leaves it alone).
if [ "$deadman" = no ] && have systemctl && systemctl is-active --quiet "$unit.timer"; then
  if out=$(systemctl stop "$unit.timer" 2>&1 </dev/null); then
    say "restored deadman $unit.timer stopped"; did=1
  else
    say "left deadman $unit.timer: systemctl stop failed: $(oneline "$out")"; left=1
  fi
fi
# 2. One apply or restore at a time.
if have flock; then
  if ! { command exec 9>>"$lock" && flock -w %[1]d 9; }; then say "note could not take the lock $lock; going on" >&2; fi
fi
id=
if [ -r "$dir/id" ]; then id=$(head -n 1 "$dir/id"); fi
# 3. iptables: every jump to the chain, then the chain, whatever the marker says.
for fam in v4 v6; do
  if [ "$fam" = v4 ]; then ipt=iptables; else ipt=ip6tables; fi
  have "$ipt" || continue
  "$ipt" -w -n -L "$chain" >/dev/null 2>&1 || continue
  for c in INPUT OUTPUT; do
    n=0
    while [ "$n" -lt 100 ] && "$ipt" -w -D "$c" -j "$chain" >/dev/null 2>&1; do n=$((n + 1)); done
  done
  out=$({ "$ipt" -w -F "$chain" && "$ipt" -w -X "$chain"; } 2>&1)
  if "$ipt" -w -n -L "$chain" >/dev/null 2>&1; then
    say "left iptables $fam: chain $chain still present: $(oneline "$out")"; left=1
  else
    say "restored iptables $fam"; did=1
  fi
done
# 4. Start again the units the drill stopped.
rest=
if [ -r "$dir/units" ]; then
  while IFS= read -r u <&3; do
    [ -n "$u" ] || continue
    systemctl reset-failed "$u" >/dev/null 2>&1 </dev/null
    if have timeout; then
      out=$(timeout %[2]d systemctl start "$u" 2>&1 </dev/null); rc=$?
    else
      out=$(systemctl start "$u" 2>&1 </dev/null); rc=$?
    fi
    if [ "$rc" -eq 0 ]; then
      say "restored start $u"; did=1
    elif [ "$rc" -eq 124 ]; then
      say "restored start $u: still activating after %[2]ds"; did=1
    else
      say "left unit $u: systemctl start failed (exit $rc): $(oneline "$out")"; left=1
      rest="$rest$u
"
    fi
  done 3<"$dir/units"
fi
# 5. The deadman service (when this is not it): stop it if it runs, forget it if it failed.
if [ "$deadman" = no ] && have systemctl; then
  st=$(systemctl is-active "$unit.service" 2>/dev/null </dev/null)
  case "$st" in
  active|activating|deactivating|reloading|refreshing)
    if out=$(systemctl stop "$unit.service" 2>&1 </dev/null); then
      say "restored deadman $unit.service stopped"; did=1
    else
      say "left deadman $unit.service: systemctl stop failed: $(oneline "$out")"; left=1
    fi ;;
  failed)
    systemctl reset-failed "$unit.service" >/dev/null 2>&1 </dev/null
    say "restored deadman $unit.service reset-failed"; did=1 ;;
  esac
fi
# 6. The marker goes when everything is back; otherwise it keeps what is still to start.
if [ -d "$dir" ]; then
  if [ "$left" -eq 0 ]; then
    rm -f "$dir/id" "$dir/started" "$dir/units" "$dir/units.tmp" "$dir/faults" "$dir/iptables" "$dir/deadline" "$dir/restore.sh"
    if out=$(rmdir "$dir" 2>&1); then
      say "restored marker removed${id:+ (drill $id)}"; did=1
    else
      say "left marker $dir: $(oneline "$out")"; left=1
    fi
  else
    printf '%%s' "$rest" >"$dir/units.tmp" && mv -f "$dir/units.tmp" "$dir/units"
    say "kept marker $dir${id:+ (drill $id)}: run the restore again once what is left is fixed"
  fi
fi
if [ "$did" -eq 0 ] && [ "$left" -eq 0 ]; then say nothing-to-do; fi
exit "$left"
`, int(lockWait.Seconds()), int(UnitStartWait.Seconds()))
	return b.String()
}

// RestoreResult is what a restore script (or an apply's rollback) reported.
type RestoreResult struct {
	// Restored lists what was put back, e.g. "iptables v4", "start etcd.service".
	Restored []string
	// Left lists what could not be put back, e.g. "unit etcd.service: systemctl start failed
	// (exit 1): ...". Empty when the host is back as it was.
	Left []string
	// KeptMarker is set when the marker was kept for a retry (something is left).
	KeptMarker bool
	// NothingToDo: the host carried nothing of a drill.
	NothingToDo bool
}

// ParseRestore reads the tag lines of a restore script's output (other lines are ignored).
func ParseRestore(out string) RestoreResult {
	var r RestoreResult
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		switch tag, rest, _ := strings.Cut(l, " "); tag {
		case "restored":
			r.Restored = append(r.Restored, rest)
		case "left":
			r.Left = append(r.Left, rest)
		case "kept":
			r.KeptMarker = true
		case "nothing-to-do":
			r.NothingToDo = true
		}
	}
	return r
}
