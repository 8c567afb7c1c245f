package fault

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hactl/hactl/internal/shell"
)

// InspectScript returns a read-only script that reports what a previous drill left on the
// host: the HACTL-DRILL chain (IPv4, IPv6: rules and jumps from INPUT/OUTPUT), the marker and
// what it records, the deadman timer and service, and the active state of units (e.g.
// etcd.service). It ends with an "end" line so that [ParseInspect] can tell a complete report
// from a cut-off one. Output lines (one per fact):
//
//	iptables v4 absent|unreadable|clean
//	iptables v4 chain <rules> <jumps>
//	marker absent | marker present
//	marker id <id> | marker started <t> | marker deadline <t> | marker unit <u> |
//	marker fault <text> | marker iptables v4|v6
//	deadman timer <is-active> | deadman service <is-active>   (or: systemd absent)
//	unit <name> <is-active> <LoadState>
//	end
func InspectScript(units []string) string { return inspectScript(hostPaths, units) }

func inspectScript(p paths, units []string) string {
	var b strings.Builder
	b.WriteString(prelude(p, "inspect: what a previous drill left on this host; changes nothing"))
	b.WriteString(`for fam in v4 v6; do
  if [ "$fam" = v4 ]; then ipt=iptables; else ipt=ip6tables; fi
  if ! have "$ipt"; then say "iptables $fam absent"; continue; fi
  if ! "$ipt" -w -n -L INPUT >/dev/null 2>&1; then say "iptables $fam unreadable"; continue; fi
  if "$ipt" -w -n -L "$chain" >/dev/null 2>&1; then
    r=$("$ipt" -w -S "$chain" 2>/dev/null | grep -c -e "^-A $chain ")
    j=$({ "$ipt" -w -S INPUT; "$ipt" -w -S OUTPUT; } 2>/dev/null | grep -c -e "-j $chain\$")
    say "iptables $fam chain ${r:-0} ${j:-0}"
  else
    say "iptables $fam clean"
  fi
done
if [ -d "$dir" ]; then
  say "marker present"
  for f in id started deadline; do
    if [ -r "$dir/$f" ]; then say "marker $f $(head -n 1 "$dir/$f")"; fi
  done
  for f in units faults iptables; do
    if [ -r "$dir/$f" ]; then
      k=$f; [ "$f" = units ] && k=unit; [ "$f" = faults ] && k=fault
      while IFS= read -r l; do [ -n "$l" ] && say "marker $k $l"; done <"$dir/$f"
    fi
  done
else
  say "marker absent"
fi
if have systemctl; then
  say "deadman timer $(systemctl is-active "$unit.timer" 2>/dev/null)"
  say "deadman service $(systemctl is-active "$unit.service" 2>/dev/null)"
  for u in`)
	for _, u := range units {
		b.WriteString(" " + shell.Quote(u))
	}
	b.WriteString(`; do
    a=$(systemctl is-active "$u" 2>/dev/null)
    l=$(systemctl show -p LoadState "$u" 2>/dev/null); l=${l#LoadState=}
    say "unit $u ${a:-unknown} ${l:-unknown}"
  done
else
  say "systemd absent"
fi
say end
`)
	return b.String()
}

// ChainState is the HACTL-DRILL chain of one address family.
type ChainState struct {
	// Family is "v4" (iptables) or "v6" (ip6tables).
	Family string
	// State is "present", "clean" (no chain), "absent" (no such tool on the host) or
	// "unreadable" (the tool could not list the filter table, e.g. no kernel support).
	State string
	// Rules counts the chain's rules, Jumps the jumps to it from INPUT and OUTPUT.
	Rules, Jumps int
}

// Marker is what the marker directory records.
type Marker struct {
	DrillID string
	// Started is when the apply began; Deadline when the deadman fires (zero when unknown).
	Started, Deadline time.Time
	// Units are the units the put-back starts again; Faults what was applied ("kill
	// etcd.service"); IPTables the families whose rules were added.
	Units, Faults, IPTables []string
}

