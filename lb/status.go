package lb

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/hactl/hactl/internal/shell"
)

// What `hactl status` reads on an LB host: StatusScript gathers it with one command (run as root),
// ParseHostStatus reads that command's output, Summarize judges all LB hosts together.

// StatsPath is the loopback stats page of HAProxy's hactl-local frontend (templates/haproxy.cfg.tmpl:
// `stats uri /stats`); with ";csv" appended it answers the same CSV as `show stat` on StatsSocket.
const StatsPath = "/stats"

// Keepalived's state dump: `kill -<keepalived --signum=DATA> <pid>` makes it write its state to
// KeepalivedDataFiles[0] (keepalived 2.2; later versions or tmp_file_path may use the others).
const KeepalivedPIDFile = "/run/keepalived.pid"

// KeepalivedDataFiles are where keepalived writes its DATA dump, first match wins.
var KeepalivedDataFiles = []string{"/tmp/keepalived.data", "/run/keepalived/keepalived.data"}

// statusMarker starts every line StatusScript uses to frame its sections:
//
//	@@hactl-lb-status begin <section> [<note>]
//	...the section's output...
//	@@hactl-lb-status end <section> rc=<exit code>
const statusMarker = "@@hactl-lb-status"

// Sections of StatusScript's output.
const (
	sectionIPAddr     = "ip-addr"           // ip -json address show
	sectionHAProxy    = "haproxy-active"    // systemctl is-active haproxy
	sectionKeepalived = "keepalived-active" // systemctl is-active keepalived
	sectionStats      = "haproxy-stat"      // HAProxy's CSV stats; note "socket" or "http"
	sectionVRRP       = "keepalived-data"   // keepalived's DATA dump
)

// probePaths are the files and addresses StatusScript reads (defaultProbe on LB hosts; tests point
// them at a HAProxy and a keepalived they run themselves).
type probePaths struct {
	StatsSocket string
	StatsURL    string
	PIDFile     string
	DataFiles   []string
}

var defaultProbe = probePaths{
	StatsSocket: StatsSocket,
	StatsURL:    fmt.Sprintf("http://127.0.0.1:%d%s;csv", LocalPort, StatsPath),
	PIDFile:     KeepalivedPIDFile,
	DataFiles:   KeepalivedDataFiles,
}

// StatusScript is the one command `hactl status` runs (as root: keepalived's dump is mode 0600) on
// every LB host. It writes five sections framed by statusMarker lines, each with its exit code:
//   - ip-addr: `ip -json address show` (who holds the VIP);
//   - haproxy-active, keepalived-active: `systemctl is-active <unit>`;
//   - haproxy-stat: `show stat` on StatsSocket through socat when socat is installed, else
//     `curl http://127.0.0.1:LocalPort/stats;csv` (curl is already needed by keepalived's check);
//   - keepalived-data: keepalived's DATA signal sent to the pid in KeepalivedPIDFile (else systemd's
//     MainPID), then the dump read from the first of KeepalivedDataFiles to appear within 2 s (an
//     older dump is removed first, so what is read is current).
//
// Every step is bounded (socat -T 2, curl --max-time 2, the dump's 2 s), so the script ends within
// about 5 s whatever the daemons do. It changes nothing on the host but keepalived's dump file.
var StatusScript = statusScript(defaultProbe)

