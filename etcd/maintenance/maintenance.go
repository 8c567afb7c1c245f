// Package maintenance is etcd's routine upkeep as etcd's maintenance guide
// (etcd.io/docs/v3.6/op-guide/maintenance) orders it: history compaction, defragmentation one member
// at a time with the leader last (a member blocks reads and writes while it defragments), and the
// NOSPACE alarm's recovery (compact, defragment every member, then disarm). `hactl etcd compact`,
// `defrag` and `alarm` are the CLI on top.
package maintenance

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/etcd/membership"
	"github.com/hactl/hactl/ui"
)

// DefragTimeout bounds one member's defragmentation (it rewrites the whole database file: about
// a second per few hundred MiB on an SSD).
const DefragTimeout = 10 * time.Minute

// ErrNotConfirmed is returned when the plan was declined.
var ErrNotConfirmed = errors.New("not confirmed: nothing was changed")

// InputError is a flag value refused before anything is contacted (exit 2).
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// ExitCode is 2.
func (e *InputError) ExitCode() int { return 2 }

// DefragOptions are one `hactl etcd defrag`.
type DefragOptions struct {
	Cluster membership.Cluster
	// MinFragmentation skips members whose database is less fragmented than this, in percent
	// (0-100; 0 defragments every member).
	MinFragmentation float64
	DryRun           bool
	// Confirm is asked with the plan; nil: no question.
	Confirm func(plan string) (bool, error)
	Printer *ui.Printer
}

// MemberDefrag is one member's line of a defragmentation.
type MemberDefrag struct {
	Name     string `json:"name"`
	ID       string `json:"id"`
	Endpoint string `json:"endpoint"`
	Leader   bool   `json:"leader"`
	// Before and After are the database file's size and the part in use, in bytes.
	BeforeBytes          int64   `json:"beforeBytes"`
	InUseBytes           int64   `json:"inUseBytes"`
	FragmentationPercent float64 `json:"fragmentationPercent"`
	AfterBytes           int64   `json:"afterBytes,omitempty"`
	// Skipped says why it was not defragmented (under --min-fragmentation, a dry run).
	Skipped    string  `json:"skipped,omitempty"`
	DurationMs float64 `json:"durationMs,omitempty"`
}

// DefragResult is the whole run, in the order the members were (or would be) defragmented.
type DefragResult struct {
	Members []MemberDefrag `json:"members"`
}

// ValidateMinFragmentation refuses a --min-fragmentation outside 0-100.
func ValidateMinFragmentation(p float64) error {
	if p < 0 || p > 100 {
		return &InputError{fmt.Errorf("--min-fragmentation %g: a percentage of the database file not in use, 0-100 (0: every member)", p)}
	}
	return nil
}

