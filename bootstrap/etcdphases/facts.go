package etcdphases

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/internal/percentile"
	"github.com/hactl/hactl/internal/shell"
	"github.com/hactl/hactl/provision"
)

// DataState describes an etcd data directory found on a host.
type DataState string

// Data directory states.
const (
	DataAbsent  DataState = "absent"  // the directory does not exist
	DataEmpty   DataState = "empty"   // exists and is empty
	DataMember  DataState = "member"  // holds etcd data (a member/ directory)
	DataForeign DataState = "foreign" // non-empty without member/: not etcd's, hactl won't touch it
)

// Facts is the etcd group's view of what preflight gathered on a member (factsFrom).
type Facts struct {
	UID         int
	Kernel      string // uname -s
	Arch        string // uname -m
	OSID        string
	OSPretty    string
	Systemd     bool
	ClockOffset time.Duration // remote clock minus local clock: midpoint of the script vs midpoint of the round trip
	ClockError  time.Duration // bound on ClockOffset's error: half the round trip not spent running the script
	RTT         time.Duration // round trip of the gathering command
	// TimeSync is the first active time sync service among TimeSyncServices ("" when none is active
	// or systemctl is missing).
	TimeSync string
	// NTPSynchronized is timedatectl's NTPSynchronized property: "yes", "no", or "" when unknown.
	NTPSynchronized string
	// Fsync is the write+fdatasync latency probe of the data dir's filesystem.
	Fsync       FsyncProbe
	EtcdActive  string // systemctl is-active etcd
	EtcdPID     int
	EtcdRunning bool   // an etcd process exists, whatever systemd says
	EtcdStarted string // ExecMainStartTimestamp, to prove a re-run did not restart etcd
	Data        DataState
	DiskAvail   int64 // bytes free on the filesystem holding the data dir
	// Quota is the backend quota the running etcd enforces, in bytes (0 when no etcd runs or it
	// could not be read), and QuotaFrom where it was read: "metrics" (etcd_server_quota_backend_bytes
	// on its loopback metrics listener) or "flags" (its command line's --quota-backend-bytes).
	Quota       int64
	QuotaFrom   string
	Marker      *etcd.Marker      // nil when absent or unreadable
	Sums        map[string]string // path -> sha256 hex of files that exist
	Stale       []string          // temp files left by interrupted uploads (removed by etcd/install)
	ListenPorts map[int]bool      // TCP ports in LISTEN state (IPv4 and IPv6)
	// Release is the record of the etcd release tarball installed by a download install (nil when
	// absent).
	Release *Release
	// Files holds the content of the public files read back (certificates, the etcd unit), by path;
	// never private keys.
	Files map[string][]byte
}

// TimeSyncServices are the systemd units whose state preflight reports, in order of preference.
var TimeSyncServices = []string{"chrony", "chronyd", "systemd-timesyncd", "ntp", "ntpd", "ntpsec", "openntpd"}

// Fsync probe shape: like etcd's WAL (and the fio job etcd's docs use to qualify a disk), appends of
// 2300 bytes, each followed by fdatasync (dd oflag=dsync), fsyncSamples of them.
const (
	fsyncSamples   = 50
	fsyncBaseline  = 10
	fsyncBlockSize = 2300
	// MaxFsyncP99 is etcd's guidance: the 99th percentile of wal_fsync_duration_seconds should stay
	// under 10 ms (etcd docs, "Hardware recommendations" / "tuning"; above it members miss
	// heartbeats under load). Preflight warns above it.
	MaxFsyncP99 = 10 * time.Millisecond
)

// FsyncProbe is the result of the facts script's fsync probe.
type FsyncProbe struct {
	Dir      string        // directory the probe file was written in (the data dir, or its nearest existing parent)
	Samples  int           // number of timed writes
	P50, P99 time.Duration // latency of one 2300-byte write with fdatasync, process start-up subtracted
	Err      string        // why no measurement was made ("" when Samples > 0)
}

// factsRequest is what preflight gathers on every member (one command with the other groups'
// requests, runctx.Run.Connect): the managed files' checksums and stale upload temps, the public
// files read back (unit, certificates: recovery), etcd's and the time sync services' units,
// listening ports, the clock, and the etcd probe (etcdProbeScript).
func (fs *fileSet) factsRequest() provision.FactsRequest {
	return factsRequestFor(fs.spec.Spec.Etcd.DataDir, fs.remotePaths(), readPaths)
}

// factsRequestFor is factsRequest for a data dir, the managed paths and the public files to read.
func factsRequestFor(dataDir string, paths, read []string) provision.FactsRequest {
	dirs := map[string]bool{}
	for _, p := range paths {
		dirs[path.Dir(p)] = true
	}
	sorted := make([]string, 0, len(dirs))
	for d := range dirs {
		sorted = append(sorted, d)
	}
	sort.Strings(sorted)
	return provision.FactsRequest{
		Files:     paths,
		SumCache:  provision.DefaultSumCache, // the etcd binaries are tens of MiB: hashed once, not every run
		Read:      append(slices.Clone(read), remoteMarker),
		Units:     append([]string{unitName}, TimeSyncServices...),
		StaleDirs: sorted,
		Listen:    true,
		Clock:     true,
		Probes:    []provision.Probe{{Name: "etcd", Script: etcdProbeScript(dataDir)}},
	}
}

