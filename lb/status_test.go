package lb

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hactl/hactl/internal/golden"
)

// Captured outputs of the real tools (testdata):
//   - haproxy-2.6-stat.csv: HAProxy 2.6's /stats;csv with the servers good (UP), unready (DOWN,
//     /readyz answers 500) and refused (DOWN, nothing listens), written by
//     TestStatusScriptRealHAProxy with -update;
//   - keepalived-2.2.7-{master,backup}.data: keepalived 2.2.7's DATA dump of the rendered
//     dedicated-unicast lb-a keepalived.conf (no HAProxy running: the check fails, priority 150 -> 130),
//     once BACKUP (just started) and once MASTER (after the master-down timer), captured by hand
//     (kill -<keepalived --signum=DATA>) in a namespace set up as TestStatusScriptRealKeepalived's.
const (
	csvFixture        = "testdata/haproxy-2.6-stat.csv"
	masterDataFixture = "testdata/keepalived-2.2.7-master.data"
	backupDataFixture = "testdata/keepalived-2.2.7-backup.data"
)

func readFixture(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkFixtureBackends checks the servers csvFixture holds (the stats page hides their addresses).
func checkFixtureBackends(t *testing.T, got []BackendStatus) {
	t.Helper()
	byName := map[string]BackendStatus{}
	var names []string
	for _, b := range got {
		byName[b.Name] = b
		names = append(names, b.Name)
	}
	if !slices.Equal(names, []string{"good", "unready", "refused"}) {
		t.Fatalf("servers %v, want good, unready, refused (in HAProxy's order; no BACKEND/FRONTEND rows)", names)
	}
	g, u, r := byName["good"], byName["unready"], byName["refused"]
	if g.Status != "UP" || g.CheckStatus != "L7OK" || g.CheckCode != 200 || g.CheckDurationMs < 0 || g.LastChangeSeconds < 0 || g.Down() {
		t.Errorf("good = %+v, want UP, L7OK, 200, a duration and a last change", g)
	}
	if u.Status != "DOWN" || u.CheckStatus != "L7STS" || u.CheckCode != 500 || !u.Down() {
		t.Errorf("unready = %+v, want DOWN, L7STS, 500", u)
	}
	if r.Status != "DOWN" || r.CheckStatus != "L4CON" || r.CheckCode != 0 || r.CheckDetail != "Connection refused" || !r.Down() {
		t.Errorf("refused = %+v, want DOWN, L4CON, no code, Connection refused", r)
	}
}

func TestParseHAProxyCSV(t *testing.T) {
	data := readFixture(t, csvFixture)
	got, err := ParseHAProxyCSV(data, BackendName)
	if err != nil {
		t.Fatal(err)
	}
	checkFixtureBackends(t, got)

	// Columns are read by name: the same rows with the columns in reverse order (and a new
	// column a later HAProxy might add) read the same.
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	var rev []string
	for i, l := range lines {
		f := strings.Split(strings.TrimPrefix(l, "# "), ",")
		slices.Reverse(f)
		extra := "new_col"
		if i > 0 {
			extra = "x"
		}
		f = append([]string{extra}, f...)
		if i == 0 {
			f[0] = "# " + f[0]
		}
		rev = append(rev, strings.Join(f, ","))
	}
	again, err := ParseHAProxyCSV([]byte(strings.Join(rev, "\n")), BackendName)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again, got) {
		t.Errorf("columns reordered: %+v\nwant %+v", again, got)
	}

	// Another backend's servers are not ours; no servers is an empty list, not an error.
	if other, err := ParseHAProxyCSV(data, "other"); err != nil || other == nil || len(other) != 0 {
		t.Errorf("other backend: %v, %v; want an empty list", other, err)
	}
	for _, bad := range []string{"", "pxname,svname,status\n", "# pxname,svname\nkube-apiservers,a\n", "curl: (7) Failed to connect to 127.0.0.1 port 8405\n"} {
		if _, err := ParseHAProxyCSV([]byte(bad), BackendName); err == nil {
			t.Errorf("ParseHAProxyCSV(%q) accepted it", bad)
		}
	}
}

