package etcdphases

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/go-multierror"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/etcd/membership"
	"github.com/hactl/hactl/internal/shell"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/report"
)

const unitName = "etcd.service"

// Install uploads every changed file, atomically, to every member that needs it (in parallel).
type Install struct{ g *Group }

// Title is PhaseInstall.
func (*Install) Title() string { return PhaseInstall }

// Mutates: the phase changes hosts.
func (*Install) Mutates() bool { return true }

// ShouldRun: some member has files to upload, a release to download or stale temp files.
func (ph *Install) ShouldRun() bool {
	g := ph.g
	for name, p := range g.ledger.plans {
		if ((len(p.Upload) > 0 || p.Download) && !g.rolls(name)) || (g.ledger.facts[name] != nil && len(g.ledger.facts[name].Stale) > 0) {
			return true
		}
	}
	return false
}

// Run does the phase's work.
func (ph *Install) Run(ctx context.Context) error {
	g := ph.g
	// Decisions (token, initial-cluster per member) are recorded before anything is installed, so an
	// interrupted run resumes with the same ones.
	if err := g.SaveState(); err != nil {
		return err
	}
	// Hosts that need the release tarball first, each with one command that also installs its other
	// files once the tarball's sha256 is verified: a refused tarball (wrong sha256, wrong version
	// or architecture) changes nothing on that host and stops the run before any other host gets
	// any file.
	if g.files.downloadInstall() {
		err := g.ForEach(ctx, func(ctx context.Context, m Member) error {
			if !g.ledger.plans[m.Name].Download || g.rolls(m.Name) {
				return nil
			}
			return ph.download(ctx, m)
		})
		if err != nil {
			return err
		}
	}
	return g.ForEach(ctx, func(ctx context.Context, m Member) error {
		p := g.ledger.plans[m.Name]
		if p.Download {
			return nil // installed above, or by the roll
		}
		if stale := g.ledger.facts[m.Name].Stale; len(stale) > 0 {
			sctx, cancel := g.run.StepCtx(ctx)
			_, err := g.run.Exec(sctx, m.Name, PhaseInstall, "rm -f -- "+shell.Join(stale...))
			cancel()
			if err != nil {
				return err
			}
			g.run.Printer.Hostf(m.Name, "removed %d temp file(s) left by an interrupted upload", len(stale))
		}
		if len(p.Upload) == 0 || g.rolls(m.Name) {
			return nil
		}
		return ph.upload(ctx, m, p.Upload)
	})
}

// member installs m's files alone (the release tarball or the uploads): the rolling restart's
// install step, right before m restarts (Group.rolls).
func (ph *Install) member(ctx context.Context, m Member) error {
	p := ph.g.ledger.plans[m.Name]
	switch {
	case p.Download:
		return ph.download(ctx, m)
	case len(p.Upload) > 0:
		return ph.upload(ctx, m, p.Upload)
	}
	return nil
}

// upload streams m's files (binaries from their local paths) in one SFTP session.
func (ph *Install) upload(ctx context.Context, m Member, upload []DesiredFile) error {
	g := ph.g
	var files []provision.File
	var total int64
	var closers []*os.File
	defer func() {
		for _, c := range closers {
			c.Close()
		}
	}()
	for _, df := range upload {
		f := provision.File{Path: df.Path, Mode: df.Mode, SHA256: df.Sum, Content: df.Data}
		if df.Local != "" {
			fh, err := os.Open(df.Local)
			if err != nil {
				return fmt.Errorf("%s: %w", PhaseInstall, err)
			}
			closers = append(closers, fh)
			st, err := fh.Stat()
			if err != nil {
				return fmt.Errorf("%s: %w", PhaseInstall, err)
			}
			f.Reader, f.Size = fh, st.Size()
		} else {
			f.Size = int64(len(df.Data))
		}
		total += f.Size
		files = append(files, f)
	}
	sctx, cancel := g.run.StepCtx(ctx)
	defer cancel()
	start := time.Now()
	if err := g.run.Upload(sctx, m.Name, PhaseInstall, files); err != nil {
		return err
	}
	g.run.Printer.Debugf("%s: [%s] uploaded %d file(s) in %s", m.Name, PhaseInstall, len(files), time.Since(start).Round(time.Millisecond))
	g.run.Printer.Hostf(m.Name, "installed %d file(s), %.1f MiB", len(files), float64(total)/(1<<20))
	return nil
}

