package schedule

import (
	"cmp"
	"fmt"
	"io"
	"time"

	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/ui"
)

// StatusReport is `hactl backup schedule --status -o json` (Members.Status). JSON field names are
// part of the command's output.
type StatusReport struct {
	Cluster string `json:"cluster"`
	// Every is the interval read back from the members' schedule.json ("" when none has one).
	Every string       `json:"every,omitempty"`
	Hosts []HostStatus `json:"hosts"`
	// Newest is the newest complete snapshot (nil when there is none).
	Newest *NewestSnapshot `json:"newest,omitempty"`
	// NewestDelta is the newest delta snapshot continuing Newest (nil when there is none). Its age is
	// not judged: the agent stores a delta only when something changed.
	NewestDelta *NewestDelta `json:"newestDelta,omitempty"`
	// Problems make the verdict fail (exit 3).
	Problems []string `json:"problems,omitempty"`
	Healthy  bool     `json:"healthy"`

	// at is when the report was evaluated: Print shows times relative to it.
	at time.Time
}

// NewestSnapshot is the newest complete snapshot and its age.
type NewestSnapshot struct {
	Key         string    `json:"key"`
	Member      string    `json:"member"`
	Slot        string    `json:"slot,omitempty"`
	CompletedAt time.Time `json:"completedAt"`
	AgeSeconds  float64   `json:"ageSeconds"`
}

// NewestDelta is the newest delta snapshot of the chain continuing the newest full snapshot: the
// revision a restore from latest reaches, and when it was stored.
type NewestDelta struct {
	Key         string    `json:"key"`
	ToRevision  int64     `json:"toRevision"`
	CompletedAt time.Time `json:"completedAt"`
	AgeSeconds  float64   `json:"ageSeconds"`
}

// evaluate fills the interval, the newest snapshot and the problems at now: a member unreachable,
// without the schedule or whose timer is not active; no snapshot, or the newest older than twice
// the interval.
func (rep *StatusReport) evaluate(l *backup.Listing, deltas []backup.Delta, now time.Time) {
	rep.at = now
	var every time.Duration
	for _, h := range rep.Hosts {
		switch {
		case h.Error != "":
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: %s", h.Host, h.Error))
		case !h.Installed:
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: no schedule installed", h.Host))
		case h.TimerActive != "active":
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: %s is %s", h.Host, TimerName, dash(h.TimerActive)))
		case h.Config != nil && h.Config.Deltas && h.AgentState != "active":
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: %s is %s (journalctl -u %s)", h.Host, AgentServiceName, dash(h.AgentState), AgentServiceName))
		}
		if h.Config != nil && every == 0 {
			if d, err := h.Config.Interval(); err == nil {
				every, rep.Every = d, h.Config.Every
			}
		}
	}
	if sn := l.Latest(); sn != nil {
		done := sn.Metadata.CompletedAt
		if done.IsZero() {
			done = sn.Time
		}
		rep.Newest = &NewestSnapshot{Key: sn.Data.Key, Member: sn.Metadata.MemberName, Slot: sn.Slot, CompletedAt: done, AgeSeconds: now.Sub(done).Seconds()}
		if chain, err := backup.Chain(deltas, sn.Metadata.Revision); err == nil && len(chain) > 0 {
			d := chain[len(chain)-1]
			rep.NewestDelta = &NewestDelta{Key: d.Data.Key, ToRevision: d.Metadata.ToRevision, CompletedAt: d.Metadata.CompletedAt, AgeSeconds: now.Sub(d.Metadata.CompletedAt).Seconds()}
		} else if err != nil {
			rep.Problems = append(rep.Problems, fmt.Sprintf("the deltas continuing %s: %v (a restore from latest would be refused)", sn.Data.Key, err))
		}
	}
	switch {
	case every == 0:
		rep.Problems = append(rep.Problems, "no member has a backup schedule (install one with --every)")
	case rep.Newest == nil:
		rep.Problems = append(rep.Problems, fmt.Sprintf("no complete snapshot under %s", l.Prefix))
	case now.Sub(rep.Newest.CompletedAt) > 2*every:
		rep.Problems = append(rep.Problems, fmt.Sprintf("the newest snapshot %s is %s old, more than 2 × the interval %s", rep.Newest.Key, now.Sub(rep.Newest.CompletedAt).Round(time.Second), every))
	}
	rep.Healthy = len(rep.Problems) == 0
}

// Print writes the report: the interval, a row per member (timer active/enabled, next and last
// trigger, the last run and the last success, relative to when the report was evaluated), the
// newest snapshot and its age, and a line per problem.
func (rep *StatusReport) Print(w io.Writer) {
	now := rep.at
	when := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		d := t.Sub(now).Round(time.Second)
		if d >= 0 {
			return fmt.Sprintf("%s (in %s)", t.UTC().Format(time.TimeOnly), d)
		}
		return fmt.Sprintf("%s (%s ago)", t.UTC().Format(time.TimeOnly), -d)
	}
	var rows [][]string
	for _, h := range rep.Hosts {
		if h.Error != "" {
			rows = append(rows, []string{h.Host, "unreachable", "-", "-", "-", "-", "-"})
			continue
		}
		timer := dash(h.TimerActive) + "/" + dash(h.TimerEnabled)
		last, success := "-", "-"
		if m := h.LastRun; m != nil {
			last = fmt.Sprintf("%s %s", dash(m.Result), when(m.RunTime))
			if sc := m.LastSuccess; sc != nil {
				success = fmt.Sprintf("%s rev %d, %d bytes", when(sc.Time), sc.Revision, sc.SizeBytes)
			}
		}
		agent := "-"
		if h.Config != nil && h.Config.Deltas {
			agent = dash(h.AgentState) + " (every " + h.Config.DeltaEvery + ")"
		}
		rows = append(rows, []string{h.Host, timer, when(h.NextElapse), when(h.LastTrigger), last, success, agent})
	}
	fmt.Fprintf(w, "cluster %s, every %s\n", rep.Cluster, dash(rep.Every))
	ui.Table(w, []string{"HOST", "TIMER", "NEXT", "LAST TRIGGER", "LAST RUN", "LAST SUCCESS", "DELTA AGENT"}, rows)
	if n := rep.Newest; n != nil {
		fmt.Fprintf(w, "newest snapshot: %s (member %s, %s old)\n", n.Key, dash(n.Member), time.Duration(n.AgeSeconds*float64(time.Second)).Round(time.Second))
	}
	if d := rep.NewestDelta; d != nil {
		fmt.Fprintf(w, "newest delta: %s (to revision %d, %s old)\n", d.Key, d.ToRevision, time.Duration(d.AgeSeconds*float64(time.Second)).Round(time.Second))
	}
	for _, pr := range rep.Problems {
		fmt.Fprintf(w, "problem: %s\n", pr)
	}
}

// dash is s, or "-" for "".
func dash(s string) string { return cmp.Or(s, "-") }
