package schedule

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hactl/hactl/internal/shell"
	"github.com/hactl/hactl/provision"
)

// Host is what the schedule needs of a member's SSH connection (*provision.Client).
type Host interface {
	Run(ctx context.Context, step, command string, opts ...provision.RunOption) (provision.Result, error)
	Upload(ctx context.Context, step string, files []provision.File) error
}

var _ Host = (*provision.Client)(nil)

// Facts are what the read-only probe found on a member.
type Facts struct {
	// Arch is `uname -m`; Kernel `uname -s`.
	Arch, Kernel string
	// Files maps each managed path present to "<sha256> <mode> <owner> <group>".
	Files map[string]string
	// TimerEnabled and TimerActive are the timer's UnitFileState ("absent" without a unit file) and
	// ActiveState ("unknown" when systemd did not say); AgentEnabled and AgentActive the agent's.
	TimerEnabled, TimerActive string
	AgentEnabled, AgentActive string
	// Systemd reports whether systemd runs as init.
	Systemd bool
	// Overrides are the drop-ins and environment files hactl does not write that set something for
	// the backup units (OwnedUnits): Install refuses the member while there are any.
	Overrides []provision.Override
}

// OwnedUnits are the backup units as hactl renders them: no drop-in or environment file of hactl's.
var OwnedUnits = []provision.OwnedUnitFiles{{Unit: ServiceName, Fragment: ServicePath}, {Unit: TimerName, Fragment: TimerPath},
	{Unit: AgentServiceName, Fragment: AgentServicePath}}

// probeRequest is what Probe gathers: the managed files and the timer.
func probeRequest() provision.FactsRequest {
	return provision.FactsRequest{Files: ManagedPaths(), SumCache: provision.DefaultSumCache, Units: []string{TimerName, AgentServiceName},
		UnitFiles: []string{ServiceName, TimerName, AgentServiceName}}
}

// factsFrom reads the schedule's view of a member from the gathered facts.
func factsFrom(pf *provision.Facts) Facts {
	f := Facts{Arch: pf.Host.Arch, Kernel: pf.Host.Kernel, Systemd: pf.Host.Systemd, Files: map[string]string{},
		TimerEnabled: "absent", TimerActive: "unknown", AgentEnabled: "absent", AgentActive: "unknown"}
	for p, sum := range pf.Sums {
		m := pf.Modes[p]
		f.Files[p] = fmt.Sprintf("%s %o %s %s", sum, m.Perm, m.Owner, m.Group)
	}
	for _, own := range OwnedUnits {
		f.Overrides = append(f.Overrides, provision.Overrides(own, pf.UnitFiles[own.Unit])...)
	}
	if u, ok := pf.Units[TimerName]; ok {
		if u.Enabled != "" {
			f.TimerEnabled = u.Enabled
		}
		if u.Active != "" {
			f.TimerActive = u.Active
		}
	}
	if u, ok := pf.Units[AgentServiceName]; ok {
		if u.Enabled != "" {
			f.AgentEnabled = u.Enabled
		}
		if u.Active != "" {
			f.AgentActive = u.Active
		}
	}
	return f
}

// Probe reads a member's facts (one read-only command, provision's facts probe; the kernel,
// architecture and systemd come with the connection).
func Probe(ctx context.Context, h Host) (Facts, error) {
	pf, err := provision.GatherFacts(ctx, h, "schedule/probe", probeRequest())
	if err != nil {
		return Facts{}, err
	}
	return factsFrom(pf), nil
}

// Change is what Install did (or, with a dry run, would do) on one member.
type Change struct {
	// Write lists the files written (changed or missing), Removed the stale ones removed.
	Write   []string `json:"write,omitempty"`
	Removed []string `json:"removed,omitempty"`
	// Reload: the units changed (daemon-reload); StartTimer: the timer was (re)started and enabled;
	// RestartAgent: the delta agent was (re)started and enabled (its unit, binary or configuration
	// changed, or it was not running); StopAgent: it was stopped and disabled (no --deltas).
	Reload       bool `json:"reload,omitempty"`
	StartTimer   bool `json:"startTimer,omitempty"`
	RestartAgent bool `json:"restartAgent,omitempty"`
	StopAgent    bool `json:"stopAgent,omitempty"`
}

// Empty reports whether nothing changes.
func (c Change) Empty() bool {
	return len(c.Write) == 0 && len(c.Removed) == 0 && !c.Reload && !c.StartTimer && !c.RestartAgent && !c.StopAgent
}

