package bootstrap

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

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
	EtcdActive  string        // systemctl is-active etcd
	EtcdPID     int
	EtcdRunning bool   // an etcd process exists, whatever systemd says
	EtcdStarted string // ExecMainStartTimestamp, to prove a re-run did not restart etcd
	Data        DataState
	DiskAvail   int64             // bytes free on the filesystem holding the data dir
	Marker      *Marker           // nil when absent or unreadable
	Sums        map[string]string // path -> sha256 hex of files that exist
	Stale       []string          // temp files left by interrupted uploads (removed by etcd/install)
	ListenPorts map[int]bool      // TCP ports in LISTEN state (IPv4 and IPv6)
}

// factsScript returns the one shell script run on each host by preflight. It only reads. Its output is
// "key=value" lines; "sum=<sha256>  <path>" lines for files that exist; "listen=<hexport>" lines.
func factsScript(dataDir string, paths []string) string {
	dirs := map[string]bool{}
	for _, p := range paths {
		dirs[path.Dir(p)] = true
	}
	sorted := make([]string, 0, len(dirs))
	for d := range dirs {
		sorted = append(sorted, d)
	}
	sort.Strings(sorted)
	q := provision.ShellQuote
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
fi
if pgrep -x etcd >/dev/null 2>&1; then echo etcd_running=yes; fi
`)
	fmt.Fprintf(&b, "D=%s\n", q(dataDir))
	b.WriteString(`if [ -d "$D/member" ]; then echo data=member
elif [ -d "$D" ] && [ -n "$(ls -A "$D" 2>/dev/null | grep -vx lost+found)" ]; then echo data=foreign
elif [ -d "$D" ]; then echo data=empty
elif [ -e "$D" ]; then echo data=foreign
else echo data=absent; fi
p="$D"; while [ ! -e "$p" ]; do p=$(dirname "$p"); done
echo "disk_avail_kb=$(df -Pk "$p" | awk 'NR==2{print $4}')"
if [ -r /etc/hactl/etcd-member.json ]; then echo "marker=$(base64 -w0 /etc/hactl/etcd-member.json)"; fi
cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk '$4=="0A"{split($2,a,":"); print "listen=" a[2]}'
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
echo "time_end_ns=$(date +%s%N)"
`)
	return b.String()
}

// parseFacts reads factsScript's output. sent and received bracket the command on the local clock.
func parseFacts(out []byte, sent, received time.Time) (*Facts, error) {
	f := &Facts{Sums: map[string]string{}, ListenPorts: map[int]bool{}, UID: -1}
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
		}
	}
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
