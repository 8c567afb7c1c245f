package bootstrap

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hactl/hactl/internal/shell"
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

// Marker is written to /etc/hactl/etcd-member.json on every member: it is how hactl recognises its own
// data directories ("already ours") and never mistakes another cluster's data for its own.
type Marker struct {
	Cluster string `json:"cluster"`
	Token   string `json:"token"`
	Member  string `json:"member"`
}

// Facts is what one gathering command reports about a host (see factsScript).
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
	DiskAvail   int64             // bytes free on the filesystem holding the data dir
	Marker      *Marker           // nil when absent or unreadable
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

// factsScript returns the one shell script run on each host by preflight. It changes nothing on the
// host except a probe file it creates and removes (see FsyncProbe). Its output is "key=value" lines;
// "sum=<sha256>  <path>" lines for the files of paths that exist; "file=<path> <base64>" lines with
// the content of the files of read that exist (public files only: never keys); "listen=<hexport>"
// lines.
func factsScript(dataDir string, paths, read []string) string {
	dirs := map[string]bool{}
	for _, p := range paths {
		dirs[path.Dir(p)] = true
	}
	sorted := make([]string, 0, len(dirs))
	for d := range dirs {
		sorted = append(sorted, d)
	}
	sort.Strings(sorted)
	q := shell.Quote
	var b strings.Builder
	b.WriteString(`echo "time_ns=$(date +%s%N)"
echo "uid=$(id -u)"
echo "kernel=$(uname -s)"
echo "arch=$(uname -m)"
if [ -r /etc/os-release ]; then . /etc/os-release; fi
echo "os_id=${ID:-unknown}"
echo "os_pretty=${PRETTY_NAME:-unknown}"
if [ -d /run/systemd/system ]; then echo systemd=yes; else echo systemd=no; fi
if command -v systemctl >/dev/null 2>&1; then
  echo "etcd_active=$(systemctl is-active etcd.service 2>/dev/null)"
  echo "etcd_pid=$(systemctl show -p MainPID --value etcd.service 2>/dev/null)"
  echo "etcd_started=$(systemctl show -p ExecMainStartTimestamp --value etcd.service 2>/dev/null)"
  set --`)
	for _, u := range TimeSyncServices {
		b.WriteString(" " + u)
	}
	b.WriteString(`
  systemctl is-active "$@" 2>/dev/null | while read -r st; do echo "timesync_$1=$st"; shift; done
fi
if command -v timedatectl >/dev/null 2>&1; then echo "ntp_sync=$(timedatectl show -p NTPSynchronized --value 2>/dev/null)"; fi
if pgrep -x etcd >/dev/null 2>&1; then echo etcd_running=yes; fi
`)
	fmt.Fprintf(&b, "D=%s\n", q(dataDir))
	b.WriteString(`if [ -d "$D/member" ]; then data=member
elif [ -d "$D" ] && [ -n "$(ls -A "$D" 2>/dev/null | grep -vx lost+found | grep -v '^\.hactl-fsync-probe\.')" ]; then data=foreign
elif [ -d "$D" ]; then data=empty
elif [ -e "$D" ]; then data=foreign
else data=absent; fi
echo "data=$data"
p="$D"; while [ ! -e "$p" ]; do p=$(dirname "$p"); done
echo "disk_avail_kb=$(df -Pk "$p" | awk 'NR==2{print $4}')"
if [ -r /etc/hactl/etcd-member.json ]; then echo "marker=$(base64 -w0 /etc/hactl/etcd-member.json)"; fi
`)
	fmt.Fprintf(&b, "if [ -r %s ]; then sed 's/^/release=/' %s; fi\n", q(remoteRelease), q(remoteRelease))
	b.WriteString(`cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk '$4=="0A"{split($2,a,":"); print "listen=" a[2]}'
`)
	// Temp files of uploads interrupted by a killed hactl (provision names them .<base>.hactl-tmp-*).
	b.WriteString("for d in")
	for _, d := range sorted {
		b.WriteString(" " + q(d))
	}
	b.WriteString(`; do for f in "$d"/.*.hactl-tmp-*; do if [ -f "$f" ]; then echo "stale=$f"; fi; done; done
`)
	b.WriteString("for f in")
	for _, p := range paths {
		b.WriteString(" " + q(p))
	}
	b.WriteString(`; do if [ -f "$f" ]; then echo "sum=$(sha256sum "$f")"; fi; done
`)
	if len(read) > 0 {
		b.WriteString("for f in")
		for _, p := range read {
			b.WriteString(" " + q(p))
		}
		b.WriteString(`; do if [ -f "$f" ]; then echo "file=$f $(base64 -w0 "$f")"; fi; done
`)
	}
	b.WriteString(fsyncProbeScript)
	b.WriteString(`echo "time_end_ns=$(date +%s%N)"
`)
	return b.String()
}

