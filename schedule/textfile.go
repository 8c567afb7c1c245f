package schedule

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hactl/hactl/internal/atomicfile"
)

// Run results (the status label of hactl_backup_last_run_status).
const (
	ResultSuccess = "success" // a snapshot was stored (and pruned)
	ResultSkipped = "skipped" // this member was not the leader: nothing to do
	ResultFailure = "failure" // the run failed (see the service's journal)
)

// Results lists every run result, in the order the textfile shows them.
var Results = []string{ResultSuccess, ResultSkipped, ResultFailure}

// Metric names of the textfile (node_exporter textfile collector format).
const (
	MetricLastRunTimestamp      = "hactl_backup_last_run_timestamp_seconds"
	MetricLastRunStatus         = "hactl_backup_last_run_status"
	MetricLastRunDuration       = "hactl_backup_last_run_duration_seconds"
	MetricLastSuccessTimestamp  = "hactl_backup_last_success_timestamp_seconds"
	MetricLastSuccessDuration   = "hactl_backup_last_success_duration_seconds"
	MetricLastSuccessSize       = "hactl_backup_last_success_size_bytes"
	MetricLastSuccessRevision   = "hactl_backup_last_success_revision"
	MetricLastSuccessSlotTimest = "hactl_backup_last_success_slot_timestamp_seconds"
)

// Success is the last successful snapshot of a member.
type Success struct {
	// Time is when the run ended; Duration how long it took.
	Time     time.Time     `json:"time"`
	Duration time.Duration `json:"duration"`
	// SizeBytes is the stored (compressed, encrypted) size; Revision etcd's revision.
	SizeBytes int64 `json:"sizeBytes"`
	Revision  int64 `json:"revision"`
	// Slot is the scheduled slot the snapshot is named after (zero for an unscheduled run).
	Slot time.Time `json:"slot,omitzero"`
}

// Metrics is what one member's textfile says.
type Metrics struct {
	Cluster, Member string
	// Result is the last run's result (ResultSuccess, ...); RunTime when it ended; RunDuration its
	// wall time.
	Result      string
	RunTime     time.Time
	RunDuration time.Duration
	// LastSuccess is the newest success, carried over from the previous file by runs that took no
	// snapshot; nil when there has been none.
	LastSuccess *Success
}

// Format renders m in the Prometheus text exposition format node_exporter's textfile collector
// reads: HELP and TYPE lines, every metric a gauge labelled with cluster and member.
func Format(m Metrics) []byte {
	var b bytes.Buffer
	labels := fmt.Sprintf(`cluster=%s,member=%s`, quoteLabel(m.Cluster), quoteLabel(m.Member))
	gauge := func(name, help string, samples ...string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name)
		for _, s := range samples {
			fmt.Fprintf(&b, "%s%s\n", name, s)
		}
	}
	one := func(v string) string { return "{" + labels + "} " + v }
	gauge(MetricLastRunTimestamp, "Unix time the last scheduled backup run on this member ended.", one(unixSeconds(m.RunTime)))
	var st []string
	for _, r := range Results {
		v := "0"
		if r == m.Result {
			v = "1"
		}
		st = append(st, fmt.Sprintf("{%s,status=%q} %s", labels, r, v))
	}
	gauge(MetricLastRunStatus, "Result of the last run: 1 for its status (success: snapshot stored; skipped: not the leader; failure: see journalctl -u "+ServiceName+"), 0 for the others.", st...)
	gauge(MetricLastRunDuration, "Wall time of the last run in seconds.", one(seconds(m.RunDuration)))
	if s := m.LastSuccess; s != nil {
		gauge(MetricLastSuccessTimestamp, "Unix time the last successful snapshot from this member was stored.", one(unixSeconds(s.Time)))
		gauge(MetricLastSuccessDuration, "Wall time of the last successful run in seconds.", one(seconds(s.Duration)))
		gauge(MetricLastSuccessSize, "Stored size of the last successful snapshot in bytes.", one(strconv.FormatInt(s.SizeBytes, 10)))
		gauge(MetricLastSuccessRevision, "etcd revision of the last successful snapshot.", one(strconv.FormatInt(s.Revision, 10)))
		if !s.Slot.IsZero() {
			gauge(MetricLastSuccessSlotTimest, "Unix time of the scheduled slot the last successful snapshot is named after.", one(unixSeconds(s.Slot)))
		}
	}
	return b.Bytes()
}

