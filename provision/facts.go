package provision

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hactl/hactl/internal/shell"
)

// Host facts: what hactl knows about a host before it changes anything. They come in two parts,
// both written by shell scripts in the one line codec of this file ("key=value" lines, see
// ParseFacts):
//
//   - HostInfo (kernel, architecture, os-release, systemd, package manager) is gathered by the
//     connect-time probe, in the same command that detects the privilege (the way k0sproject/rig
//     detects the OS when it connects): it costs no extra round trip.
//   - Facts is what one command built from a FactsRequest reports: file checksums and modes, file
//     contents, unit states, leftovers of interrupted uploads, listening ports, addresses, the
//     clock, and whatever caller-provided Probes print. A command gathers every caller's request at
//     once (FactsRequest.Merge): one command per host per run.

// HostInfo is what the connect-time probe reports about a host (see [Client.Host]).
type HostInfo struct {
	// UID is the login user's uid (`id -u`; commands run as root whatever it is, see Privilege).
	UID int
	// Kernel is `uname -s` ("Linux"), Arch `uname -m` ("x86_64", "aarch64").
	Kernel, Arch string
	// OSID, OSLike, OSVersion and OSPretty are os-release's ID, ID_LIKE, VERSION_ID and PRETTY_NAME
	// (os-release(5); "" when /etc/os-release is missing).
	OSID, OSLike, OSVersion, OSPretty string
	// Systemd: systemd runs as init (/run/systemd/system exists, sd_booted(3)'s test).
	Systemd bool
	// PackageManager is the first of apt-get, dnf and yum on the login PATH ("" when none).
	PackageManager string
}

// hostInfoScript prints HostInfo's keys (except uid, which the privilege probe prints itself). It
// runs os-release in a subshell so its variables stay there.
const hostInfoScript = `fact host.kernel "$(uname -s)"
fact host.arch "$(uname -m)"
( if [ -r /etc/os-release ]; then . /etc/os-release; fi
  fact host.os.id "${ID:-}"; fact host.os.like "${ID_LIKE:-}"; fact host.os.version "${VERSION_ID:-}"; fact host.os.pretty "${PRETTY_NAME:-}" )
if [ -d /run/systemd/system ]; then fact host.systemd yes; else fact host.systemd no; fi
for pm in apt-get dnf yum; do if command -v "$pm" >/dev/null 2>&1; then fact host.pm "$pm"; break; fi; done
`

// factPrelude defines `fact KEY VALUE`, the only way the scripts print a fact. VALUE must be one
// line (callers base64-encode anything else).
const factPrelude = `fact() { printf '%s=%s\n' "$1" "$2"; }
`

// hostInfo reads HostInfo's keys from parsed facts.
func hostInfo(v map[string][]string) HostInfo {
	last := func(k string) string {
		if vs := v[k]; len(vs) > 0 {
			return vs[len(vs)-1]
		}
		return ""
	}
	h := HostInfo{UID: -1, Kernel: last("host.kernel"), Arch: last("host.arch"), OSID: last("host.os.id"), OSLike: last("host.os.like"),
		OSVersion: last("host.os.version"), OSPretty: last("host.os.pretty"), Systemd: last("host.systemd") == "yes", PackageManager: last("host.pm")}
	if uid, err := strconv.Atoi(last("uid")); err == nil {
		h.UID = uid
	}
	return h
}

// Probe is a caller's addition to a facts command: Script is POSIX sh run as root after the
// request's own facts, printing its facts with `fact KEY VALUE` (KEY namespaced by the caller,
// e.g. "etcd.data"; VALUE one line). It must change nothing on the host beyond temporary files it
// removes itself. Its facts are read back with [Facts.Value] and [Facts.Values].
type Probe struct {
	// Name identifies the probe (Merge keeps one probe per name).
	Name   string
	Script string
}

