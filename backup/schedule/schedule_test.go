package schedule

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/specload"
)

func TestOnCalendar(t *testing.T) {
	for _, tc := range []struct {
		every      time.Duration
		allowShort bool
		want       string
		err        string
	}{
		{5 * time.Minute, false, "*-*-* *:00/5:00 UTC", ""},
		{time.Minute, false, "*-*-* *:00/1:00 UTC", ""},
		{30 * time.Minute, false, "*-*-* *:00/30:00 UTC", ""},
		{time.Hour, false, "*-*-* 00/1:00:00 UTC", ""},
		{6 * time.Hour, false, "*-*-* 00/6:00:00 UTC", ""},
		{24 * time.Hour, false, "*-*-* 00:00:00 UTC", ""},
		{10 * time.Second, true, "*-*-* *:*:00/10 UTC", ""},
		{time.Second, true, "*-*-* *:*:00/1 UTC", ""},
		{10 * time.Second, false, "", "--allow-short-interval"},
		{59 * time.Second, false, "", "--allow-short-interval"},
		{7 * time.Second, true, "", "dividing a minute"},
		{1500 * time.Millisecond, true, "", "whole seconds"},
		{7 * time.Minute, false, "", "must divide an hour evenly (1m 2m 3m 4m 5m 6m 10m 12m 15m 20m 30m)"},
		{90 * time.Second, false, "", "must divide an hour evenly"},
		{45 * time.Minute, false, "", "must divide an hour evenly"},
		{5 * time.Hour, false, "", "whole hours dividing a day"},
		{90 * time.Minute, false, "", "whole hours dividing a day"},
		{48 * time.Hour, false, "", "at most 24h"},
		{0, false, "", "positive"},
		{-time.Minute, false, "", "positive"},
	} {
		got, err := OnCalendar(tc.every, tc.allowShort)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("OnCalendar(%s, %v): error %v, want one saying %q", tc.every, tc.allowShort, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("OnCalendar(%s, %v) = %q, %v; want %q", tc.every, tc.allowShort, got, err, tc.want)
		}
		if tc.err == "" {
			checkCalendar(t, got, tc.every)
		}
	}
}

// systemdAnalyze returns systemd-analyze's path, or "" when this machine lacks it (logged); with
// HACTL_REQUIRE_SYSTEMD_ANALYZE=1 (make unit sets it) a missing tool fails the test instead, so
// the checks by systemd cannot silently disappear.
func systemdAnalyze(t *testing.T) string {
	t.Helper()
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		msg := "systemd-analyze is not installed on this machine (Debian: apt-get install systemd): the units and their calendar expressions are not checked by systemd"
		if os.Getenv("HACTL_REQUIRE_SYSTEMD_ANALYZE") == "1" {
			t.Fatal(msg + " (HACTL_REQUIRE_SYSTEMD_ANALYZE=1)")
		}
		t.Log(msg)
		return ""
	}
	return sa
}

// checkCalendar asks the real systemd-analyze (when this machine has it: systemdAnalyze) for the
// expression's next elapses: they must be valid, on Slot boundaries, and every apart.
func checkCalendar(t *testing.T, expr string, every time.Duration) {
	t.Helper()
	sa := systemdAnalyze(t)
	if sa == "" {
		return
	}
	out, err := exec.Command(sa, "calendar", "--iterations=3", expr).CombinedOutput()
	if err != nil {
		t.Errorf("systemd-analyze calendar %q: %v\n%s", expr, err, out)
		return
	}
	var elapses []time.Time
	for _, l := range strings.Split(string(out), "\n") {
		l = strings.TrimSpace(l)
		if k, v, ok := strings.Cut(l, ": "); ok && (k == "Next elapse" || strings.HasPrefix(k, "Iter.")) {
			ts, err := time.Parse("Mon 2006-01-02 15:04:05 MST", strings.TrimSpace(v))
			if err != nil {
				t.Fatalf("systemd-analyze calendar output %q: %v", l, err)
			}
			elapses = append(elapses, ts)
		}
	}
	if len(elapses) != 3 {
		t.Fatalf("systemd-analyze calendar %q: %d elapses in\n%s", expr, len(elapses), out)
	}
	for i, e := range elapses {
		if !Slot(e, every).Equal(e) {
			t.Errorf("%q elapses at %s, not on a slot of %s", expr, e, every)
		}
		if i > 0 && e.Sub(elapses[i-1]) != every {
			t.Errorf("%q elapses %s then %s: not %s apart", expr, elapses[i-1], e, every)
		}
	}
}