// Start starts new members together (etcd needs a quorum of the initial cluster to form), restarts
// changed members of a running cluster one at a time (leader last, waiting for each to be
// healthy), and joins new members one at a time as learners, promoting each once it caught up.
// Name is its title (PhaseStart; a restore starts its members as "restore/start").
type Start struct {
	G    *Group
	Name string
}

// Title is s.Name.
func (s *Start) Title() string { return s.Name }

// Mutates: the phase changes hosts.
func (*Start) Mutates() bool { return true }

// ShouldRun: some member is to be (re)started, created, resumed or joined.
func (s *Start) ShouldRun() bool {
	for _, p := range s.G.ledger.plans {
		switch p.Action {
		case report.ActionJoin, report.ActionReplace, report.ActionCreate, report.ActionResume, report.ActionStart:
			return true
		}
		if p.Restart {
			return true
		}
	}
	return false
}

// Run does the phase's work. A member of a rolling restart or join that fails is a
// *provision.HostError.
func (s *Start) Run(ctx context.Context) error {
	g := s.G
	var founding, rolling, joining []Member
	for _, m := range g.members {
		p := g.ledger.plans[m.Name]
		switch {
		case p.Action == report.ActionJoin, p.Action == report.ActionReplace:
			joining = append(joining, m)
		case !p.Restart:
		case g.live == nil:
			founding = append(founding, m)
		default:
			rolling = append(rolling, m)
		}
	}
	if len(founding) > 0 {
		err := provision.ForEach(ctx, founding, g.run.Spec.Spec.SSH.MaxParallel, func(m Member) string { return m.Name },
			func(ctx context.Context, m Member) error {
				verb := "start"
				if g.ledger.facts[m.Name].EtcdActive == "active" {
					verb = "restart"
				}
				return s.systemctl(ctx, m, verb, false)
			})
		if err != nil {
			return err
		}
	}
	if len(rolling) > 0 {
		if err := s.roll(ctx, rolling); err != nil {
			return err
		}
	}
	// Members already added (learners waiting to start) go first: etcd allows one learner at a time
	// by default (--max-learners=1).
	sort.SliceStable(joining, func(i, j int) bool {
		return g.ledger.plans[joining[i].Name].ID != 0 && g.ledger.plans[joining[j].Name].ID == 0
	})
	for _, m := range joining {
		if err := s.join(ctx, m); err != nil {
			return &provision.HostError{Host: m.Name, Err: err}
		}
	}
	return nil
}

// roll is the rolling restart (and upgrade) of the running cluster's changed members: one member
// at a time, the leader last (one election instead of two); each gets its files installed, is
// restarted, and must be healthy and caught up (WaitMember, waitCaughtUp) before the next is touched.
// The first failure stops the roll (*provision.HostError naming the member): the members after it
// keep their old files, binary and process. When the roll upgraded etcd, the cluster version is
// checked after (waitClusterVersion).
func (s *Start) roll(ctx context.Context, rolling []Member) error {
	g := s.G
	s.leaderLast(ctx, rolling)
	// Members that are down are started first: each one back adds a vote before a running one goes.
	sort.SliceStable(rolling, func(i, j int) bool {
		return g.ledger.plans[rolling[i].Name].Action == report.ActionStart && g.ledger.plans[rolling[j].Name].Action != report.ActionStart
	})
	upgraded := false
	for i, m := range rolling {
		p := g.ledger.plans[m.Name]
		g.run.Printer.Hostf(m.Name, "rolling restart %d/%d", i+1, len(rolling))
		if p.Action != report.ActionStart {
			if err := s.checkRestartQuorum(ctx, m); err != nil {
				return &provision.HostError{Host: m.Name, Err: err}
			}
		}
		if err := (&Install{g}).member(ctx, m); err != nil {
			return &provision.HostError{Host: m.Name, Err: err}
		}
		verb := "restart"
		if p.Action == report.ActionStart {
			verb = "start"
		}
		if err := s.systemctl(ctx, m, verb, true); err != nil {
			return &provision.HostError{Host: m.Name, Err: err}
		}
		if err := g.WaitMember(ctx, m, false); err != nil {
			return &provision.HostError{Host: m.Name, Err: err}
		}
		if err := s.waitCaughtUp(ctx, m); err != nil {
			return &provision.HostError{Host: m.Name, Err: err}
		}
		if p.From != "" {
			upgraded = true
			g.run.Printer.Hostf(m.Name, "upgraded: etcd v%s → %s", p.From, g.run.Spec.Spec.Etcd.Version)
		}
	}
	if !upgraded {
		return nil
	}
	return s.waitClusterVersion(ctx)
}