func statusScript(p probePaths) string {
	q := shell.Quote
	var dataFiles []string
	for _, f := range p.DataFiles {
		dataFiles = append(dataFiles, q(f))
	}
	return fmt.Sprintf(`m=%[1]s
begin() { printf '%%s begin %%s\n' "$m" "$*"; }
end() { rc=$?; printf '\n%%s end %%s rc=%%s\n' "$m" "$1" "$rc"; }
begin %[2]s; ip -json address show; end %[2]s
begin %[3]s; systemctl is-active haproxy; end %[3]s
begin %[4]s; systemctl is-active keepalived; end %[4]s
if [ -S %[6]s ] && command -v socat >/dev/null 2>&1; then
  begin %[5]s socket; echo 'show stat' | socat -T 2 - UNIX-CONNECT:%[6]s 2>&1; end %[5]s
else
  begin %[5]s http; curl --silent --show-error --fail --max-time 2 --noproxy 127.0.0.1 %[7]s 2>&1; end %[5]s
fi
begin %[8]s
vrrp() {
  pid=$(cat %[9]s 2>/dev/null)
  [ -n "$pid" ] || pid=$(systemctl show --property=MainPID --value keepalived 2>/dev/null)
  if [ -z "$pid" ] || [ "$pid" = 0 ] || ! kill -0 "$pid" 2>/dev/null; then
    echo "keepalived is not running (no process in %[9]s or systemd's MainPID)"; return 1
  fi
  sig=$(keepalived --signum=DATA 2>/dev/null) || { echo "keepalived --signum=DATA failed"; return 1; }
  rm -f %[10]s
  kill -"$sig" "$pid" || return 1
  i=0
  while [ $i -lt 20 ]; do
    for f in %[10]s; do
      if [ -s "$f" ]; then
        # Written with stdio in one go; wait until its size settles.
        s1=$(wc -c <"$f"); sleep 0.1; s2=$(wc -c <"$f")
        if [ "$s1" = "$s2" ]; then cat "$f"; return 0; fi
      fi
    done
    sleep 0.1; i=$((i+1))
  done
  echo "keepalived wrote no dump to %[11]s within 2s"; return 1
}
vrrp 2>&1; end %[8]s
`, q(statusMarker), sectionIPAddr, sectionHAProxy, sectionKeepalived, sectionStats, q(p.StatsSocket), q(p.StatsURL),
		sectionVRRP, q(p.PIDFile), strings.Join(dataFiles, " "), strings.Join(p.DataFiles, " or "))
}

// ActiveState values of `systemctl is-active`: "active", "inactive", "failed", "activating",
// "deactivating", "reloading"; "unknown" for a unit systemd does not know.
const ActiveStateActive = "active"

// VRRP states keepalived reports (its dump's "State = ..." of the instance).
const (
	VRRPMaster = "MASTER"
	VRRPBackup = "BACKUP"
	VRRPFault  = "FAULT"
)

// HostStatus is the load balancer as one LB host sees it (`hactl status -o json`, loadBalancer.hosts).
type HostStatus struct {
	Host    string `json:"host"`
	Address string `json:"address"`
	// HoldsVIP: the VIP is one of the host's addresses (ip address show).
	HoldsVIP bool `json:"holdsVIP"`
	// Interface carries the VIP on this host ("" when it does not hold it).
	Interface string `json:"interface,omitempty"`
	// HAProxy and Keepalived are the systemd units' ActiveState (`systemctl is-active`): "active",
	// "inactive", "failed", ... ("" when the host could not be read).
	HAProxy    string `json:"haproxy"`
	Keepalived string `json:"keepalived"`
	// VRRPState is keepalived's state of instance InstanceName: MASTER, BACKUP, FAULT (also INIT or
	// STOP); "" when keepalived's dump could not be read (VRRPNote says why and what the addresses
	// show instead).
	VRRPState string `json:"vrrpState,omitempty"`
	// Priority and EffectivePriority are the instance's configured priority and the one it
	// advertises now (lowered by the check weight while its HAProxy check fails); 0 when unknown.
	Priority          int    `json:"priority,omitempty"`
	EffectivePriority int    `json:"effectivePriority,omitempty"`
	VRRPNote          string `json:"vrrpNote,omitempty"`
	// StatsSource is where the backends' states came from: "socket" (StatsSocket, via socat) or
	// "http" (the loopback stats page); StatsError says why they could not be read.
	StatsSource string `json:"statsSource,omitempty"`
	StatsError  string `json:"statsError,omitempty"`
	// Backends are the servers of backend BackendName as this host's HAProxy sees them, in its order.
	Backends []BackendStatus `json:"backends"`
	// Error is why the host could not be read at all ("" when it was).
	Error string `json:"error,omitempty"`
}