// etcdProbeScript reports what the generic facts do not: whether an etcd process runs (whatever
// systemd says), NTP synchronisation, the data dir's state and free space, hactl's marker and
// release record, and the fsync probe (fsyncProbeScript). Keys: etcd.running, etcd.ntp, etcd.data,
// etcd.disk_avail_kb, etcd.release (lines), etcd.fsync_*, etcd.quota (quotaScript).
func etcdProbeScript(dataDir string) string {
	q := shell.Quote
	var b strings.Builder
	b.WriteString(`if command -v timedatectl >/dev/null 2>&1; then fact etcd.ntp "$(timedatectl show -p NTPSynchronized --value 2>/dev/null)"; fi
if pgrep -x etcd >/dev/null 2>&1; then fact etcd.running yes; fi
`)
	b.WriteString(quotaScript)
	fmt.Fprintf(&b, "D=%s\n", q(dataDir))
	b.WriteString(`if [ -d "$D/member" ]; then data=member
elif [ -d "$D" ] && [ -n "$(ls -A "$D" 2>/dev/null | grep -vx lost+found | grep -v '^\.hactl-fsync-probe\.')" ]; then data=foreign
elif [ -d "$D" ]; then data=empty
elif [ -e "$D" ]; then data=foreign
else data=absent; fi
fact etcd.data "$data"
p="$D"; while [ ! -e "$p" ]; do p=$(dirname "$p"); done
fact etcd.disk_avail_kb "$(df -Pk "$p" | awk 'NR==2{print $4}')"
`)
	fmt.Fprintf(&b, "if [ -r %[1]s ]; then while IFS= read -r l; do fact etcd.release \"$l\"; done <%[1]s; fi\n", q(remoteRelease))
	b.WriteString(fsyncProbeScript)
	return b.String()
}

// quotaScript reads back the quota the running etcd enforces (etcd.quota="<from> <bytes>"): from
// its metrics (etcd_server_quota_backend_bytes, on the loopback listener every member has) with curl
// or wget when either is installed, else from its command line (/proc/<pid>/cmdline).
var quotaScript = fmt.Sprintf(`if pid=$(pgrep -xo etcd 2>/dev/null); then
  q=$( { if command -v curl >/dev/null 2>&1; then curl -fsS --max-time 2 http://127.0.0.1:%[1]d/metrics
         elif command -v wget >/dev/null 2>&1; then wget -q -T 2 -O - http://127.0.0.1:%[1]d/metrics; fi; } 2>/dev/null | awk '$1 == "etcd_server_quota_backend_bytes" { print $2; exit }')
  if [ -n "$q" ]; then fact etcd.quota "metrics $q"
  else
    q=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | sed -n 's/^--*quota-backend-bytes=//p' | tail -n 1)
    if [ -n "$q" ]; then fact etcd.quota "flags $q"; fi
  fi
fi
`, etcd.MetricsPort)

// fsyncProbeScript measures write+fdatasync latency where the data dir lives, with nothing but a
// POSIX shell and coreutils: fsyncSamples appends of fsyncBlockSize bytes with dd oflag=dsync (O_DSYNC:
// every write is followed by the equivalent of fdatasync, as etcd's WAL does), each timed with
// date +%s%N; the same loop writing to /dev/null gives the cost of starting dd and date, whose
// median is subtracted from every sample by factsFrom. A host whose data dir already holds etcd data
// is not probed: the probe matters before installing, and a re-run must not write into a live
// member's data dir (nor pay ~0.5 s per host). The probe file (.hactl-fsync-probe.<pid>) is
// written in the data dir when it exists and is not foreign, else in its nearest existing parent,
// and removed (also on failure); the data dir check above ignores such files. It runs in a subshell
// so a failure (no %N in date, no oflag=dsync in dd, a read-only filesystem) only reports fsync_err.
var fsyncProbeScript = fmt.Sprintf(`if [ "$data" = member ]; then
  echo "etcd.fsync_err=skipped: etcd already keeps its data here (its wal_fsync_duration_seconds metric is the measure now)"
else
pd="$D"
if [ ! -d "$pd" ] || [ "$data" = foreign ]; then pd=$(dirname "$D"); fi
while [ ! -d "$pd" ]; do pd=$(dirname "$pd"); done
echo "etcd.fsync_dir=$pd"
(
  case "$(date +%%s%%N)" in *[!0-9]*) echo "etcd.fsync_err=date +%%s%%N does not report nanoseconds"; exit 0;; esac
  f="$pd/.hactl-fsync-probe.$$"
  rm -f "$pd"/.hactl-fsync-probe.* 2>/dev/null
  trap 'rm -f "$f"' EXIT
  s=""; i=0; t=$(date +%%s%%N)
  while [ $i -lt %[1]d ]; do
    e=$(dd if=/dev/zero of=/dev/null bs=%[3]d count=1 2>&1) || { echo "etcd.fsync_err=dd: $(echo "$e" | head -n1)"; exit 0; }
    n=$(date +%%s%%N); s="$s $((n-t))"; t=$n; i=$((i+1))
  done
  echo "etcd.fsync_base=$s"
  s=""; i=0; t=$(date +%%s%%N)
  while [ $i -lt %[2]d ]; do
    e=$(dd if=/dev/zero of="$f" bs=%[3]d count=1 seek=$i conv=notrunc oflag=dsync 2>&1) || { echo "etcd.fsync_err=dd: $(echo "$e" | head -n1)"; exit 0; }
    n=$(date +%%s%%N); s="$s $((n-t))"; t=$n; i=$((i+1))
  done
  echo "etcd.fsync_ns=$s"
) 2>/dev/null
fi
`, fsyncBaseline, fsyncSamples, fsyncBlockSize)