// UnitState is a unit's state as systemctl reports it.
type UnitState struct {
	Name string
	// Active is `systemctl is-active` ("active", "inactive", "failed", "activating", ...);
	// Load the LoadState ("loaded", "not-found", "masked", ...).
	Active, Load string
}

// Leftovers is what [InspectScript] found on one host.
type Leftovers struct {
	// Chains are the v4 and v6 chain states.
	Chains []ChainState
	// Marker is nil when there is no marker directory.
	Marker *Marker
	// DeadmanTimer and DeadmanService are `systemctl is-active` of the deadman units ("" when
	// the host has no systemctl).
	DeadmanTimer, DeadmanService string
	// Units are the units asked about, in order.
	Units []UnitState
}

// Any reports whether the host carries something of a drill: a chain, a marker, a deadman
// timer or service that is active (or a service that failed: the deadman ran and could not
// put everything back), or a unit asked about that is not active while the marker lists it as
// one to start again. Other inactive units are not leftovers (they are the health check's
// business): their states are in Units.
func (l Leftovers) Any() bool { return len(l.Describe()) > 0 }

// Describe returns one line per leftover, e.g.
//
//	iptables chain HACTL-DRILL present: 7 rules, 2 jumps from INPUT/OUTPUT (drill 20261201-0512-ab12)
//	drill marker /run/hactl-drill present: drill 20261201-0512-ab12 started 2026-12-01T05:12:03Z; kill etcd.service; starts etcd.service again on put-back
//	deadman hactl-drill-restore.timer active: the host puts itself back at 2026-12-01T05:14:03Z (drill 20261201-0512-ab12)
//	etcd.service inactive (stopped by drill 20261201-0512-ab12)
func (l Leftovers) Describe() []string {
	var out []string
	of := " (no drill marker)"
	if l.Marker != nil && l.Marker.DrillID != "" {
		of = " (drill " + l.Marker.DrillID + ")"
	}
	for _, c := range l.Chains {
		if c.State != "present" {
			continue
		}
		tool := "iptables"
		if c.Family == "v6" {
			tool = "ip6tables"
		}
		out = append(out, fmt.Sprintf("%s chain %s present: %d rules, %d jumps from INPUT/OUTPUT%s", tool, Chain, c.Rules, c.Jumps, of))
	}
	if m := l.Marker; m != nil {
		var s strings.Builder
		fmt.Fprintf(&s, "drill marker %s present: drill %s", MarkerDir, orUnknown(m.DrillID))
		if !m.Started.IsZero() {
			s.WriteString(" started " + m.Started.UTC().Format(time.RFC3339))
		}
		if len(m.Faults) > 0 {
			s.WriteString("; " + strings.Join(m.Faults, ", "))
		}
		if len(m.Units) > 0 {
			s.WriteString("; starts " + strings.Join(m.Units, ", ") + " again on put-back")
		}
		out = append(out, s.String())
	}
	if activeState(l.DeadmanTimer) {
		s := fmt.Sprintf("deadman %s.timer %s", DeadmanUnit, l.DeadmanTimer)
		if l.Marker != nil && !l.Marker.Deadline.IsZero() {
			s += ": the host puts itself back at " + l.Marker.Deadline.UTC().Format(time.RFC3339)
		}
		out = append(out, s+of)
	}
	switch {
	case activeState(l.DeadmanService) || l.DeadmanService == "deactivating":
		out = append(out, fmt.Sprintf("deadman %s.service %s: the host is putting itself back", DeadmanUnit, l.DeadmanService))
	case l.DeadmanService == "failed":
		out = append(out, fmt.Sprintf("deadman %s.service failed: the host's own put-back did not put everything back (journalctl -u %[1]s.service)", DeadmanUnit))
	}
	for _, u := range l.Units {
		if u.Active != "active" && l.Marker != nil && slices.Contains(l.Marker.Units, u.Name) {
			out = append(out, fmt.Sprintf("%s %s (stopped by drill %s)", u.Name, u.Active, orUnknown(l.Marker.DrillID)))
		}
	}
	return out
}