func TestSlot(t *testing.T) {
	at := func(s string) time.Time {
		ts, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	for _, tc := range []struct {
		t     string
		every time.Duration
		want  string
	}{
		{"2026-12-01T03:05:00Z", 5 * time.Minute, "20261201T030500Z"},
		{"2026-12-01T03:09:59.999Z", 5 * time.Minute, "20261201T030500Z"},
		{"2026-12-01T03:05:00.700Z", 5 * time.Minute, "20261201T030500Z"}, // AccuracySec=1s: fired late
		{"2026-12-01T03:05:09Z", 10 * time.Second, "20261201T030500Z"},
		{"2026-12-01T03:05:10Z", 10 * time.Second, "20261201T030510Z"},
		{"2026-12-01T04:35:00+05:30", time.Hour, "20261130T230000Z"}, // UTC whatever the zone: 23:05 UTC the day before
		{"2026-12-01T23:59:59Z", 24 * time.Hour, "20261201T000000Z"},
		{"2026-12-01T13:00:00Z", 6 * time.Hour, "20261201T120000Z"},
	} {
		if got := SlotName(at(tc.t), tc.every); got != tc.want {
			t.Errorf("SlotName(%s, %s) = %s, want %s", tc.t, tc.every, got, tc.want)
		}
		if _, err := backup.Stem(time.Time{}, 0, "x", SlotName(at(tc.t), tc.every)); err != nil {
			t.Errorf("slot %s is not a valid backup slot: %v", tc.want, err)
		}
	}
}

func TestTriggerTime(t *testing.T) {
	now := time.Date(2026, 12, 1, 3, 5, 12, 0, time.UTC)
	trig := time.Date(2026, 12, 1, 3, 5, 0, 300_000_000, time.UTC)
	usec := func(t time.Time) string { return strconv.FormatInt(t.UnixMicro(), 10) }
	for _, tc := range []struct {
		name, usec string
		every      time.Duration
		want       time.Time
	}{
		{"the timer's trigger time, however late the process starts", usec(trig), time.Minute, trig},
		{"unset: now", "", time.Minute, now},
		{"garbage: now", "soon", time.Minute, now},
		{"older than an interval (a coalesced trigger): now", usec(trig), 10 * time.Second, now},
		{"in the future: now", usec(now.Add(time.Second)), time.Minute, now},
	} {
		if got := TriggerTime(tc.usec, tc.every, now); !got.Equal(tc.want) {
			t.Errorf("%s: TriggerTime = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func testConfig() Config {
	return Config{Cluster: "lab", Member: "cp-a", Every: "5m0s", OnCalendar: "*-*-* *:00/5:00 UTC",
		Policy: backup.Policy{KeepLast: 288, KeepDaily: 14}, Textfile: TextfilePath(DefaultTextfileDir)}
}

func TestRender(t *testing.T) {
	u, err := Render(testConfig(), BinaryPath)
	if err != nil {
		t.Fatal(err)
	}
	svc := string(u.Service)
	for _, want := range []string{
		"Type=oneshot\n",
		"ExecStart=/usr/local/bin/hactl --log-file= backup now \\\n  --file=/etc/hactl/backup/cluster.yaml \\\n  --only-if-leader \\\n  --member=cp-a \\\n  --slot-every=5m0s \\\n  --slot-trigger-usec=${TRIGGER_TIMER_REALTIME_USEC} \\\n  --keep-last=288 \\\n  --keep-hourly=0 \\\n  --keep-daily=14 \\\n  --textfile=/var/lib/node_exporter/textfile_collector/hactl_backup.prom\n",
		"TimeoutStartSec=900\n",
		"ReadWritePaths=-/var/lib/node_exporter/textfile_collector\n",
	} {
		if !strings.Contains(svc, want) {
			t.Errorf("service unit lacks %q:\n%s", want, svc)
		}
	}
	timer := string(u.Timer)
	for _, want := range []string{"OnCalendar=*-*-* *:00/5:00 UTC\n", "AccuracySec=1s\n", "Persistent=false\n", "Unit=hactl-backup.service\n", "WantedBy=timers.target\n"} {
		if !strings.Contains(timer, want) {
			t.Errorf("timer unit lacks %q:\n%s", want, timer)
		}
	}
	if strings.Contains(svc+timer, "accessKey") || strings.Contains(svc, "secret") {
		t.Errorf("a unit names credentials:\n%s", svc)
	}
}

// TestRenderVerify runs the real `systemd-analyze verify` on the rendered units (with the binary
// path pointing at an existing executable, as it does on the members). Without the tool it is
// skipped, or fails with HACTL_REQUIRE_SYSTEMD_ANALYZE=1 (systemdAnalyze).
func TestRenderVerify(t *testing.T) {
	sa := systemdAnalyze(t)
	if sa == "" {
		t.Skip("systemd-analyze missing")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "hactl")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, every := range []time.Duration{10 * time.Second, 5 * time.Minute, 6 * time.Hour} {
		cfg := testConfig()
		cfg.Every = every.String()
		onCalendar, err := OnCalendar(every, true)
		if err != nil {
			t.Fatal(err)
		}
		cfg.OnCalendar = onCalendar
		u, err := Render(cfg, bin)
		if err != nil {
			t.Fatal(err)
		}
		svc, timer := filepath.Join(dir, ServiceName), filepath.Join(dir, TimerName)
		if err := os.WriteFile(svc, u.Service, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(timer, u.Timer, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(sa, "verify", "--man=no", svc, timer).CombinedOutput()
		if err != nil || len(strings.TrimSpace(string(out))) > 0 {
			t.Errorf("systemd-analyze verify (every %s): %v\n%s\n--- service\n%s--- timer\n%s", every, err, out, u.Service, u.Timer)
		}
	}
}

func TestHostSpec(t *testing.T) {
	c, _, err := specload.Decode([]byte(`apiVersion: hactl.io/v1alpha1
kind: Cluster
metadata: {name: prod}
spec:
  stateDir: /home/me/state
  ssh: {user: deploy, identityFile: /home/me/.ssh/id, knownHostsFile: /home/me/.ssh/known_hosts, bastion: {address: 192.0.2.1}}
  hosts:
  - {name: cp-a, address: 10.0.1.11, zone: az-a, roles: [etcd, control-plane]}
  - {name: cp-b, address: 10.0.1.12, zone: az-b, roles: [etcd, control-plane]}
  - {name: cp-c, address: 10.0.1.13, zone: az-c, roles: [etcd, control-plane]}
  - {name: w-1, address: 10.0.1.21, zone: az-a, roles: [control-plane]}
  etcd: {version: v3.6.16, binaries: {etcd: /home/me/bin/etcd}, clientPort: 12379}
  backup:
    objectStore:
      endpoint: s3.example.net
      bucket: etcd-backups
      prefix: prod
      tls: {caFile: /home/me/ca.pem}
      credentials: {env: {accessKeyID: AK, secretAccessKey: SK}}
    encryption: {recipients: [age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p]}
`), "cluster.yaml", "/home/me")
	if err != nil {
		t.Fatal(err)
	}
	recips := []string{"age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p", "age1lggyhqrw2nlhcxprm67z43rta597azn8gknawjehu9d9dl0jq3yqqvfafg"}
	out, err := HostSpec(c, recips)
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	if strings.Contains(s, "/home/me") || strings.Contains(s, "bastion") || strings.Contains(s, "w-1") || strings.Contains(s, "deploy") {
		t.Errorf("the host spec names this machine's paths, the bastion, a non-etcd host or the SSH user:\n%s", s)
	}
	hc, _, err := specload.Decode(out, SpecPath, ConfigDir)
	if err != nil {
		t.Fatalf("the host spec does not load: %v\n%s", err, s)
	}
	b := hc.Spec.Backup
	switch {
	case hc.Spec.StateDir != ConfigDir:
		t.Errorf("stateDir %s, want %s", hc.Spec.StateDir, ConfigDir)
	case b.ObjectStore.Credentials.File != CredentialsPath || b.ObjectStore.Credentials.Env != nil:
		t.Errorf("credentials %+v, want the file %s only", b.ObjectStore.Credentials, CredentialsPath)
	case b.ObjectStore.TLS == nil || b.ObjectStore.TLS.CAFile != ObjectStoreCAPath:
		t.Errorf("tls %+v, want caFile %s", b.ObjectStore.TLS, ObjectStoreCAPath)
	case b.Encryption == nil || len(b.Encryption.Recipients) != 2 || b.Encryption.RecipientsFile != "":
		t.Errorf("encryption %+v, want both recipients inline", b.Encryption)
	case len(hc.EtcdHosts()) != 3 || hc.Spec.Etcd.ClientPort != 12379 || b.ObjectStore.Prefix != "prod" || hc.Metadata.Name != "prod":
		t.Errorf("members %v, client port %d, prefix %q, name %q: not the cluster's", hc.EtcdHosts(), hc.Spec.Etcd.ClientPort, b.ObjectStore.Prefix, hc.Metadata.Name)
	}
}

func TestPlan(t *testing.T) {
	files := []File{data(SpecPath, 0o600, []byte("spec"), false), data(ServicePath, 0o644, []byte("svc"), false), data(TimerPath, 0o644, []byte("timer"), false)}
	converged := Facts{Files: map[string]string{}, TimerEnabled: "enabled", TimerActive: "active"}
	for _, f := range files {
		converged.Files[f.Path] = fmt.Sprintf("%s %o root root", f.Sum, f.Mode.Perm())
	}
	if c := Plan(files, converged); !c.Empty() {
		t.Errorf("converged member: plan %+v, want nothing", c)
	}
	f := cloneFacts(converged)
	f.Files[SpecPath] = files[0].Sum + " 644 root root" // readable by others
	if c := Plan(files, f); len(c.Write) != 1 || c.Write[0] != SpecPath || c.Reload || c.StartTimer {
		t.Errorf("wrong mode: plan %+v, want the spec rewritten only", c)
	}
	f = cloneFacts(converged)
	delete(f.Files, ServicePath)
	if c := Plan(files, f); len(c.Write) != 1 || !c.Reload || c.StartTimer {
		t.Errorf("service missing: plan %+v, want it written and a reload, the timer left running", c)
	}
	f = cloneFacts(converged)
	f.Files[TimerPath] = "0000 644 root root"
	if c := Plan(files, f); !c.Reload || !c.StartTimer {
		t.Errorf("timer changed: plan %+v, want a reload and a restart", c)
	}
	f = cloneFacts(converged)
	f.TimerActive = "inactive"
	if c := Plan(files, f); len(c.Write) != 0 || c.Reload || !c.StartTimer {
		t.Errorf("timer stopped: plan %+v, want only a start", c)
	}
	f = cloneFacts(converged)
	f.Files[ObjectStoreCAPath] = "x 644 root root"
	if c := Plan(files, f); len(c.Removed) != 1 || c.Removed[0] != ObjectStoreCAPath {
		t.Errorf("stale CA: plan %+v, want it removed", c)
	}

	// With --deltas: the agent runs, and restarts when anything it reads changes.
	withAgent := append(append([]File{}, files...), data(AgentServicePath, 0o644, []byte("agent"), false))
	conv := cloneFacts(converged)
	conv.Files[AgentServicePath] = fmt.Sprintf("%s 644 root root", withAgent[3].Sum)
	conv.AgentEnabled, conv.AgentActive = "enabled", "active"
	if c := Plan(withAgent, conv); !c.Empty() {
		t.Errorf("converged member with its agent: plan %+v, want nothing", c)
	}
	f = cloneFacts(conv)
	f.Files[SpecPath] = "0000 600 root root"
	if c := Plan(withAgent, f); !c.RestartAgent || c.Reload {
		t.Errorf("spec changed: plan %+v, want the agent restarted (no reload)", c)
	}
	f = cloneFacts(conv)
	f.AgentActive = "failed"
	if c := Plan(withAgent, f); !c.RestartAgent || len(c.Write) != 0 {
		t.Errorf("agent failed: plan %+v, want only a restart", c)
	}
	delete(f.Files, AgentServicePath)
	if c := Plan(withAgent, f); !c.RestartAgent || !c.Reload {
		t.Errorf("--deltas added: plan %+v, want the unit written, a reload and a start", c)
	}
	if c := Plan(files, conv); !c.StopAgent || !c.Reload || len(c.Removed) != 1 || c.Removed[0] != AgentServicePath || c.RestartAgent {
		t.Errorf("--deltas dropped: plan %+v, want the agent stopped and its unit removed", c)
	}
}

func cloneFacts(f Facts) Facts {
	g := f
	g.Files = map[string]string{}
	for k, v := range f.Files {
		g.Files[k] = v
	}
	return g
}

// statusFacts parses a facts command's output as Status gathers it.
func statusFacts(t *testing.T, out string) *provision.Facts {
	t.Helper()
	pf, err := provision.ParseFacts(statusRequest(), []byte(out+"end=ok\n"), time.Now(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return pf
}

func TestParseStatus(t *testing.T) {
	textfile := base64.StdEncoding.EncodeToString(mustFormat(t, Metrics{Cluster: "lab", Member: "cp-a", Result: ResultSkipped, RunTime: time.Unix(1764558301, 0)}))
	out := "unit=Id=" + TimerName + "\nunit=ActiveState=active\nunit=UnitFileState=enabled\nunit=NextElapseUSecRealtime=@1764558310\nunit=LastTriggerUSec=@1764558300\nunit=\n" +
		"unit=Id=" + ServiceName + "\nunit=ActiveState=inactive\nunit=Result=success\nunit=\n" +
		"file=" + base64.StdEncoding.EncodeToString(testConfig().Marshal()) + " " + ConfigPath + "\n" +
		"schedule.textfile=" + textfile + "\n"
	st := statusFrom("cp-a", statusFacts(t, out))
	switch {
	case !st.Installed || st.Config == nil || st.Config.Every != "5m0s":
		t.Errorf("schedule not read: %+v", st)
	case st.TimerActive != "active" || st.TimerEnabled != "enabled" || st.NextElapse.Unix() != 1764558310 || st.LastTrigger.Unix() != 1764558300:
		t.Errorf("timer not read: %+v", st)
	case st.ServiceResult != "success" || st.LastRun == nil || st.LastRun.Result != ResultSkipped:
		t.Errorf("last run not read: %+v", st)
	}
	none := statusFrom("cp-b", statusFacts(t, "unit=Id="+TimerName+"\nunit=ActiveState=inactive\nunit=UnitFileState=\nunit=NextElapseUSecRealtime=\nunit=LastTriggerUSec=n/a\nunit=\n"+
		"unit=Id="+ServiceName+"\nunit=ActiveState=inactive\nunit=Result=success\nunit=\n"))
	if none.Installed || !none.NextElapse.IsZero() || !none.LastTrigger.IsZero() || none.LastRun != nil {
		t.Errorf("member without a schedule: %+v", none)
	}
	if ts := parseTimestamp("Tue 2026-12-01 03:05:00 UTC"); ts.Unix() != 1796094300 {
		t.Errorf("default timestamp format: %s", ts)
	}
}

// TestFactsFrom: the probe's facts in Plan's terms — "<sha256> <mode> <owner> <group>" per managed
// file, a timer without a unit file "absent"; kernel, architecture and systemd from the connection.
func TestFactsFrom(t *testing.T) {
	sha := strings.Repeat("ab", 32)
	pf, err := provision.ParseFacts(probeRequest(), []byte("sum="+sha+" "+SpecPath+"\nmode=600 root root "+SpecPath+"\n"+
		"unit=Id="+TimerName+"\nunit=ActiveState=inactive\nunit=UnitFileState=\nunit=\nend=ok\n"), time.Now(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pf.Host = provision.HostInfo{Kernel: "Linux", Arch: "aarch64", Systemd: true}
	f := factsFrom(pf)
	if f.Files[SpecPath] != sha+" 600 root root" || len(f.Files) != 1 || f.TimerEnabled != "absent" || f.TimerActive != "inactive" ||
		f.Arch != "aarch64" || f.Kernel != "Linux" || !f.Systemd {
		t.Errorf("facts %+v", f)
	}
	if r := probeRequest(); len(r.Files) != len(ManagedPaths()) || len(r.Units) != 2 {
		t.Errorf("request %+v", r)
	}
}

// TestProbeFindsForeignOverrides: a drop-in hactl does not write for the backup timer is read back
// by the probe and refuses Install, dry run or not, naming host, file and setting.
func TestProbeFindsForeignOverrides(t *testing.T) {
	const dropIn = "/etc/systemd/system/hactl-backup.timer.d/override.conf"
	out := "uid=0\nuf.frag=hactl-backup.timer " + TimerPath + "\nuf.dropin=hactl-backup.timer " + dropIn + "\n" +
		"uf.file=" + base64.StdEncoding.EncodeToString([]byte("[Timer]\nOnCalendar=\nOnCalendar=weekly\n")) + " " + dropIn + "\nend=ok\n"
	h := &cannedProbe{out: out}
	for _, dry := range []bool{true, false} {
		_, err := Install(context.Background(), h, "cp-a", nil, "", "/var/lib/node_exporter", dry)
		var fe *provision.ForeignOverridesError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), "host cp-a") ||
			!strings.Contains(err.Error(), "drop-in "+dropIn+" sets OnCalendar=; OnCalendar=weekly for hactl-backup.timer") {
			t.Errorf("dry run %v: %v, want a ForeignOverridesError naming host, file and setting", dry, err)
		}
	}
	if len(h.cmds) != 2 || !strings.Contains(h.cmds[0], "-p DropInPaths") {
		t.Errorf("commands: %d, the probe does not ask for the units' drop-ins", len(h.cmds))
	}
}

// cannedProbe answers every command with out (a Linux host with systemd).
type cannedProbe struct {
	out  string
	cmds []string
}

func (h *cannedProbe) Run(_ context.Context, _, command string, _ ...provision.RunOption) (provision.Result, error) {
	h.cmds = append(h.cmds, command)
	return provision.Result{Stdout: []byte(h.out)}, nil
}
func (h *cannedProbe) Upload(context.Context, string, []provision.File) error { return nil }
func (h *cannedProbe) Host() provision.HostInfo {
	return provision.HostInfo{Kernel: "Linux", Systemd: true, Arch: "x86_64"}
}
