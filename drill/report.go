package drill

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/hactl/hactl/drill/workload"
	"github.com/hactl/hactl/ui"
)

// Report is what a drill prints and writes to --report (JSON). Durations are milliseconds (fields
// ending in Ms) unless named otherwise.
type Report struct {
	ID        string    `json:"id"`
	Cluster   string    `json:"cluster"`
	Drill     Kind      `json:"drill"`
	Method    Method    `json:"method,omitempty"`
	Component Component `json:"component,omitempty"`
	Zone      string    `json:"zone,omitempty"`
	Started   time.Time `json:"started"`
	// DurationMs is the whole drill, preflight to the last put-back.
	DurationMs float64  `json:"durationMs"`
	Settings   Settings `json:"settings"`
	// Plan is what the drill said it would do before it was confirmed.
	Plan       []string        `json:"plan"`
	DryRun     bool            `json:"dryRun,omitempty"`
	Prediction *ZonePrediction `json:"prediction,omitempty"`
	Iterations []Iteration     `json:"iterations"`
	// Summary is min/median/max over the iterations of each figure, by the figure's JSON name.
	Summary map[string]Distribution `json:"summary,omitempty"`
	// Verdict is "pass" (no failure, and within --max-rto when given), "fail", or "measured" (no
	// failure, no --max-rto: figures only). Failures say why a drill failed.
	Verdict  string   `json:"verdict"`
	Failures []string `json:"failures,omitempty"`
	// MaxRTOMs is --max-rto (0: not given); it applies to every iteration's RTO. MaxRPOMs is
	// --max-rpo (restore drill).
	MaxRTOMs float64 `json:"maxRTOMs,omitempty"`
	MaxRPOMs float64 `json:"maxRPOMs,omitempty"`
	// LostWrites is the number of acknowledged writes missing after all iterations (must be 0). A
	// restore drill loses the writes after its snapshot by design: they are counted in
	// iterations[].restore.lostWrites, not here.
	LostWrites int `json:"lostWrites"`
	// Error is why the drill did not complete (verdict "error"): a runtime failure, a put-back
	// that failed, an interruption.
	Error string `json:"error,omitempty"`
}

// setError marks the report as not completed because of err (a verdict failure stays "fail").
func (r *Report) setError(err error) {
	var ve *VerdictError
	if err == nil || errors.As(err, &ve) {
		return
	}
	r.Error = err.Error()
	r.Verdict = "error"
}

// Settings are the cluster's and the drill's timing settings the figures depend on.
type Settings struct {
	// HeartbeatIntervalMs and ElectionTimeoutMs are etcd's --heartbeat-interval and
	// --election-timeout (spec.etcd); a follower campaigns after a randomised timeout between 1x and
	// 2x the election timeout (etcd raft), the floor of a leader election.
	HeartbeatIntervalMs float64 `json:"heartbeatIntervalMs"`
	ElectionTimeoutMs   float64 `json:"electionTimeoutMs"`
	// AdvertIntervalMs is keepalived's advert_int; CheckIntervalMs/CheckFall/CheckRise HAProxy's
	// backend check; ScriptIntervalMs/ScriptFall Keepalived's check of HAProxy (with a load balancer).
	AdvertIntervalMs float64 `json:"advertIntervalMs,omitempty"`
	CheckIntervalMs  float64 `json:"checkIntervalMs,omitempty"`
	CheckFall        int     `json:"checkFall,omitempty"`
	CheckRise        int     `json:"checkRise,omitempty"`
	ScriptIntervalMs float64 `json:"scriptIntervalMs,omitempty"`
	ScriptFall       int     `json:"scriptFall,omitempty"`
	// Rate is the workload's puts per second, RequestTimeoutMs each request's deadline.
	Rate             int     `json:"rate,omitempty"`
	RequestTimeoutMs float64 `json:"requestTimeoutMs,omitempty"`
	HoldMs           float64 `json:"holdMs"`
	// PollIntervalMs is how often members (and readyz) are asked; ResolutionMs the coarser of that
	// and the workload's tick: the resolution of every figure.
	PollIntervalMs float64 `json:"pollIntervalMs"`
	ResolutionMs   float64 `json:"resolutionMs"`
	Count          int     `json:"count"`
}