// factsFrom reads the etcd group's view of a member from the gathered facts.
func factsFrom(pf *provision.Facts) *Facts {
	h := pf.Host
	f := &Facts{UID: pf.UID, Kernel: h.Kernel, Arch: h.Arch, OSID: h.OSID, OSPretty: h.OSPretty, Systemd: h.Systemd,
		ClockOffset: pf.ClockOffset, ClockError: pf.ClockError, RTT: pf.RTT,
		Sums: pf.Sums, Stale: pf.Stale, ListenPorts: pf.Listen, Files: pf.Files,
		NTPSynchronized: pf.Value("etcd.ntp"), EtcdRunning: pf.Value("etcd.running") == "yes", Data: DataState(pf.Value("etcd.data"))}
	if f.OSID == "" {
		f.OSID = "unknown"
	}
	if f.OSPretty == "" {
		f.OSPretty = "unknown"
	}
	if u, ok := pf.Units[unitName]; ok {
		f.EtcdActive, f.EtcdPID, f.EtcdStarted = u.Active, u.MainPID, u.Started
	}
	for _, u := range TimeSyncServices {
		if pf.Units[u].Active == "active" {
			f.TimeSync = u
			break
		}
	}
	if from, v, ok := strings.Cut(pf.Value("etcd.quota"), " "); ok {
		// The metric is a float in Prometheus' text format ("2.147483648e+09").
		if q, err := strconv.ParseFloat(v, 64); err == nil && q > 0 {
			f.Quota, f.QuotaFrom = int64(q), from
		}
	}
	if kb, err := strconv.ParseInt(pf.Value("etcd.disk_avail_kb"), 10, 64); err == nil {
		f.DiskAvail = kb * 1024
	}
	if raw := pf.Files[remoteMarker]; len(raw) > 0 {
		var m etcd.Marker
		if json.Unmarshal(raw, &m) == nil {
			f.Marker = &m
		}
	}
	if rel := pf.Values("etcd.release"); len(rel) > 0 {
		f.Release = parseRelease(rel)
	}
	f.Fsync.Dir, f.Fsync.Err = pf.Value("etcd.fsync_dir"), pf.Value("etcd.fsync_err")
	f.Fsync.fill(parseInts(pf.Value("etcd.fsync_base")), parseInts(pf.Value("etcd.fsync_ns")))
	return f
}

// parseInts reads space-separated integers, skipping anything else.
func parseInts(s string) []int64 {
	var out []int64
	for _, w := range strings.Fields(s) {
		if n, err := strconv.ParseInt(w, 10, 64); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// fill computes the percentiles from the probe's raw timings (nanoseconds): each timed write minus
// the median of the baseline (process start-up), floored at 0.
func (p *FsyncProbe) fill(base, samples []int64) {
	if len(samples) == 0 {
		if p.Err == "" {
			p.Err = "the host reported no fsync timings"
		}
		return
	}
	var startup int64
	if len(base) > 0 {
		b := slices.Clone(base)
		slices.Sort(b)
		startup = b[len(b)/2]
	}
	lat := make([]time.Duration, len(samples))
	for i, s := range samples {
		lat[i] = max(time.Duration(s-startup), 0)
	}
	slices.Sort(lat)
	p.Samples = len(lat)
	p.P50 = percentile.NearestRank(lat, 50)
	p.P99 = percentile.NearestRank(lat, 99)
	p.Err = ""
}

// timeSyncSummary is "chrony active, synchronised" and the like, for the preflight line.
func (f *Facts) timeSyncSummary() string {
	svc := "no time sync service active"
	if f.TimeSync != "" {
		svc = f.TimeSync + " active"
	}
	switch f.NTPSynchronized {
	case "yes":
		return svc + ", synchronised"
	case "no":
		return svc + ", not synchronised"
	}
	return svc + ", sync state unknown"
}

// fsyncSummary is "fsync p50/p99 0.4/1.2 ms", or why it was not measured.
func (f *Facts) fsyncSummary() string {
	if f.Fsync.Samples == 0 {
		return "fsync not measured (" + orDash(f.Fsync.Err) + ")"
	}
	ms := func(d time.Duration) string {
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64)
	}
	return fmt.Sprintf("fsync p50/p99 %s/%s ms", ms(f.Fsync.P50), ms(f.Fsync.P99))
}