// Plan compares the desired files with the facts: a file is written when it is missing or its
// sha256, mode or owner differ (as bootstrap does, unchanged files are not rewritten); the units
// are reloaded only when a unit file changes; the timer is restarted when its file changes or it
// is not enabled and active. Stale optional files (the object store CA after tls was removed) are
// removed.
func Plan(files []File, f Facts) Change {
	var c Change
	want := map[string]bool{}
	changed := false
	for _, d := range files {
		want[d.Path] = true
		if f.Files[d.Path] != fmt.Sprintf("%s %o root root", d.Sum, d.Mode.Perm()) {
			c.Write = append(c.Write, d.Path)
			changed = true
			if d.Path == ServicePath || d.Path == TimerPath || d.Path == AgentServicePath {
				c.Reload = true
			}
			if d.Path == TimerPath {
				c.StartTimer = true
			}
		}
	}
	for _, p := range ManagedPaths() {
		if _, ok := f.Files[p]; ok && !want[p] {
			c.Removed = append(c.Removed, p)
			if p == AgentServicePath {
				c.StopAgent, c.Reload = true, true
			}
		}
	}
	if f.TimerEnabled != "enabled" || f.TimerActive != "active" {
		c.StartTimer = true
	}
	// The agent reads the binary, the spec copy, the credentials and the certificates only when it
	// starts: any change restarts it.
	if want[AgentServicePath] && (changed || f.AgentEnabled != "enabled" || f.AgentActive != "active") {
		c.RestartAgent = true
	}
	return c
}

// ArchError is a binary built for another architecture than the member's.
type ArchError struct {
	Host, Binary, BinaryArch, HostArch string
}

func (e *ArchError) Error() string {
	return fmt.Sprintf("host %s: the hactl binary %s is built for %s but the host is %s: build hactl for the host (GOOS=linux GOARCH=...) and pass it with --hactl-binary",
		e.Host, e.Binary, e.BinaryArch, e.HostArch)
}

// Install converges one member: probe, refuse a host whose `uname -m` is not binArch (an
// *ArchError) or that has no systemd, upload what Plan says changed (atomically, sha256 checked,
// root-owned with each file's mode; ConfigDir root-only), remove stale files, create textfileDir,
// daemon-reload when a unit changed, enable and (re)start the timer when needed. With dryRun it
// only probes and returns the plan. A member where a drop-in or environment file hactl does not
// write sets something for the backup units is refused, dry run or not (a
// *provision.ForeignOverridesError naming the host, the files and what they set).
func Install(ctx context.Context, h Host, name string, files []File, binArch, textfileDir string, dryRun bool) (Change, error) {
	f, err := Probe(ctx, h)
	if err != nil {
		return Change{}, err
	}
	switch {
	case f.Kernel != "Linux":
		return Change{}, fmt.Errorf("host %s: kernel %q: scheduled backups need Linux with systemd", name, f.Kernel)
	case !f.Systemd:
		return Change{}, fmt.Errorf("host %s: systemd is not running as init: scheduled backups run from a systemd timer", name)
	case binArch != "" && f.Arch != binArch:
		bin := ""
		for _, d := range files {
			if d.Path == BinaryPath {
				bin = d.Local
			}
		}
		return Change{}, &ArchError{Host: name, Binary: bin, BinaryArch: binArch, HostArch: f.Arch}
	case len(f.Overrides) > 0:
		return Change{}, &provision.ForeignOverridesError{Host: name, Overrides: f.Overrides}
	}
	c := Plan(files, f)
	if dryRun || c.Empty() {
		return c, nil
	}
	// ConfigDir is root-only before anything secret goes into it (Upload creates missing parents 0755).
	dirs := fmt.Sprintf("set -e\nmkdir -p %[1]s %[2]s %[3]s\nchmod 0700 %[1]s\nchmod 0755 %[3]s\n",
		shell.Quote(ConfigDir), shell.Quote(PKIDir), shell.Quote(textfileDir))
	if _, err := h.Run(ctx, "schedule/dirs", dirs); err != nil {
		return c, err
	}
	var up []provision.File
	for _, d := range files {
		if !slices.Contains(c.Write, d.Path) {
			continue
		}
		pf := provision.File{Path: d.Path, Mode: d.Mode, Content: d.Data, SHA256: d.Sum}
		if d.Local != "" {
			lf, err := os.Open(d.Local)
			if err != nil {
				return c, fmt.Errorf("host %s: %w", name, err)
			}
			defer lf.Close()
			pf.Content, pf.Reader, pf.Size = nil, lf, d.Size
		}
		up = append(up, pf)
	}
	if err := h.Upload(ctx, "schedule/install", up); err != nil {
		return c, err
	}
	var script strings.Builder
	script.WriteString("set -e\n")
	if c.StopAgent {
		fmt.Fprintf(&script, "systemctl disable --now %s >/dev/null 2>&1 || true\n", AgentServiceName)
	}
	for _, p := range c.Removed {
		fmt.Fprintf(&script, "rm -f %s\n", shell.Quote(p))
	}
	if c.Reload {
		script.WriteString("systemctl daemon-reload\n")
	}
	if c.StartTimer {
		fmt.Fprintf(&script, "systemctl enable %[1]s >/dev/null 2>&1\nsystemctl restart %[1]s\n", TimerName)
	}
	if c.RestartAgent {
		fmt.Fprintf(&script, "systemctl enable %[1]s >/dev/null 2>&1\nsystemctl restart %[1]s\n", AgentServiceName)
	}
	if _, err := h.Run(ctx, "schedule/start", script.String()); err != nil {
		var units []string
		if c.RestartAgent {
			units = append(units, AgentServiceName)
		}
		if c.StartTimer {
			units = append(units, TimerName)
		}
		return c, provision.ExplainUnitFailure(ctx, h, "schedule/start", err, units...)
	}
	return c, nil
}

