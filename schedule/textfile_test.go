package schedule

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestFormat(t *testing.T) {
	m := Metrics{Cluster: "lab", Member: "cp-a", Result: ResultSuccess, RunTime: time.Unix(1796094301, 500_000_000), RunDuration: 1250 * time.Millisecond,
		LastSuccess: &Success{Time: time.Unix(1796094301, 500_000_000), Duration: 1250 * time.Millisecond, SizeBytes: 4096, Revision: 1234, Slot: time.Unix(1796094300, 0)}}
	want := `# HELP hactl_backup_last_run_timestamp_seconds Unix time the last scheduled backup run on this member ended.
# TYPE hactl_backup_last_run_timestamp_seconds gauge
hactl_backup_last_run_timestamp_seconds{cluster="lab",member="cp-a"} 1796094301.5
# HELP hactl_backup_last_run_status Result of the last run: 1 for its status (success: snapshot stored; skipped: not the leader; failure: see journalctl -u hactl-backup.service), 0 for the others.
# TYPE hactl_backup_last_run_status gauge
hactl_backup_last_run_status{cluster="lab",member="cp-a",status="success"} 1
hactl_backup_last_run_status{cluster="lab",member="cp-a",status="skipped"} 0
hactl_backup_last_run_status{cluster="lab",member="cp-a",status="failure"} 0
# HELP hactl_backup_last_run_duration_seconds Wall time of the last run in seconds.
# TYPE hactl_backup_last_run_duration_seconds gauge
hactl_backup_last_run_duration_seconds{cluster="lab",member="cp-a"} 1.25
# HELP hactl_backup_last_success_timestamp_seconds Unix time the last successful snapshot from this member was stored.
# TYPE hactl_backup_last_success_timestamp_seconds gauge
hactl_backup_last_success_timestamp_seconds{cluster="lab",member="cp-a"} 1796094301.5
# HELP hactl_backup_last_success_duration_seconds Wall time of the last successful run in seconds.
# TYPE hactl_backup_last_success_duration_seconds gauge
hactl_backup_last_success_duration_seconds{cluster="lab",member="cp-a"} 1.25
# HELP hactl_backup_last_success_size_bytes Stored size of the last successful snapshot in bytes.
# TYPE hactl_backup_last_success_size_bytes gauge
hactl_backup_last_success_size_bytes{cluster="lab",member="cp-a"} 4096
# HELP hactl_backup_last_success_revision etcd revision of the last successful snapshot.
# TYPE hactl_backup_last_success_revision gauge
hactl_backup_last_success_revision{cluster="lab",member="cp-a"} 1234
# HELP hactl_backup_last_success_slot_timestamp_seconds Unix time of the scheduled slot the last successful snapshot is named after.
# TYPE hactl_backup_last_success_slot_timestamp_seconds gauge
hactl_backup_last_success_slot_timestamp_seconds{cluster="lab",member="cp-a"} 1796094300
`
	if got := string(Format(m)); got != want {
		t.Errorf("Format:\n%s\nwant:\n%s", got, want)
	}
	back, err := Parse(Format(m))
	if err != nil {
		t.Fatal(err)
	}
	if back.Cluster != "lab" || back.Member != "cp-a" || back.Result != ResultSuccess || !back.RunTime.Equal(m.RunTime) ||
		back.LastSuccess == nil || *back.LastSuccess != (Success{Time: m.LastSuccess.Time.UTC(), Duration: m.LastSuccess.Duration, SizeBytes: 4096, Revision: 1234, Slot: m.LastSuccess.Slot.UTC()}) {
		t.Errorf("Parse(Format(m)) = %+v (last success %+v)", back, back.LastSuccess)
	}
	odd := Metrics{Cluster: `a"b\c`, Member: "x", Result: ResultFailure, RunTime: time.Unix(1, 0)}
	if back, err := Parse(Format(odd)); err != nil || back.Cluster != odd.Cluster || back.LastSuccess != nil {
		t.Errorf("label escaping: %+v %v", back, err)
	}
}

// TestWriteTextfile: the file is replaced atomically (no temp file left), created with its
// directory, and a run without a snapshot keeps the previous success.
func TestWriteTextfile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "collector", TextfileName)
	ok := Metrics{Cluster: "lab", Member: "cp-a", Result: ResultSuccess, RunTime: time.Unix(100, 0),
		LastSuccess: &Success{Time: time.Unix(100, 0), SizeBytes: 10, Revision: 7}}
	if err := WriteTextfile(p, ok); err != nil {
		t.Fatal(err)
	}
	if err := WriteTextfile(p, Metrics{Cluster: "lab", Member: "cp-a", Result: ResultSkipped, RunTime: time.Unix(110, 0)}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if m.Result != ResultSkipped || m.RunTime.Unix() != 110 || m.LastSuccess == nil || m.LastSuccess.Revision != 7 || m.LastSuccess.Time.Unix() != 100 {
		t.Errorf("after a skipped run: %+v (last success %+v), want the skip and the earlier success", m, m.LastSuccess)
	}
	ents, _ := os.ReadDir(filepath.Dir(p))
	if len(ents) != 1 {
		t.Errorf("textfile dir holds %d entries, want only %s", len(ents), TextfileName)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", fi.Mode())
	}
}