// fsyncProbeScript measures write+fdatasync latency where the data dir lives, with nothing but a
// POSIX shell and coreutils: fsyncSamples appends of fsyncBlockSize bytes with dd oflag=dsync (O_DSYNC:
// every write is followed by the equivalent of fdatasync, as etcd's WAL does), each timed with
// date +%s%N; the same loop writing to /dev/null gives the cost of starting dd and date, whose
// median is subtracted from every sample by parseFacts. A host whose data dir already holds etcd data
// is not probed: the probe matters before installing, and a re-run must not write into a live
// member's data dir (nor pay ~0.5 s per host). The probe file (.hactl-fsync-probe.<pid>) is
// written in the data dir when it exists and is not foreign, else in its nearest existing parent,
// and removed (also on failure); the data dir check above ignores such files. It runs in a subshell
// so a failure (no %N in date, no oflag=dsync in dd, a read-only filesystem) only reports fsync_err.
var fsyncProbeScript = fmt.Sprintf(`if [ "$data" = member ]; then
  echo "fsync_err=skipped: etcd already keeps its data here (its wal_fsync_duration_seconds metric is the measure now)"
else
pd="$D"
if [ ! -d "$pd" ] || [ "$data" = foreign ]; then pd=$(dirname "$D"); fi
while [ ! -d "$pd" ]; do pd=$(dirname "$pd"); done
echo "fsync_dir=$pd"
(
  case "$(date +%%s%%N)" in *[!0-9]*) echo "fsync_err=date +%%s%%N does not report nanoseconds"; exit 0;; esac
  f="$pd/.hactl-fsync-probe.$$"
  rm -f "$pd"/.hactl-fsync-probe.* 2>/dev/null
  trap 'rm -f "$f"' EXIT
  s=""; i=0; t=$(date +%%s%%N)
  while [ $i -lt %[1]d ]; do
    e=$(dd if=/dev/zero of=/dev/null bs=%[3]d count=1 2>&1) || { echo "fsync_err=dd: $(echo "$e" | head -n1)"; exit 0; }
    n=$(date +%%s%%N); s="$s $((n-t))"; t=$n; i=$((i+1))
  done
  echo "fsync_base=$s"
  s=""; i=0; t=$(date +%%s%%N)
  while [ $i -lt %[2]d ]; do
    e=$(dd if=/dev/zero of="$f" bs=%[3]d count=1 seek=$i conv=notrunc oflag=dsync 2>&1) || { echo "fsync_err=dd: $(echo "$e" | head -n1)"; exit 0; }
    n=$(date +%%s%%N); s="$s $((n-t))"; t=$n; i=$((i+1))
  done
  echo "fsync_ns=$s"
) 2>/dev/null
fi
`, fsyncBaseline, fsyncSamples, fsyncBlockSize)