// DisableRunWait bounds how long Disable waits for a run in progress to finish before it stops it:
// a run still going after its files were removed would write its textfiles again.
const DisableRunWait = 5 * time.Minute

// Disable stops and disables the timer and the delta agent, waits for a run in progress to finish
// (up to DisableRunWait, then stops it: it would write its textfiles after they are removed), and
// removes everything Install put on the member — the units, ConfigDir (spec copy, credentials,
// certificates, schedule), the hactl binary — and both textfiles the runs write (the backup's,
// named in the schedule, and CertificatesTextfile next to it). It returns the paths removed: none
// on a member without a schedule (it is idempotent).
func Disable(ctx context.Context, h Host) ([]string, error) {
	r, err := h.Run(ctx, "schedule/disable", disableScript())
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, l := range strings.Split(strings.TrimSpace(string(r.Stdout)), "\n") {
		if l != "" {
			removed = append(removed, l)
		}
	}
	return removed, nil
}

// disableScript is what Disable runs on a member (as root): it prints each path it removes.
func disableScript() string {
	var b strings.Builder
	fmt.Fprintf(&b, "set -e\ntf=$(sed -n 's/.*\"textfile\": *\"\\([^\"]*\\)\".*/\\1/p' %s 2>/dev/null || true)\n", shell.Quote(ConfigPath))
	fmt.Fprintf(&b, "cf=\nif [ -n \"$tf\" ]; then cf=$(dirname \"$tf\")/%s; fi\n", CertificatesTextfile)
	b.WriteString("for f in")
	for _, p := range append(ManagedPaths(), ConfigDir) {
		b.WriteString(" " + shell.Quote(p))
	}
	fmt.Fprintf(&b, ` $tf $cf; do if [ -e "$f" ]; then echo "$f"; fi; done
if command -v systemctl >/dev/null 2>&1; then
  systemctl disable --now %[1]s %[7]s >/dev/null 2>&1 || true
  i=0
  while [ "$(systemctl show -p ActiveState --value %[6]s 2>/dev/null)" = activating ] && [ $i -lt %[9]d ]; do sleep 1; i=$((i+1)); done
  systemctl stop %[6]s >/dev/null 2>&1 || true
fi
rm -f %[2]s %[3]s %[4]s %[8]s
if [ -n "$tf" ]; then rm -f "$tf" "$cf"; fi
rm -rf %[5]s
if command -v systemctl >/dev/null 2>&1; then systemctl daemon-reload; systemctl reset-failed %[1]s %[6]s >/dev/null 2>&1 || true; fi
`, TimerName, shell.Quote(TimerPath), shell.Quote(ServicePath), shell.Quote(BinaryPath),
		shell.Quote(ConfigDir), ServiceName, AgentServiceName, shell.Quote(AgentServicePath), int(DisableRunWait/time.Second))
	return b.String()
}