// BackendStatus is one kube-apiserver as one HAProxy sees it (a server row of HAProxy's CSV stats,
// read by column name; see HAProxy's management guide, "9.1. CSV format").
type BackendStatus struct {
	// Name is the server name (the control-plane host); Address its address:port (the CSV's addr,
	// else the spec's).
	Name    string `json:"name"`
	Address string `json:"address,omitempty"`
	// Status is HAProxy's: "UP", "DOWN", "MAINT", "DRAIN", "NOLB", "no check", or a transition such
	// as "UP 1/3" (up, failing checks: going down) or "DOWN 1/2" (down, passing checks: coming up).
	Status string `json:"status"`
	// CheckStatus is the last health check's result: "L7OK", "L7STS" (wrong HTTP status), "L4CON"
	// (connection refused), "L4TOUT", "L6TOUT", "L6RSP", "L7TOUT", ... (HAProxy's "* " prefix for a
	// check in progress is removed: see CheckRunning).
	CheckStatus string `json:"checkStatus,omitempty"`
	// CheckRunning: a check was in progress when the stats were read (CheckStatus is the previous one).
	CheckRunning bool `json:"checkRunning,omitempty"`
	// CheckCode is the HTTP status of the last layer-7 check (0 when there was none).
	CheckCode int `json:"checkCode,omitempty"`
	// CheckDurationMs is how long the last check took, in milliseconds (-1 when unknown).
	CheckDurationMs int `json:"checkDurationMs"`
	// CheckDetail is HAProxy's text about the last check (last_chk, else check_desc), e.g.
	// "Connection refused" or "Layer7 check passed".
	CheckDetail string `json:"checkDetail,omitempty"`
	// LastChangeSeconds is the time since the server last went UP or DOWN, in seconds (-1 when unknown).
	LastChangeSeconds int `json:"lastChangeSeconds"`
}

// Down reports whether HAProxy sends this backend no traffic because its checks failed ("DOWN",
// also "DOWN 1/2" while coming back).
func (b BackendStatus) Down() bool { return b.Status == "DOWN" || strings.HasPrefix(b.Status, "DOWN ") }

// statusSection is one framed section of StatusScript's output.
type statusSection struct {
	note string // the begin line's note ("socket", "http")
	body string
	rc   int // exit code; -1 when the end line is missing
}

// splitStatus cuts StatusScript's output into its sections, by name.
func splitStatus(out []byte) map[string]statusSection {
	secs := map[string]statusSection{}
	var name string
	var cur *statusSection
	var body strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		rest, isMarker := strings.CutPrefix(line, statusMarker+" ")
		f := strings.Fields(rest)
		switch {
		case isMarker && len(f) >= 2 && f[0] == "begin":
			name, cur = f[1], &statusSection{rc: -1}
			cur.note = strings.Join(f[2:], " ")
			body.Reset()
		case isMarker && len(f) == 3 && f[0] == "end" && cur != nil && f[1] == name:
			if rc, err := strconv.Atoi(strings.TrimPrefix(f[2], "rc=")); err == nil {
				cur.rc = rc
			}
			cur.body = strings.TrimSpace(body.String())
			secs[name] = *cur
			cur = nil
		case cur != nil:
			body.WriteString(line)
			body.WriteByte('\n')
		}
	}
	if cur != nil { // cut short: keep what arrived
		cur.body = strings.TrimSpace(body.String())
		secs[name] = *cur
	}
	return secs
}

// ParseHostStatus reads StatusScript's standard output from LB host host at address, for the VIP
// vip. Missing or failed sections leave their fields empty with the reason (the section's output:
// the failed steps write their errors there) in VRRPNote or StatsError.
func ParseHostStatus(host, address string, vip netip.Addr, out []byte) HostStatus {
	st := HostStatus{Host: host, Address: address}
	secs := splitStatus(out)

	// Who holds the VIP.
	ipHeld, ipErr := false, ""
	if s, ok := secs[sectionIPAddr]; !ok || s.rc != 0 {
		ipErr = "ip address show failed"
	} else if addrs, err := ParseIPAddrJSON([]byte(s.body)); err != nil {
		ipErr = err.Error()
	} else {
		for _, a := range addrs {
			if a.Prefix.Addr().Unmap() == vip.Unmap() {
				ipHeld, st.Interface = true, a.Interface
			}
		}
	}
	st.HoldsVIP = ipHeld

	st.HAProxy = activeState(secs[sectionHAProxy])
	st.Keepalived = activeState(secs[sectionKeepalived])

	// HAProxy's view of the backends.
	if s, ok := secs[sectionStats]; ok {
		st.StatsSource = s.note
		switch backends, err := ParseHAProxyCSV([]byte(s.body), BackendName); {
		case s.rc != 0:
			st.StatsError = fmt.Sprintf("reading them (%s) failed with exit code %d: %s", s.note, s.rc, firstLine(s.body))
		case err != nil:
			st.StatsError = err.Error()
		default:
			st.Backends = backends
		}
	} else {
		st.StatsError = "HAProxy's stats were not read"
	}

	// Keepalived's own state.
	s, ok := secs[sectionVRRP]
	var inst *VRRPInstance
	var err error
	switch {
	case !ok:
		err = fmt.Errorf("its dump was not read")
	case s.rc != 0:
		err = fmt.Errorf("%s", firstLine(s.body))
	default:
		inst, err = ParseKeepalivedData([]byte(s.body), InstanceName)
	}
	if inst != nil {
		st.VRRPState, st.Priority, st.EffectivePriority = inst.State, inst.Priority, inst.EffectivePriority
	} else {
		held := "does not hold the VIP"
		if ipHeld {
			held = "holds the VIP"
		}
		if ipErr != "" {
			held = "VIP unknown: " + ipErr
		}
		st.VRRPNote = fmt.Sprintf("keepalived's state unknown (%v); by its addresses the host %s", err, held)
	}
	if ipErr != "" && st.VRRPNote == "" {
		st.VRRPNote = "the host's addresses could not be read: " + ipErr
	}
	return st
}