// Unchecked returns what the inspection could not look at (no ip6tables, a filter table that
// cannot be listed, no systemd), e.g. "ip6tables: absent". These are not leftovers.
func (l Leftovers) Unchecked() []string {
	var out []string
	for _, c := range l.Chains {
		if c.State == "absent" || c.State == "unreadable" {
			tool := "iptables"
			if c.Family == "v6" {
				tool = "ip6tables"
			}
			out = append(out, tool+": "+c.State)
		}
	}
	if l.DeadmanTimer == "" {
		out = append(out, "systemd: absent")
	}
	return out
}

func activeState(s string) bool {
	switch s {
	case "active", "activating", "reloading", "refreshing":
		return true
	}
	return false
}

func orUnknown(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}

// ParseInspect reads an [InspectScript] output. It fails when the output is cut off (no "end"
// line) or a line is malformed.
func ParseInspect(out string) (Leftovers, error) {
	var l Leftovers
	var errs []error
	bad := func(line string, why string) {
		errs = append(errs, fmt.Errorf("inspect output line %q: %s", line, why))
	}
	ended := false
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		switch f[0] {
		case "end":
			ended = true
		case "iptables":
			if len(f) < 3 || (f[1] != "v4" && f[1] != "v6") {
				bad(line, "want iptables v4|v6 <state>")
				continue
			}
			c := ChainState{Family: f[1], State: f[2]}
			switch {
			case f[2] == "chain" && len(f) == 5:
				r, err1 := strconv.Atoi(f[3])
				j, err2 := strconv.Atoi(f[4])
				if err1 != nil || err2 != nil {
					bad(line, "rule and jump counts are not numbers")
					continue
				}
				c.State, c.Rules, c.Jumps = "present", r, j
			case (f[2] == "absent" || f[2] == "unreadable" || f[2] == "clean") && len(f) == 3:
			default:
				bad(line, "unknown chain state")
				continue
			}
			l.Chains = append(l.Chains, c)
		case "marker":
			if len(f) < 2 {
				bad(line, "marker without a field")
				continue
			}
			if f[1] == "absent" {
				continue
			}
			if l.Marker == nil {
				l.Marker = &Marker{}
			}
			m := l.Marker
			rest := ""
			if len(f) > 2 {
				_, rest, _ = strings.Cut(line, " "+f[1]+" ")
				rest = strings.TrimSpace(rest)
			}
			switch f[1] {
			case "present":
			case "id":
				m.DrillID = rest
			case "started", "deadline":
				t, err := parseHostTime(rest)
				if err != nil {
					bad(line, err.Error())
					continue
				}
				if f[1] == "started" {
					m.Started = t
				} else {
					m.Deadline = t
				}
			case "unit":
				m.Units = append(m.Units, rest)
			case "fault":
				m.Faults = append(m.Faults, rest)
			case "iptables":
				m.IPTables = append(m.IPTables, rest)
			}
		case "deadman":
			if len(f) < 2 {
				bad(line, "want deadman timer|service <state>")
				continue
			}
			st := "unknown"
			if len(f) > 2 {
				st = f[2]
			}
			switch f[1] {
			case "timer":
				l.DeadmanTimer = st
			case "service":
				l.DeadmanService = st
			default:
				bad(line, "want deadman timer|service <state>")
			}
		case "unit":
			if len(f) != 4 {
				bad(line, "want unit <name> <active state> <load state>")
				continue
			}
			l.Units = append(l.Units, UnitState{Name: f[1], Active: f[2], Load: f[3]})
		case "systemd":
		}
	}
	if !ended {
		errs = append(errs, errors.New("inspect output is incomplete (no end line): the script did not finish"))
	}
	return l, errors.Join(errs...)
}