// Iteration is one run of the drill. Times are offsets in ms from the fault (t0) unless named
// otherwise; a figure that was not observed is null.
type Iteration struct {
	N int `json:"n"`
	// Targets are the hosts taken down; Fault what was done to them.
	Targets []string `json:"targets"`
	Fault   string   `json:"fault"`
	// FaultAt is t0 (wall clock), from the host's own timestamps around the fault: the end of that
	// window for a kill or iptables (figures may understate by at most FaultUncertaintyMs, the
	// window's length), its start for lb-failover's stop; for --method host, when --down-command
	// returned.
	FaultAt            time.Time `json:"faultAt"`
	FaultUncertaintyMs float64   `json:"faultUncertaintyMs"`

	// etcd drills.
	LeaderBefore string   `json:"leaderBefore,omitempty"`
	LeaderAfter  string   `json:"leaderAfter,omitempty"`
	TermBefore   uint64   `json:"termBefore,omitempty"`
	TermAfter    uint64   `json:"termAfter,omitempty"`
	ElectionMs   *float64 `json:"electionMs,omitempty"`
	// StepDownMs (kill-leader --method network): when the partitioned leader, watched on its own
	// loopback through SSH, stopped reporting itself as leader (etcd's CheckQuorum: after an
	// election timeout without hearing from a quorum).
	StepDownMs *float64 `json:"stepDownMs,omitempty"`
	// RTOMs: etcd drills, until the first acknowledged write sent after t0 (or, when quorum was
	// lost, after the put-back: RecoveryFromPutBack); lb-failover, until readyz through the VIP
	// answers 200 again.
	RTOMs               *float64 `json:"rtoMs"`
	RecoveryFromPutBack bool     `json:"recoveryFromPutBack,omitempty"`
	LongestGapMs        *float64 `json:"longestGapMs,omitempty"`
	WriteP50Ms          *float64 `json:"writeP50Ms,omitempty"`
	WriteP99Ms          *float64 `json:"writeP99Ms,omitempty"`
	// Workload is the workload's own statistics (t0-relative), Verification the read-back.
	Workload     *workload.Stats        `json:"workload,omitempty"`
	Verification *workload.Verification `json:"verification,omitempty"`
	// WritesAckedDuringFault counts writes sent once every target was down (t0 for one target; the
	// last target's fault instant for a zone) and acknowledged before the put-back: none when
	// quorum was lost.
	WritesAckedDuringFault int `json:"writesAckedDuringFault"`
	// SentDuringHold and AckedDuringHold count the writes sent between t0 and the put-back and those
	// of them acknowledged: after the RTO, a partitioned member still takes its share of the
	// client's requests (round robin) until its connection is found dead, and those time out.
	SentDuringHold  int `json:"sentDuringHold"`
	AckedDuringHold int `json:"ackedDuringHold"`

	// Put-back: PutBackMs is when it was done (offset from t0), CatchUpMs how long after its start
	// (start-up included) the slowest returned member's applied index reached the commit index the
	// survivors reported when the put-back started.
	PutBackMs float64  `json:"putBackMs"`
	CatchUpMs *float64 `json:"catchUpMs,omitempty"`

	// Load balancer: VIP holder before and after, when the VIP was seen on another host, and how
	// long after the put-back it settled where the configuration puts it (SettledOn).
	VIPBefore  string   `json:"vipBefore,omitempty"`
	VIPAfter   string   `json:"vipAfter,omitempty"`
	VIPMovedMs *float64 `json:"vipMovedMs,omitempty"`
	// ReadyzFailures counts failed readyz requests (lb-failover: those sent from t0 that ended
	// before the put-back's start); FailbackOutageMs the unavailability caused by the VIP moving back
	// once the put-back started (preemption), if any; SettleMs is from the put-back's start until the
	// VIP was taken by SettledOn.
	ReadyzFailures   int      `json:"readyzFailures,omitempty"`
	FailbackOutageMs *float64 `json:"failbackOutageMs,omitempty"`
	SettledOn        string   `json:"settledOn,omitempty"`
	SettleMs         *float64 `json:"settleMs,omitempty"`

	// Restore is the restore drill's snapshot, RPO and read-back.
	Restore *RestoreFigures `json:"restore,omitempty"`

	// Observed is what happened, for a comparison with the prediction (az-outage).
	Observed *Observed `json:"observed,omitempty"`
	// Notes are what was seen and is worth knowing but fails nothing.
	Notes []string `json:"notes,omitempty"`
	// Failures make the drill fail (exit 3).
	Failures []string `json:"failures,omitempty"`
}

