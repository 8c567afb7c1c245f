package etcdphases

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/provision"
)

// runFacts runs the etcd group's facts command (the generic facts and the etcd probe, as preflight
// gathers them) for dataDir with the local /bin/sh, and returns the etcd view and the raw output.
func runFacts(t *testing.T, dataDir string, paths, read []string) (*Facts, []byte) {
	t.Helper()
	r := factsRequestFor(dataDir, paths, read)
	sent := time.Now()
	out, err := exec.Command("/bin/sh", "-c", provision.FactsScript(r)).Output()
	if err != nil {
		t.Fatalf("script failed: %v\n%s", err, out)
	}
	pf, err := provision.ParseFacts(r, out, sent, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return factsFrom(pf), out
}

// parseOutput reads a facts command's output (the line codec) into the etcd view.
func parseOutput(t *testing.T, out string, sent, received time.Time) *Facts {
	t.Helper()
	r := factsRequestFor("/var/lib/etcd", nil, nil)
	pf, err := provision.ParseFacts(r, []byte(out), sent, received)
	if err != nil {
		t.Fatal(err)
	}
	pf.Host = provision.HostInfo{UID: 0, Kernel: "Linux", Arch: "x86_64", OSID: "debian", OSPretty: "Debian GNU/Linux 12 (bookworm)", Systemd: true}
	return factsFrom(pf)
}

func TestParseFacts(t *testing.T) {
	out := `uid=0
time.start=1700000000500000000
unit=Id=etcd.service
unit=ActiveState=active
unit=MainPID=1234
unit=ExecMainStartTimestamp=Mon 2026-11-30 06:00:00 UTC
unit=
etcd.data=member
etcd.disk_avail_kb=1048576
file=eyJjbHVzdGVyIjoibGFiIiwidG9rZW4iOiJsYWItMTIzIiwibWVtYmVyIjoiY3AtYSJ9 /etc/hactl/etcd-member.json
listen=0947
listen=0950
sum=abc123abc123abc123abc123abc123abc123abc123abc123abc123abc123abcd /usr/local/bin/etcd
end=ok
`
	sent := time.Unix(1700000000, 0)
	f := parseOutput(t, out, sent, sent.Add(200*time.Millisecond))
	// One timestamp only (no time.end): the script is taken as instantaneous.
	if f.ClockOffset != 400*time.Millisecond || f.RTT != 200*time.Millisecond || f.ClockError != 100*time.Millisecond {
		t.Errorf("offset %v ±%v rtt %v", f.ClockOffset, f.ClockError, f.RTT)
	}
	if f.UID != 0 || f.Arch != "x86_64" || !f.Systemd || f.Data != DataMember || f.DiskAvail != 1<<30 || f.EtcdPID != 1234 ||
		f.EtcdActive != "active" || f.EtcdStarted != "Mon 2026-11-30 06:00:00 UTC" {
		t.Errorf("facts %+v", f)
	}
	if f.Marker == nil || f.Marker.Token != "lab-123" || f.Marker.Member != "cp-a" {
		t.Errorf("marker %+v", f.Marker)
	}
	if !f.ListenPorts[2375] || !f.ListenPorts[2384] || f.ListenPorts[22] {
		t.Errorf("ports %v", f.ListenPorts)
	}
	if f.Sums["/usr/local/bin/etcd"] != "abc123abc123abc123abc123abc123abc123abc123abc123abc123abc123abcd" {
		t.Errorf("sums %v", f.Sums)
	}
}

// TestPreflightNeedsTheDataDirState: output without the etcd probe's data dir state (a shell that
// stopped half-way) is refused by preflight, not taken for an absent data dir.
func TestPreflightNeedsTheDataDirState(t *testing.T) {
	f := newPlanFixture(t, 3, false)
	for _, m := range f.b.members {
		pf, err := provision.ParseFacts(provision.FactsRequest{}, []byte("end=ok\n"), time.Now(), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		f.b.run.SetFacts(m.Name, pf)
		f.b.run.SetClient(m.Name, &recordingHost{})
	}
	f.b.run.Spec.Spec.Etcd.Binaries.Etcd = "/proc/self/exe" // an ELF binary of this machine's architecture
	err := (&Preflight{f.b}).Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "did not report its data dir") {
		t.Fatalf("err = %v", err)
	}
}

// TestFactsScriptRuns runs the real script with the local /bin/sh: it must be valid POSIX sh and report
// the fields preflight requires.
func TestFactsScriptRuns(t *testing.T) {
	dir := t.TempDir()
	f, _ := runFacts(t, dir+"/data dir", []string{"/bin/sh", dir + "/missing"}, nil)
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
			f, _ := runFacts(t, d, nil, nil)
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
	f, _ := runFacts(t, filepath.Join(dir, "data"), []string{filepath.Join(dir, "etcd")}, nil)
	if len(f.Stale) != 1 || f.Stale[0] != filepath.Join(dir, ".etcd.hactl-tmp-0123abcd") {
		t.Fatalf("stale = %v", f.Stale)
	}
}

// TestParseFactsIssue3: time sync state, the fsync probe's timings, the release record and files
// read back.
func TestParseFactsIssue3(t *testing.T) {
	sha := strings.Repeat("ab", 32)
	out := "time.start=1\netcd.data=empty\n" +
		"unit=Id=chrony.service\nunit=ActiveState=inactive\nunit=\nunit=Id=chronyd.service\nunit=ActiveState=inactive\nunit=\n" +
		"unit=Id=systemd-timesyncd.service\nunit=ActiveState=active\nunit=\nunit=Id=ntp.service\nunit=ActiveState=active\nunit=\n" +
		"etcd.ntp=yes\n" +
		"etcd.release=" + sha + "  etcd-v3.6.16-linux-amd64.tar.gz\n" +
		"etcd.release=" + strings.Repeat("01", 32) + "  /usr/local/bin/etcd\n" +
		"file=aGVsbG8= /etc/etcd/pki/ca.crt\n" +
		"etcd.fsync_dir=/var/lib\n" +
		// baseline median 3ms; samples 3.1ms x 98, 2ms (below baseline: 0), 15ms
		"etcd.fsync_base= 2000000 3000000 9000000\n" +
		"etcd.fsync_ns=" + strings.Repeat(" 3100000", 98) + " 2000000 15000000\n" +
		"end=ok\n"
	f := parseOutput(t, out, time.Unix(0, 0), time.Unix(0, 0))
	if f.TimeSync != "systemd-timesyncd" || f.NTPSynchronized != "yes" || f.timeSyncSummary() != "systemd-timesyncd active, synchronised" {
		t.Errorf("time sync %q %q %q", f.TimeSync, f.NTPSynchronized, f.timeSyncSummary())
	}
	if f.Release == nil || f.Release.Tarball != sha || f.Release.Binaries["/usr/local/bin/etcd"] != strings.Repeat("01", 32) {
		t.Errorf("release %+v", f.Release)
	}
	if string(f.Files["/etc/etcd/pki/ca.crt"]) != "hello" {
		t.Errorf("files %q", f.Files)
	}
	want := FsyncProbe{Dir: "/var/lib", Samples: 100, P50: 100 * time.Microsecond, P99: 100 * time.Microsecond}
	if f.Fsync != want {
		t.Errorf("fsync %+v, want %+v", f.Fsync, want)
	}
	if s := f.fsyncSummary(); s != "fsync p50/p99 0.1/0.1 ms" {
		t.Errorf("summary %q", s)
	}
}

func TestFsyncPercentiles(t *testing.T) {
	ms := func(n int64) int64 { return n * int64(time.Millisecond) }
	for _, tc := range []struct {
		name          string
		base, samples []int64
		p50, p99      time.Duration
		err           string
	}{
		{"no samples", nil, nil, 0, 0, "no fsync timings"},
		{"no baseline", nil, []int64{ms(1), ms(2), ms(3)}, 2 * time.Millisecond, 3 * time.Millisecond, ""},
		{"50 samples: p99 is the largest", []int64{ms(1)}, append(slices.Repeat([]int64{ms(2)}, 49), ms(13)), time.Millisecond, 12 * time.Millisecond, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p FsyncProbe
			p.fill(tc.base, tc.samples)
			if p.P50 != tc.p50 || p.P99 != tc.p99 || !strings.Contains(p.Err, tc.err) || (tc.err == "") != (p.Samples > 0) {
				t.Errorf("got %+v, want p50 %v p99 %v err %q", p, tc.p50, tc.p99, tc.err)
			}
		})
	}
}

