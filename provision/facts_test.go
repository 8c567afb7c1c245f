package provision_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hactl/hactl/provision"
)

// runFacts runs FactsScript(r) with the local /bin/sh (the script must be valid POSIX sh) and
// parses its output.
func runFacts(t *testing.T, r provision.FactsRequest) *provision.Facts {
	t.Helper()
	sent := time.Now()
	out, err := exec.Command("/bin/sh", "-c", provision.FactsScript(r)).Output()
	if err != nil {
		t.Fatalf("script failed: %v\n%s", err, out)
	}
	f, err := provision.ParseFacts(r, out, sent, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestFactsScriptRuns: every part of a request, against real files.
func TestFactsScriptRuns(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "etcd")
	os.WriteFile(bin, []byte("real"), 0o755)
	os.WriteFile(filepath.Join(dir, ".etcd.hactl-tmp-0123abcd"), []byte("partial"), 0o600)
	os.WriteFile(filepath.Join(dir, ".other"), []byte("not ours"), 0o600)
	crt := filepath.Join(dir, "ca.crt")
	os.WriteFile(crt, []byte("hello\nworld\n"), 0o644)
	r := provision.FactsRequest{
		Files:     []string{bin, filepath.Join(dir, "missing"), crt},
		Read:      []string{crt, filepath.Join(dir, "missing.crt")},
		StaleDirs: []string{dir},
		Commands:  []string{"sh", "hactl-no-such-command"},
		Listen:    true,
		Clock:     true,
		Probes: []provision.Probe{{Name: "test", Script: `fact test.one "a b=c"
fact test.many 1
fact test.many 2`}},
	}
	f := runFacts(t, r)
	// sha256 of "real"
	if len(f.Sums) != 2 || f.Sums[bin] != sha256hex("real") {
		t.Errorf("sums = %v", f.Sums)
	}
	if m := f.Modes[bin]; m.Perm != 0o755 || m.Owner == "" || m.Group == "" {
		t.Errorf("mode of %s = %+v", bin, m)
	}
	if string(f.Files[crt]) != "hello\nworld\n" || len(f.Files) != 1 {
		t.Errorf("files = %q", f.Files)
	}
	if len(f.Stale) != 1 || f.Stale[0] != filepath.Join(dir, ".etcd.hactl-tmp-0123abcd") {
		t.Errorf("stale = %v", f.Stale)
	}
	if f.UID != os.Getuid() {
		t.Errorf("uid %d, want %d", f.UID, os.Getuid())
	}
	if !f.Commands["sh"] || f.Commands["hactl-no-such-command"] {
		t.Errorf("commands = %v", f.Commands)
	}
	if f.Value("test.one") != "a b=c" || strings.Join(f.Values("test.many"), ",") != "1,2" || f.Has("test.none") {
		t.Errorf("probe values: one %q many %q", f.Value("test.one"), f.Values("test.many"))
	}
	if d := f.ClockOffset; d > time.Second || d < -time.Second || f.RTT <= 0 {
		t.Errorf("local clock offset %v, rtt %v", d, f.RTT)
	}
	if runtime.GOOS == "linux" && len(f.Listen) == 0 {
		t.Log("no listening TCP port on this machine (nothing to check)")
	}
}

func sha256hex(s string) string {
	out, err := exec.Command("/bin/sh", "-c", "printf %s "+s+" | sha256sum").Output()
	if err != nil {
		panic(err)
	}
	h, _, _ := strings.Cut(string(out), " ")
	return h
}

// TestParseFacts reads a fixed output: sums, modes, units (systemctl show blocks, asked without a
// suffix), listening ports (hex), addresses, probe values.
func TestParseFacts(t *testing.T) {
	sha := strings.Repeat("ab", 32)
	out := "time.start=1700000000500000000\n" +
		"sum=" + sha + " /usr/local/bin/etcd\n" +
		"sum=nothex /etc/bad\n" +
		"mode=600 root root /etc/etcd/pki/ca.key\n" +
		"file=aGVsbG8= /etc/etcd/pki/ca.crt\n" +
		"unit=Id=etcd.service\nunit=LoadState=loaded\nunit=ActiveState=active\nunit=UnitFileState=enabled\nunit=MainPID=1234\n" +
		"unit=ExecMainStartTimestamp=Mon 2026-11-30 06:00:00 UTC\nunit=\n" +
		"unit=Id=chrony.service\nunit=LoadState=not-found\nunit=ActiveState=inactive\nunit=UnitFileState=\nunit=MainPID=0\n" +
		"listen=0947\nlisten=0950\n" +
		"addrs=[{\"ifname\":\"lo\"}]\n" +
		"etcd.data=member\n" +
		"noise without equals\n" +
		"end=ok\n"
	r := provision.FactsRequest{Units: []string{"etcd", "chrony.service", "keepalived"}, Clock: true}
	sent := time.Unix(1700000000, 0)
	f, err := provision.ParseFacts(r, []byte(out), sent, sent.Add(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	// One timestamp only (no time.end): the script is taken as instantaneous.
	if f.ClockOffset != 400*time.Millisecond || f.RTT != 200*time.Millisecond || f.ClockError != 100*time.Millisecond {
		t.Errorf("offset %v ±%v rtt %v", f.ClockOffset, f.ClockError, f.RTT)
	}
	if len(f.Sums) != 1 || f.Sums["/usr/local/bin/etcd"] != sha {
		t.Errorf("sums %v", f.Sums)
	}
	if m := f.Modes["/etc/etcd/pki/ca.key"]; m != (provision.FileMode{Perm: 0o600, Owner: "root", Group: "root"}) {
		t.Errorf("modes %v", f.Modes)
	}
	if string(f.Files["/etc/etcd/pki/ca.crt"]) != "hello" {
		t.Errorf("files %q", f.Files)
	}
	got := f.Units["etcd"]
	if got.Load != "loaded" || got.Active != "active" || got.Enabled != "enabled" || got.MainPID != 1234 || got.Started != "Mon 2026-11-30 06:00:00 UTC" ||
		got.Properties["ActiveState"] != "active" || len(got.Properties) != 6 || f.Units["chrony.service"].Load != "not-found" || f.Units["chrony.service"].Active != "inactive" {
		t.Errorf("units %+v", f.Units)
	}
	if _, ok := f.Units["keepalived"]; ok {
		t.Errorf("keepalived was not reported but has a state: %+v", f.Units["keepalived"])
	}
	if !f.Listen[2375] || !f.Listen[2384] || f.Listen[22] {
		t.Errorf("ports %v", f.Listen)
	}
	if string(f.AddrsJSON) != `[{"ifname":"lo"}]` || f.Value("etcd.data") != "member" {
		t.Errorf("addrs %q etcd.data %q", f.AddrsJSON, f.Value("etcd.data"))
	}
}

// TestParseFactsIncomplete: output cut off before the end line is an error, not partial facts; a
// clock asked for and not reported too.
func TestParseFactsIncomplete(t *testing.T) {
	_, err := provision.ParseFacts(provision.FactsRequest{}, []byte("sum=x /y\n"), time.Now(), time.Now())
	var ie *provision.IncompleteFactsError
	if !errors.As(err, &ie) {
		t.Fatalf("err = %v, want *IncompleteFactsError", err)
	}
	if _, err := provision.ParseFacts(provision.FactsRequest{Clock: true}, []byte("end=ok\n"), time.Now(), time.Now()); err == nil ||
		!strings.Contains(err.Error(), "time") {
		t.Fatalf("err = %v, want the missing time", err)
	}
}

// TestClockOffsetDiscountsScriptTime: a slow script (hashing binaries) must not bias the offset.
func TestClockOffsetDiscountsScriptTime(t *testing.T) {
	sent := time.Unix(1700000000, 0)
	// Network 10 ms each way, script ran 600 ms, remote clock 50 ms ahead.
	start := sent.Add(10*time.Millisecond + 50*time.Millisecond)
	end := start.Add(600 * time.Millisecond)
	received := sent.Add(620 * time.Millisecond)
	out := fmt.Sprintf("time.start=%d\ntime.end=%d\nend=ok\n", start.UnixNano(), end.UnixNano())
	f, err := provision.ParseFacts(provision.FactsRequest{Clock: true}, []byte(out), sent, received)
	if err != nil {
		t.Fatal(err)
	}
	if f.ClockOffset != 50*time.Millisecond || f.ClockError != 10*time.Millisecond {
		t.Fatalf("offset %v ±%v, want 50ms ±10ms", f.ClockOffset, f.ClockError)
	}
}

// TestFactsRequestMerge: lists are unions in order, flags or'ed, probes kept once by name.
func TestFactsRequestMerge(t *testing.T) {
	a := provision.FactsRequest{Files: []string{"/a", "/b"}, Units: []string{"etcd"}, Clock: true,
		Probes: []provision.Probe{{Name: "etcd", Script: "fact etcd.x 1"}}}
	b := provision.FactsRequest{Files: []string{"/b", "/c"}, Units: []string{"haproxy"}, Addrs: true, Commands: []string{"curl"},
		Probes: []provision.Probe{{Name: "etcd", Script: "other"}, {Name: "lb", Script: "fact lb.y 2"}}}
	m := a.Merge(b)
	if strings.Join(m.Files, ",") != "/a,/b,/c" || strings.Join(m.Units, ",") != "etcd,haproxy" || !m.Clock || !m.Addrs ||
		len(m.Commands) != 1 || len(m.Probes) != 2 || m.Probes[0].Script != "fact etcd.x 1" || m.Probes[1].Name != "lb" {
		t.Errorf("merge = %+v", m)
	}
	if len(a.Files) != 2 || len(a.Probes) != 1 {
		t.Errorf("merge changed its receiver: %+v", a)
	}
}

// TestClientFacts: the connect-time probe reports HostInfo with the privilege (no extra command),
// and Client.Facts runs one command and carries it.
func TestClientFacts(t *testing.T) {
	c := newEnv(t).dial()
	h := c.Host()
	uname, _ := exec.Command("uname", "-m").Output()
	if h.Kernel != "Linux" || h.Arch != strings.TrimSpace(string(uname)) || h.UID < 0 {
		t.Errorf("host info %+v", h)
	}
	if c.Commands() != 1 {
		t.Errorf("Commands() = %d after connect, want 1 (the probe)", c.Commands())
	}
	f, err := c.Facts(ctxTimeout(t, 10*time.Second), "test/facts", provision.FactsRequest{Files: []string{"/bin/sh"}, Clock: true})
	if err != nil {
		t.Fatal(err)
	}
	if c.Commands() != 2 || f.Sums["/bin/sh"] == "" || f.Host != h || f.UID != os.Getuid() {
		t.Errorf("commands %d, sums %v, host %+v", c.Commands(), f.Sums, f.Host)
	}
}

// TestSumCache: a file whose identity (device, inode, size, mtime, ctime) matches the cache is not
// hashed again — a planted sum comes back — and any write to it makes it hashed again; other
// files' entries survive; paths with spaces work; the cache is root-only.
func TestSumCache(t *testing.T) {
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache", "sha256.cache")
	a, b := filepath.Join(dir, "a file"), filepath.Join(dir, "b")
	os.WriteFile(a, []byte("one"), 0o644)
	os.WriteFile(b, []byte("two"), 0o644)
	r := provision.FactsRequest{Files: []string{a, b}, SumCache: cache}
	f := runFacts(t, r)
	if f.Sums[a] != sha256hex("one") || f.Sums[b] != sha256hex("two") {
		t.Fatalf("first run sums %v", f.Sums)
	}
	raw, err := os.ReadFile(cache)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(cache); st.Mode().Perm() != 0o600 {
		t.Errorf("cache mode %o", st.Mode().Perm())
	}
	// Plant a sum for a: the cache is trusted while a is untouched.
	planted := strings.Repeat("ab", 32)
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if strings.HasSuffix(l, " "+a) {
			key, _, _ := strings.Cut(l, " ")
			l = key + " " + planted + " " + a
		}
		lines = append(lines, l)
	}
	os.WriteFile(cache, []byte(strings.Join(lines, "\n")+"\n"), 0o600)
	if f := runFacts(t, r); f.Sums[a] != planted || f.Sums[b] != sha256hex("two") {
		t.Fatalf("untouched files: sums %v, want the cached ones", f.Sums)
	}
	// A write (same size, even) changes ctime: hashed again.
	os.WriteFile(a, []byte("uno"), 0o644)
	if f := runFacts(t, r); f.Sums[a] != sha256hex("uno") {
		t.Fatalf("after a write: sum %s, want the new content's", f.Sums[a])
	}
	// Another request's run keeps a's and b's entries.
	c := filepath.Join(dir, "c")
	os.WriteFile(c, []byte("three"), 0o644)
	runFacts(t, provision.FactsRequest{Files: []string{c}, SumCache: cache})
	raw, _ = os.ReadFile(cache)
	for _, p := range []string{a, b, c} {
		if !strings.Contains(string(raw), " "+p+"\n") {
			t.Errorf("cache lacks %s:\n%s", p, raw)
		}
	}
	entries, _ := os.ReadDir(filepath.Dir(cache))
	if len(entries) != 1 {
		t.Errorf("temp files left next to the cache: %v", entries)
	}
}
