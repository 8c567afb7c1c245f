package schedule

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/hactl/hactl/internal/atomicfile"
)

// Run results (the status label of hactl_backup_last_run_status).
const (
	ResultSuccess = "success" // a snapshot was stored (and pruned)
	ResultSkipped = "skipped" // this member was not the leader: nothing to do
	ResultFailure = "failure" // the run failed (see the service's journal)
)

// Results lists every run result: MetricLastRunStatus has a sample for each (the textfile orders
// them by label value).
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

// The labels of every sample, and the extra label of MetricLastRunStatus.
const (
	labelCluster = "cluster"
	labelMember  = "member"
	labelStatus  = "status"
)

// Format renders m in the Prometheus text exposition format (text/plain; version=0.0.4) that
// node_exporter's textfile collector reads: each metric a gauge with its HELP and TYPE lines,
// labelled with cluster and member, families ordered by name and samples by label values, as a
// prometheus.Registry gathers them; values as expfmt writes floats (shortest form: 1.7960943e+09
// for a Unix time). Times are Unix seconds with a fraction (0 for the zero time), durations
// seconds. The error is the registry's, e.g. for a cluster or member name that is not UTF-8.
func Format(m Metrics) ([]byte, error) {
	reg := prometheus.NewPedanticRegistry()
	labels := prometheus.Labels{labelCluster: m.Cluster, labelMember: m.Member}
	var errs []error
	gauge := func(name, help string, v float64) {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels})
		g.Set(v)
		errs = append(errs, reg.Register(g))
	}
	gauge(MetricLastRunTimestamp, "Unix time the last scheduled backup run on this member ended.", unixSeconds(m.RunTime))
	status := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricLastRunStatus, ConstLabels: labels,
		Help: "Result of the last run: 1 for its status (success: snapshot stored; skipped: not the leader; failure: see journalctl -u " + ServiceName + "), 0 for the others."},
		[]string{labelStatus})
	for _, r := range Results {
		v := 0.0
		if r == m.Result {
			v = 1
		}
		status.WithLabelValues(r).Set(v)
	}
	errs = append(errs, reg.Register(status))
	gauge(MetricLastRunDuration, "Wall time of the last run in seconds.", m.RunDuration.Seconds())
	if s := m.LastSuccess; s != nil {
		gauge(MetricLastSuccessTimestamp, "Unix time the last successful snapshot from this member was stored.", unixSeconds(s.Time))
		gauge(MetricLastSuccessDuration, "Wall time of the last successful run in seconds.", s.Duration.Seconds())
		gauge(MetricLastSuccessSize, "Stored size of the last successful snapshot in bytes.", float64(s.SizeBytes))
		gauge(MetricLastSuccessRevision, "etcd revision of the last successful snapshot.", float64(s.Revision))
		if !s.Slot.IsZero() {
			gauge(MetricLastSuccessSlotTimest, "Unix time of the scheduled slot the last successful snapshot is named after.", unixSeconds(s.Slot))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("textfile: %w", err)
	}
	b, err := encodeText(reg)
	if err != nil {
		return nil, fmt.Errorf("textfile: %w", err)
	}
	return b, nil
}

// encodeText gathers reg and writes its families in the text exposition format, as node_exporter's
// textfile collector reads it (families ordered by name, samples by label values).
func encodeText(reg *prometheus.Registry) ([]byte, error) {
	families, err := reg.Gather()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range families {
		if err := enc.Encode(f); err != nil {
			return nil, err
		}
	}
	return b.Bytes(), nil
}

// unixSeconds is t as Unix seconds with a fraction; 0 for the zero time.
func unixSeconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return time.Duration(t.UnixNano()).Seconds()
}

// Parse reads a textfile in the text exposition format back (the previous run's, to carry
// LastSuccess over, and the status command's), with expfmt's parser: families and samples in any
// order, values in any float form, a missing final newline tolerated. Metrics it does not know are
// ignored; a missing value is left zero; times come back in UTC. Cluster and Member are the
// labels of the samples. The error is the parser's, with its line number, for text that is not
// in the format.
func Parse(data []byte) (Metrics, error) {
	if len(data) > 0 && data[len(data)-1] != '\n' {
		data = append(data[:len(data):len(data)], '\n')
	}
	// node_exporter's textfile collector reads the classic names (Prometheus' legacy validation).
	p := expfmt.NewTextParser(model.LegacyValidation)
	families, err := p.TextToMetricFamilies(bytes.NewReader(data))
	if err != nil {
		return Metrics{}, fmt.Errorf("textfile: %w", err)
	}
	var m Metrics
	s := &Success{}
	seen := false
	for name, f := range families {
		for _, sample := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range sample.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			v := sampleValue(sample)
			switch name {
			case MetricLastRunTimestamp:
				m.RunTime = fromUnix(v)
			case MetricLastRunStatus:
				if v == 1 {
					m.Result = labels[labelStatus]
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
			default:
				continue
			}
			m.Cluster, m.Member = labels[labelCluster], labels[labelMember]
		}
	}
	if seen {
		m.LastSuccess = s
	}
	return m, nil
}

// sampleValue is a sample's value whatever its family's TYPE (gauge, untyped or counter); 0 for
// the other types.
func sampleValue(s *dto.Metric) float64 {
	switch {
	case s.Gauge != nil:
		return s.GetGauge().GetValue()
	case s.Untyped != nil:
		return s.GetUntyped().GetValue()
	default:
		return s.GetCounter().GetValue()
	}
}

func fromUnix(v float64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(v*1e9)).UTC()
}

func fromSeconds(v float64) time.Duration { return time.Duration(v * float64(time.Second)) }

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
	data, err := Format(m)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, data, 0o644)
}
