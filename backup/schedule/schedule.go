// Package schedule installs, inspects and removes scheduled etcd backups on the members (`hactl
// backup schedule`): on every etcd member a systemd timer fires on wall-clock slots and a oneshot
// service runs the uploaded hactl binary, `hactl backup now --only-if-leader --member <host>
// --slot-every <interval>`, so only the member that is leader at that moment takes the snapshot
// and two members that both believe they are leader write the same object key (the slot's). The
// runs read nothing but files on the member (a minimal spec copy, hactl's etcd client certificate,
// a root-only credentials file): they keep running when the Kubernetes API is down.
package schedule

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hactl/hactl/backup"
)

// Layout on every member.
const (
	// BinaryPath is where the hactl binary is uploaded.
	BinaryPath = "/usr/local/bin/hactl"
	// ConfigDir holds everything a run reads; root only (0700).
	ConfigDir = "/etc/hactl/backup"
	// SpecPath is the minimal spec copy a run loads (-f).
	SpecPath = ConfigDir + "/cluster.yaml"
	// CredentialsPath is the object store's access key, 0600 root; the spec copy's
	// credentials.file points at it.
	CredentialsPath = ConfigDir + "/credentials"
	// ObjectStoreCAPath is the object store's CA bundle (spec.backup.objectStore.tls.caFile).
	ObjectStoreCAPath = ConfigDir + "/objectstore-ca.crt"
	// ConfigPath is the schedule itself (Config as JSON): `--status` reads the interval back from it.
	ConfigPath = ConfigDir + "/schedule.json"
	// PKIDir is the spec copy's stateDir's pki/: the etcd CA and hactl's client certificate.
	PKIDir = ConfigDir + "/pki"
	// ServiceName and TimerName are the units; ServicePath and TimerPath their files.
	ServiceName = "hactl-backup.service"
	TimerName   = "hactl-backup.timer"
	ServicePath = "/etc/systemd/system/" + ServiceName
	TimerPath   = "/etc/systemd/system/" + TimerName
	// AgentServiceName is `hactl backup agent`'s unit (with --deltas), AgentServicePath its file.
	AgentServiceName = "hactl-backup-agent.service"
	AgentServicePath = "/etc/systemd/system/" + AgentServiceName
	// DefaultTextfileDir is node_exporter's conventional textfile collector directory.
	DefaultTextfileDir = "/var/lib/node_exporter/textfile_collector"
	// TextfileName is the metrics file a run writes in the textfile directory.
	TextfileName = "hactl_backup.prom"
)

// MinInterval is the shortest interval without the explicit override (AllowShort).
const MinInterval = time.Minute

// Config is what the schedule is, as installed on every member (ConfigPath).
type Config struct {
	// Cluster is metadata.name; Member the host it is installed on.
	Cluster string `json:"cluster"`
	Member  string `json:"member"`
	// Every is the interval (Go duration syntax); OnCalendar the timer's expression for it.
	Every      string `json:"every"`
	OnCalendar string `json:"onCalendar"`
	// Policy is the retention applied after each successful snapshot.
	Policy backup.Policy `json:"policy"`
	// Textfile is the Prometheus textfile each run writes.
	Textfile string `json:"textfile"`
	// Deltas: the member runs `hactl backup agent` (AgentServiceName); DeltaEvery is
	// spec.backup.deltaEvery as installed.
	Deltas     bool   `json:"deltas,omitempty"`
	DeltaEvery string `json:"deltaEvery,omitempty"`
}

// Interval parses c.Every.
func (c Config) Interval() (time.Duration, error) { return time.ParseDuration(c.Every) }

// Marshal renders c as indented JSON with a trailing newline.
func (c Config) Marshal() []byte {
	b, _ := json.MarshalIndent(c, "", "  ") // no field can fail to marshal
	return append(b, '\n')
}

// minuteDivisors and hourDivisors are the intervals that fall on the same wall-clock slots every
// hour (every day): a calendar expression "every 7 minutes" restarts at minute 0 each hour (…, 49,
// 56, 0), leaving a 4-minute gap, so only divisors of 60 (of 24 for hours) are accepted.
var (
	minuteDivisors = []int{1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30}
	hourDivisors   = []int{1, 2, 3, 4, 6, 8, 12}
)

