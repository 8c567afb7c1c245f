//go:build e2e

package backupe2e

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/backup/schedule"
	"github.com/hactl/hactl/e2e/harness"
)

// scheduleEvery is the e2e interval (under a minute: --allow-short-interval).
const scheduleEvery = 10 * time.Second

// runGrace is how long after its slot began a scheduled run has stored the slot's snapshot (a run
// takes about 1 s here): a listing taken later must hold it.
const runGrace = 5 * time.Second

// TestSchedule installs scheduled backups every 10 s on cp-a/b/c and checks, against the real
// timers and the real MinIO: one snapshot per slot, named after the slot, taken by the leader only
// (the followers' runs skip); a re-run changes nothing; the leader's host killed → a new leader
// keeps every later slot (the slot in which it died may be missed: reported); the killed host's
// timer runs again after its restart; --status exits 0; a tighter retention keeps exactly N; a
// member removed by hactl etcd member remove loses its schedule; --disable removes everything and
// is idempotent. Each step waits for what it needs (snapshots in
// the listing, a run in a member's textfile) rather than for a fixed time.
func TestSchedule(t *testing.T) {
	ctx := context.Background()
	spec := cluster(t, "schedule")
	cli := client(t)
	install := func(keep int) harness.Result {
		return suite.MustHactl(t, "backup", "schedule", "-f", spec, "--every", scheduleEvery.String(), "--allow-short-interval",
			"--keep-last", fmt.Sprint(keep), "--yes")
	}

	// Bad input: nothing contacted.
	wantExit(t, 2, []string{"--allow-short-interval"}, "backup", "schedule", "-f", spec, "--every", "10s", "--keep-last", "3", "--yes")
	wantExit(t, 2, []string{"must divide an hour evenly"}, "backup", "schedule", "-f", spec, "--every", "7m", "--keep-last", "3", "--yes")

	install(100)
	for _, h := range members {
		for _, p := range []string{schedule.BinaryPath, schedule.CredentialsPath, schedule.SpecPath, schedule.ServicePath, schedule.TimerPath} {
			suite.ExecOn(t, h, "test", "-f", p)
		}
		if mode := strings.TrimSpace(suite.ExecOn(t, h, "stat", "-c", "%a %U", schedule.CredentialsPath)); mode != "600 root" {
			t.Errorf("%s: %s is %s, want 600 root", h, schedule.CredentialsPath, mode)
		}
		if args := suite.ExecOn(t, h, "systemctl", "show", "-p", "ExecStart", schedule.ServiceName); strings.Contains(args, objectStore(t).SecretAccessKey) {
			t.Errorf("%s: the secret key is on the service's command line", h)
		}
	}
	// Idempotent: a re-run rewrites nothing and restarts nothing.
	if r := install(100); strings.Count(r.Stderr, "unchanged") != len(members) {
		t.Errorf("re-run: want every member unchanged:\n%s", r.Stderr)
	}
	start := time.Now() // every timer runs by now: the slots after this one must all be stored

	leader := leaderName(t, cli)
	// Three slots that began after start, each stored: every timer has run a few times.
	first := schedule.Slot(start, scheduleEvery).Add(scheduleEvery)
	l, listed := listUntil(t, spec, fmt.Sprintf("at least 3 scheduled snapshots from slot %s on (every %s)", first.Format(backup.TimeFormat), scheduleEvery),
		90*time.Second, func(l backup.Listing) string {
			if n := countSnapshots(l, func(sn backup.Snapshot) bool { return !sn.Time.Before(first) }); n < 3 {
				return fmt.Sprintf("%d stored: %v", n, stems(l))
			}
			return ""
		})
	checkSlots(t, l, start, listed, nil)
	for _, sn := range l.Snapshots {
		if sn.Metadata.MemberName != leader {
			t.Errorf("snapshot %s taken by %s, but %s leads", sn.Stem, sn.Metadata.MemberName, leader)
		}
	}
	for _, h := range members {
		m := textfile(t, h)
		want := schedule.ResultSkipped
		if h == leader {
			want = schedule.ResultSuccess
		}
		if m.Result != want || m.Cluster != "lab3" || m.Member != h {
			t.Errorf("%s's textfile: last run %q (cluster %q, member %q), want %q", h, m.Result, m.Cluster, m.Member, want)
		}
		if h == leader && (m.LastSuccess == nil || m.LastSuccess.Revision == 0 || m.LastSuccess.SizeBytes == 0) {
			t.Errorf("leader %s's textfile has no last success: %+v", h, m.LastSuccess)
		}
		// Every run also writes the member's certificates' expiry next to it.
		certs := suite.ExecOn(t, h, "cat", path.Join(schedule.DefaultTextfileDir, schedule.CertificatesTextfile))
		if !strings.Contains(certs, schedule.MetricCertificateExpiry+`{cluster="lab3",member="`+h+`",path="/etc/etcd/pki/server.crt"`) {
			t.Errorf("%s's certificates textfile lacks server.crt's expiry:\n%s", h, certs)
		}
	}

	// The leader's host dies: a new leader takes the later slots.
	killed := time.Now()
	if err := suite.Lab.Kill(ctx, leader); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed the leader's host %s at %s", leader, killed.UTC().Format(time.RFC3339Nano))
	// While it is down, two slots past the grace below are stored by a surviving member.
	listUntil(t, spec, fmt.Sprintf("2 slots after %s stored by a member other than the killed leader %s", killed.Add(scheduleEvery).UTC().Format(time.RFC3339), leader),
		90*time.Second, func(l backup.Listing) string {
			if n := countSnapshots(l, func(sn backup.Snapshot) bool {
				return sn.Time.After(killed.Add(scheduleEvery)) && sn.Metadata.MemberName != leader
			}); n < 2 {
				return fmt.Sprintf("%d stored: %v", n, stems(l))
			}
			return ""
		})
	newLeader := leaderName(t, cli)
	restarted := time.Now() // the killed host was down until here
	if err := suite.Lab.Start(ctx, leader); err != nil {
		t.Fatal(err)
	}
	waitHealthy(t, cli, leader)
	// The restarted host's timer runs again (enabled: it starts with the host).
	harness.WaitFor(t, leader+"'s timer running again after its restart at "+restarted.UTC().Format(time.RFC3339), 60*time.Second, time.Second, func() string {
		if m := textfile(t, leader); !m.RunTime.After(restarted) {
			return fmt.Sprintf("no run since its restart (last run %s)", m.RunTime.UTC().Format(time.RFC3339))
		}
		return ""
	})
	// The schedule goes on with the member back: a slot after the restart is stored.
	l, listed = listUntil(t, spec, "a slot after the restart at "+restarted.UTC().Format(time.RFC3339)+" stored", 60*time.Second, func(l backup.Listing) string {
		if countSnapshots(l, func(sn backup.Snapshot) bool { return sn.Time.After(restarted) }) == 0 {
			return fmt.Sprintf("none: %v", stems(l))
		}
		return ""
	})
	// The slot in which the leader died and the next (election, at most ~1 s here) may be missed.
	grace := func(s time.Time) bool {
		return !s.Before(schedule.Slot(killed, scheduleEvery)) && s.Before(killed.Add(scheduleEvery))
	}
	checkSlots(t, l, start, listed, grace)
	t.Logf("slots around the kill (%s led, %s after, back at %s): %v", leader, newLeader, restarted.UTC().Format(time.RFC3339), stems(l))
	for _, sn := range l.Snapshots {
		// A slot that began before the restart fired while the host was down.
		if sn.Time.After(killed.Add(scheduleEvery)) && sn.Metadata.MemberName == leader && sn.Time.Before(restarted) {
			t.Errorf("snapshot %s taken by %s while its host was down", sn.Stem, leader)
		}
		if sn.Time.After(killed.Add(scheduleEvery)) && sn.Time.Before(restarted) && sn.Metadata.MemberName != newLeader {
			t.Errorf("snapshot %s taken by %s, but %s led after %s died", sn.Stem, sn.Metadata.MemberName, newLeader, leader)
		}
	}

	var st struct {
		Healthy bool                  `json:"healthy"`
		Every   string                `json:"every"`
		Hosts   []schedule.HostStatus `json:"hosts"`
	}
	// Between runs: while a run is in progress systemd may report no next elapse for the timer (seen
	// once in CI: "next 0001-01-01" on every member with runs at the slot's start).
	betweenRuns()
	r := suite.MustHactl(t, "backup", "schedule", "-f", spec, "--status", "-o", "json")
	harness.DecodeJSON(t, r, &st)
	if !st.Healthy || st.Every != "10s" || len(st.Hosts) != 3 {
		t.Errorf("--status: %+v", st)
	}
	for _, h := range st.Hosts {
		if h.TimerActive != "active" || h.NextElapse.IsZero() || h.LastRun == nil {
			t.Errorf("--status of %s: timer %s, next %s, last run %+v", h.Host, h.TimerActive, h.NextElapse, h.LastRun)
		}
	}
	suite.MustHactl(t, "backup", "schedule", "-f", spec, "--status")

	// Retention: the runs prune to exactly N.
	const keep = 3
	if r := install(keep); !strings.Contains(r.Stderr, schedule.ServicePath) {
		t.Errorf("new retention: the service unit was not rewritten:\n%s", r.Stderr)
	}
	// The first slot that begins after the install runs the rewritten unit: once its snapshot is
	// stored, the run prunes, then writes its textfile (the snapshot as its last success).
	pruning := schedule.Slot(time.Now(), scheduleEvery).Add(scheduleEvery)
	var taker string
	listUntil(t, spec, fmt.Sprintf("the snapshot of slot %s (the first run with --keep-last %d)", pruning.Format(backup.TimeFormat), keep), 60*time.Second, func(l backup.Listing) string {
		for _, sn := range l.Snapshots {
			if !sn.Time.Before(pruning) {
				taker = sn.Metadata.MemberName
				return ""
			}
		}
		return fmt.Sprintf("not stored: %v", stems(l))
	})
	harness.WaitFor(t, fmt.Sprintf("%s's run of slot %s ending (its pruning done)", taker, pruning.Format(backup.TimeFormat)), 60*time.Second, 500*time.Millisecond, func() string {
		if m := textfile(t, taker); m.LastSuccess == nil || m.LastSuccess.Slot.Before(pruning) {
			return fmt.Sprintf("last success %+v", m.LastSuccess)
		}
		return ""
	})
	betweenRuns() // no later run in progress either
	if l = list(t, spec); len(l.Snapshots) != keep {
		t.Errorf("--keep-last %d: %d snapshots stored: %v", keep, len(l.Snapshots), stems(l))
	}

	// A member removed with `hactl etcd member remove` loses its schedule with it (a timer left on
	// a retired host would fail every slot). TestSchedule is the package's last test: the cluster
	// stays at two members, and --disable below finds no schedule on the removed one.
	removed := ""
	for _, h := range members {
		if h != leaderName(t, cli) {
			removed = h
		}
	}
	betweenRuns()
	if r := suite.MustHactl(t, "etcd", "member", "remove", removed, "-f", spec, "--yes"); !strings.Contains(r.Stderr, "backup schedule removed") {
		t.Errorf("member remove %s: the backup schedule's removal not reported:\n%s", removed, r.Stderr)
	}
	if out, _ := suite.Lab.Exec(ctx, removed, "sh", "-c", "systemctl is-active "+schedule.TimerName+" "+schedule.AgentServiceName+"; ls "+schedule.ConfigDir+" "+schedule.TimerPath+" "+schedule.ServicePath+" "+schedule.AgentServicePath+" "+schedule.BinaryPath+" 2>&1 | grep -v 'No such file' || true"); strings.TrimSpace(out) != "inactive\ninactive" {
		t.Errorf("%s after etcd member remove: %q, want the timer and the agent inactive and no file of the schedule left", removed, out)
	}

	// Disable: everything gone, timers too; again: nothing to do. A run in progress is left to
	// finish, so disable between runs: after it, the listing must not change.
	betweenRuns()
	suite.MustHactl(t, "backup", "schedule", "-f", spec, "--disable")
	for _, h := range members {
		out, _ := suite.Lab.Exec(ctx, h, "sh", "-c", "systemctl is-active "+schedule.TimerName+"; ls "+schedule.ConfigDir+" "+schedule.TimerPath+" "+schedule.ServicePath+" "+schedule.BinaryPath+" 2>&1 | grep -v 'No such file' || true")
		if strings.TrimSpace(out) != "inactive" {
			t.Errorf("%s after --disable: %q, want the timer inactive and no file left", h, out)
		}
	}
	afterScheduleDisable(t)
	if r := suite.MustHactl(t, "backup", "schedule", "-f", spec, "--disable"); strings.Count(r.Stderr, "no schedule") != len(members) {
		t.Errorf("second --disable: want every member without a schedule:\n%s", r.Stderr)
	}
	wantExit(t, 3, []string{"no member has a backup schedule"}, "backup", "schedule", "-f", spec, "--status")
	n := len(list(t, spec).Snapshots)
	// Nothing happening has no event to wait for: wait until the next slot's run would have stored
	// its snapshot.
	time.Sleep(time.Until(schedule.Slot(time.Now(), scheduleEvery).Add(scheduleEvery + runGrace)))
	if m := len(list(t, spec).Snapshots); m != n {
		t.Errorf("after --disable: %d snapshots, then %d: something still takes them", n, m)
	}
}

