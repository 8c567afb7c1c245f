package schedule

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/internal/exitcode"
	"github.com/hactl/hactl/ui"
)

// TestRunSlot: the slot is the trigger time's with --slot-every, the given one without; the bad
// combinations are exit 2 naming the flag.
func TestRunSlot(t *testing.T) {
	now := time.Date(2026, 12, 1, 3, 7, 12, 0, time.UTC)
	if s, err := (RunOptions{}).Slot("20261201T030500Z", now); s != "20261201T030500Z" || err != nil {
		t.Errorf("without --slot-every: %q, %v", s, err)
	}
	if s, err := (RunOptions{SlotEvery: 5 * time.Minute}).Slot("", now); s != "20261201T030500Z" || err != nil {
		t.Errorf("--slot-every 5m at 03:07:12: %q, %v", s, err)
	}
	for _, tc := range []struct {
		o    RunOptions
		slot string
		want string
	}{
		{RunOptions{SlotEvery: 5 * time.Minute}, "20261201T030500Z", "--slot and --slot-every: give one"},
		{RunOptions{SlotEvery: 7 * time.Minute}, "", "--slot-every: --every 7m0s"},
		{RunOptions{Policy: backup.Policy{KeepLast: -1}}, "", "must not be negative"},
	} {
		_, err := tc.o.Slot(tc.slot, now)
		if exitcode.Of(err) != exitcode.Invalid || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want exit 2 saying %q", tc.o, err, tc.want)
		}
	}
}