func TestParseKeepalivedData(t *testing.T) {
	for _, tc := range []struct {
		file, state string
	}{{masterDataFixture, VRRPMaster}, {backupDataFixture, VRRPBackup}} {
		v, err := ParseKeepalivedData(readFixture(t, tc.file), InstanceName)
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		// Later sections (interfaces) have "State = UP, RUNNING" lines too: not the instance's.
		want := VRRPInstance{Name: InstanceName, State: tc.state, Priority: 150, EffectivePriority: 130}
		if *v != want {
			t.Errorf("%s: %+v, want %+v", tc.file, *v, want)
		}
	}
	data := readFixture(t, masterDataFixture)
	if _, err := ParseKeepalivedData(data, "other"); err == nil || !strings.Contains(err.Error(), "no vrrp_instance other") {
		t.Errorf("missing instance: %v", err)
	}
	noState := strings.Replace(string(data), "   State = MASTER\n", "", 1)
	if _, err := ParseKeepalivedData([]byte(noState), InstanceName); err == nil || !strings.Contains(err.Error(), "without a State") {
		t.Errorf("instance without State: %v", err)
	}
	// Two instances: the one asked for, not the first.
	two := strings.Replace(string(data), "------< VRRP Topology >------\n",
		"------< VRRP Topology >------\n VRRP Instance = VI_other\n   State = FAULT\n   Priority = 10\n", 1)
	if v, err := ParseKeepalivedData([]byte(two), InstanceName); err != nil || v.State != VRRPMaster {
		t.Errorf("two instances: %+v, %v", v, err)
	}
}

// section frames out as StatusScript does.
func section(name, note, body string, rc int) string {
	begin := strings.TrimSpace(name + " " + note)
	return fmt.Sprintf("%s begin %s\n%s\n%s end %s rc=%d\n", statusMarker, begin, body, statusMarker, name, rc)
}

const ipHoldingVIP = `[{"ifindex":1,"ifname":"lo","addr_info":[{"family":"inet","local":"127.0.0.1","prefixlen":8}]},` +
	`{"ifindex":3,"ifname":"eth0","addr_info":[{"family":"inet","local":"172.28.0.21","prefixlen":24},` +
	`{"family":"inet","local":"172.28.0.100","prefixlen":24,"secondary":true}]}]`

const ipWithoutVIP = `[{"ifindex":3,"ifname":"eth0","addr_info":[{"family":"inet","local":"172.28.0.22","prefixlen":24}]}]`