// betweenRuns sleeps until the middle of a slot, when no scheduled run is in progress (a run
// takes about 1 s here): a listing taken then does not race with a run's upload and its pruning.
// Up to a second past the middle counts as the middle (a listing just taken there leaves the rest
// of the slot quiet for the next step). The clock is the condition here: the timers start runs on
// the slots' boundaries only.
func betweenRuns() {
	now := time.Now()
	mid := schedule.Slot(now, scheduleEvery).Add(scheduleEvery / 2)
	if now.After(mid.Add(time.Second)) {
		mid = mid.Add(scheduleEvery)
	}
	time.Sleep(time.Until(mid))
}

// checkSlots checks the listing from the first slot after from to the last slot before to: every
// snapshot is named after a slot on the interval's boundaries, and every slot has one — except
// slots for which allowMiss says so (they are reported).
func checkSlots(t *testing.T, l backup.Listing, from, to time.Time, allowMiss func(time.Time) bool) {
	t.Helper()
	var got []time.Time
	for _, sn := range l.Snapshots {
		if sn.Slot == "" {
			t.Errorf("snapshot %s is not named after a slot", sn.Stem)
			continue
		}
		s, err := time.Parse(backup.TimeFormat, sn.Slot)
		if err != nil || !schedule.Slot(s, scheduleEvery).Equal(s) {
			t.Errorf("snapshot %s: slot %s is not on a %s boundary (%v)", sn.Stem, sn.Slot, scheduleEvery, err)
		}
		got = append(got, s)
	}
	// Every slot from the first one after from to the last one that has had time to complete.
	for s := schedule.Slot(from, scheduleEvery).Add(scheduleEvery); s.Add(runGrace).Before(to); s = s.Add(scheduleEvery) {
		if slices.ContainsFunc(got, s.Equal) {
			continue
		}
		if allowMiss != nil && allowMiss(s) {
			t.Logf("slot %s missed (the leader's host was killed in it)", s.Format(backup.TimeFormat))
			continue
		}
		t.Errorf("slot %s has no snapshot; stored: %v", s.Format(backup.TimeFormat), stems(l))
	}
}