// RestartQuorumError refuses to restart a running member in a roll while the other voting members
// could not commit without it: fewer of them healthy than a quorum of all voters (raft's
// ⌊n/2⌋+1, membership.Quorum). Nothing was changed on Member.
type RestartQuorumError struct {
	Member         string
	Voters         int
	HealthyOthers  []string
	UnhealthyOther []string
	Quorum         int
}

func (e *RestartQuorumError) Error() string {
	return fmt.Sprintf("%s: restarting %s would leave %d of the %d voting members serving (%s) while it restarts; a quorum of %d voters is %d, "+
		"so the cluster could not commit: bring %s back first (hactl status), then re-run; %s and the members after it were left untouched",
		PhaseStart, e.Member, len(e.HealthyOthers), e.Voters, orDash(strings.Join(e.HealthyOthers, ", ")), e.Voters, e.Quorum,
		strings.Join(e.UnhealthyOther, ", "), e.Member)
}

// checkRestartQuorum returns a *RestartQuorumError when the voting members other than m, asked
// one by one (status with a leader, 2 s each), are fewer healthy than a quorum of all voters.
func (s *Start) checkRestartQuorum(ctx context.Context, m Member) error {
	cli, err := s.G.Client(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	ml, err := cli.MemberList(lctx)
	cancel()
	if err != nil {
		return fmt.Errorf("%s: member list before restarting %s: %w", PhaseStart, m.Name, err)
	}
	e := &RestartQuorumError{Member: m.Name}
	for _, lm := range ml.Members {
		if lm.IsLearner {
			continue
		}
		e.Voters++
		if slices.Contains(lm.PeerURLs, m.PeerURL) {
			continue
		}
		name := lm.Name
		if name == "" {
			name = fmt.Sprintf("%x", lm.ID)
		}
		healthy := false
		for _, u := range lm.ClientURLs {
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			st, err := cli.Status(sctx, u)
			cancel()
			if err == nil && st.Leader != 0 {
				healthy = true
				break
			}
		}
		if healthy {
			e.HealthyOthers = append(e.HealthyOthers, name)
		} else {
			e.UnhealthyOther = append(e.UnhealthyOther, name)
		}
	}
	e.Quorum = membership.Quorum(e.Voters)
	if len(e.HealthyOthers) < e.Quorum {
		return e
	}
	return nil
}

// systemctl (re)starts etcd on m. Founding members and learners are started without waiting
// (--no-block: a founding member is only ready once a quorum of its peers is up; readiness is checked
// through the client afterwards). A member of a running cluster is restarted with waiting
// (Type=notify: systemctl returns once etcd has rejoined), so a rolling restart never checks the
// health of the old process and never has two members down at once (etcd.StartCommand).
func (s *Start) systemctl(ctx context.Context, m Member, verb string, wait bool) error {
	g := s.G
	sctx, cancel := g.run.StepCtx(ctx)
	defer cancel()
	if _, err := g.run.Exec(sctx, m.Name, PhaseStart, etcd.StartCommand(g.run.Spec.Spec.Etcd.DataDir, verb, wait)); err != nil {
		return g.run.ExplainUnit(ctx, m.Name, PhaseStart, err, etcd.UnitName)
	}
	g.run.Printer.Hostf(m.Name, "etcd %sed", verb)
	return nil
}

// leaderLast orders ms so that the current leader, if among them, restarts last (one election
// instead of two).
func (s *Start) leaderLast(ctx context.Context, ms []Member) {
	g := s.G
	cli, err := g.Client(ctx)
	if err != nil {
		return
	}
	defer cli.Close()
	var leader uint64
	for _, u := range g.KnownClientURLs() {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := cli.Status(sctx, u)
		cancel()
		if err == nil {
			leader = st.Leader
			break
		}
	}
	sort.SliceStable(ms, func(i, j int) bool {
		return g.ledger.plans[ms[j].Name].ID == leader && g.ledger.plans[ms[i].Name].ID != leader
	})
}

// backoff is how the waits of this group poll: from 200 ms, ×1.5 per attempt with 10% jitter, then
// every 2 s (the cap) until their own deadline (apimachinery's wait.Backoff).
func backoff() wait.Backoff {
	return wait.Backoff{Duration: 200 * time.Millisecond, Factor: 1.5, Jitter: 0.1, Cap: 2 * time.Second, Steps: math.MaxInt32}
}

// retry calls try at once and then with backoff until it returns done or a non-nil error, ctx
// ends, or timeout passes. It returns try's error, ctx's error when ctx ended, or errTimeout when
// the timeout passed.
func retry(ctx context.Context, timeout time.Duration, try func(ctx context.Context) (done bool, err error)) error {
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := backoff().DelayFunc().Until(tctx, true, true, try)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case tctx.Err() != nil:
		return errTimeout
	}
	return err
}