// FactsRequest is what one facts command gathers. Every part is optional; an empty request still
// reports the clock (when Clock is set) and proves the host answers.
type FactsRequest struct {
	// Files are absolute paths whose sha256, mode, owner and group are reported when they exist as
	// regular files (Facts.Sums, Facts.Modes).
	Files []string
	// SumCache, when set, is a root-only file on the host (e.g. DefaultSumCache) where the facts
	// command keeps the sha256 of each of Files with the file's identity — device, inode, size,
	// mtime and ctime in nanoseconds, as git's index does — and reuses it while that identity is
	// unchanged: any write to a file changes its ctime (POSIX stat(2): st_ctime is updated on every
	// change of content or status, and no call sets it), so a cached sum is never stale. A re-run
	// then hashes nothing (tens of MiB of etcd binaries per host). Where stat cannot report
	// nanoseconds (not GNU coreutils) every file is hashed. "": every file is hashed, nothing is
	// written.
	SumCache string
	// Read are public files whose content is reported (Facts.Files): certificates, units; never
	// keys. A file over 1 MiB is not read.
	Read []string
	// Units are systemd units whose load, active and enablement state, main PID and start time
	// are reported (Facts.Units); a unit name without a suffix means ".service".
	Units []string
	// UnitProperties are more systemctl show properties reported for every unit
	// (UnitState.Properties), e.g. "NextElapseUSecRealtime".
	UnitProperties []string
	// UnitFiles are systemd units whose unit file, drop-ins and environment files are reported
	// (Facts.UnitFiles; see Overrides); a unit name without a suffix means ".service".
	UnitFiles []string
	// StaleDirs are directories searched for temp files of interrupted uploads
	// (".<name>.hactl-tmp-*", see Upload; Facts.Stale).
	StaleDirs []string
	// Commands are programs looked up on root's PATH (Facts.Commands).
	Commands []string
	// Listen reports the TCP ports in LISTEN state, IPv4 and IPv6 (Facts.Listen).
	Listen bool
	// Addrs reports `ip -json addr show` (Facts.AddrsJSON).
	Addrs bool
	// Clock measures the host's clock against this machine's (Facts.ClockOffset, ClockError).
	Clock bool
	// Probes are the callers' own scripts, run last, in order.
	Probes []Probe
}

