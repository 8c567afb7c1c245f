package etcdphases

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"time"

	"github.com/hashicorp/go-multierror"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/hactl/hactl/etcd"
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
	for name, p := range g.plans {
		if len(p.Upload) > 0 || p.Download || (g.facts[name] != nil && len(g.facts[name].Stale) > 0) {
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
			if !g.plans[m.Name].Download {
				return nil
			}
			return ph.download(ctx, m)
		})
		if err != nil {
			return err
		}
	}
	return g.ForEach(ctx, func(ctx context.Context, m Member) error {
		p := g.plans[m.Name]
		if p.Download {
			return nil // installed above
		}
		if stale := g.facts[m.Name].Stale; len(stale) > 0 {
			sctx, cancel := g.run.StepCtx(ctx)
			_, err := g.run.Exec(sctx, m.Name, PhaseInstall, "rm -f -- "+shell.Join(stale...))
			cancel()
			if err != nil {
				return err
			}
			g.run.Printer.Hostf(m.Name, "removed %d temp file(s) left by an interrupted upload", len(stale))
		}
		if len(p.Upload) == 0 {
			return nil
		}
		return ph.upload(ctx, m, p.Upload)
	})
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
	for _, p := range s.G.plans {
		switch p.Action {
		case report.ActionJoin, report.ActionCreate, report.ActionResume, report.ActionStart:
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
		p := g.plans[m.Name]
		switch {
		case p.Action == report.ActionJoin:
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
				if g.facts[m.Name].EtcdActive == "active" {
					verb = "restart"
				}
				return s.systemctl(ctx, m, verb, false)
			})
		if err != nil {
			return err
		}
	}
	if len(rolling) > 0 {
		s.leaderLast(ctx, rolling)
		for _, m := range rolling {
			verb := "restart"
			if g.plans[m.Name].Action == report.ActionStart {
				verb = "start"
			}
			if err := s.systemctl(ctx, m, verb, true); err != nil {
				return &provision.HostError{Host: m.Name, Err: err}
			}
			if err := g.WaitMember(ctx, m, false); err != nil {
				return &provision.HostError{Host: m.Name, Err: err}
			}
		}
	}
	// Members already added (learners waiting to start) go first: etcd allows one learner at a time
	// by default (--max-learners=1).
	sort.SliceStable(joining, func(i, j int) bool {
		return g.plans[joining[i].Name].ID != 0 && g.plans[joining[j].Name].ID == 0
	})
	for _, m := range joining {
		if err := s.join(ctx, m); err != nil {
			return &provision.HostError{Host: m.Name, Err: err}
		}
	}
	return nil
}

