package bootstrap

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseFacts(t *testing.T) {
	out := `time_ns=1700000000500000000
uid=0
kernel=Linux
arch=x86_64
os_id=debian
os_pretty=Debian GNU/Linux 12 (bookworm)
systemd=yes
etcd_active=active
etcd_pid=1234
etcd_started=Mon 2026-11-30 06:00:00 UTC
data=member
disk_avail_kb=1048576
marker=eyJjbHVzdGVyIjoibGFiIiwidG9rZW4iOiJsYWItMTIzIiwibWVtYmVyIjoiY3AtYSJ9
listen=0947
listen=0950
sum=abc123  /usr/local/bin/etcd
`
	sent := time.Unix(1700000000, 0)
	f, err := parseFacts([]byte(out), sent, sent.Add(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	// One timestamp only (no time_end_ns): the script is taken as instantaneous.
	if f.ClockOffset != 400*time.Millisecond || f.RTT != 200*time.Millisecond || f.ClockError != 100*time.Millisecond {
		t.Errorf("offset %v ±%v rtt %v", f.ClockOffset, f.ClockError, f.RTT)
	}
	if f.UID != 0 || f.Arch != "x86_64" || !f.Systemd || f.Data != DataMember || f.DiskAvail != 1<<30 || f.EtcdPID != 1234 {
		t.Errorf("facts %+v", f)
	}
	if f.Marker == nil || f.Marker.Token != "lab-123" || f.Marker.Member != "cp-a" {
		t.Errorf("marker %+v", f.Marker)
	}
	if !f.ListenPorts[2375] || !f.ListenPorts[2384] || f.ListenPorts[22] {
		t.Errorf("ports %v", f.ListenPorts)
	}
	if f.Sums["/usr/local/bin/etcd"] != "abc123" {
		t.Errorf("sums %v", f.Sums)
	}
}

func TestParseFactsIncomplete(t *testing.T) {
	if _, err := parseFacts([]byte("uid=0\n"), time.Now(), time.Now()); err == nil || !strings.Contains(err.Error(), "time_ns") {
		t.Fatalf("err = %v", err)
	}
}

// TestFactsScriptRuns runs the real script with the local /bin/sh: it must be valid POSIX sh and report
// the fields parseFacts requires.
func TestFactsScriptRuns(t *testing.T) {
	dir := t.TempDir()
	script := factsScript(dir+"/data dir", []string{"/bin/sh", dir + "/missing"})
	sent := time.Now()
	out, err := exec.Command("/bin/sh", "-c", script).Output()
	if err != nil {
		t.Fatalf("script failed: %v\n%s", err, out)
	}
	f, err := parseFacts(out, sent, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if f.Data != DataAbsent {
		t.Errorf("data = %q, want absent", f.Data)
	}
	if len(f.Sums) != 1 || f.Sums["/bin/sh"] == "" {
		t.Errorf("sums = %v", f.Sums)
	}
	if f.DiskAvail <= 0 {
		t.Errorf("disk avail = %d", f.DiskAvail)
	}
	if d := f.ClockOffset; d > time.Second || d < -time.Second {
		t.Errorf("local clock offset %v", d)
	}
}

// TestFactsDataDirStates runs the script against real directories: a mount point holding only
// lost+found counts as empty; anything else that is not etcd's is foreign.
func TestFactsDataDirStates(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(d string)
		want  DataState
	}{
		{"absent", func(d string) {}, DataAbsent},
		{"empty", func(d string) { os.Mkdir(d, 0o700) }, DataEmpty},
		{"only lost+found", func(d string) { os.MkdirAll(filepath.Join(d, "lost+found"), 0o700) }, DataEmpty},
		{"etcd data", func(d string) { os.MkdirAll(filepath.Join(d, "member", "wal"), 0o700) }, DataMember},
		{"other files", func(d string) { os.MkdirAll(d, 0o700); os.WriteFile(filepath.Join(d, "x"), nil, 0o600) }, DataForeign},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := filepath.Join(t.TempDir(), "etcd")
			tc.setup(d)
			out, err := exec.Command("/bin/sh", "-c", factsScript(d, nil)).Output()
			if err != nil {
				t.Fatal(err)
			}
			f, err := parseFacts(out, time.Now(), time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if f.Data != tc.want {
				t.Fatalf("data = %s, want %s", f.Data, tc.want)
			}
		})
	}
}

func TestFactsReportsStaleUploadTemps(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, ".etcd.hactl-tmp-0123abcd"), []byte("partial"), 0o600)
	os.WriteFile(filepath.Join(dir, "etcd"), []byte("real"), 0o755)
	os.WriteFile(filepath.Join(dir, ".other"), []byte("not ours"), 0o600)
	out, err := exec.Command("/bin/sh", "-c", factsScript(filepath.Join(dir, "data"), []string{filepath.Join(dir, "etcd")})).Output()
	if err != nil {
		t.Fatal(err)
	}
	f, err := parseFacts(out, time.Now(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Stale) != 1 || f.Stale[0] != filepath.Join(dir, ".etcd.hactl-tmp-0123abcd") {
		t.Fatalf("stale = %v", f.Stale)
	}
}

// TestClockOffsetDiscountsScriptTime: a slow script (hashing binaries) must not bias the offset.
func TestClockOffsetDiscountsScriptTime(t *testing.T) {
	sent := time.Unix(1700000000, 0)
	// Network 10 ms each way, script ran 600 ms, remote clock 50 ms ahead.
	start := sent.Add(10*time.Millisecond + 50*time.Millisecond)
	end := start.Add(600 * time.Millisecond)
	received := sent.Add(620 * time.Millisecond)
	out := fmt.Sprintf("time_ns=%d\nuid=0\narch=x86_64\ndata=absent\ntime_end_ns=%d\n", start.UnixNano(), end.UnixNano())
	f, err := parseFacts([]byte(out), sent, received)
	if err != nil {
		t.Fatal(err)
	}
	if f.ClockOffset != 50*time.Millisecond || f.ClockError != 10*time.Millisecond {
		t.Fatalf("offset %v ±%v, want 50ms ±10ms", f.ClockOffset, f.ClockError)
	}
}