func TestParseHostStatus(t *testing.T) {
	vip := netip.MustParseAddr("172.28.0.100")
	csv, data := string(readFixture(t, csvFixture)), string(readFixture(t, masterDataFixture))

	all := section(sectionIPAddr, "", ipHoldingVIP, 0) + section(sectionHAProxy, "", "active", 0) +
		section(sectionKeepalived, "", "active", 0) + section(sectionStats, "http", csv, 0) + section(sectionVRRP, "", data, 0)
	st := ParseHostStatus("lb-a", "172.28.0.21", vip, []byte(all))
	if !st.HoldsVIP || st.Interface != "eth0" || st.HAProxy != "active" || st.Keepalived != "active" || st.VRRPState != VRRPMaster ||
		st.Priority != 150 || st.EffectivePriority != 130 || st.VRRPNote != "" || st.StatsSource != "http" || st.StatsError != "" || st.Error != "" {
		t.Errorf("all sections: %+v", st)
	}
	checkFixtureBackends(t, st.Backends)

	// HAProxy and keepalived stopped, the dump unavailable: states as systemctl says, the VRRP state
	// falls back to the addresses and says so.
	down := section(sectionIPAddr, "", ipWithoutVIP, 0) + section(sectionHAProxy, "", "inactive", 3) +
		section(sectionKeepalived, "", "failed", 3) +
		section(sectionStats, "http", "curl: (7) Failed to connect to 127.0.0.1 port 8405 after 0 ms: Couldn't connect to server", 7) +
		section(sectionVRRP, "", "keepalived is not running (no process in /run/keepalived.pid or systemd's MainPID)", 1)
	st = ParseHostStatus("lb-b", "172.28.0.22", vip, []byte(down))
	if st.HoldsVIP || st.Interface != "" || st.HAProxy != "inactive" || st.Keepalived != "failed" || st.VRRPState != "" || st.Backends != nil {
		t.Errorf("stopped: %+v", st)
	}
	if want := "keepalived's state unknown (keepalived is not running (no process in /run/keepalived.pid or systemd's MainPID)); by its addresses the host does not hold the VIP"; st.VRRPNote != want {
		t.Errorf("VRRPNote = %q, want %q", st.VRRPNote, want)
	}
	if !strings.Contains(st.StatsError, "exit code 7: curl: (7) Failed to connect") {
		t.Errorf("StatsError = %q", st.StatsError)
	}

	// Output cut short (the command was killed at its timeout): what arrived is used.
	cut := section(sectionIPAddr, "", ipHoldingVIP, 0) + section(sectionHAProxy, "", "active", 0) + statusMarker + " begin " + sectionKeepalived + "\n"
	st = ParseHostStatus("lb-a", "172.28.0.21", vip, []byte(cut))
	if !st.HoldsVIP || st.HAProxy != "active" || st.Keepalived != "" || st.StatsError == "" || !strings.Contains(st.VRRPNote, "by its addresses the host holds the VIP") {
		t.Errorf("cut short: %+v", st)
	}

	// No output at all (not the script's): nothing is claimed.
	st = ParseHostStatus("lb-a", "172.28.0.21", vip, []byte("sh: 1: syntax error\n"))
	if st.HoldsVIP || st.HAProxy != "" || !strings.Contains(st.VRRPNote, "addresses could not be read") && !strings.Contains(st.VRRPNote, "VIP unknown") {
		t.Errorf("garbage: %+v", st)
	}
}