// HostStatus is one member's schedule as systemd and the last run's textfile show it.
type HostStatus struct {
	Host string `json:"host"`
	// Installed: the schedule's config exists on the member.
	Installed bool    `json:"installed"`
	Config    *Config `json:"config,omitempty"`
	// Timer: systemctl show of the timer (ActiveState, UnitFileState); NextElapse and LastTrigger
	// zero when unknown or never.
	TimerActive  string    `json:"timerActive"`
	TimerEnabled string    `json:"timerEnabled"`
	NextElapse   time.Time `json:"nextElapse,omitzero"`
	LastTrigger  time.Time `json:"lastTrigger,omitzero"`
	// ServiceResult is the service's last Result ("success", "exit-code", ...); ServiceState its
	// ActiveState ("inactive" between runs, "activating" during one).
	ServiceResult string `json:"serviceResult,omitempty"`
	ServiceState  string `json:"serviceState,omitempty"`
	// AgentState is the delta agent's ActiveState ("" without --deltas).
	AgentState string `json:"agentState,omitempty"`
	// LastRun is what the member's textfile says (nil before the first run).
	LastRun *Metrics `json:"lastRun,omitempty"`
	// Error is why the member could not be read ("" when it was).
	Error string `json:"error,omitempty"`
}

// statusRequest is what Status gathers (one read-only command, provision's facts probe): the
// timer's and the service's states, the schedule, and the textfile the schedule names.
func statusRequest() provision.FactsRequest {
	return provision.FactsRequest{
		Units:          []string{TimerName, ServiceName, AgentServiceName},
		UnitProperties: []string{"NextElapseUSecRealtime", "LastTriggerUSec", "Result"},
		Read:           []string{ConfigPath},
		Probes: []provision.Probe{{Name: "schedule", Script: fmt.Sprintf(`tf=$(sed -n 's/.*"textfile": *"\([^"]*\)".*/\1/p' %s 2>/dev/null || true)
if [ -n "$tf" ] && [ -f "$tf" ]; then fact schedule.textfile "$(base64 -w0 "$tf")"; fi`, shell.Quote(ConfigPath))}},
	}
}

// Status reads one member's schedule (one read-only command).
func Status(ctx context.Context, h Host, name string) HostStatus {
	pf, err := provision.GatherFacts(ctx, h, "schedule/status", statusRequest())
	if err != nil {
		return HostStatus{Host: name, Error: err.Error()}
	}
	return statusFrom(name, pf)
}

// statusFrom reads a member's schedule from its gathered facts.
func statusFrom(name string, pf *provision.Facts) HostStatus {
	st := HostStatus{Host: name}
	t := pf.Units[TimerName].Properties
	st.TimerActive, st.TimerEnabled = t["ActiveState"], t["UnitFileState"]
	st.NextElapse, st.LastTrigger = parseTimestamp(t["NextElapseUSecRealtime"]), parseTimestamp(t["LastTriggerUSec"])
	s := pf.Units[ServiceName].Properties
	st.ServiceState, st.ServiceResult = s["ActiveState"], s["Result"]
	if a, ok := pf.Units[AgentServiceName]; ok && a.Load == "loaded" {
		st.AgentState = a.Active
	}
	if js := strings.TrimSpace(string(pf.Files[ConfigPath])); js != "" {
		var c Config
		if err := json.Unmarshal([]byte(js), &c); err != nil {
			st.Error = fmt.Sprintf("%s: %v", ConfigPath, err)
		} else {
			st.Installed, st.Config = true, &c
		}
	}
	if b64 := pf.Value("schedule.textfile"); b64 != "" {
		if raw, err := base64.StdEncoding.DecodeString(b64); err == nil {
			if m, err := Parse(raw); err == nil {
				st.LastRun = &m
			}
		}
	}
	return st
}

// parseTimestamp reads a systemctl show timestamp: "@<unix seconds>" (--timestamp=unix) or the
// default "Tue 2026-12-01 03:05:00 UTC"; zero for "", "n/a", "0" or anything else.
func parseTimestamp(s string) time.Time {
	s = strings.TrimSpace(s)
	if rest, ok := strings.CutPrefix(s, "@"); ok {
		if n, err := strconv.ParseInt(rest, 10, 64); err == nil && n > 0 {
			return time.Unix(n, 0).UTC()
		}
		return time.Time{}
	}
	if t, err := time.Parse("Mon 2006-01-02 15:04:05 MST", s); err == nil {
		return t.UTC()
	}
	return time.Time{}
}

// TextfilePath is the textfile in dir.
func TextfilePath(dir string) string { return path.Join(dir, TextfileName) }