// planDefrag orders the members: followers by name, the leader last. A learner is skipped (etcd
// refuses a learner's Defragment and linearizable reads); an endpoint of the spec that is no
// member is left out. A voting member that is unreachable or unhealthy stops the plan:
// defragmenting the rest would leave the cluster with one member fewer while each is busy.
func planDefrag(st *etcd.ClusterStatus, minFrag float64) ([]MemberDefrag, error) {
	learner := map[string]bool{}
	member := map[string]bool{}
	for _, m := range st.Members {
		member[m.ID] = true
		learner[m.ID] = m.IsLearner
		for _, u := range m.ClientURLs {
			member[u] = true
		}
	}
	var out []MemberDefrag
	var bad []string
	for _, ep := range st.Endpoints {
		switch {
		case !ep.Reachable && member[ep.Endpoint]:
			bad = append(bad, memberAt(st, ep.Endpoint)+" (unreachable)")
			continue
		case !ep.Reachable || !member[ep.MemberID]:
			continue // a spec host that is no member (removed, never joined)
		}
		m := MemberDefrag{Name: ep.MemberName, ID: ep.MemberID, Endpoint: ep.Endpoint, Leader: ep.IsLeader,
			BeforeBytes: ep.DBSizeBytes, InUseBytes: ep.DBSizeInUseBytes, FragmentationPercent: ep.FragmentationPercent}
		switch {
		case learner[ep.MemberID]:
			m.Skipped = "a learner (etcd defragments voting members only); defragment it once promoted"
		case !ep.Healthy:
			bad = append(bad, memberAt(st, ep.Endpoint)+" (unhealthy)")
			continue
		case m.FragmentationPercent < minFrag:
			m.Skipped = fmt.Sprintf("%.1f%% free, under --min-fragmentation %g%%", m.FragmentationPercent, minFrag)
		}
		out = append(out, m)
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("etcd/defrag: %s: a member defragmenting cannot serve, so every other voting member must be healthy first", strings.Join(bad, ", "))
	}
	slices.SortStableFunc(out, func(a, b MemberDefrag) int {
		if a.Leader != b.Leader {
			if a.Leader {
				return 1
			}
			return -1
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return out, nil
}

// memberAt names the member serving endpoint ep ("name (ep)"), or ep alone.
func memberAt(st *etcd.ClusterStatus, ep string) string {
	for _, m := range st.Members {
		if slices.Contains(m.ClientURLs, ep) && m.Name != "" {
			return m.Name + " (" + ep + ")"
		}
	}
	return ep
}

// Defrag defragments the members one at a time, followers first and the leader last, skipping
// those under o.MinFragmentation, and checks after each that the member is healthy again before the
// next. Errors: *InputError; the status read; a member unhealthy before the run; a member's
// Defragment or its health afterwards (the run stops there: the members after it are untouched).
// The result is returned also on failure.
func Defrag(ctx context.Context, o DefragOptions) (*DefragResult, error) {
	if err := ValidateMinFragmentation(o.MinFragmentation); err != nil {
		return nil, err
	}
	c := o.Cluster
	st, err := etcd.Status(ctx, c.Endpoints, c.TLS, c.Options...)
	if err != nil {
		return nil, fmt.Errorf("etcd status: %w", err)
	}
	plan, err := planDefrag(st, o.MinFragmentation)
	res := &DefragResult{Members: plan}
	if err != nil {
		return res, err
	}
	if o.DryRun {
		for i := range res.Members {
			if res.Members[i].Skipped == "" {
				res.Members[i].Skipped = "dry run"
			}
		}
		return res, nil
	}
	if o.Confirm != nil {
		ok, err := o.Confirm(defragPlan(plan))
		if err != nil {
			return res, err
		}
		if !ok {
			return res, ErrNotConfirmed
		}
	}
	for i := range res.Members {
		m := &res.Members[i]
		if m.Skipped != "" {
			o.Printer.Hostf(m.Name, "defrag skipped: %s", m.Skipped)
			continue
		}
		if err := defragOne(ctx, c, m); err != nil {
			return res, err
		}
		o.Printer.Hostf(m.Name, "defragmented in %.0f ms: %s → %s", m.DurationMs, mib(m.BeforeBytes), mib(m.AfterBytes))
	}
	return res, nil
}

func defragOne(ctx context.Context, c membership.Cluster, m *MemberDefrag) error {
	cli, err := etcd.NewClient(ctx, []string{m.Endpoint}, c.TLS, etcd.DefaultDialTimeout, c.Options...)
	if err != nil {
		return fmt.Errorf("etcd/defrag %s: %w", m.Name, err)
	}
	defer cli.Close()
	dctx, cancel := context.WithTimeout(ctx, DefragTimeout)
	defer cancel()
	start := time.Now()
	if _, err := cli.Defragment(dctx, m.Endpoint); err != nil {
		return fmt.Errorf("etcd/defrag %s (%s): %w", m.Name, m.Endpoint, err)
	}
	m.DurationMs = float64(time.Since(start)) / float64(time.Millisecond)
	sctx, cancel2 := context.WithTimeout(ctx, etcd.DefaultRequestTimeout)
	defer cancel2()
	resp, err := cli.Status(sctx, m.Endpoint)
	if err != nil {
		return fmt.Errorf("etcd/defrag %s: status after: %w", m.Name, err)
	}
	m.AfterBytes = resp.DbSize
	// A linearizable read through this member (not a write: under NOSPACE writes are refused until
	// the alarm is disarmed).
	if _, err := cli.Get(sctx, "health"); err != nil {
		return fmt.Errorf("etcd/defrag %s: not serving linearizable reads after: %w", m.Name, err)
	}
	return nil
}

func defragPlan(ms []MemberDefrag) string {
	s := "defragment one member at a time (each blocks its reads and writes while it runs), the leader last:"
	for i, m := range ms {
		what := fmt.Sprintf("%s, %.1f%% free", mib(m.BeforeBytes), m.FragmentationPercent)
		if m.Skipped != "" {
			what = "skip: " + m.Skipped
		}
		role := ""
		if m.Leader {
			role = " (leader)"
		}
		s += fmt.Sprintf("\n  %d. %s%s: %s", i+1, m.Name, role, what)
	}
	return s
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// CompactResult is one compaction.
type CompactResult struct {
	// Revision is the store's revision when compacting, CompactedTo the revision compacted to
	// (every older revision is gone), Retained the revisions kept.
	Revision    int64 `json:"revision"`
	CompactedTo int64 `json:"compactedTo"`
	Retained    int64 `json:"retained"`
	// Skipped says why nothing was compacted.
	Skipped string `json:"skipped,omitempty"`
}

// ValidateRetain refuses a negative --retain.
func ValidateRetain(n int64) error {
	if n < 0 {
		return &InputError{fmt.Errorf("--retain %d: the number of most recent revisions to keep, 0 or more", n)}
	}
	return nil
}

// Compact compacts the keyspace's history to the current revision minus retain, physically
// (etcd's WithCompactPhysical: it returns once the backend dropped the old revisions). A compaction
// to a revision already compacted is no error: the result says so. Errors: *InputError, the
// revision read, the compaction.
func Compact(ctx context.Context, c membership.Cluster, retain int64) (*CompactResult, error) {
	if err := ValidateRetain(retain); err != nil {
		return nil, err
	}
	cli, err := etcd.NewClient(ctx, c.Endpoints, c.TLS, etcd.DefaultDialTimeout, c.Options...)
	if err != nil {
		return nil, fmt.Errorf("etcd/compact: %w", err)
	}
	defer cli.Close()
	rctx, cancel := context.WithTimeout(ctx, etcd.DefaultRequestTimeout)
	defer cancel()
	resp, err := cli.Get(rctx, "hactl/compact-revision", clientv3.WithCountOnly())
	if err != nil {
		return nil, fmt.Errorf("etcd/compact: reading the revision: %w", err)
	}
	res := &CompactResult{Revision: resp.Header.Revision, Retained: retain}
	res.CompactedTo = res.Revision - retain
	if res.CompactedTo < 1 {
		res.CompactedTo, res.Skipped = 0, fmt.Sprintf("revision %d holds no more than the %d revisions to retain", res.Revision, retain)
		return res, nil
	}
	cctx, cancel2 := context.WithTimeout(ctx, DefragTimeout)
	defer cancel2()
	if _, err := cli.Compact(cctx, res.CompactedTo, clientv3.WithCompactPhysical()); err != nil {
		if errors.Is(err, rpctypes.ErrCompacted) {
			res.Skipped = fmt.Sprintf("revision %d is already compacted", res.CompactedTo)
			return res, nil
		}
		return res, fmt.Errorf("etcd/compact to revision %d: %w", res.CompactedTo, err)
	}
	return res, nil
}

// Alarm is one active alarm, with its member's name.
type Alarm struct {
	MemberID string `json:"memberID"`
	Member   string `json:"member,omitempty"`
	Alarm    string `json:"alarm"`
	id       uint64
	typ      etcdserverpb.AlarmType
}

// Alarms lists the active alarms (etcdctl alarm list), each with its member's name.
func Alarms(ctx context.Context, c membership.Cluster) ([]Alarm, error) {
	cli, err := etcd.NewClient(ctx, c.Endpoints, c.TLS, etcd.DefaultDialTimeout, c.Options...)
	if err != nil {
		return nil, fmt.Errorf("etcd/alarm: %w", err)
	}
	defer cli.Close()
	return alarms(ctx, cli)
}

func alarms(ctx context.Context, cli *clientv3.Client) ([]Alarm, error) {
	rctx, cancel := context.WithTimeout(ctx, etcd.DefaultRequestTimeout)
	defer cancel()
	resp, err := cli.AlarmList(rctx)
	if err != nil {
		return nil, fmt.Errorf("etcd/alarm list: %w", err)
	}
	ml, err := cli.MemberList(rctx)
	if err != nil {
		return nil, fmt.Errorf("etcd/alarm: member list: %w", err)
	}
	names := map[uint64]string{}
	for _, m := range ml.Members {
		names[m.ID] = m.Name
	}
	out := []Alarm{}
	for _, a := range resp.Alarms {
		out = append(out, Alarm{MemberID: strconv.FormatUint(a.MemberID, 16), Member: names[a.MemberID], Alarm: a.Alarm.String(), id: a.MemberID, typ: a.Alarm})
	}
	return out, nil
}

// DisarmOptions are one `hactl etcd alarm disarm`.
type DisarmOptions struct {
	Cluster membership.Cluster
	// Retain is the compaction's --retain (NOSPACE recovery).
	Retain  int64
	DryRun  bool
	Confirm func(plan string) (bool, error)
	Printer *ui.Printer
}

// DisarmResult is what a disarm did.
type DisarmResult struct {
	Alarms  []Alarm        `json:"alarms"`
	Plan    string         `json:"plan"`
	Compact *CompactResult `json:"compact,omitempty"`
	Defrag  *DefragResult  `json:"defrag,omitempty"`
	// Disarmed are the alarms cleared; Remaining those still active after (the space is still short:
	// etcd raises NOSPACE again).
	Disarmed  []Alarm `json:"disarmed,omitempty"`
	Remaining []Alarm `json:"remaining,omitempty"`
}

// QuotaError: after compaction and defragmentation the data itself still fills the quota, so a
// disarm would be followed by the next write's NOSPACE; nothing was disarmed (exit 3).
type QuotaError struct {
	Member       string
	InUse, Quota int64
}

func (e *QuotaError) Error() string {
	return fmt.Sprintf("%s still uses %s of its %s quota after compaction and defragmentation: the data itself is too big; raise spec.etcd's quota (a rolling restart) or delete data, then disarm", e.Member, mib(e.InUse), mib(e.Quota))
}

// ExitCode is 3.
func (e *QuotaError) ExitCode() int { return 3 }

// CorruptError refuses to disarm a CORRUPT alarm: a member's data differs from the others', and
// clearing the alarm would serve it again (exit 3, the check's verdict).
type CorruptError struct{ Alarms []Alarm }

func (e *CorruptError) Error() string {
	return fmt.Sprintf("CORRUPT alarm on %v: a member's data differs from the others'; hactl does not disarm it: replace that member (its data dir moved aside) or restore from a snapshot, then disarm", e.Alarms)
}

// ExitCode is 3.
func (e *CorruptError) ExitCode() int { return 3 }

// Disarm clears the active alarms. For NOSPACE it runs etcd's recovery in order, after the plan is
// confirmed: compact (retaining o.Retain revisions), defragment every member (followers first, the
// leader last), then disarm; an alarm still active afterwards is reported in the result. A CORRUPT
// alarm is refused (*CorruptError) and nothing is done. No alarm: nothing to do, no error.
func Disarm(ctx context.Context, o DisarmOptions) (*DisarmResult, error) {
	if err := ValidateRetain(o.Retain); err != nil {
		return nil, err
	}
	c := o.Cluster
	cli, err := etcd.NewClient(ctx, c.Endpoints, c.TLS, etcd.DefaultDialTimeout, c.Options...)
	if err != nil {
		return nil, fmt.Errorf("etcd/alarm: %w", err)
	}
	defer cli.Close()
	as, err := alarms(ctx, cli)
	if err != nil {
		return nil, err
	}
	res := &DisarmResult{Alarms: as}
	if len(as) == 0 {
		res.Plan = "no active alarm: nothing to do\n"
		return res, nil
	}
	var corrupt []Alarm
	nospace := false
	for _, a := range as {
		switch a.typ {
		case etcdserverpb.AlarmType_CORRUPT:
			corrupt = append(corrupt, a)
		case etcdserverpb.AlarmType_NOSPACE:
			nospace = true
		}
	}
	if len(corrupt) > 0 {
		return res, &CorruptError{Alarms: corrupt}
	}
	steps := []string{}
	if nospace {
		steps = append(steps,
			fmt.Sprintf("compact the history to the current revision minus %d (physically)", o.Retain),
			"defragment every member, one at a time, the leader last (each blocks while it runs)")
	}
	steps = append(steps, fmt.Sprintf("disarm %d alarm(s)", len(as)))
	for i := range steps {
		res.Plan += fmt.Sprintf("  %d. %s\n", i+1, steps[i])
	}
	if o.DryRun {
		return res, nil
	}
	if o.Confirm != nil {
		ok, err := o.Confirm(res.Plan)
		if err != nil {
			return res, err
		}
		if !ok {
			return res, ErrNotConfirmed
		}
	}
	if nospace {
		if res.Compact, err = Compact(ctx, c, o.Retain); err != nil {
			return res, err
		}
		if res.Compact.Skipped != "" {
			o.Printer.Infof("nothing compacted: %s", res.Compact.Skipped)
		} else {
			o.Printer.Infof("compacted to revision %d", res.Compact.CompactedTo)
		}
		if res.Defrag, err = Defrag(ctx, DefragOptions{Cluster: c, Printer: o.Printer}); err != nil {
			return res, err
		}
		// etcd raises NOSPACE again only at the next write over the quota, so check the data now.
		for _, m := range res.Defrag.Members {
			sctx, cancel := context.WithTimeout(ctx, etcd.DefaultRequestTimeout)
			sr, err := cli.Status(sctx, m.Endpoint)
			cancel()
			if err != nil {
				return res, fmt.Errorf("etcd/alarm: status of %s: %w", m.Name, err)
			}
			if sr.DbSizeQuota > 0 && sr.DbSizeInUse >= sr.DbSizeQuota*95/100 {
				return res, &QuotaError{Member: m.Name, InUse: sr.DbSizeInUse, Quota: sr.DbSizeQuota}
			}
		}
	}
	for _, a := range as {
		rctx, cancel := context.WithTimeout(ctx, etcd.DefaultRequestTimeout)
		_, err := cli.AlarmDisarm(rctx, &clientv3.AlarmMember{MemberID: a.id, Alarm: a.typ})
		cancel()
		if err != nil {
			return res, fmt.Errorf("etcd/alarm disarm %s on %s: %w", a.Alarm, a.Member, err)
		}
		res.Disarmed = append(res.Disarmed, a)
	}
	if res.Remaining, err = alarms(ctx, cli); err != nil {
		return res, err
	}
	return res, nil
}