// errTimeout is retry's error when its timeout passed; callers say what did not happen.
var errTimeout = errors.New("timed out")

// join adds m to the running cluster with etcd/membership's learner join: added as a learner
// (unless that already happened; etcd's post-join refusal waited out for up to WaitTimeout), its
// unit's --initial-cluster set from the member list etcd returned, started, caught up
// (membership.WaitCaughtUp) and promoted within one WaitTimeout together, then checked healthy (etcd
// docs: "runtime reconfiguration", learner).
func (s *Start) join(ctx context.Context, m Member) error {
	g := s.G
	cli, err := g.Client(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	p := g.ledger.plans[m.Name]
	if p.ReplaceID != 0 {
		if err := s.removeLost(ctx, m, p); err != nil {
			return err
		}
	}
	if p.ID == 0 {
		id, members, err := membership.AddLearner(ctx, cli, m.PeerURL, g.opt.WaitTimeout, func(err error) {
			g.run.Printer.Debugf("%s: member add refused for now (%v); retrying", m.Name, err)
		})
		if err != nil {
			return fmt.Errorf("%s: adding %s as a learner: %w", PhaseStart, m.PeerURL, err)
		}
		p.ID = id
		rec := g.st.Members[m.Name]
		rec.ID = fmt.Sprintf("%x", p.ID)
		// The learner starts with the member list etcd returned (etcd checks it against the
		// membership): it differs from the plan's when the membership changed since.
		ic, err := membership.JoinInitialCluster(members, p.ID, m.Name, peerNames(g.members))
		if err != nil {
			return fmt.Errorf("%s: %w", PhaseStart, err)
		}
		changed := !sameMembers(ic, rec.InitialCluster)
		if changed {
			rec.InitialCluster = ic
		}
		if err := g.SaveState(); err != nil {
			return err
		}
		g.run.Printer.Hostf(m.Name, "added as learner %x", p.ID)
		if changed {
			files, err := g.UnitFiles(m)
			if err != nil {
				return err
			}
			sctx, cancel := g.run.StepCtx(ctx)
			err = g.run.Upload(sctx, m.Name, PhaseStart, files)
			cancel()
			if err != nil {
				return err
			}
			g.run.Printer.Hostf(m.Name, "unit's --initial-cluster set from the member list etcd returned")
		}
	}
	if p.Restart || g.ledger.facts[m.Name].EtcdActive != "active" {
		if err := s.systemctl(ctx, m, "start", false); err != nil {
			return err
		}
	}
	// A learner is promoted once its raft applied index reached the leader's committed index; one
	// that is not a learner any more was promoted by an earlier, interrupted run. The catch-up and
	// the promotion share one deadline: --wait bounds both together, not each.
	deadline := time.Now().Add(g.opt.WaitTimeout)
	cu, err := membership.WaitCaughtUp(ctx, cli, m.ClientURL, g.opt.WaitTimeout)
	var ce *membership.CatchUpError
	switch {
	case errors.As(err, &ce):
		return fmt.Errorf("%s: learner %x did not catch up within %s: %w", PhaseStart, p.ID, g.opt.WaitTimeout, ce.Cause())
	case err != nil:
		return err
	}
	g.run.Printer.Debugf("%s: caught up with the leader (raft applied index %d ≥ %d)", m.Name, cu.Applied, cu.Committed)
	// Promote retries etcd's refusals for the time left (at least one attempt); only a learner that
	// is gone fails it before then.
	promoted, err := membership.Promote(ctx, cli, p.ID, time.Until(deadline))
	var gone *membership.NoSuchMemberError
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.As(err, &gone):
		return fmt.Errorf("%s: promoting learner %x: %w", PhaseStart, p.ID, err)
	default:
		return fmt.Errorf("%s: learner %x did not catch up within %s: %w", PhaseStart, p.ID, g.opt.WaitTimeout, err)
	}
	if promoted {
		g.run.Printer.Hostf(m.Name, "promoted to voting member")
	}
	return g.WaitMember(ctx, m, false)
}