func unixSeconds(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	return seconds(time.Duration(t.UnixNano()))
}

func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
}

// quoteLabel quotes a label value as the exposition format wants: backslash, double quote and
// newline escaped.
func quoteLabel(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}

// Parse reads a textfile written by Format back (the previous run's, to carry LastSuccess over,
// and the status command's). Lines it does not know are ignored; a missing value is left zero.
func Parse(data []byte) (Metrics, error) {
	var m Metrics
	s := &Success{}
	seen := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, labels, value, err := splitSample(line)
		if err != nil {
			return Metrics{}, err
		}
		m.Cluster, m.Member = labels["cluster"], labels["member"]
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return Metrics{}, fmt.Errorf("textfile: %s: value %q: %w", name, value, err)
		}
		switch name {
		case MetricLastRunTimestamp:
			m.RunTime = fromUnix(v)
		case MetricLastRunStatus:
			if v == 1 {
				m.Result = labels["status"]
			}
		case MetricLastRunDuration:
			m.RunDuration = fromSeconds(v)
		case MetricLastSuccessTimestamp:
			s.Time, seen = fromUnix(v), true
		case MetricLastSuccessDuration:
			s.Duration = fromSeconds(v)
		case MetricLastSuccessSize:
			s.SizeBytes = int64(v)
		case MetricLastSuccessRevision:
			s.Revision = int64(v)
		case MetricLastSuccessSlotTimest:
			s.Slot = fromUnix(v)
		}
	}
	if err := sc.Err(); err != nil {
		return Metrics{}, fmt.Errorf("textfile: %w", err)
	}
	if seen {
		m.LastSuccess = s
	}
	return m, nil
}

func fromUnix(v float64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(v*1e9)).UTC()
}

func fromSeconds(v float64) time.Duration { return time.Duration(v * float64(time.Second)) }

// splitSample splits `name{a="x",b="y"} value` (labels optional).
func splitSample(line string) (name string, labels map[string]string, value string, err error) {
	labels = map[string]string{}
	rest := line
	if i := strings.IndexByte(line, '{'); i >= 0 {
		name = line[:i]
		rest = line[i+1:]
		for {
			rest = strings.TrimLeft(rest, ", ")
			if strings.HasPrefix(rest, "}") {
				rest = rest[1:]
				break
			}
			k, r, ok := strings.Cut(rest, "=")
			if !ok || !strings.HasPrefix(r, `"`) {
				return "", nil, "", fmt.Errorf("textfile: bad labels in %q", line)
			}
			v, r, ok := unquoteLabel(r[1:])
			if !ok {
				return "", nil, "", fmt.Errorf("textfile: bad label value in %q", line)
			}
			labels[strings.TrimSpace(k)] = v
			rest = r
		}
	} else {
		name, rest, _ = strings.Cut(line, " ")
	}
	f := strings.Fields(rest)
	if name == "" || len(f) == 0 {
		return "", nil, "", fmt.Errorf("textfile: bad sample %q", line)
	}
	return name, labels, f[0], nil
}

// unquoteLabel reads a label value up to its closing quote (the opening one already consumed).
func unquoteLabel(s string) (value, rest string, ok bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return b.String(), s[i+1:], true
		case '\\':
			if i+1 == len(s) {
				return "", "", false
			}
			i++
			if s[i] == 'n' {
				b.WriteByte('\n')
			} else {
				b.WriteByte(s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", "", false
}

// WriteTextfile writes m to path atomically (temp file in the same directory, rename), creating
// the directory (0755) when missing, so node_exporter never reads a partial file. m.LastSuccess,
// when nil, is carried over from the file already at path (a run that took no snapshot does not
// forget the last one). The file is 0644: it holds no secret.
func WriteTextfile(path string, m Metrics) error {
	if m.LastSuccess == nil {
		if old, err := os.ReadFile(path); err == nil {
			if prev, err := Parse(old); err == nil {
				m.LastSuccess = prev.LastSuccess
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("textfile %s: %w", path, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("textfile: %w", err)
	}
	return atomicfile.WriteFile(path, Format(m), 0o644)
}
