package schedule

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func TestFormat(t *testing.T) {
	m := Metrics{Cluster: "lab", Member: "cp-a", Result: ResultSuccess, RunTime: time.Unix(1796094301, 500_000_000), RunDuration: 1250 * time.Millisecond,
		LastSuccess: &Success{Time: time.Unix(1796094301, 500_000_000), Duration: 1250 * time.Millisecond, SizeBytes: 4096, Revision: 1234, Slot: time.Unix(1796094300, 0)}}
	want := `# HELP hactl_backup_last_run_duration_seconds Wall time of the last run in seconds.
# TYPE hactl_backup_last_run_duration_seconds gauge
hactl_backup_last_run_duration_seconds{cluster="lab",member="cp-a"} 1.25
# HELP hactl_backup_last_run_status Result of the last run: 1 for its status (success: snapshot stored; skipped: not the leader; failure: see journalctl -u hactl-backup.service), 0 for the others.
# TYPE hactl_backup_last_run_status gauge
hactl_backup_last_run_status{cluster="lab",member="cp-a",status="failure"} 0
hactl_backup_last_run_status{cluster="lab",member="cp-a",status="skipped"} 0
hactl_backup_last_run_status{cluster="lab",member="cp-a",status="success"} 1
# HELP hactl_backup_last_run_timestamp_seconds Unix time the last scheduled backup run on this member ended.
# TYPE hactl_backup_last_run_timestamp_seconds gauge
hactl_backup_last_run_timestamp_seconds{cluster="lab",member="cp-a"} 1.7960943015e+09
# HELP hactl_backup_last_success_duration_seconds Wall time of the last successful run in seconds.
# TYPE hactl_backup_last_success_duration_seconds gauge
hactl_backup_last_success_duration_seconds{cluster="lab",member="cp-a"} 1.25
# HELP hactl_backup_last_success_revision etcd revision of the last successful snapshot.
# TYPE hactl_backup_last_success_revision gauge
hactl_backup_last_success_revision{cluster="lab",member="cp-a"} 1234
# HELP hactl_backup_last_success_size_bytes Stored size of the last successful snapshot in bytes.
# TYPE hactl_backup_last_success_size_bytes gauge
hactl_backup_last_success_size_bytes{cluster="lab",member="cp-a"} 4096
# HELP hactl_backup_last_success_slot_timestamp_seconds Unix time of the scheduled slot the last successful snapshot is named after.
# TYPE hactl_backup_last_success_slot_timestamp_seconds gauge
hactl_backup_last_success_slot_timestamp_seconds{cluster="lab",member="cp-a"} 1.7960943e+09
# HELP hactl_backup_last_success_timestamp_seconds Unix time the last successful snapshot from this member was stored.
# TYPE hactl_backup_last_success_timestamp_seconds gauge
hactl_backup_last_success_timestamp_seconds{cluster="lab",member="cp-a"} 1.7960943015e+09
`
	got := mustFormat(t, m)
	// testdata/hand-written.prom is what hactl's own formatter wrote before the textfile was
	// rendered with client_golang: the same metrics, labels, values, HELP and TYPE lines, in
	// another order and with values in another float form. Files like it are on members already,
	// and must read back the same.
	handWritten, err := os.ReadFile(filepath.Join("testdata", "hand-written.prom"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("Format:\n%s\nwant:\n%s", got, want)
	}
	// The same exposition as the hand-written formatter's: families, HELP, TYPE, labels, values.
	if g, h := families(t, got), families(t, handWritten); !reflect.DeepEqual(g, h) {
		t.Errorf("Format's metrics differ from the hand-written formatter's:\n%v\nwant\n%v", g, h)
	}
	wantBack := Metrics{Cluster: "lab", Member: "cp-a", Result: ResultSuccess, RunTime: m.RunTime.UTC(), RunDuration: m.RunDuration,
		LastSuccess: &Success{Time: m.LastSuccess.Time.UTC(), Duration: m.LastSuccess.Duration, SizeBytes: 4096, Revision: 1234, Slot: m.LastSuccess.Slot.UTC()}}
	for name, text := range map[string][]byte{"Format(m)": got, "the hand-written file": handWritten, "without the final newline": bytes.TrimSpace(got)} {
		back, err := Parse(text)
		if err != nil {
			t.Fatalf("Parse(%s): %v", name, err)
		}
		if !reflect.DeepEqual(back, wantBack) {
			t.Errorf("Parse(%s) = %+v (last success %+v), want %+v (last success %+v)", name, back, back.LastSuccess, wantBack, wantBack.LastSuccess)
		}
	}
	odd := Metrics{Cluster: `a"b\c` + "\nd", Member: "x", Result: ResultFailure, RunTime: time.Unix(1, 0)}
	if back, err := Parse(mustFormat(t, odd)); err != nil || back.Cluster != odd.Cluster || back.Result != ResultFailure || back.LastSuccess != nil {
		t.Errorf("label escaping: %+v %v", back, err)
	}
	if _, err := Format(Metrics{Cluster: "lab\xff", Member: "x"}); err == nil {
		t.Error("Format accepted a cluster name that is not UTF-8")
	}
	if _, err := Parse([]byte("hactl_backup_last_run_status{cluster=\"lab\" 1\n")); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("Parse of a broken sample: %v, want the parser's error naming the line", err)
	}
}

// families parses an exposition into one line per sample with its family's HELP and TYPE, sorted:
// what a scraper sees, whatever the order and float form of the text.
func families(t *testing.T, text []byte) []string {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fs, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		t.Fatalf("parsing %q: %v", text, err)
	}
	var out []string
	for name, f := range fs {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+strconv.Quote(l.GetValue()))
			}
			sort.Strings(labels)
			out = append(out, fmt.Sprintf("%s{%s} %v %s %q", name, strings.Join(labels, ","), m.GetGauge().GetValue(), f.GetType(), f.GetHelp()))
		}
	}
	sort.Strings(out)
	return out
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

// mustFormat is Format(m), failing the test on an error.
func mustFormat(t *testing.T, m Metrics) []byte {
	t.Helper()
	b, err := Format(m)
	if err != nil {
		t.Fatalf("Format(%+v): %v", m, err)
	}
	return b
}