// removeLost removes the member whose data dir was lost (p.ReplaceID, `--replace-lost`) before its
// host joins again under the same peer URL: etcd stopped on the host and whatever is left of the
// data dir moved aside (membership.RetireScript; never deleted), then the member removed through
// the others with etcd/membership's quorum guard.
func (s *Start) removeLost(ctx context.Context, m Member, p *HostPlan) error {
	g := s.G
	stamp := time.Now().UTC().Format("20060102T150405Z")
	sctx, cancel := g.run.StepCtx(ctx)
	res, err := g.run.Exec(sctx, m.Name, PhaseStart, membership.RetireScript(g.run.Spec.Spec.Etcd.DataDir, stamp))
	cancel()
	if err != nil {
		return err
	}
	if aside := strings.TrimSpace(string(res.Stdout)); aside != "" {
		g.run.Printer.Hostf(m.Name, "etcd stopped; what was left of the data dir kept as %s", aside)
	} else {
		g.run.Printer.Hostf(m.Name, "etcd stopped")
	}
	cl := membership.Cluster{Endpoints: g.KnownClientURLs(), TLS: g.creds.TLS, Options: []etcd.Option{g.run.EtcdDial()}}
	if _, err := membership.Remove(ctx, membership.RemoveOptions{Cluster: cl, Name: m.Name, ID: p.ReplaceID, Printer: g.run.Printer}); err != nil {
		return fmt.Errorf("%s: removing lost member %x: %w", PhaseStart, p.ReplaceID, err)
	}
	g.run.Printer.Hostf(m.Name, "lost member %x removed from the cluster", p.ReplaceID)
	p.ReplaceID, p.ID = 0, 0
	g.st.Members[m.Name].ID = ""
	return g.SaveState()
}

// peerNames are the names of ms (the spec's members) by peer URL (a joiner's --initial-cluster
// names the spec's members as the spec does: membership.JoinInitialCluster).
func peerNames(ms []Member) map[string]string {
	out := make(map[string]string, len(ms))
	for _, m := range ms {
		out[m.PeerURL] = m.Name
	}
	return out
}

// sameMembers: the two --initial-cluster values list the same name=peerURL pairs (order aside).
func sameMembers(a, b string) bool {
	as, bs := strings.Split(a, ","), strings.Split(b, ",")
	slices.Sort(as)
	slices.Sort(bs)
	return slices.Equal(as, bs)
}

