// Package fault renders the shell scripts a failover drill runs on a host over SSH — the fault
// ([ApplyScript]) and its put-back ([RestoreScript], also run by the host's own deadman timer) —
// and parses their output; the search for a previous drill's leftovers is a host-facts request
// ([InspectRequest], read back by [InspectFrom]) gathered by package provision's one facts
// command. It also parses and runs the operator's local host commands ([ParseHostCommand],
// [RunLocal]) for faults hactl cannot cause over SSH, such as powering a host off. It opens no
// SSH connection: the caller runs the scripts with (*provision.Client).Run and the request with
// provision.GatherFacts, as root, with /bin/sh.
//
// # What stays on the host during a drill
//
//   - The marker directory [MarkerDir] (/run/hactl-drill, on tmpfs, so a reboot clears it along
//     with everything the fault changed): files id, started, units, faults, iptables, deadline
//     and restore.sh, written before the fault is applied (write-ahead).
//   - The iptables chain [Chain] (HACTL-DRILL), jumped to from INPUT and OUTPUT at position 1,
//     for IPv4 and, where ip6tables works, IPv6.
//   - The units the fault killed or stopped, held stopped.
//   - The deadman: transient units [DeadmanUnit].timer and [DeadmanUnit].service
//     (hactl-drill-restore), made with systemd-run, that run MarkerDir/restore.sh --deadman when
//     the deadman delay passes, even if hactl died.
//   - The lock file [LockFile] (/run/hactl-drill.lock, empty, on tmpfs), taken with flock(1) by
//     the apply and restore scripts so that a deadman firing during a put-back waits for it. It
//     is not a leftover and is never removed (removing a lock file others may hold breaks it).
//
// # Tag lines
//
// The scripts print one line per action on standard output, "<tag> <what>[: <detail>]":
//
//	apply:   marker /run/hactl-drill drill <id>
//	         deadman hactl-drill-restore.timer <n>s at <unix seconds>
//	         time fault-start <unix seconds.nanoseconds>
//	         applied iptables v4|v6
//	         applied kill <unit> | applied stop <unit>
//	         time fault-end <unix seconds.nanoseconds>
//	         applied hold <unit>                   (a killed unit stopped so Restart= keeps off)
//	         skipped kill|stop <unit>: <state>     (the unit was not running)
//	         skipped ip6tables: <why>              (IPv6 rules could not be added)
//	         rollback <why>                        (the apply failed; restore lines follow)
//	restore: restored <what> | left <what>: <why> | kept marker <dir>... | nothing-to-do
//
// [ParseApply] and [ParseRestore] read them. (The inspection prints host facts instead: see
// [InspectRequest].)
package fault

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// On-host names shared by every script.
const (
	// Chain is the iptables (and ip6tables) chain holding every rule of a drill.
	Chain = "HACTL-DRILL"
	// MarkerDir is the on-host marker directory of the drill in progress.
	MarkerDir = "/run/hactl-drill"
	// LockFile serialises the apply and restore scripts (flock(1)).
	LockFile = "/run/hactl-drill.lock"
	// DeadmanUnit names the transient deadman timer and service (DeadmanUnit+".timer",
	// DeadmanUnit+".service").
	DeadmanUnit = "hactl-drill-restore"
	// ExitNotClean is the apply script's exit status when the host still carries a drill (a
	// marker, the chain, an active deadman): nothing was changed. Other failures exit 1.
	ExitNotClean = 3
	// UnitStartWait bounds how long the restore script waits for one unit's start job (etcd's
	// Type=notify start waits for quorum); a unit still starting then is reported as restored
	// "still activating" and systemd goes on starting it.
	UnitStartWait = 30 * time.Second
	// lockWait bounds how long a script waits for the lock (another apply/restore running).
	lockWait = 120 * time.Second
)

// Fault is what a drill does to one host. The zero value of a field means "not this fault"; at
// least one of KillUnits, StopUnits, DropPorts and Isolate must be set.
type Fault struct {
	// DrillID identifies the drill ([a-z0-9][a-z0-9-]*, at most 64 characters), e.g.
	// "20261201-051144-a3f9". It is written to the marker.
	DrillID string
	// KillUnits are systemd units (e.g. "etcd.service") whose processes get SIGKILL
	// (systemctl kill --signal=SIGKILL: a crash, not a shutdown), then are stopped in the same
	// script, after the fault-end time, so that Restart= (etcd: RestartSec=5s) does not bring
	// them back during the hold. Put back with systemctl start.
	KillUnits []string
	// StopUnits are units stopped cleanly (systemctl stop), e.g. "keepalived.service". Put back
	// with systemctl start.
	StopUnits []string
	// DropPorts are local TCP ports whose traffic is dropped in both directions: packets to or
	// from the port, entering or leaving the host (INPUT and OUTPUT, --dport and --sport), e.g.
	// etcd's peer 2380 and client 2379 to partition a member. Loopback is never dropped.
	DropPorts []int
	// Isolate drops all traffic entering or leaving the host except loopback and TCP to or from
	// SSHPort (so the operator keeps SSH; for IPv6 also ICMPv6 router and neighbour discovery,
	// types 133-136, which SSH over IPv6 needs). VRRP (IP protocol 112), etcd, ICMP and
	// everything else are dropped.
	Isolate bool
	// SSHPort is the host's SSH port (1-65535); required with Isolate. DropPorts must not
	// contain it.
	SSHPort int
	// Deadman is how long after the apply the host puts itself back on its own (rounded up to
	// whole seconds, at least 1 s): a transient systemd timer runs the saved restore script.
	Deadman time.Duration
}