// parseFacts reads factsScript's output. sent and received bracket the command on the local clock.
func parseFacts(out []byte, sent, received time.Time) (*Facts, error) {
	f := &Facts{Sums: map[string]string{}, ListenPorts: map[int]bool{}, Files: map[string][]byte{}, UID: -1}
	var fsyncBase, fsyncNS []int64
	var release []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	seen := map[string]bool{}
	var startNS, endNS int64
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		seen[k] = true
		switch k {
		case "time_ns", "time_end_ns":
			ns, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("facts: remote time %q: %w", v, err)
			}
			if k == "time_ns" {
				startNS = ns
			} else {
				endNS = ns
			}
		case "uid":
			n, err := strconv.Atoi(v)
			if err != nil {
				return nil, fmt.Errorf("facts: uid %q: %w", v, err)
			}
			f.UID = n
		case "kernel":
			f.Kernel = v
		case "arch":
			f.Arch = v
		case "os_id":
			f.OSID = v
		case "os_pretty":
			f.OSPretty = v
		case "systemd":
			f.Systemd = v == "yes"
		case "etcd_active":
			f.EtcdActive = v
		case "etcd_running":
			f.EtcdRunning = v == "yes"
		case "etcd_pid":
			f.EtcdPID, _ = strconv.Atoi(v)
		case "etcd_started":
			f.EtcdStarted = v
		case "data":
			f.Data = DataState(v)
		case "disk_avail_kb":
			kb, err := strconv.ParseInt(v, 10, 64)
			if err == nil {
				f.DiskAvail = kb * 1024
			}
		case "marker":
			raw, err := base64.StdEncoding.DecodeString(v)
			if err != nil {
				continue
			}
			var m Marker
			if json.Unmarshal(raw, &m) == nil {
				f.Marker = &m
			}
		case "listen":
			port, err := strconv.ParseInt(v, 16, 32)
			if err == nil {
				f.ListenPorts[int(port)] = true
			}
		case "stale":
			if base := path.Base(v); strings.HasPrefix(base, ".") && strings.Contains(base, ".hactl-tmp-") {
				f.Stale = append(f.Stale, v)
			}
		case "sum":
			sum, path, ok := strings.Cut(v, "  ")
			if ok {
				f.Sums[path] = sum
			}
		case "file":
			path, b64, _ := strings.Cut(v, " ")
			if raw, err := base64.StdEncoding.DecodeString(b64); err == nil {
				f.Files[path] = raw
			}
		case "release":
			release = append(release, v)
		case "ntp_sync":
			f.NTPSynchronized = v
		case "fsync_dir":
			f.Fsync.Dir = v
		case "fsync_err":
			f.Fsync.Err = v
		case "fsync_base":
			fsyncBase = parseInts(v)
		case "fsync_ns":
			fsyncNS = parseInts(v)
		default:
			if unit, ok := strings.CutPrefix(k, "timesync_"); ok && v == "active" && f.TimeSync == "" {
				f.TimeSync = unit
			}
		}
	}
	if len(release) > 0 {
		f.Release = parseRelease(release)
	}
	f.Fsync.fill(fsyncBase, fsyncNS)
	for _, k := range []string{"time_ns", "uid", "arch", "data"} {
		if !seen[k] {
			return nil, fmt.Errorf("facts: the host did not report %q (is /bin/sh a POSIX shell?)", k)
		}
	}
	// The script's own run time (hashing binaries) is not network delay: compare the script's
	// midpoint with the round trip's midpoint; the error is half of what remains.
	if endNS < startNS {
		endNS = startNS
	}
	f.RTT = received.Sub(sent)
	ran := time.Duration(endNS - startNS)
	if ran > f.RTT {
		ran = f.RTT
	}
	remoteMid := time.Unix(0, startNS+(endNS-startNS)/2)
	f.ClockOffset = remoteMid.Sub(sent.Add(f.RTT / 2))
	f.ClockError = (f.RTT - ran) / 2
	return f, nil
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
	p.P50 = percentile(lat, 50)
	p.P99 = percentile(lat, 99)
	p.Err = ""
}

// percentile returns the nearest-rank q-th percentile of sorted (not empty).
func percentile(sorted []time.Duration, q int) time.Duration {
	rank := (q*len(sorted) + 99) / 100 // ceil(q/100 * n)
	return sorted[max(rank, 1)-1]
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