// Client connects to every known client URL (the spec's and, during a client port change, the
// recorded ones) with hactl's client certificate. The caller closes it.
func (g *Group) Client(ctx context.Context) (*clientv3.Client, error) {
	return etcd.NewClient(ctx, g.KnownClientURLs(), g.creds.TLS, 5*time.Second, g.run.EtcdDial())
}

// WaitMember polls m's client URL, with backoff, until it reports a leader and a linearizable read
// succeeds, for at most Options.WaitTimeout. quiet leaves out the "healthy" line. Errors: ctx's,
// or one naming the member with the last health error, after a timeout with etcd.service's last
// journal lines on the member (a *provision.UnitFailedError) when they can be read.
func (g *Group) WaitMember(ctx context.Context, m Member, quiet bool) error {
	var last error
	err := retry(ctx, g.opt.WaitTimeout, func(ctx context.Context) (bool, error) {
		last = g.MemberHealthy(ctx, m)
		return last == nil, nil
	})
	switch {
	case errors.Is(err, errTimeout):
		// Why, in etcd's own words: a member started without waiting (founding members, learners)
		// that never became healthy has said so in its journal.
		return g.run.ExplainUnit(ctx, m.Name, PhaseWait, fmt.Errorf("%s: member %s not healthy after %s: %w", PhaseWait, m.Name, g.opt.WaitTimeout, last), etcd.UnitName)
	case err != nil:
		return err
	}
	if !quiet {
		g.run.Printer.Hostf(m.Name, "healthy")
	}
	return nil
}