// TestFactsFsyncProbe runs the real probe: it measures, writes only its own temp file next to (or in)
// the data dir and removes it; a probe file left by a killed run does not make an empty data dir
// foreign.
func TestFactsFsyncProbe(t *testing.T) {
	parent := t.TempDir()
	d := filepath.Join(parent, "etcd")
	os.Mkdir(d, 0o700)
	os.WriteFile(filepath.Join(d, ".hactl-fsync-probe.123"), nil, 0o600) // left by a killed run
	start := time.Now()
	f, out := runFacts(t, d, nil, nil)
	took := time.Since(start)
	if f.Data != DataEmpty {
		t.Errorf("data = %s, want empty", f.Data)
	}
	if f.Fsync.Dir != d || f.Fsync.Samples != fsyncSamples || f.Fsync.P99 < f.Fsync.P50 {
		t.Errorf("fsync %+v (output:\n%s)", f.Fsync, out)
	}
	for _, dir := range []string{parent, d} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".hactl-fsync-probe") {
				t.Errorf("probe file %s left in %s", e.Name(), dir)
			}
		}
	}
	t.Logf("facts script took %s: %s, %s", took, f.timeSyncSummary(), f.fsyncSummary())
	// Without the data dir the probe writes in its parent.
	if f, _ := runFacts(t, filepath.Join(parent, "absent", "etcd"), nil, nil); f.Fsync.Dir != parent {
		t.Errorf("absent data dir: probe dir %q, want %s", f.Fsync.Dir, parent)
	}
}