// OnCalendar returns the systemd calendar expression (systemd.time(7)) firing every `every` on
// UTC wall-clock slots: whole seconds dividing a minute ("*-*-* *:*:00/10 UTC", only with
// allowShort), whole minutes dividing an hour ("*-*-* *:00/5:00 UTC"), whole hours dividing a day
// ("*-*-* 00/6:00:00 UTC") or one day ("*-*-* 00:00:00 UTC"). Slot (below) truncates a time to the
// same slots. UTC makes the slots the same on every member whatever its time zone (a local zone
// with a 30-minute offset would shift hourly slots). Errors say which values are accepted.
func OnCalendar(every time.Duration, allowShort bool) (string, error) {
	switch {
	case every <= 0:
		return "", fmt.Errorf("--every %s: must be a positive interval such as 5m", every)
	case every < MinInterval && !allowShort:
		return "", fmt.Errorf("--every %s: under %s; intervals this short load etcd and the object store for little gain and are meant for tests: pass --allow-short-interval to use it anyway", every, MinInterval)
	case every < time.Minute:
		s := every / time.Second
		if every%time.Second != 0 || 60%int(s) != 0 || s == 0 {
			return "", fmt.Errorf("--every %s: a sub-minute interval must be whole seconds dividing a minute evenly (1s 2s 3s 4s 5s 6s 10s 12s 15s 20s 30s): timers fire on wall-clock slots", every)
		}
		return fmt.Sprintf("*-*-* *:*:00/%d UTC", s), nil
	case every < time.Hour:
		m := int(every / time.Minute)
		if every%time.Minute != 0 || 60%m != 0 {
			return "", fmt.Errorf("--every %s: must divide an hour evenly (%s): timers fire on wall-clock slots, and every %s would restart at minute 0 each hour, leaving a shorter gap", every, units(minuteDivisors, "m"), every)
		}
		return fmt.Sprintf("*-*-* *:00/%d:00 UTC", m), nil
	case every < 24*time.Hour:
		h := int(every / time.Hour)
		if every%time.Hour != 0 || 24%h != 0 {
			return "", fmt.Errorf("--every %s: must be whole minutes dividing an hour or whole hours dividing a day evenly (%s): timers fire on wall-clock slots", every, units(hourDivisors, "h"))
		}
		return fmt.Sprintf("*-*-* 00/%d:00:00 UTC", h), nil
	case every == 24*time.Hour:
		return "*-*-* 00:00:00 UTC", nil
	}
	return "", fmt.Errorf("--every %s: at most 24h (a snapshot a day)", every)
}

func units(ns []int, unit string) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n) + unit
	}
	return strings.Join(s, " ")
}

// Slot returns the slot t falls in: t in UTC truncated to every (the slots OnCalendar fires on).
func Slot(t time.Time, every time.Duration) time.Time {
	return t.UTC().Truncate(every)
}

// SlotName is the slot of t as backup.Stem takes it (backup.TimeFormat, e.g. 20261201T030500Z).
func SlotName(t time.Time, every time.Duration) string {
	return Slot(t, every).Format(backup.TimeFormat)
}

// TriggerTime returns the time a run's slot is computed from: the timer's trigger time that
// systemd passes in $TRIGGER_TIMER_REALTIME_USEC (usec: microseconds since the epoch, as given;
// "" when unset), which is at or just after the slot however late the process starts; now when
// usec is empty, not a number, or not within the last interval (systemd documents the variable as
// best effort: coalesced triggers may report another one).
func TriggerTime(usec string, every time.Duration, now time.Time) time.Time {
	n, err := strconv.ParseInt(strings.TrimSpace(usec), 10, 64)
	if err != nil || n <= 0 {
		return now
	}
	t := time.UnixMicro(n)
	if t.After(now) || now.Sub(t) >= every {
		return now
	}
	return t
}