// waitCaughtUp waits, for at most Options.WaitTimeout, until m has applied every entry the leader
// had committed once m was healthy again (membership.WaitCaughtUp: m's raft applied index ≥ the
// leader's committed index then): a member restarted in a roll is caught up before the next one
// goes down. Nil at once when m is the leader. Errors: ctx's, the member or leader not answering
// within the wait, or the wait timing out (naming both indexes).
func (s *Start) waitCaughtUp(ctx context.Context, m Member) error {
	g := s.G
	cli, err := g.Client(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	cu, err := membership.WaitCaughtUp(ctx, cli, m.ClientURL, g.opt.WaitTimeout)
	var ce *membership.CatchUpError
	switch {
	case errors.As(err, &ce) && ce.Err == nil:
		return fmt.Errorf("%s: %s has applied raft index %d, the leader had committed %d: not caught up within %s", PhaseStart, m.Name, ce.Applied, ce.Committed, g.opt.WaitTimeout)
	case errors.As(err, &ce) && ce.FromMember:
		return fmt.Errorf("%s: status of %s: %w", PhaseStart, m.Name, ce.Err)
	case errors.As(err, &ce):
		return fmt.Errorf("%s: %w", PhaseStart, ce.Err)
	case err != nil:
		return err
	case cu.Leader:
		return nil
	}
	g.run.Printer.Hostf(m.Name, "caught up with the leader (raft applied index %d ≥ %d)", cu.Applied, cu.Committed)
	return nil
}

// waitClusterVersion waits, for at most Options.WaitTimeout, until every member's /version answers
// spec.etcd.version as its server version and that version's minor as the cluster version
// (etcd.MemberVersions; the leader raises the cluster version a few seconds after the last member
// of the old minor went), the check etcd's upgrade guide ends an upgrade with. The cluster version
// is kept for the report (ClusterVersion). Errors: ctx's, or the timeout with what each member
// last answered.
func (s *Start) waitClusterVersion(ctx context.Context) error {
	g := s.G
	want := strings.TrimPrefix(g.run.Spec.Spec.Etcd.Version, "v")
	wantCluster := etcd.MinorOf(want)
	var last []string
	err := retry(ctx, g.opt.WaitTimeout, func(ctx context.Context) (bool, error) {
		last = last[:0]
		ok := true
		for _, m := range g.members {
			v, err := etcd.MemberVersions(ctx, m.ClientURL, g.creds.TLS, 3*time.Second, g.run.EtcdDial())
			switch {
			case err != nil:
				ok = false
				last = append(last, fmt.Sprintf("%s: %v", m.Name, err))
			case v.Server != want || v.Cluster != wantCluster:
				ok = false
				last = append(last, fmt.Sprintf("%s: server %s, cluster %s", m.Name, v.Server, v.Cluster))
			}
		}
		return ok, nil
	})
	switch {
	case errors.Is(err, errTimeout):
		return fmt.Errorf("%s: the cluster version is not %s after %s (%s)", PhaseStart, wantCluster, g.opt.WaitTimeout, strings.Join(last, "; "))
	case err != nil:
		return err
	}
	g.clusterVersion = wantCluster
	g.run.Printer.Infof("  cluster version %s: every member runs etcd %s", wantCluster, want)
	return nil
}

// ClusterVersion is the cluster version etcd/start saw after an upgrade ("" when the run
// upgraded nothing).
func (g *Group) ClusterVersion() string { return g.clusterVersion }

// MemberHealthy asks m alone (its client URL) for its status and a linearizable read: nil when it
// has a leader, is a voting member and serves the read within 3 s.
func (g *Group) MemberHealthy(ctx context.Context, m Member) error {
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	cli, err := etcd.NewClient(cctx, []string{m.ClientURL}, g.creds.TLS, 2*time.Second, g.run.EtcdDial())
	if err != nil {
		return err
	}
	defer cli.Close()
	st, err := cli.Status(cctx, m.ClientURL)
	if err != nil {
		return err
	}
	if st.Leader == 0 {
		return errors.New("no leader")
	}
	if st.IsLearner {
		return errors.New("still a learner")
	}
	if _, err := cli.Get(cctx, "hactl/health"); err != nil {
		return err
	}
	return nil
}

// Wait waits for every member to be healthy, proves quorum with a write and a linearizable read
// (only when something changed: a no-op re-run writes nothing), and records the cluster ID and
// member IDs in the state dir.
type Wait struct{ g *Group }

// Title is PhaseWait.
func (*Wait) Title() string { return PhaseWait }

// Mutates: the phase writes the check key and the state dir.
func (*Wait) Mutates() bool { return true }

// Run does the phase's work.
func (ph *Wait) Run(ctx context.Context) error {
	g := ph.g
	err := g.ForEach(ctx, func(ctx context.Context, m Member) error {
		return g.WaitMember(ctx, m, g.ledger.plans[m.Name].Action == report.ActionUnchanged)
	})
	if err != nil {
		return err
	}
	cli, err := g.Client(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	changed := g.ledger.anyChanges()
	if changed {
		if err := etcd.CheckQuorum(qctx, cli, "hactl/bootstrap-check"); err != nil {
			return fmt.Errorf("%s: quorum check: %w", PhaseWait, err)
		}
	}
	resp, err := cli.MemberList(qctx)
	if err != nil {
		return fmt.Errorf("%s: member list: %w", PhaseWait, err)
	}
	g.st.ClusterID = fmt.Sprintf("%x", resp.Header.ClusterId)
	var errs *multierror.Error
	for _, m := range g.members {
		found := false
		for _, lm := range resp.Members {
			for _, u := range lm.PeerURLs {
				if u == m.PeerURL {
					found = true
					rec := g.memberRecord(m)
					rec.ID = fmt.Sprintf("%x", lm.ID)
					rec.PeerURL, rec.ClientURL = m.PeerURL, m.ClientURL
				}
			}
		}
		if !found {
			errs = multierror.Append(errs, fmt.Errorf("%s: not in the member list after bootstrap", m.Name))
		}
	}
	if err := g.SaveState(); err != nil {
		return err
	}
	if err := errs.ErrorOrNil(); err != nil {
		return err
	}
	check := "linearizable member list OK"
	if changed {
		check = "write + linearizable read OK"
	}
	g.run.Printer.Infof("  quorum: %d/%d members healthy, %s, cluster ID %s", len(g.members), len(resp.Members), check, g.st.ClusterID)
	return nil
}
