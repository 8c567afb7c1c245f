package fault

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hactl/hactl/provision"
)

// Inspect facts. What a previous drill left on a host is read with the one host-facts command of
// package provision: [InspectRequest] asks for the deadman's and the given units' states
// (FactsRequest.Units: one systemctl show), whether systemctl is on PATH (FactsRequest.Commands),
// and runs the inspect probe, which prints, with `fact KEY VALUE`:
//
//	drill.iptables.v4, drill.iptables.v6   absent | unreadable | clean | present
//	drill.iptables.<fam>.rules, .jumps     with present: the chain's rules; the jumps to it from INPUT and OUTPUT
//	drill.marker                           absent | present
//	drill.marker.id, .started, .deadline   the first line of that marker file (when it is readable)
//	drill.marker.unit, .fault, .iptables   one value per non-empty line of the units, faults and iptables files
//
// [InspectFrom] reads them back. A cut-off command is provision's *IncompleteFactsError (no end
// line), from provision.ParseFacts or provision.GatherFacts.

// inspectProbeName names the inspect probe in a FactsRequest (Merge keeps one per name).
const inspectProbeName = "drill/inspect"

// InspectRequest returns the read-only facts request that finds what a previous drill left on the
// host: the HACTL-DRILL chain (IPv4, IPv6: rules and jumps from INPUT/OUTPUT), the marker and
// what it records, the deadman timer and service, and the states of units (e.g. etcd.service; a
// name without a suffix means .service). Gather it (merged with other requests if need be) with
// provision.GatherFacts or (*provision.Client).Facts, and read it with [InspectFrom] and the same
// units.
func InspectRequest(units []string) provision.FactsRequest { return inspectRequest(hostPaths, units) }

func inspectRequest(p paths, units []string) provision.FactsRequest {
	return provision.FactsRequest{
		Units:    append([]string{DeadmanUnit + ".timer", DeadmanUnit + ".service"}, units...),
		Commands: []string{"systemctl"},
		Probes:   []provision.Probe{{Name: inspectProbeName, Script: inspectProbe(p)}},
	}
}