func TestSummarize(t *testing.T) {
	vip := netip.MustParsePrefix("172.28.0.100/24")
	up := []BackendStatus{{Name: "cp-a", Status: "UP"}, {Name: "cp-b", Status: "UP 1/3"}}
	healthy := func(host string, holds bool) HostStatus {
		state := VRRPBackup
		if holds {
			state = VRRPMaster
		}
		return HostStatus{Host: host, HoldsVIP: holds, HAProxy: "active", Keepalived: "active", VRRPState: state, Backends: up}
	}
	with := func(h HostStatus, f func(*HostStatus)) HostStatus { f(&h); return h }
	for _, tc := range []struct {
		name    string
		hosts   []HostStatus
		holders []string
		want    []string
	}{
		{"healthy", []HostStatus{healthy("lb-a", true), healthy("lb-b", false)}, []string{"lb-a"}, nil},
		{"no holder", []HostStatus{healthy("lb-a", false), healthy("lb-b", false)}, []string{},
			[]string{"no LB host holds the VIP 172.28.0.100"}},
		{"split brain", []HostStatus{healthy("lb-a", true), healthy("lb-b", true)}, []string{"lb-a", "lb-b"},
			[]string{"split brain: lb-a, lb-b all hold the VIP 172.28.0.100"}},
		{"backend down", []HostStatus{
			with(healthy("lb-a", true), func(h *HostStatus) {
				h.Backends = []BackendStatus{{Name: "cp-a", Status: "DOWN"}, {Name: "cp-b", Status: "UP"}}
			}),
			with(healthy("lb-b", false), func(h *HostStatus) {
				h.Backends = []BackendStatus{{Name: "cp-a", Status: "DOWN 1/2"}, {Name: "cp-b", Status: "MAINT"}}
			}),
		}, []string{"lb-a"}, []string{"backend cp-a is DOWN (as seen by lb-a, lb-b)"}},
		{"daemons stopped", []HostStatus{healthy("lb-a", true), with(healthy("lb-b", false), func(h *HostStatus) {
			h.HAProxy, h.Keepalived, h.VRRPState, h.Backends, h.StatsError = "inactive", "failed", "", nil, "curl failed"
		})}, []string{"lb-a"}, []string{"haproxy on lb-b is inactive", "keepalived on lb-b is failed"}},
		{"stats unreadable while haproxy runs", []HostStatus{healthy("lb-a", true), with(healthy("lb-b", false), func(h *HostStatus) {
			h.Backends, h.StatsError = nil, "curl: (7) refused"
		})}, []string{"lb-a"}, []string{"HAProxy's backend states on lb-b could not be read: curl: (7) refused"}},
		{"fault, master without VIP", []HostStatus{
			with(healthy("lb-a", true), func(h *HostStatus) { h.VRRPState = VRRPFault }),
			with(healthy("lb-b", false), func(h *HostStatus) { h.VRRPState = VRRPMaster }),
		}, []string{"lb-a"}, []string{"keepalived on lb-a is in FAULT state", "keepalived on lb-b is MASTER but the host does not hold the VIP 172.28.0.100"}},
		{"unreachable holder", []HostStatus{{Host: "lb-a", Error: "dial tcp 172.28.0.21:22: i/o timeout"}, healthy("lb-b", false)}, []string{},
			[]string{"LB host lb-a could not be read: dial tcp 172.28.0.21:22: i/o timeout", "no reachable LB host holds the VIP 172.28.0.100"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Summarize(vip, tc.hosts)
			if s.VIP != "172.28.0.100/24" || !slices.Equal(s.Holders, tc.holders) || !slices.Equal(s.Problems, tc.want) {
				t.Errorf("holders %q, problems %q\nwant holders %q, problems %q", s.Holders, s.Problems, tc.holders, tc.want)
			}
		})
	}
}

// TestStatsPageRendered: the stats page StatusScript falls back to is in every rendered haproxy.cfg,
// on the loopback frontend (and `haproxy -c` accepts it: TestHAProxyCheck).
func TestStatsPageRendered(t *testing.T) {
	for _, tc := range cases {
		cfg := plan(t, tc.spec)
		data, err := RenderHAProxy(cfg, cfg.Nodes[0].Name)
		if err != nil {
			t.Fatal(err)
		}
		_, local, _ := strings.Cut(string(data), "frontend hactl-local\n")
		for _, want := range []string{fmt.Sprintf("bind 127.0.0.1:%d\n", LocalPort), "stats enable\n", "stats uri " + StatsPath + "\n"} {
			if !strings.Contains(local, want) {
				t.Errorf("%s: the hactl-local frontend lacks %q:\n%s", tc.name, want, local)
			}
		}
	}
}