// activeState is the first word systemctl is-active printed ("" when it printed nothing).
func activeState(s statusSection) string {
	if f := strings.Fields(s.body); len(f) > 0 {
		return f[0]
	}
	return ""
}

// firstLine returns the first line of a failed step's output, or "no output".
func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	if l == "" {
		return "no output"
	}
	return l
}

// ParseHAProxyCSV reads HAProxy's CSV statistics (`show stat` on the runtime API, or a stats page
// with ";csv"), whose first line is the header "# pxname,svname,...", and returns the servers of
// proxy backend (not its BACKEND or FRONTEND summary rows). Columns are found by their header name,
// so HAProxy versions that add or move columns read the same; pxname, svname and status are required.
func ParseHAProxyCSV(data []byte, backend string) ([]BackendStatus, error) {
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1
	r.ReuseRecord = false
	header, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("HAProxy's CSV stats: no header line: %w", err)
	}
	if len(header) == 0 || !strings.HasPrefix(header[0], "# ") {
		return nil, fmt.Errorf("HAProxy's CSV stats: the first line %q is not the \"# pxname,...\" header", strings.Join(header, ","))
	}
	header[0] = strings.TrimPrefix(header[0], "# ")
	col := map[string]int{}
	for i, h := range header {
		if _, dup := col[h]; !dup && h != "" {
			col[h] = i
		}
	}
	for _, need := range []string{"pxname", "svname", "status"} {
		if _, ok := col[need]; !ok {
			return nil, fmt.Errorf("HAProxy's CSV stats: no column %q in the header", need)
		}
	}
	out := []BackendStatus{}
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("HAProxy's CSV stats: %w", err)
		}
		get := func(name string) string {
			if i, ok := col[name]; ok && i < len(rec) {
				return rec[i]
			}
			return ""
		}
		num := func(name string) int {
			n, err := strconv.Atoi(get(name))
			if err != nil {
				return -1
			}
			return n
		}
		if get("pxname") != backend || slices.Contains([]string{"BACKEND", "FRONTEND"}, get("svname")) {
			continue
		}
		b := BackendStatus{
			Name:              get("svname"),
			Address:           get("addr"),
			Status:            get("status"),
			CheckStatus:       strings.TrimPrefix(get("check_status"), "* "),
			CheckRunning:      strings.HasPrefix(get("check_status"), "* "),
			CheckDurationMs:   num("check_duration"),
			CheckDetail:       get("last_chk"),
			LastChangeSeconds: num("lastchg"),
		}
		if c := num("check_code"); c > 0 {
			b.CheckCode = c
		}
		if b.CheckDetail == "" {
			b.CheckDetail = get("check_desc")
		}
		out = append(out, b)
	}
	return out, nil
}

// VRRPInstance is one vrrp_instance of keepalived's DATA dump.
type VRRPInstance struct {
	Name string
	// State is "MASTER", "BACKUP", "FAULT", "INIT" or "STOP".
	State string
	// Priority is the configured priority, EffectivePriority the one advertised now (0 when absent).
	Priority, EffectivePriority int
}