// listUntil lists the snapshots (listQuiet) every second until done says "" of the listing, and
// returns that listing and the time just before it was taken (a slot is required in it when it
// began runGrace before: checkSlots' to). When within has passed, the test fails naming what and
// done's last answer; a listing that fails fails the test at once.
func listUntil(t *testing.T, spec, what string, within time.Duration, done func(backup.Listing) string) (backup.Listing, time.Time) {
	t.Helper()
	var l backup.Listing
	var listed time.Time
	harness.WaitFor(t, what, within, time.Second, func() string {
		listed = time.Now()
		l = listQuiet(t, spec)
		return done(l)
	})
	return l, listed
}

// countSnapshots returns how many of the listing's snapshots match.
func countSnapshots(l backup.Listing, match func(backup.Snapshot) bool) int {
	n := 0
	for _, sn := range l.Snapshots {
		if match(sn) {
			n++
		}
	}
	return n
}

func stems(l backup.Listing) []string {
	var out []string
	for _, sn := range l.Snapshots {
		out = append(out, sn.Stem+"("+sn.Metadata.MemberName+")")
	}
	return out
}

// leaderName returns the name of the member that leads now.
func leaderName(t *testing.T, cli *clientv3.Client) string {
	t.Helper()
	var leader string
	harness.WaitFor(t, "a leader", 30*time.Second, time.Second, func() string {
		ml, err := cli.MemberList(context.Background())
		if err != nil {
			return err.Error()
		}
		for _, m := range ml.Members {
			if len(m.ClientURLs) == 0 {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			st, err := cli.Status(ctx, m.ClientURLs[0])
			cancel()
			if err == nil && st.Leader != 0 {
				for _, x := range ml.Members {
					if x.ID == st.Leader {
						leader = x.Name
						return ""
					}
				}
			}
		}
		return "no member names a leader"
	})
	return leader
}

// waitHealthy waits until host's etcd answers a status request.
func waitHealthy(t *testing.T, cli *clientv3.Client, host string) {
	t.Helper()
	harness.WaitFor(t, host+"'s etcd back", 60*time.Second, time.Second, func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := cli.Status(ctx, suite.Endpoint(t, host))
		cancel()
		if err != nil {
			return err.Error()
		}
		return ""
	})
}

// textfile reads a member's Prometheus textfile.
func textfile(t *testing.T, host string) schedule.Metrics {
	t.Helper()
	m, err := schedule.Parse([]byte(suite.ExecOn(t, host, "cat", schedule.TextfilePath(schedule.DefaultTextfileDir))))
	if err != nil {
		t.Fatalf("%s's textfile: %v", host, err)
	}
	return m
}