// systemctl (re)starts etcd on m. Founding members and learners are started without waiting
// (--no-block: a founding member is only ready once a quorum of its peers is up; readiness is checked
// through the client afterwards). A member of a running cluster is restarted with waiting
// (Type=notify: systemctl returns once etcd has rejoined), so a rolling restart never checks the
// health of the old process and never has two members down at once.
func (s *Start) systemctl(ctx context.Context, m Member, verb string, wait bool) error {
	g := s.G
	sctx, cancel := g.run.StepCtx(ctx)
	defer cancel()
	dir := shell.Quote(g.run.Spec.Spec.Etcd.DataDir)
	noBlock := " --no-block"
	if wait {
		noBlock = ""
	}
	// A new data dir is created 0700 (etcd's recommendation); an existing one is left as it is.
	cmd := fmt.Sprintf("{ [ -d %s ] || mkdir -p -m 0700 %s; } && systemctl daemon-reload && systemctl enable --quiet %s && systemctl %s%s %s",
		dir, dir, unitName, verb, noBlock, unitName)
	if _, err := g.run.Exec(sctx, m.Name, PhaseStart, cmd); err != nil {
		return err
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
		return g.plans[ms[j].Name].ID == leader && g.plans[ms[i].Name].ID != leader
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

// join adds m to the running cluster as a learner (unless that already happened), starts it, waits
// for it to catch up and promotes it to a voting member (etcd docs: "runtime reconfiguration",
// learner).
func (s *Start) join(ctx context.Context, m Member) error {
	g := s.G
	cli, err := g.Client(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	p := g.plans[m.Name]
	if p.ID == 0 {
		// etcd's strict reconfiguration check refuses a member add (rpctypes.ErrUnhealthy) until the
		// leader has been connected to every voting member for 5 s (etcdserver HealthInterval), e.g.
		// right after the previous joiner was promoted: retry until WaitTimeout.
		var resp *clientv3.MemberAddResponse
		var last error
		err := retry(ctx, g.opt.WaitTimeout, func(ctx context.Context) (bool, error) {
			actx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			resp, last = cli.MemberAddAsLearner(actx, []string{m.PeerURL})
			switch {
			case last == nil:
				return true, nil
			case errors.Is(last, rpctypes.ErrUnhealthy):
				g.run.Printer.Debugf("%s: member add refused for now (%v); retrying", m.Name, last)
				return false, nil
			}
			return false, last
		})
		if err != nil {
			if errors.Is(err, errTimeout) {
				err = last
			}
			return fmt.Errorf("%s: adding %s as a learner: %w", PhaseStart, m.PeerURL, err)
		}
		p.ID = resp.Member.ID
		g.st.Members[m.Name].ID = fmt.Sprintf("%x", p.ID)
		if err := g.SaveState(); err != nil {
			return err
		}
		g.run.Printer.Hostf(m.Name, "added as learner %x", p.ID)
	}
	if p.Restart || g.facts[m.Name].EtcdActive != "active" {
		if err := s.systemctl(ctx, m, "start", false); err != nil {
			return err
		}
	}
	// A learner is promoted once it caught up with the leader (rpctypes.ErrLearnerNotReady until
	// then); one that is not a learner any more was promoted by an earlier, interrupted run.
	var last error
	promoted := true
	err = retry(ctx, g.opt.WaitTimeout, func(ctx context.Context) (bool, error) {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, last = cli.MemberPromote(pctx, p.ID)
		if errors.Is(last, rpctypes.ErrMemberNotLearner) {
			promoted, last = false, nil
		}
		return last == nil, nil
	})
	switch {
	case errors.Is(err, errTimeout):
		return fmt.Errorf("%s: learner %x did not catch up within %s: %w", PhaseStart, p.ID, g.opt.WaitTimeout, last)
	case err != nil:
		return err
	}
	if promoted {
		g.run.Printer.Hostf(m.Name, "promoted to voting member")
	}
	return g.WaitMember(ctx, m, false)
}

// Client connects to every known client URL (the spec's and, during a client port change, the
// recorded ones) with hactl's client certificate. The caller closes it.
func (g *Group) Client(ctx context.Context) (*clientv3.Client, error) {
	return etcd.NewClient(ctx, g.KnownClientURLs(), g.creds.TLS, 5*time.Second, g.run.EtcdDial())
}

// WaitMember polls m's client URL, with backoff, until it reports a leader and a linearizable read
// succeeds, for at most Options.WaitTimeout. quiet leaves out the "healthy" line. Errors: ctx's,
// or one naming the member with the last health error.
func (g *Group) WaitMember(ctx context.Context, m Member, quiet bool) error {
	var last error
	err := retry(ctx, g.opt.WaitTimeout, func(ctx context.Context) (bool, error) {
		last = g.MemberHealthy(ctx, m)
		return last == nil, nil
	})
	switch {
	case errors.Is(err, errTimeout):
		return fmt.Errorf("%s: member %s not healthy after %s: %w", PhaseWait, m.Name, g.opt.WaitTimeout, last)
	case err != nil:
		return err
	}
	if !quiet {
		g.run.Printer.Hostf(m.Name, "healthy")
	}
	return nil
}

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
		return g.WaitMember(ctx, m, g.plans[m.Name].Action == report.ActionUnchanged)
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
	changed := g.anyChanges()
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