// TestFsyncProbeSkipsLiveDataDir: a data dir that already holds etcd data is never written into by
// the probe (a re-run changes nothing), and the facts say why nothing was measured.
func TestFsyncProbeSkipsLiveDataDir(t *testing.T) {
	d := filepath.Join(t.TempDir(), "etcd")
	os.MkdirAll(filepath.Join(d, "member", "wal"), 0o700)
	f, _ := runFacts(t, d, nil, nil)
	if f.Fsync.Samples != 0 || !strings.Contains(f.Fsync.Err, "skipped") {
		t.Fatalf("fsync probe on a live data dir: %+v", f.Fsync)
	}
	entries, _ := os.ReadDir(d)
	if len(entries) != 1 {
		t.Fatalf("the probe left files in the data dir: %v", entries)
	}
}

// TestEffectiveQuota: the quota the running etcd enforces is read back from its metrics (Prometheus'
// float format) or its flags, and plan names every member whose quota differs from the spec's,
// saying whether this run's restart applies the spec's value.
func TestEffectiveQuota(t *testing.T) {
	read := func(v string) *Facts {
		return parseOutput(t, "time.start=1700000000000000000\netcd.data=member\netcd.quota="+v+"\nend=ok\n", time.Now(), time.Now())
	}
	if f := read("metrics 2.147483648e+09"); f.Quota != 2<<30 || f.QuotaFrom != "metrics" {
		t.Errorf("from metrics: %d %q", f.Quota, f.QuotaFrom)
	}
	if f := read("flags 1073741824"); f.Quota != 1<<30 || f.QuotaFrom != "flags" {
		t.Errorf("from flags: %d %q", f.Quota, f.QuotaFrom)
	}
	if f := read("flags nonsense"); f.Quota != 0 {
		t.Errorf("unparsable: %d", f.Quota)
	}
	ms := []Member{{Host: v1alpha1.Host{Name: "cp-a"}}, {Host: v1alpha1.Host{Name: "cp-b"}}, {Host: v1alpha1.Host{Name: "cp-c"}}}
	for i := range ms {
		ms[i].Name = ms[i].Host.Name
	}
	facts := map[string]*Facts{"cp-a": {Quota: 1 << 30, QuotaFrom: "metrics"}, "cp-b": {Quota: 2 << 30, QuotaFrom: "metrics"}, "cp-c": {Quota: 1 << 30, QuotaFrom: "flags"}}
	plans := map[string]*HostPlan{"cp-a": {}, "cp-b": {}, "cp-c": {Restart: true}}
	got := effectiveDiffs(2<<30, ms, facts, plans)
	want := []string{
		"cp-a: etcd runs with quota-backend-bytes 1073741824 (read from its metrics), spec.etcd.quotaBackendBytes is 2147483648: this run does not restart it: the unit already has the spec's value, so something else sets it (a drop-in or environment file hactl does not own?)",
		"cp-c: etcd runs with quota-backend-bytes 1073741824 (read from its flags), spec.etcd.quotaBackendBytes is 2147483648: etcd/start restarts it with the spec's value",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