// inspectProbe prints the drill.* facts. It runs in a subshell, so its PATH and names stay there
// (the other probes of a merged request do not see them).
func inspectProbe(p paths) string {
	var b strings.Builder
	b.WriteString("(\n")
	b.WriteString(prelude(p, "inspect: what a previous drill left on this host; changes nothing"))
	b.WriteString(`for fam in v4 v6; do
  if [ "$fam" = v4 ]; then ipt=iptables; else ipt=ip6tables; fi
  if ! have "$ipt"; then fact "drill.iptables.$fam" absent; continue; fi
  if ! "$ipt" -w -n -L INPUT >/dev/null 2>&1; then fact "drill.iptables.$fam" unreadable; continue; fi
  if "$ipt" -w -n -L "$chain" >/dev/null 2>&1; then
    r=$("$ipt" -w -S "$chain" 2>/dev/null | grep -c -e "^-A $chain ")
    j=$({ "$ipt" -w -S INPUT; "$ipt" -w -S OUTPUT; } 2>/dev/null | grep -c -e "-j $chain\$")
    fact "drill.iptables.$fam" present; fact "drill.iptables.$fam.rules" "${r:-0}"; fact "drill.iptables.$fam.jumps" "${j:-0}"
  else
    fact "drill.iptables.$fam" clean
  fi
done
if [ -d "$dir" ]; then
  fact drill.marker present
  for f in id started deadline; do
    if [ -r "$dir/$f" ]; then fact "drill.marker.$f" "$(head -n 1 "$dir/$f")"; fi
  done
  for f in units faults iptables; do
    if [ -r "$dir/$f" ]; then
      k=$f; [ "$f" = units ] && k=unit; [ "$f" = faults ] && k=fault
      while IFS= read -r l; do [ -n "$l" ] && fact "drill.marker.$k" "$l"; done <"$dir/$f"
    fi
  done
else
  fact drill.marker absent
fi
)
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

// Leftovers is what a previous drill left on one host ([InspectFrom]).
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

// InspectFrom reads what [InspectRequest](units) gathered (f may hold more: a merged request).
// Unit states come from f.Units ("unknown" for a unit systemctl did not report), the deadman's
// too; without systemctl on PATH, DeadmanTimer and DeadmanService are "" and Units is empty. It
// returns what it could read, and an error (errors.Join, one per fact, each naming the fact) when
// f lacks the inspect probe's facts (not gathered with InspectRequest), or a fact is malformed
// (counts that are not numbers, an unknown chain state, a host time that is not unix seconds, a
// unit reported without its load or active state).
func InspectFrom(f *provision.Facts, units []string) (Leftovers, error) {
	var l Leftovers
	var errs []error
	bad := func(key, why string) {
		errs = append(errs, fmt.Errorf("drill inspect: fact %s=%q: %s", key, f.Value(key), why))
	}
	if !f.Has("drill.marker") {
		return l, fmt.Errorf("drill inspect: no drill.marker fact: the facts were not gathered with fault.InspectRequest, or its probe (%s) did not finish", inspectProbeName)
	}
	for _, fam := range []string{"v4", "v6"} {
		key := "drill.iptables." + fam
		c := ChainState{Family: fam, State: f.Value(key)}
		switch c.State {
		case "present":
			r, err1 := strconv.Atoi(f.Value(key + ".rules"))
			j, err2 := strconv.Atoi(f.Value(key + ".jumps"))
			if err1 != nil || err2 != nil {
				bad(key, fmt.Sprintf("rule and jump counts (%s.rules %q, %[1]s.jumps %q) are not numbers", key, f.Value(key+".rules"), f.Value(key+".jumps")))
				continue
			}
			c.Rules, c.Jumps = r, j
		case "absent", "unreadable", "clean":
		case "":
			bad(key, "no state for this family (want absent, unreadable, clean or present)")
			continue
		default:
			bad(key, "unknown chain state (want absent, unreadable, clean or present)")
			continue
		}
		l.Chains = append(l.Chains, c)
	}
	switch f.Value("drill.marker") {
	case "absent":
	case "present":
		m := &Marker{DrillID: strings.TrimSpace(f.Value("drill.marker.id"))}
		for _, ts := range []struct {
			key string
			t   *time.Time
		}{{"drill.marker.started", &m.Started}, {"drill.marker.deadline", &m.Deadline}} {
			if !f.Has(ts.key) {
				continue
			}
			t, err := parseHostTime(strings.TrimSpace(f.Value(ts.key)))
			if err != nil {
				errs = append(errs, fmt.Errorf("drill inspect: fact %s: %w", ts.key, err))
				continue
			}
			*ts.t = t
		}
		trimmed := func(key string) []string {
			var out []string
			for _, v := range f.Values(key) {
				out = append(out, strings.TrimSpace(v))
			}
			return out
		}
		m.Units, m.Faults, m.IPTables = trimmed("drill.marker.unit"), trimmed("drill.marker.fault"), trimmed("drill.marker.iptables")
		l.Marker = m
	default:
		bad("drill.marker", "want absent or present")
	}
	if !f.Commands["systemctl"] {
		return l, errors.Join(errs...)
	}
	state := func(u string) UnitState {
		st, ok := f.Units[u]
		if !ok {
			return UnitState{Name: u, Active: "unknown", Load: "unknown"}
		}
		if st.Active == "" || st.Load == "" {
			errs = append(errs, fmt.Errorf("drill inspect: unit %s: systemctl show reported LoadState %q, ActiveState %q: want both", u, st.Load, st.Active))
		}
		return UnitState{Name: u, Active: st.Active, Load: st.Load}
	}
	l.DeadmanTimer = state(DeadmanUnit + ".timer").Active
	l.DeadmanService = state(DeadmanUnit + ".service").Active
	for _, u := range units {
		l.Units = append(l.Units, state(u))
	}
	return l, errors.Join(errs...)
}