var (
	drillIDRe = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
	// unitRe accepts systemd unit names of the types a drill can start and stop.
	unitRe = regexp.MustCompile(`^[A-Za-z0-9:_.@\\][A-Za-z0-9:_.@\\-]*\.(service|socket|target|timer|path|mount|swap|scope)$`)
)

// Validate checks f and returns every problem found (errors.Join), each naming its field, e.g.
// "fault: killUnits[0] "etcd": not a systemd unit name".
func (f Fault) Validate() error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf("fault: "+format, a...)) }
	if !drillIDRe.MatchString(f.DrillID) || len(f.DrillID) > 64 {
		add("drillID %q: must be 1-64 characters of [a-z0-9-], starting with a letter or digit", f.DrillID)
	}
	seen := map[string]string{}
	checkUnits := func(field string, units []string) {
		for i, u := range units {
			switch {
			case !unitRe.MatchString(u) || len(u) > 255:
				add("%s[%d] %q: not a systemd unit name with its type (e.g. etcd.service)", field, i, u)
			case seen[u] != "":
				add("%s[%d] %q: already in %s", field, i, u, seen[u])
			case strings.HasPrefix(u, DeadmanUnit+"."):
				add("%s[%d] %q: is the drill's own deadman", field, i, u)
			default:
				seen[u] = fmt.Sprintf("%s[%d]", field, i)
			}
		}
	}
	checkUnits("killUnits", f.KillUnits)
	checkUnits("stopUnits", f.StopUnits)
	ports := map[int]bool{}
	for i, p := range f.DropPorts {
		switch {
		case p < 1 || p > 65535:
			add("dropPorts[%d] %d: not a port (1-65535)", i, p)
		case ports[p]:
			add("dropPorts[%d] %d: listed twice", i, p)
		case p == f.SSHPort:
			add("dropPorts[%d] %d: is the SSH port; dropping it would cut the operator off", i, p)
		}
		ports[p] = true
	}
	if f.Isolate && (f.SSHPort < 1 || f.SSHPort > 65535) {
		add("sshPort %d: isolate needs the host's SSH port (1-65535) to keep it open", f.SSHPort)
	}
	if !f.Isolate && f.SSHPort != 0 && (f.SSHPort < 1 || f.SSHPort > 65535) {
		add("sshPort %d: not a port (1-65535)", f.SSHPort)
	}
	if f.Deadman <= 0 {
		add("deadman %s: must be positive (the host puts itself back after it)", f.Deadman)
	}
	if len(f.KillUnits) == 0 && len(f.StopUnits) == 0 && len(f.DropPorts) == 0 && !f.Isolate {
		add("nothing to do: set killUnits, stopUnits, dropPorts or isolate")
	}
	return errors.Join(errs...)
}

// usesIPTables reports whether the fault adds iptables rules.
func (f Fault) usesIPTables() bool { return f.Isolate || len(f.DropPorts) > 0 }

// deadmanSeconds is Deadman rounded up to whole seconds.
func (f Fault) deadmanSeconds() int64 {
	return int64((f.Deadman + time.Second - 1) / time.Second)
}

// faultLines describes the fault for the marker's faults file, one line per fault.
func (f Fault) faultLines() []string {
	var out []string
	for _, u := range f.KillUnits {
		out = append(out, "kill "+u)
	}
	for _, u := range f.StopUnits {
		out = append(out, "stop "+u)
	}
	if len(f.DropPorts) > 0 {
		ps := make([]string, len(f.DropPorts))
		for i, p := range slices.Clone(f.DropPorts) {
			ps[i] = fmt.Sprint(p)
		}
		out = append(out, "drop tcp ports "+strings.Join(ps, ","))
	}
	if f.Isolate {
		out = append(out, fmt.Sprintf("isolate except ssh port %d", f.SSHPort))
	}
	return out
}

// paths are the on-host locations the scripts use; tests render with temporary ones.
type paths struct {
	dir, lock string
	// extraPath is appended to PATH by every script (iptables lives in sbin).
	extraPath string
}

var hostPaths = paths{dir: MarkerDir, lock: LockFile, extraPath: "/usr/sbin:/sbin"}