// TestRecord: the textfile says failure, success or skipped; a snapshot stored before a failure
// (pruning) is still the last success; a textfile that can't be written fails an otherwise good
// run and is only a warning after a failed one.
func TestRecord(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, TextfileName)
	o := RunOptions{Textfile: path}
	sn := &backup.Metadata{StoredSizeBytes: 611, Revision: 9, Slot: "20261201T030500Z"}
	failed := errors.New("backup now: status of cluster lab: no member answered")
	read := func() Metrics {
		t.Helper()
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		m, err := Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if err := o.Record(RunRecord{Cluster: "lab", Member: "cp-a", Start: time.Now()}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if m := read(); m.Result != ResultSkipped || m.Cluster != "lab" || m.Member != "cp-a" || m.LastSuccess != nil {
		t.Errorf("skipped run: %+v", m)
	}
	if err := o.Record(RunRecord{Cluster: "lab", Member: "cp-a", Start: time.Now(), Snapshot: sn}, failed, nil); err != failed {
		t.Errorf("the run's error is returned as it is: %v", err)
	}
	m := read()
	if m.Result != ResultFailure || m.LastSuccess == nil || m.LastSuccess.Revision != 9 || m.LastSuccess.Slot != time.Date(2026, 12, 1, 3, 5, 0, 0, time.UTC) {
		t.Errorf("snapshot stored, then a failure: %+v (last success %+v)", m, m.LastSuccess)
	}
	if err := o.Record(RunRecord{Start: time.Now()}, failed, nil); err != failed || read().LastSuccess == nil {
		t.Errorf("a failed run keeps the last success: %v", err)
	}
	if err := (RunOptions{}).Record(RunRecord{}, failed, nil); err != failed {
		t.Errorf("without a textfile: %v", err)
	}

	bad := RunOptions{Textfile: filepath.Join(path, "under-a-file.prom")} // path is a file
	if err := bad.Record(RunRecord{Snapshot: sn}, nil, nil); err == nil || !strings.HasPrefix(err.Error(), "backup now: ") {
		t.Errorf("unwritable textfile after a good run: %v", err)
	}
	var warn bytes.Buffer
	if err := bad.Record(RunRecord{}, failed, ui.New(&warn, false, false)); err != failed || !strings.Contains(warn.String(), "under-a-file.prom") {
		t.Errorf("unwritable textfile after a failed run: %v, warned %q", err, warn.String())
	}
}

// TestStatusReport: the problems that fail `--status` and the table it prints.
func TestStatusReport(t *testing.T) {
	now := time.Date(2026, 12, 1, 3, 7, 0, 0, time.UTC)
	l := &backup.Listing{Prefix: "hactl/lab/snapshots/", Snapshots: []backup.Snapshot{{
		Stem: "20261201T030000Z-rev000000000000030-cp-a", Time: now.Add(-7 * time.Minute), Slot: "20261201T030000Z",
		Data:     backup.ObjectInfo{Key: "hactl/lab/snapshots/20261201T030000Z-rev000000000000030-cp-a.db"},
		Metadata: &backup.Metadata{MemberName: "cp-a", Revision: 30, CompletedAt: now.Add(-6 * time.Minute)},
	}}}
	cfg := &Config{Every: "5m"}
	rep := &StatusReport{Cluster: "lab", Hosts: []HostStatus{
		{Host: "cp-a", Installed: true, Config: cfg, TimerActive: "active", TimerEnabled: "enabled", NextElapse: now.Add(3 * time.Minute),
			LastRun: &Metrics{Result: ResultSuccess, RunTime: now.Add(-6 * time.Minute), LastSuccess: &Success{Time: now.Add(-6 * time.Minute), Revision: 30, SizeBytes: 611}}},
		{Host: "cp-b", Installed: true, Config: cfg, TimerActive: "inactive", TimerEnabled: "enabled"},
		{Host: "cp-c", Error: "host cp-c: connect: connection refused"},
	}}
	rep.evaluate(l, nil, now)
	want := []string{"cp-b: hactl-backup.timer is inactive", "cp-c: host cp-c: connect: connection refused"}
	if rep.Healthy || rep.Every != "5m" || rep.Newest == nil || rep.Newest.AgeSeconds != 360 || strings.Join(rep.Problems, "|") != strings.Join(want, "|") {
		t.Errorf("report %+v, problems %q; want %q", rep, rep.Problems, want)
	}
	var b bytes.Buffer
	rep.Print(&b)
	for _, s := range []string{
		"cluster lab, every 5m\n",
		"cp-a  active/enabled    03:10:00 (in 3m0s)  -             success 03:01:00 (6m0s ago)  03:01:00 (6m0s ago) rev 30, 611 bytes  -\n",
		"cp-c  unreachable       -",
		"newest snapshot: hactl/lab/snapshots/20261201T030000Z-rev000000000000030-cp-a.db (member cp-a, 6m0s old)\n",
		"problem: cp-b: hactl-backup.timer is inactive\n",
	} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("status lacks %q:\n%s", s, b.String())
		}
	}

	// With --deltas, a member whose agent is not running is a problem.
	dcfg := &Config{Every: "5m", Deltas: true, DeltaEvery: "30s"}
	withAgent := &StatusReport{Cluster: "lab", Hosts: []HostStatus{
		{Host: "cp-a", Installed: true, Config: dcfg, TimerActive: "active", TimerEnabled: "enabled", AgentState: "active"},
		{Host: "cp-b", Installed: true, Config: dcfg, TimerActive: "active", TimerEnabled: "enabled", AgentState: "failed"},
	}}
	delta := func(from, to int64, ago time.Duration) backup.Delta {
		return backup.Delta{Data: backup.ObjectInfo{Key: fmt.Sprintf("d/rev%d-rev%d.events", from, to)},
			Metadata: &backup.DeltaMetadata{FromRevision: from, ToRevision: to, CompletedAt: now.Add(-ago)}}
	}
	withAgent.evaluate(l, []backup.Delta{delta(42, 50, 20*time.Second), delta(30, 42, 50*time.Second), delta(10, 20, time.Hour)}, now)
	if withAgent.Healthy || len(withAgent.Problems) != 1 || !strings.Contains(withAgent.Problems[0], "cp-b: hactl-backup-agent.service is failed") {
		t.Errorf("a failed agent: problems %q", withAgent.Problems)
	}
	if d := withAgent.NewestDelta; d == nil || d.ToRevision != 50 || d.AgeSeconds != 20 {
		t.Errorf("newest delta %+v, want to revision 50, 20 s old", d)
	}
	b.Reset()
	withAgent.Print(&b)
	for _, s := range []string{"active (every 30s)", "newest delta: d/rev42-rev50.events (to revision 50, 20s old)"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("status lacks %q:\n%s", s, b.String())
		}
	}
	gap := &StatusReport{Hosts: withAgent.Hosts[:1]}
	gap.evaluate(l, []backup.Delta{delta(42, 50, 20*time.Second)}, now)
	if gap.Healthy || gap.NewestDelta != nil || len(gap.Problems) != 1 || !strings.Contains(gap.Problems[0], "no delta holds revisions 31 to 42") {
		t.Errorf("a gap after the newest snapshot: newest delta %+v, problems %q", gap.NewestDelta, gap.Problems)
	}

	old := &StatusReport{Hosts: rep.Hosts[:1]}
	old.evaluate(l, nil, now.Add(time.Hour))
	if old.Healthy || len(old.Problems) != 1 || !strings.Contains(old.Problems[0], "is 1h6m0s old, more than 2 × the interval 5m0s") {
		t.Errorf("stale snapshot: %q", old.Problems)
	}
	none := &StatusReport{Hosts: []HostStatus{{Host: "cp-a"}}}
	none.evaluate(&backup.Listing{Prefix: "p/"}, nil, now)
	if strings.Join(none.Problems, "|") != "cp-a: no schedule installed|no member has a backup schedule (install one with --every)" {
		t.Errorf("nothing installed: %q", none.Problems)
	}
}

// TestDescribeChange: a member's line after an install or a dry run, and the policy in the question.
func TestDescribeChange(t *testing.T) {
	ch := Change{Write: []string{BinaryPath, TimerPath}, Removed: []string{ObjectStoreCAPath}, Reload: true, StartTimer: true}
	if got := describeChange(ch, false); got != "wrote "+BinaryPath+", "+TimerPath+"; removed "+ObjectStoreCAPath+"; reloaded systemd; (re)started "+TimerName {
		t.Errorf("install: %q", got)
	}
	if got := describeChange(ch, true); got != "would write "+BinaryPath+", "+TimerPath+"; would remove "+ObjectStoreCAPath+"; would reload systemd; would (re)start "+TimerName {
		t.Errorf("dry run: %q", got)
	}
	if got := describeChange(Change{}, true); got != "unchanged" {
		t.Errorf("no change: %q", got)
	}
	if got := policyString(backup.Policy{KeepLast: 288, KeepDaily: 14}); got != "the last 288 + 14 daily" {
		t.Errorf("policy: %q", got)
	}
}