// fakeSystemctl puts a systemctl on PATH that says every unit is active and has no MainPID, and
// returns the PATH to run StatusScript with.
func fakeSystemctl(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	script := "#!/bin/sh\ncase \"$1\" in is-active) echo active;; show) echo 0;; *) exit 1;; esac\n"
	if err := os.WriteFile(filepath.Join(dir, "systemctl"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir + ":" + os.Getenv("PATH")
}

// TestStatusScriptRealHAProxy runs the status script (with a systemctl stand-in, no keepalived and
// the stats socket absent: the curl branch) against the real HAProxy with a rendered haproxy.cfg
// (ports and paths moved to a temp dir, chroot and user dropped) in front of fake apiservers: one
// ready, one answering 500, one port where nothing listens. The parsed status must show them UP,
// DOWN (L7STS 500) and DOWN (L4CON); keepalived's state is unknown and says why. With -update it
// writes the CSV it read to csvFixture.
func TestStatusScriptRealHAProxy(t *testing.T) {
	haproxy := realTool(t, "haproxy")
	realTool(t, "curl")
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca := &x509.Certificate{Subject: pkix.Name{CommonName: "test CA"}} // verify none: any issuer
	good, unready := startFakeAPIServer(t, ca, caKey), startFakeAPIServer(t, ca, caKey)
	unready.ready.Store(false)

	cfg := plan(t, cases[0].spec) // verify none, inter 2s, fall 3
	cfg.HealthCheck.Interval, cfg.HealthCheck.FastInterval = 200*time.Millisecond, 100*time.Millisecond
	cfg.Bind, cfg.FrontendPort = "127.0.0.1", freePort(t)
	lo := netip.MustParseAddr("127.0.0.1")
	cfg.Backends = []Backend{{"good", lo, good.port()}, {"unready", lo, unready.port()}, {"refused", lo, freePort(t)}}
	data, err := RenderHAProxy(cfg, "lb-a")
	if err != nil {
		t.Fatal(err)
	}
	localPort, _ := runHAProxy(t, haproxy, dir, data)

	script := statusScript(probePaths{
		StatsSocket: filepath.Join(dir, "no-socket"), // the socket branch needs socat: not tested here
		StatsURL:    fmt.Sprintf("http://127.0.0.1:%d%s;csv", localPort, StatsPath),
		PIDFile:     filepath.Join(dir, "keepalived.pid"),
		DataFiles:   []string{filepath.Join(dir, "keepalived.data")},
	})
	path := fakeSystemctl(t)
	vip := netip.MustParseAddr("192.0.2.1") // held by no interface here
	var st HostStatus
	var out []byte
	deadline := time.Now().Add(20 * time.Second)
	for {
		run := exec.Command("/bin/sh", "-c", script)
		run.Env = append(os.Environ(), "PATH="+path, "LC_ALL=C")
		out, err = run.Output()
		if err != nil {
			t.Fatalf("status script: %v\n%s", err, out)
		}
		st = ParseHostStatus("lb-a", "127.0.0.1", vip, out)
		states := map[string]string{}
		running := false // a check in progress has no code yet: read again
		for _, b := range st.Backends {
			states[b.Name] = b.Status + "/" + b.CheckStatus
			running = running || b.CheckRunning
		}
		if !running && states["good"] == "UP/L7OK" && states["unready"] == "DOWN/L7STS" && states["refused"] == "DOWN/L4CON" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("backends not good UP, unready and refused DOWN within 20s: %v (%+v)\n%s", states, st, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	checkFixtureBackends(t, st.Backends)
	if st.HAProxy != "active" || st.Keepalived != "active" || st.StatsSource != "http" || st.StatsError != "" || st.HoldsVIP {
		t.Errorf("status: %+v", st)
	}
	if st.VRRPState != "" || !strings.Contains(st.VRRPNote, "keepalived is not running") || !strings.Contains(st.VRRPNote, "does not hold the VIP") {
		t.Errorf("VRRP state %q, note %q: want unknown, keepalived not running, does not hold the VIP", st.VRRPState, st.VRRPNote)
	}
	if *golden.Update {
		if err := os.WriteFile(csvFixture, []byte(splitStatus(out)[sectionStats].body+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStatusScriptRealKeepalived runs the real keepalived with the rendered dedicated-unicast lb-a
// keepalived.conf in a new network and mount namespace (unshare --net --mount, root: eth0 a veth
// holding lb-a's address, tmpfs on /tmp and /run so the pid file and the dump stay inside), waits
// until it holds the VIP (its peer never answers; its HAProxy check fails, so it advertises 130),
// and runs StatusScript itself (only systemctl is a stand-in): keepalived's DATA dump must say
// MASTER and the VIP must be on eth0. Then keepalived is stopped and the script runs again: the VRRP
// state is unknown, the note says so, and the VIP is gone.
func TestStatusScriptRealKeepalived(t *testing.T) {
	keepalived := realTool(t, "keepalived")
	unshare := realTool(t, "unshare")
	realTool(t, "ip")
	if out, err := exec.Command(unshare, "--net", "--mount", "true").CombinedOutput(); err != nil {
		if os.Getenv("HACTL_SKIP_REAL_TOOLS") != "" {
			t.Skipf("unshare --net --mount: %v %s", err, out)
		}
		t.Fatalf("unshare --net --mount (needs root) failed: %v %s; set HACTL_SKIP_REAL_TOOLS=1 to skip the checks with the real tools", err, out)
	}
	cfg := plan(t, cases[0].spec)
	// A weighted check (-20): the failing check (no HAProxy here) only lowers the priority, so
	// keepalived takes the VIP; with the default weight 0 it would stay in FAULT.
	cfg.Weight = -20
	conf, err := RenderKeepalived(cfg, "lb-a", AuthSecret{})
	if err != nil {
		t.Fatal(err)
	}
	// The files go in through the environment and the outputs come out on stdout: the test's temp
	// dir is under /tmp, which the namespace hides.
	const run = `set -e
mount -t tmpfs tmpfs /tmp; mount -t tmpfs tmpfs /run
printf '%s' "$HACTL_TEST_CONF" >/tmp/keepalived.conf; printf '%s' "$HACTL_TEST_SCRIPT" >/tmp/status.sh
ip link set lo up
ip link add eth0 type veth peer name hactl-peer0; ip link set eth0 up; ip link set hactl-peer0 up
ip addr add 172.28.0.21/24 dev eth0
"$1" --dont-fork --log-console --vrrp -f /tmp/keepalived.conf -p /run/keepalived.pid >/tmp/keepalived.log 2>&1 &
i=0; until ip -o addr show dev eth0 | grep -q ' 172.28.0.100/'; do
  i=$((i+1)); [ $i -lt 150 ] || { echo "keepalived did not take the VIP within 15s" >&2; cat /tmp/keepalived.log >&2; exit 1; }
  sleep 0.1
done
sh /tmp/status.sh
kill "$(cat /run/keepalived.pid)"; wait
echo "=== stopped"
sh /tmp/status.sh
`
	c := exec.Command(unshare, "--net", "--mount", "sh", "-c", run, "sh", keepalived)
	c.Env = append(os.Environ(), "PATH="+fakeSystemctl(t), "HACTL_TEST_CONF="+string(conf), "HACTL_TEST_SCRIPT="+StatusScript)
	var stderr strings.Builder
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		t.Fatalf("in the namespace: %v\n%s\n%s", err, out, stderr.String())
	}
	heldOut, stoppedOut, ok := strings.Cut(string(out), "=== stopped\n")
	if !ok {
		t.Fatalf("no second run:\n%s", out)
	}
	vip := cfg.VIP.Addr()
	held := []byte(heldOut)
	st := ParseHostStatus("lb-a", "172.28.0.21", vip, held)
	if !st.HoldsVIP || st.Interface != "eth0" || st.VRRPState != VRRPMaster || st.Priority != 150 || st.EffectivePriority != 130 || st.VRRPNote != "" {
		t.Errorf("keepalived holding the VIP: %+v\n%s", st, held)
	}
	if st.StatsError == "" || st.Backends != nil { // no HAProxy in the namespace
		t.Errorf("no HAProxy, yet stats: %+v", st)
	}
	stopped := []byte(stoppedOut)
	st = ParseHostStatus("lb-a", "172.28.0.21", vip, stopped)
	if st.HoldsVIP || st.VRRPState != "" || !strings.Contains(st.VRRPNote, "keepalived is not running") || !strings.Contains(st.VRRPNote, "does not hold the VIP") {
		t.Errorf("keepalived stopped: %+v\n%s", st, stopped)
	}
}