// Merge returns the request that gathers everything r and o gather (lists deduplicated in order;
// probes by name).
func (r FactsRequest) Merge(o FactsRequest) FactsRequest {
	union := func(a, b []string) []string {
		out := slices.Clone(a)
		for _, s := range b {
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
		return out
	}
	m := FactsRequest{
		Files:          union(r.Files, o.Files),
		SumCache:       cmp.Or(r.SumCache, o.SumCache),
		Read:           union(r.Read, o.Read),
		Units:          union(r.Units, o.Units),
		UnitProperties: union(r.UnitProperties, o.UnitProperties),
		UnitFiles:      union(r.UnitFiles, o.UnitFiles),
		StaleDirs:      union(r.StaleDirs, o.StaleDirs),
		Commands:       union(r.Commands, o.Commands),
		Listen:         r.Listen || o.Listen,
		Addrs:          r.Addrs || o.Addrs,
		Clock:          r.Clock || o.Clock,
		Probes:         slices.Clone(r.Probes),
	}
	for _, p := range o.Probes {
		if !slices.ContainsFunc(m.Probes, func(q Probe) bool { return q.Name == p.Name }) {
			m.Probes = append(m.Probes, p)
		}
	}
	return m
}

// FileMode is a file's permission bits and owner as `stat` reports them.
type FileMode struct {
	Perm         fs.FileMode
	Owner, Group string
}

// UnitState is a systemd unit's state (systemctl show).
type UnitState struct {
	// Load is LoadState ("loaded", "not-found", "masked"), Active ActiveState ("active",
	// "inactive", "failed", "activating", ...), Enabled UnitFileState ("enabled", "disabled",
	// "static", ...; "" for a unit without a unit file).
	Load, Active, Enabled string
	// MainPID is the main process (0 when none); Started is ExecMainStartTimestamp as systemctl
	// prints it: "@<unix seconds>" where systemd has --timestamp=unix (v248+), else its default
	// "Mon 2026-11-30 06:00:00 UTC"; "" when the unit never ran.
	MainPID int
	Started string
	// Properties holds every property systemctl printed, FactsRequest.UnitProperties included
	// (timestamps as for Started).
	Properties map[string]string
}

// Facts is what a facts command reported about a host.
type Facts struct {
	// Host is the connection's HostInfo (zero from ParseFacts).
	Host HostInfo
	// UID is the uid the facts command ran as: 0 when commands run as root (directly or through
	// sudo, see Privilege), whatever the login user's (Host.UID); -1 when not reported.
	UID int
	// Sums maps each path of FactsRequest.Files that exists to its sha256 (hex); Modes to its mode.
	Sums  map[string]string
	Modes map[string]FileMode
	// Files maps each path of FactsRequest.Read that exists to its content.
	Files map[string][]byte
	// Units maps each unit asked about, as named in the request, to its state.
	Units map[string]UnitState
	// UnitFiles maps each unit of FactsRequest.UnitFiles, as named in the request, to the files
	// systemd reads for it (a unit without any: zero UnitFiles).
	UnitFiles map[string]UnitFiles
	// Stale are the temp files of interrupted uploads found in FactsRequest.StaleDirs.
	Stale []string
	// Commands are the FactsRequest.Commands found on PATH.
	Commands map[string]bool
	// Listen are the TCP ports in LISTEN state.
	Listen map[int]bool
	// AddrsJSON is `ip -json addr show` (nil when not asked or ip is missing).
	AddrsJSON []byte
	// ClockOffset is the host's clock minus this machine's: the midpoint of the command on the host
	// against the midpoint of its round trip; ClockError bounds its error (half the round trip not
	// spent running the command); RTT is the round trip. Zero unless FactsRequest.Clock.
	ClockOffset, ClockError, RTT time.Duration

	values map[string][]string
}

// Value returns the last value a probe printed for key ("" when none).
func (f *Facts) Value(key string) string {
	if vs := f.values[key]; len(vs) > 0 {
		return vs[len(vs)-1]
	}
	return ""
}

// Values returns every value printed for key, in order.
func (f *Facts) Values(key string) []string { return f.values[key] }

// Has reports whether key was printed at all.
func (f *Facts) Has(key string) bool { _, ok := f.values[key]; return ok }

// DefaultSumCache is where hactl keeps its checksum cache on the hosts (FactsRequest.SumCache).
const DefaultSumCache = "/var/cache/hactl/sha256.cache"

// sumCacheScript hashes "$@" through the checksum cache at cache (FactsRequest.SumCache): one stat
// for all files and an awk join with the cache; sha256sum for the misses only, and only then the
// cache written again (temp + rename, 0600; entries of other files kept), so a run that hashes
// nothing writes nothing. Cache lines are "<identity> <sha256> <path>"; paths may hold spaces, not
// newlines.
func sumCacheScript(cache string) string {
	return fmt.Sprintf(`  c=%[1]s; miss=0; plan=""
  if stat -c '%%.9Z' / >/dev/null 2>&1; then
    [ -f "$c" ] || { mkdir -p -m 0700 "${c%%/*}" 2>/dev/null && : >"$c"; } 2>/dev/null
    if [ -r "$c" ]; then
      plan=$(stat -c '%%d:%%i:%%s:%%.9Y:%%.9Z %%n' "$@" | awk 'FILENAME == ARGV[1] { p=$0; sub(/^[^ ]+ [^ ]+ /, "", p); sum[$1 " " p]=$2; next }
        { p=$0; sub(/^[^ ]+ /, "", p); if (($1 " " p) in sum) print "hit " $1 " " sum[$1 " " p] " " p; else print "miss " $1 " - " p }' "$c" -)
    fi
  fi
  if [ -n "$plan" ]; then
    new=""
    while IFS= read -r l; do
      r=${l#* }; key=${r%%%% *}; r=${r#* }; s=${r%%%% *}; p=${r#* }
      case "$l" in miss\ *) s=$(sha256sum <"$p" | cut -d' ' -f1); miss=1 ;; esac
      fact sum "$s $p"; new="$new$key $s $p
"
    done <<HACTL_PLAN
$plan
HACTL_PLAN
    if [ "$miss" = 1 ] && k=$(mktemp "$c.XXXXXXXX" 2>/dev/null); then
      { printf '%%s' "$new"; printf '%%s\n' "$plan" | awk 'NR == FNR { p=$0; sub(/^[^ ]+ [^ ]+ [^ ]+ /, "", p); cur[p]=1; next }
          { p=$0; sub(/^[^ ]+ [^ ]+ /, "", p); if (!(p in cur)) print }' - "$c"; } >"$k" && chmod 0600 "$k" && mv -f "$k" "$c" || rm -f "$k"
    fi
  else
    sha256sum "$@" | while read -r s p; do fact sum "$s $p"; done
  fi
`, shell.Quote(cache))
}

// maxReadBytes bounds a file FactsRequest.Read reports.
const maxReadBytes = 1 << 20

// FactsScript returns the one read-only command that gathers r. Its output is ParseFacts's input.
func FactsScript(r FactsRequest) string {
	var b strings.Builder
	b.WriteString(factPrelude)
	b.WriteString("fact uid \"$(id -u)\"\n")
	if r.Clock {
		b.WriteString("fact time.start \"$(date +%s%N)\"\n")
	}
	if len(r.Files) > 0 {
		// One stat for the modes; sha256sum for the files the checksum cache does not vouch for.
		fmt.Fprintf(&b, `set --
for f in %s; do if [ -f "$f" ]; then set -- "$@" "$f"; fi; done
if [ $# -gt 0 ]; then
  stat -c '%%a %%U %%G %%n' "$@" | while read -r m u g p; do fact mode "$m $u $g $p"; done
`, shell.Join(r.Files...))
		if r.SumCache != "" {
			b.WriteString(sumCacheScript(r.SumCache))
		} else {
			b.WriteString("  sha256sum \"$@\" | while read -r s p; do fact sum \"$s $p\"; done\n")
		}
		b.WriteString("fi\n")
	}
	if len(r.Read) > 0 {
		// One stat for the sizes, then base64 straight to the output (no command substitution).
		fmt.Fprintf(&b, `set --
for f in %s; do if [ -f "$f" ]; then set -- "$@" "$f"; fi; done
if [ $# -gt 0 ]; then
  while read -r n f; do
    if [ "$n" -le %d ]; then printf 'file='; base64 -w0 "$f"; printf ' %%s\n' "$f"; fi
  done <<HACTL_READ
$(stat -c '%%s %%n' "$@")
HACTL_READ
fi
`, shell.Join(r.Read...), maxReadBytes)
	}
	if len(r.Units) > 0 {
		props := strings.Join(append([]string{"Id", "LoadState", "ActiveState", "UnitFileState", "MainPID", "ExecMainStartTimestamp"}, r.UnitProperties...), ",")
		fmt.Fprintf(&b, `if command -v systemctl >/dev/null 2>&1; then
  { systemctl show --timestamp=unix -p %[1]s -- %[2]s 2>/dev/null || systemctl show -p %[1]s -- %[2]s 2>/dev/null; } | while IFS= read -r l; do fact unit "$l"; done
fi
`, shell.Quote(props), shell.Join(unitNames(r.Units)...))
	}
	if len(r.UnitFiles) > 0 {
		b.WriteString(unitFilesScript(unitNames(r.UnitFiles)))
	}
	if len(r.StaleDirs) > 0 {
		fmt.Fprintf(&b, `for d in %s; do for f in "$d"/.*.hactl-tmp-*; do if [ -f "$f" ]; then fact stale "$f"; fi; done; done
`, shell.Join(r.StaleDirs...))
	}
	if len(r.Commands) > 0 {
		fmt.Fprintf(&b, `for c in %s; do if command -v "$c" >/dev/null 2>&1; then fact command "$c"; fi; done
`, shell.Join(r.Commands...))
	}
	if r.Listen {
		b.WriteString(`awk '$4=="0A"{split($2,a,":"); print "listen=" a[2]}' /proc/net/tcp /proc/net/tcp6 2>/dev/null
`)
	}
	if r.Addrs {
		b.WriteString(`if command -v ip >/dev/null 2>&1; then fact addrs "$(ip -json addr show | tr -d '\n')"; fi
`)
	}
	for _, p := range r.Probes {
		b.WriteString("# probe " + p.Name + "\n")
		b.WriteString(strings.TrimRight(p.Script, "\n") + "\n")
	}
	if r.Clock {
		b.WriteString("fact time.end \"$(date +%s%N)\"\n")
	}
	b.WriteString("fact end ok\n")
	return b.String()
}

// unitNames gives every unit its suffix (systemctl show prints the full Id).
func unitNames(units []string) []string {
	out := make([]string, len(units))
	for i, u := range units {
		out[i] = fullUnit(u)
	}
	return out
}

func fullUnit(u string) string {
	if path.Ext(u) == "" {
		return u + ".service"
	}
	return u
}

// IncompleteFactsError: the facts command's output ended before its last line (the command was cut
// off, or /bin/sh is not a POSIX shell).
type IncompleteFactsError struct{ Output string }

func (e *IncompleteFactsError) Error() string {
	first, _, _ := strings.Cut(e.Output, "\n")
	return fmt.Sprintf("the facts command's output is incomplete (no end line; is /bin/sh a POSIX shell?): first line %q", first)
}

// ParseFacts reads FactsScript(r)'s output (and the connect probe's): "key=value" lines; lines
// without "=" are ignored. sent and received bracket the command on this machine's clock (for
// the clock offset). It returns an *IncompleteFactsError when the end line is missing.
func ParseFacts(r FactsRequest, out []byte, sent, received time.Time) (*Facts, error) {
	f := &Facts{Sums: map[string]string{}, Modes: map[string]FileMode{}, Files: map[string][]byte{}, Units: map[string]UnitState{},
		Commands: map[string]bool{}, Listen: map[int]bool{}, values: map[string][]string{}}
	v, err := parseLines(out)
	if err != nil {
		return nil, err
	}
	if len(v["end"]) == 0 {
		return nil, &IncompleteFactsError{Output: string(out)}
	}
	f.values = v
	f.UID = -1
	if uid, err := strconv.Atoi(f.Value("uid")); err == nil {
		f.UID = uid
	}
	for _, s := range v["sum"] {
		if sum, p, ok := strings.Cut(s, " "); ok && IsSHA256(sum) {
			f.Sums[p] = sum
		}
	}
	for _, s := range v["mode"] {
		parts := strings.SplitN(s, " ", 4)
		if len(parts) != 4 {
			continue
		}
		perm, err := strconv.ParseUint(parts[0], 8, 32)
		if err != nil {
			continue
		}
		f.Modes[parts[3]] = FileMode{Perm: fs.FileMode(perm), Owner: parts[1], Group: parts[2]}
	}
	for _, s := range v["file"] {
		b64, p, ok := strings.Cut(s, " ")
		if !ok {
			continue
		}
		if raw, err := decodeBase64(b64); err == nil {
			f.Files[p] = raw
		}
	}
	f.Units = parseUnits(r.Units, v["unit"])
	if len(r.UnitFiles) > 0 {
		f.UnitFiles = parseUnitFiles(r.UnitFiles, v)
	}
	for _, s := range v["stale"] {
		if base := path.Base(s); strings.HasPrefix(base, ".") && strings.Contains(base, ".hactl-tmp-") {
			f.Stale = append(f.Stale, s)
		}
	}
	for _, c := range v["command"] {
		f.Commands[c] = true
	}
	for _, s := range v["listen"] {
		if port, err := strconv.ParseInt(s, 16, 32); err == nil {
			f.Listen[int(port)] = true
		}
	}
	if a := v["addrs"]; len(a) > 0 {
		f.AddrsJSON = []byte(a[len(a)-1])
	}
	if r.Clock {
		if err := f.clock(v, sent, received); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// parseLines splits "key=value" lines into values by key, in order.
func parseLines(out []byte) (map[string][]string, error) {
	v := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), 4*maxReadBytes) // ip -json addr and base64 files: long lines
	for sc.Scan() {
		if k, val, ok := strings.Cut(sc.Text(), "="); ok && k != "" {
			v[k] = append(v[k], val)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading facts: %w", err)
	}
	return v, nil
}

// parseUnits reads systemctl show's blocks ("unit=Key=Value" lines, an empty value between units)
// and maps them to the units as asked.
func parseUnits(asked []string, lines []string) map[string]UnitState {
	byID := map[string]UnitState{}
	var id string
	st := UnitState{Properties: map[string]string{}}
	flush := func() {
		if id != "" {
			byID[id] = st
		}
		id, st = "", UnitState{Properties: map[string]string{}}
	}
	for _, l := range lines {
		k, val, ok := strings.Cut(l, "=")
		if !ok {
			flush()
			continue
		}
		st.Properties[k] = val
		switch k {
		case "Id":
			id = val
		case "LoadState":
			st.Load = val
		case "ActiveState":
			st.Active = val
		case "UnitFileState":
			st.Enabled = val
		case "MainPID":
			st.MainPID, _ = strconv.Atoi(val)
		case "ExecMainStartTimestamp":
			st.Started = val
		}
	}
	flush()
	out := map[string]UnitState{}
	for _, u := range asked {
		if st, ok := byID[fullUnit(u)]; ok {
			out[u] = st
		}
	}
	return out
}

// clock computes the offset from time.start and time.end: the command's own run time (hashing
// binaries) is not network delay, so the command's midpoint is compared with the round trip's
// midpoint and the error is half of what remains.
func (f *Facts) clock(v map[string][]string, sent, received time.Time) error {
	ns := func(k string) (int64, error) {
		vs := v[k]
		if len(vs) == 0 {
			return 0, nil
		}
		n, err := strconv.ParseInt(vs[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("facts: remote time %q: %w", vs[0], err)
		}
		return n, nil
	}
	start, err := ns("time.start")
	if err != nil {
		return err
	}
	if start == 0 {
		return fmt.Errorf("facts: the host did not report its time (date +%%s%%N)")
	}
	end, err := ns("time.end")
	if err != nil {
		return err
	}
	if end < start {
		end = start
	}
	f.RTT = received.Sub(sent)
	ran := min(time.Duration(end-start), f.RTT)
	remoteMid := time.Unix(0, start+(end-start)/2)
	f.ClockOffset = remoteMid.Sub(sent.Add(f.RTT / 2))
	f.ClockError = (f.RTT - ran) / 2
	return nil
}

// Facts runs FactsScript(r) on the host (one command, as root) and parses its output; the result
// carries the connection's HostInfo. step names the caller's step in errors. Errors: the command's
// (*CommandError), or ParseFacts's.
func (c *Client) Facts(ctx context.Context, step string, r FactsRequest) (*Facts, error) {
	return GatherFacts(ctx, c, step, r)
}

// Runner runs one remote command: a *Client, or a fake in tests.
type Runner interface {
	Run(ctx context.Context, step, command string, opts ...RunOption) (Result, error)
}

// hostInfoer is implemented by *Client.
type hostInfoer interface{ Host() HostInfo }

// GatherFacts is [Client.Facts] for any Runner (HostInfo is filled in when the runner is a
// *Client or has a Host method).
func GatherFacts(ctx context.Context, run Runner, step string, r FactsRequest) (*Facts, error) {
	sent := time.Now()
	res, err := run.Run(ctx, step, FactsScript(r))
	received := time.Now()
	if err != nil {
		return nil, err
	}
	f, err := ParseFacts(r, res.Stdout, sent, received)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", step, err)
	}
	if h, ok := run.(hostInfoer); ok {
		f.Host = h.Host()
	}
	return f, nil
}

func decodeBase64(s string) ([]byte, error) { return base64.StdEncoding.DecodeString(s) }

// IsSHA256 reports whether s is a sha256 in lower-case hex, as sha256sum prints it.
func IsSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// InstallCommand returns the command installing pkgs with package manager pm (HostInfo's: apt-get,
// dnf, yum), non-interactively. apt-get refreshes its index only when the first attempt fails (a
// fresh image has none). Errors: pm is none of the three.
func InstallCommand(pm string, pkgs []string) (string, error) {
	list := shell.Join(pkgs...)
	switch pm {
	case "apt-get":
		inst := "DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends " + list
		return inst + " || { apt-get update && " + inst + "; }", nil
	case "dnf", "yum":
		return pm + " install -y " + list, nil
	default:
		return "", fmt.Errorf("no supported package manager (apt-get, dnf, yum) to install %s", list)
	}
}