// Observed is what an az-outage iteration saw, in the prediction's terms.
type Observed struct {
	QuorumHeld    bool `json:"quorumHeld"`
	LeaderChanged bool `json:"leaderChanged"`
	VIPMoved      bool `json:"vipMoved"`
}

// Distribution is min/median/max of one figure over the iterations (ms); N counts the iterations
// that had it.
type Distribution struct {
	N      int     `json:"n"`
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
}

// distribution returns min/median/max of xs (the median of an even count is the mean of the middle
// two).
func distribution(xs []float64) Distribution {
	if len(xs) == 0 {
		return Distribution{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Distribution{N: len(s), Min: s[0], Median: med, Max: s[len(s)-1]}
}

// summarize fills r.Summary from the iterations.
func (r *Report) summarize() {
	figures := []struct {
		name string
		get  func(it Iteration) *float64
	}{
		{"rtoMs", func(it Iteration) *float64 { return it.RTOMs }},
		{"electionMs", func(it Iteration) *float64 { return it.ElectionMs }},
		{"stepDownMs", func(it Iteration) *float64 { return it.StepDownMs }},
		{"longestGapMs", func(it Iteration) *float64 { return it.LongestGapMs }},
		{"writeP50Ms", func(it Iteration) *float64 { return it.WriteP50Ms }},
		{"writeP99Ms", func(it Iteration) *float64 { return it.WriteP99Ms }},
		{"catchUpMs", func(it Iteration) *float64 { return it.CatchUpMs }},
		{"vipMovedMs", func(it Iteration) *float64 { return it.VIPMovedMs }},
		{"settleMs", func(it Iteration) *float64 { return it.SettleMs }},
		{"failbackOutageMs", func(it Iteration) *float64 { return it.FailbackOutageMs }},
	}
	r.Summary = map[string]Distribution{}
	for _, f := range figures {
		var xs []float64
		for _, it := range r.Iterations {
			if v := f.get(it); v != nil {
				xs = append(xs, *v)
			}
		}
		if len(xs) > 0 {
			r.Summary[f.name] = distribution(xs)
		}
	}
}

// decide sets the verdict from the iterations' failures and --max-rto.
func (r *Report) decide() {
	r.Failures = nil
	r.LostWrites = 0
	for _, it := range r.Iterations {
		for _, f := range it.Failures {
			r.Failures = append(r.Failures, fmt.Sprintf("iteration %d: %s", it.N, f))
		}
		if it.Verification != nil {
			r.LostWrites += it.Verification.Lost
		}
		if r.MaxRTOMs > 0 && it.RTOMs != nil && *it.RTOMs > r.MaxRTOMs {
			r.Failures = append(r.Failures, fmt.Sprintf("iteration %d: RTO %s over --max-rto %s", it.N, fmtMs(it.RTOMs), fmtMs(&r.MaxRTOMs)))
		}
		if x := it.Restore; x != nil && r.MaxRTOMs > 0 && x.ReadyzRTOMs != nil && *x.ReadyzRTOMs > r.MaxRTOMs {
			r.Failures = append(r.Failures, fmt.Sprintf("iteration %d: readyz through the VIP back after %s, over --max-rto %s", it.N, fmtMs(x.ReadyzRTOMs), fmtMs(&r.MaxRTOMs)))
		}
		if x := it.Restore; x != nil && r.MaxRPOMs > 0 && x.Verification != nil && x.RPOMs > r.MaxRPOMs {
			r.Failures = append(r.Failures, fmt.Sprintf("iteration %d: RPO %s over --max-rpo %s", it.N, fmtMs(&x.RPOMs), fmtMs(&r.MaxRPOMs)))
		}
		if r.MaxRTOMs > 0 && it.RTOMs == nil {
			r.Failures = append(r.Failures, fmt.Sprintf("iteration %d: no recovery observed, --max-rto %s not met", it.N, fmtMs(&r.MaxRTOMs)))
		}
	}
	switch {
	case len(r.Failures) > 0:
		r.Verdict = "fail"
	case r.MaxRTOMs > 0:
		r.Verdict = "pass"
	default:
		r.Verdict = "measured"
	}
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/float64(time.Microsecond)) / 1000 }

func msp(d time.Duration) *float64 { v := ms(d); return &v }

func fmtMs(v *float64) string {
	if v == nil {
		return "-"
	}
	if *v >= 10000 {
		return fmt.Sprintf("%.2fs", *v/1000)
	}
	return fmt.Sprintf("%.0fms", *v)
}

// Print writes the human report: settings, one row per iteration, min/median/max, the verdict.
func (r *Report) Print(w io.Writer) {
	s := r.Settings
	fmt.Fprintf(w, "\ndrill %s on cluster %s (%s)", r.Drill, r.Cluster, r.ID)
	if r.Method != "" {
		fmt.Fprintf(w, ", method %s", r.Method)
	}
	if r.Component != "" {
		fmt.Fprintf(w, ", component %s", r.Component)
	}
	if r.Zone != "" {
		fmt.Fprintf(w, ", zone %s", r.Zone)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "settings: etcd heartbeat %s, election timeout %s", fmtMs(&s.HeartbeatIntervalMs), fmtMs(&s.ElectionTimeoutMs))
	if s.AdvertIntervalMs > 0 {
		fmt.Fprintf(w, ", VRRP advert %s, keepalived check %s x%d, HAProxy check %s fall %d rise %d",
			fmtMs(&s.AdvertIntervalMs), fmtMs(&s.ScriptIntervalMs), s.ScriptFall, fmtMs(&s.CheckIntervalMs), s.CheckFall, s.CheckRise)
	}
	if s.HoldMs > 0 {
		fmt.Fprintf(w, "; hold %s", fmtMs(&s.HoldMs))
	}
	fmt.Fprintf(w, "; resolution %s\n", fmtMs(&s.ResolutionMs))
	if r.DryRun {
		fmt.Fprintln(w, "dry run: nothing was done")
		return
	}
	l := layoutOf(r)
	l.table(r, w)
	r.printSummary(w)
	fmt.Fprintln(w)
	l.conclusion(r, w)
	r.printVerdict(w)
}

// reportLayout is how the report of one kind of drill prints: its table (one row per iteration)
// and its conclusion in a sentence.
type reportLayout struct {
	table, conclusion func(r *Report, w io.Writer)
}

// layoutOf chooses the layout of r by its drill (and, for lb-failover, its component): the one
// place the report looks at the kind.
func layoutOf(r *Report) reportLayout {
	switch {
	case r.Drill == Restore:
		return reportLayout{table: restoreTable, conclusion: etcdConclusion}
	case r.Drill == LBFailover && r.Component == ComponentAPIServer:
		return reportLayout{table: backendTable, conclusion: backendConclusion}
	case r.Drill == LBFailover:
		return reportLayout{table: vipTable, conclusion: vipConclusion}
	}
	return reportLayout{table: etcdTable, conclusion: etcdConclusion}
}

// restoreTable is the restore drill's table and its budgets.
func restoreTable(r *Report, w io.Writer) {
	rows := [][]string{}
	for _, it := range r.Iterations {
		x := it.Restore
		if x == nil {
			rows = append(rows, []string{fmt.Sprint(it.N), "-", "-", "-", "-", fmtMs(it.RTOMs), "-", "-", "-", "-", verdictOf(it)})
			continue
		}
		kept, lost, window := "-", "-", "-"
		if v := x.Verification; v != nil {
			kept = fmt.Sprintf("%d/%d", v.HeldBefore, v.AckedBefore)
			lost = fmt.Sprint(v.LostBefore)
			if x.LostFromMs != nil {
				window = fmt.Sprintf("t0-%s..t0-%s", fmtMs(x.LostFromMs), fmtMs(x.LostToMs))
			}
		}
		snap := fmt.Sprintf("%s (rev %d)", x.Snapshot.Key, x.Snapshot.Revision)
		if x.Deltas > 0 {
			snap += fmt.Sprintf(" + %d deltas to rev %d", x.Deltas, x.Snapshot.DeltasTo)
		}
		rows = append(rows, []string{fmt.Sprint(it.N), snap, fmtMs(&x.SnapshotAgeMs),
			fmtMs(&x.FetchMs), fmtMs(&x.RestoreMs), fmtMs(it.RTOMs), fmtMs(x.ReadyzRTOMs), fmtMs(&x.RPOMs) + " (" + x.RPOFrom + ")", kept, lost + " " + window, verdictOf(it)})
	}
	ui.Table(w, []string{"#", "SNAPSHOT", "AGE AT t0", "FETCH", "RESTORE", "RTO (etcd)", "RTO (READYZ)", "RPO", "KEPT", "LOST (ACKED BEFORE t0)", "RESULT"}, rows)
	fmt.Fprintf(w, "budgets: RTO %s, RPO %s\n", fmtMs(&r.MaxRTOMs), fmtMs(&r.MaxRPOMs))
}

// backendTable is lb-failover's table through an external load balancer.
func backendTable(r *Report, w io.Writer) {
	rows := [][]string{}
	for _, it := range r.Iterations {
		rows = append(rows, []string{fmt.Sprint(it.N), strings.Join(it.Targets, ","), fmtMs(it.RTOMs), fmt.Sprint(it.ReadyzFailures), fmtMs(it.LongestGapMs), fmtMs(it.FailbackOutageMs), verdictOf(it)})
	}
	ui.Table(w, []string{"#", "BACKEND CUT OFF", "FAILING FOR (RTO)", "FAILED REQS", "LONGEST GAP", "FAILBACK OUTAGE", "RESULT"}, rows)
}

// vipTable is lb-failover's table with hactl's load balancer.
func vipTable(r *Report, w io.Writer) {
	rows := [][]string{}
	for _, it := range r.Iterations {
		rows = append(rows, []string{fmt.Sprint(it.N), it.VIPBefore, dash(it.VIPAfter), fmtMs(it.VIPMovedMs), fmtMs(it.RTOMs),
			fmt.Sprint(it.ReadyzFailures), dash(it.SettledOn), fmtMs(it.SettleMs), fmtMs(it.FailbackOutageMs), verdictOf(it)})
	}
	ui.Table(w, []string{"#", "VIP HOLDER", "MOVED TO", "VIP MOVED", "READYZ BACK (RTO)", "FAILED REQS", "SETTLED ON", "SETTLE", "FAILBACK OUTAGE", "RESULT"}, rows)
}

// etcdTable is kill-leader's and az-outage's table.
func etcdTable(r *Report, w io.Writer) {
	rows := [][]string{}
	for _, it := range r.Iterations {
		lost, acked := "-", "-"
		if it.Verification != nil {
			lost = fmt.Sprint(it.Verification.Lost)
			acked = fmt.Sprint(it.Verification.Acked)
		}
		rows = append(rows, []string{fmt.Sprint(it.N), strings.Join(it.Targets, ","), dash(it.LeaderBefore), dash(it.LeaderAfter),
			fmtMs(it.ElectionMs), fmtMs(it.RTOMs), fmtMs(it.LongestGapMs), fmtMs(it.WriteP50Ms) + "/" + fmtMs(it.WriteP99Ms),
			fmtMs(it.CatchUpMs), acked, lost, verdictOf(it)})
	}
	ui.Table(w, []string{"#", "DOWN", "LEADER", "NEW LEADER", "ELECTION", "RTO", "LONGEST GAP", "WRITE P50/P99", "CATCH-UP", "ACKED", "LOST", "RESULT"}, rows)
}

// printSummary writes min/median/max over several iterations, the notes and the prediction.
func (r *Report) printSummary(w io.Writer) {
	if len(r.Iterations) > 1 {
		fmt.Fprintln(w)
		var rows [][]string
		for _, k := range []string{"electionMs", "stepDownMs", "rtoMs", "longestGapMs", "vipMovedMs", "catchUpMs", "settleMs", "failbackOutageMs"} {
			if d, ok := r.Summary[k]; ok {
				rows = append(rows, []string{k, fmtMs(&d.Min), fmtMs(&d.Median), fmtMs(&d.Max), fmt.Sprint(d.N)})
			}
		}
		ui.Table(w, []string{"FIGURE", "MIN", "MEDIAN", "MAX", "N"}, rows)
	}
	for _, it := range r.Iterations {
		for _, n := range it.Notes {
			fmt.Fprintf(w, "note (#%d): %s\n", it.N, n)
		}
	}
	if r.Prediction != nil {
		fmt.Fprintln(w, "\nprediction vs observation:")
		for _, sn := range r.Prediction.Sentences() {
			fmt.Fprintf(w, "  predicted: %s\n", sn)
		}
		for _, it := range r.Iterations {
			if o := it.Observed; o != nil {
				fmt.Fprintf(w, "  observed (#%d): quorum held %s, leader changed %s, VIP moved %s\n", it.N, yesNo(o.QuorumHeld), yesNo(o.LeaderChanged), yesNo(o.VIPMoved))
			}
		}
	}
}

// backendConclusion says how long requests through the user's load balancer failed.
func backendConclusion(r *Report, w io.Writer) {
	if d, ok := r.Summary["rtoMs"]; ok {
		fmt.Fprintf(w, "Requests through your load balancer failed for %s (median of %d) after a backend's kube-apiserver was cut off: until its health check took the backend out (the others answered meanwhile).\n", fmtMs(&d.Median), d.N)
	}
}

// vipConclusion says how long the API through the VIP was unavailable.
func vipConclusion(r *Report, w io.Writer) {
	if d, ok := r.Summary["rtoMs"]; ok {
		fmt.Fprintf(w, "The API through the VIP was unavailable for %s (median of %d) after %s stopped on the VIP holder.\n", fmtMs(&d.Median), d.N, r.Component)
	}
}

// etcdConclusion says how the writes fared during the hold, how long etcd was unavailable for
// writes and whether an acknowledged write was lost.
func etcdConclusion(r *Report, w io.Writer) {
	var sent, ackedHold int
	for _, it := range r.Iterations {
		sent += it.SentDuringHold
		ackedHold += it.AckedDuringHold
	}
	if sent > 0 && ackedHold < sent {
		fmt.Fprintf(w, "While the fault was held, %d of %d writes (%.0f%%) were acknowledged; the others timed out (during the election, or sent to the unreachable member until the client gave up on it).\n",
			ackedHold, sent, 100*float64(ackedHold)/float64(sent))
	}
	var acked int
	for _, it := range r.Iterations {
		if it.Verification != nil {
			acked += it.Verification.Acked
		}
	}
	if d, ok := r.Summary["rtoMs"]; ok {
		res := r.Settings.ResolutionMs
		if d.N == 1 {
			fmt.Fprintf(w, "etcd was unavailable for writes for %s (±%s); ", fmtMs(&d.Median), fmtMs(&res))
		} else {
			fmt.Fprintf(w, "etcd was unavailable for writes for %s (median of %d iterations, max %s, ±%s); ", fmtMs(&d.Median), d.N, fmtMs(&d.Max), fmtMs(&res))
		}
	}
	if r.LostWrites == 0 && r.Verdict != "error" {
		fmt.Fprintf(w, "all %d acknowledged writes were read back: nothing was lost (RPO 0).\n", acked)
	} else if r.LostWrites == 0 {
		fmt.Fprintf(w, "%d acknowledged writes were read back, none lost.\n", acked)
	} else {
		fmt.Fprintf(w, "%d OF %d ACKNOWLEDGED WRITES WERE LOST.\n", r.LostWrites, acked)
	}
}

// printVerdict writes the verdict and the failures.
func (r *Report) printVerdict(w io.Writer) {
	switch r.Verdict {
	case "error":
		fmt.Fprintf(w, "verdict: ERROR — the drill did not complete: %s\n", r.Error)
		for _, f := range r.Failures {
			fmt.Fprintf(w, "  - %s\n", f)
		}
	case "pass":
		fmt.Fprintf(w, "verdict: PASS (every RTO within --max-rto %s, no failure)\n", fmtMs(&r.MaxRTOMs))
	case "fail":
		fmt.Fprintln(w, "verdict: FAIL")
		for _, f := range r.Failures {
			fmt.Fprintf(w, "  - %s\n", f)
		}
	default:
		fmt.Fprintln(w, "verdict: no failure (give --max-rto for a pass/fail verdict on the RTO)")
	}
}

func verdictOf(it Iteration) string {
	if len(it.Failures) > 0 {
		return "FAIL"
	}
	return "ok"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