// ParseKeepalivedData finds vrrp_instance instance in keepalived's DATA dump (its "VRRP Topology"
// section: " VRRP Instance = <name>" followed by indented "State = ...", "Priority = ...",
// "Effective priority = ..." lines, as keepalived 2.x writes them).
func ParseKeepalivedData(data []byte, instance string) (*VRRPInstance, error) {
	var cur *VRRPInstance
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		key, val, ok := strings.Cut(strings.TrimSpace(line), " = ")
		switch {
		case strings.HasPrefix(line, "------<"): // a new top-level section
			if cur != nil {
				return finishInstance(cur)
			}
		case !ok:
		case key == "VRRP Instance":
			if cur != nil {
				return finishInstance(cur)
			}
			if val == instance {
				cur = &VRRPInstance{Name: val}
			}
		case cur == nil:
		case key == "State":
			cur.State = val
		case key == "Priority":
			cur.Priority, _ = strconv.Atoi(val)
		case key == "Effective priority":
			cur.EffectivePriority, _ = strconv.Atoi(val)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("keepalived's dump: %w", err)
	}
	if cur != nil {
		return finishInstance(cur)
	}
	return nil, fmt.Errorf("keepalived's dump has no vrrp_instance %s", instance)
}

func finishInstance(v *VRRPInstance) (*VRRPInstance, error) {
	if v.State == "" {
		return nil, fmt.Errorf("keepalived's dump has vrrp_instance %s without a State line", v.Name)
	}
	return v, nil
}

// Status is the load-balancer section of `hactl status` (-o json: loadBalancer).
type Status struct {
	// VIP is spec.loadBalancer.vip (address/prefix length).
	VIP string `json:"vip"`
	// Holders are the LB hosts that hold the VIP: exactly one when healthy, two or more is split
	// brain.
	Holders []string `json:"holders"`
	// Hosts are the LB hosts in spec order.
	Hosts []HostStatus `json:"hosts"`
	// Problems are what makes the load balancer degraded (`hactl status` then exits 3).
	Problems []string `json:"problems,omitempty"`
}

// Summarize judges the LB hosts together. Problems: no host holds the VIP; several do (split
// brain); a host that could not be read; haproxy or keepalived not active; keepalived in FAULT, or
// MASTER without the VIP; HAProxy's stats unreadable on a host whose HAProxy is active; a backend
// DOWN as seen by any host (reported once per backend, naming the hosts that see it DOWN).
func Summarize(vip netip.Prefix, hosts []HostStatus) *Status {
	s := &Status{VIP: vip.String(), Holders: []string{}, Hosts: hosts}
	var reachable int
	down := map[string][]string{}
	var downOrder []string
	for _, h := range hosts {
		if h.Error != "" {
			s.Problems = append(s.Problems, fmt.Sprintf("LB host %s could not be read: %s", h.Host, h.Error))
			continue
		}
		reachable++
		if h.HoldsVIP {
			s.Holders = append(s.Holders, h.Host)
		}
		for _, u := range []struct{ unit, state string }{{"haproxy", h.HAProxy}, {"keepalived", h.Keepalived}} {
			if u.state != ActiveStateActive {
				s.Problems = append(s.Problems, fmt.Sprintf("%s on %s is %s", u.unit, h.Host, orUnknown(u.state)))
			}
		}
		switch {
		case h.VRRPState == VRRPFault:
			s.Problems = append(s.Problems, fmt.Sprintf("keepalived on %s is in FAULT state", h.Host))
		case h.VRRPState == VRRPMaster && !h.HoldsVIP:
			s.Problems = append(s.Problems, fmt.Sprintf("keepalived on %s is MASTER but the host does not hold the VIP %s", h.Host, vip.Addr()))
		}
		if h.StatsError != "" && h.HAProxy == ActiveStateActive {
			s.Problems = append(s.Problems, fmt.Sprintf("HAProxy's backend states on %s could not be read: %s", h.Host, h.StatsError))
		}
		for _, b := range h.Backends {
			if b.Down() {
				if _, seen := down[b.Name]; !seen {
					downOrder = append(downOrder, b.Name)
				}
				down[b.Name] = append(down[b.Name], h.Host)
			}
		}
	}
	for _, name := range downOrder {
		s.Problems = append(s.Problems, fmt.Sprintf("backend %s is DOWN (as seen by %s)", name, strings.Join(down[name], ", ")))
	}
	switch {
	case len(s.Holders) > 1:
		s.Problems = append(s.Problems, fmt.Sprintf("split brain: %s all hold the VIP %s", strings.Join(s.Holders, ", "), vip.Addr()))
	case len(s.Holders) == 0 && reachable == len(hosts):
		s.Problems = append(s.Problems, fmt.Sprintf("no LB host holds the VIP %s", vip.Addr()))
	case len(s.Holders) == 0:
		s.Problems = append(s.Problems, fmt.Sprintf("no reachable LB host holds the VIP %s", vip.Addr()))
	}
	return s
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
