package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/go-multierror"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/internal/shell"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/report"
	"github.com/hactl/hactl/state"
)

const unitName = "etcd.service"

// install uploads every changed file, atomically, to every member that needs it (in parallel).
func (b *Bootstrapper) install(ctx context.Context) error {
	// Decisions (token, initial-cluster per member) are recorded before anything is installed, so an
	// interrupted run resumes with the same ones.
	if err := state.Save(b.spec.Spec.StateDir, b.st); err != nil {
		return err
	}
	// Hosts that need the release tarball first, each with one command that also installs its other
	// files once the tarball's sha256 is verified: a refused tarball (wrong sha256, wrong version
	// or architecture) changes nothing on that host and stops the run before any other host gets
	// any file.
	if b.downloadInstall() {
		err := b.forEach(ctx, func(ctx context.Context, m member) error {
			if !b.plans[m.Name].download {
				return nil
			}
			return b.download(ctx, m)
		})
		if err != nil {
			return err
		}
	}
	return b.forEach(ctx, func(ctx context.Context, m member) error {
		p := b.plans[m.Name]
		if p.download {
			return nil // installed above
		}
		if stale := b.facts[m.Name].Stale; len(stale) > 0 {
			quoted := make([]string, len(stale))
			for i, s := range stale {
				quoted[i] = shell.Quote(s)
			}
			sctx, cancel := b.stepCtx(ctx)
			_, err := b.run(sctx, m.Name, "etcd/install", "rm -f -- "+strings.Join(quoted, " "))
			cancel()
			if err != nil {
				return err
			}
			b.p.Hostf(m.Name, "removed %d temp file(s) left by an interrupted upload", len(stale))
		}
		if len(p.upload) == 0 {
			return nil
		}
		var files []provision.File
		var total int64
		var closers []*os.File
		defer func() {
			for _, c := range closers {
				c.Close()
			}
		}()
		for _, df := range p.upload {
			f := provision.File{Path: df.Path, Mode: df.Mode, SHA256: df.Sum, Content: df.Data}
			if df.Local != "" {
				fh, err := os.Open(df.Local)
				if err != nil {
					return fmt.Errorf("etcd/install: %w", err)
				}
				closers = append(closers, fh)
				st, err := fh.Stat()
				if err != nil {
					return fmt.Errorf("etcd/install: %w", err)
				}
				f.Reader, f.Size = fh, st.Size()
			} else {
				f.Size = int64(len(df.Data))
			}
			total += f.Size
			files = append(files, f)
		}
		sctx, cancel := b.stepCtx(ctx)
		defer cancel()
		start := time.Now()
		if err := b.client(m.Name).Upload(sctx, "etcd/install", files); err != nil {
			return err
		}
		b.p.Debugf("%s: [etcd/install] uploaded %d file(s) in %s", m.Name, len(files), time.Since(start).Round(time.Millisecond))
		b.p.Hostf(m.Name, "installed %d file(s), %.1f MiB", len(files), float64(total)/(1<<20))
		return nil
	})
}

// start starts new members together (etcd needs a quorum of the initial cluster to form), restarts
// changed members of a running cluster one at a time (leader last, waiting for each to be healthy), and
// joins new members one at a time as learners, promoting each once it caught up.
func (b *Bootstrapper) start(ctx context.Context) error {
	var founding, rolling, joining []member
	for _, m := range b.members {
		p := b.plans[m.Name]
		switch {
		case p.action == report.ActionJoin:
			joining = append(joining, m)
		case !p.restart:
		case b.live == nil:
			founding = append(founding, m)
		default:
			rolling = append(rolling, m)
		}
	}
	if len(founding) > 0 {
		err := provision.ForEach(ctx, founding, b.spec.Spec.SSH.MaxParallel, func(m member) string { return m.Name },
			func(ctx context.Context, m member) error {
				verb := "start"
				if b.facts[m.Name].EtcdActive == "active" {
					verb = "restart"
				}
				return b.systemctl(ctx, m, verb, false)
			})
		if err != nil {
			return err
		}
	}
	if len(rolling) > 0 {
		b.leaderLast(ctx, rolling)
		for _, m := range rolling {
			verb := "restart"
			if b.plans[m.Name].action == report.ActionStart {
				verb = "start"
			}
			if err := b.systemctl(ctx, m, verb, true); err != nil {
				return &provision.HostError{Host: m.Name, Err: err}
			}
			if err := b.waitMember(ctx, m, false); err != nil {
				return &provision.HostError{Host: m.Name, Err: err}
			}
		}
	}
	// Members already added (learners waiting to start) go first: etcd allows one learner at a time
	// by default (--max-learners=1).
	sort.SliceStable(joining, func(i, j int) bool {
		return b.plans[joining[i].Name].id != 0 && b.plans[joining[j].Name].id == 0
	})
	for _, m := range joining {
		if err := b.join(ctx, m); err != nil {
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
func (b *Bootstrapper) systemctl(ctx context.Context, m member, verb string, wait bool) error {
	sctx, cancel := b.stepCtx(ctx)
	defer cancel()
	dir := shell.Quote(b.spec.Spec.Etcd.DataDir)
	noBlock := " --no-block"
	if wait {
		noBlock = ""
	}
	// A new data dir is created 0700 (etcd's recommendation); an existing one is left as it is.
	cmd := fmt.Sprintf("{ [ -d %s ] || mkdir -p -m 0700 %s; } && systemctl daemon-reload && systemctl enable --quiet %s && systemctl %s%s %s",
		dir, dir, unitName, verb, noBlock, unitName)
	if _, err := b.run(sctx, m.Name, "etcd/start", cmd); err != nil {
		return err
	}
	b.p.Hostf(m.Name, "etcd %sed", verb)
	return nil
}

// leaderLast orders ms so that the current leader, if among them, restarts last (one election
// instead of two).
func (b *Bootstrapper) leaderLast(ctx context.Context, ms []member) {
	cli, err := b.etcdClient(ctx)
	if err != nil {
		return
	}
	defer cli.Close()
	var leader uint64
	for _, u := range b.knownClientURLs() {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := cli.Status(sctx, u)
		cancel()
		if err == nil {
			leader = st.Leader
			break
		}
	}
	sort.SliceStable(ms, func(i, j int) bool {
		return b.plans[ms[j].host.Name].id == leader && b.plans[ms[i].host.Name].id != leader
	})
}

// join adds m to the running cluster as a learner (unless that already happened), starts it, waits
// for it to catch up and promotes it to a voting member (etcd docs: "runtime reconfiguration", learner).
func (b *Bootstrapper) join(ctx context.Context, m member) error {
	cli, err := b.etcdClient(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	p := b.plans[m.Name]
	if p.id == 0 {
		// etcd's strict reconfiguration check refuses a member add ("unhealthy cluster") until the
		// leader has been connected to every voting member for 5 s (etcdserver HealthInterval), e.g.
		// right after the previous joiner was promoted: retry until WaitTimeout.
		var resp *clientv3.MemberAddResponse
		deadline := time.Now().Add(b.opt.WaitTimeout)
		for {
			actx, cancel := context.WithTimeout(ctx, 10*time.Second)
			var err error
			resp, err = cli.MemberAddAsLearner(actx, []string{m.peerURL})
			cancel()
			if err == nil {
				break
			}
			if !(errors.Is(err, rpctypes.ErrUnhealthy) || strings.Contains(err.Error(), "unhealthy cluster")) || time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("etcd/start: adding %s as a learner: %w", m.peerURL, err)
			}
			b.p.Debugf("%s: member add refused for now (%v); retrying", m.Name, err)
			time.Sleep(500 * time.Millisecond)
		}
		p.id = resp.Member.ID
		b.st.Members[m.Name].ID = fmt.Sprintf("%x", p.id)
		if err := state.Save(b.spec.Spec.StateDir, b.st); err != nil {
			return err
		}
		b.p.Hostf(m.Name, "added as learner %x", p.id)
	}
	if p.restart || b.facts[m.Name].EtcdActive != "active" {
		if err := b.systemctl(ctx, m, "start", false); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(b.opt.WaitTimeout)
	for {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := cli.MemberPromote(pctx, p.id)
		cancel()
		if err == nil {
			b.p.Hostf(m.Name, "promoted to voting member")
			break
		}
		if strings.Contains(err.Error(), "is not a learner") {
			break // promoted by an earlier, interrupted run
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcd/start: learner %x did not catch up within %s: %w", p.id, b.opt.WaitTimeout, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	return b.waitMember(ctx, m, false)
}

// etcdClient connects to every known client URL (the spec's and, during a client port change, the
// recorded ones).
func (b *Bootstrapper) etcdClient(ctx context.Context) (*clientv3.Client, error) {
	return etcd.NewClient(ctx, b.knownClientURLs(), b.creds.tls, 5*time.Second, b.etcdDial())
}

// waitMember polls m's client URL until it reports a leader and a linearizable read succeeds.
func (b *Bootstrapper) waitMember(ctx context.Context, m member, quiet bool) error {
	deadline := time.Now().Add(b.opt.WaitTimeout)
	var last error
	for time.Now().Before(deadline) {
		if err := ctx.Err(); err != nil {
			return err
		}
		last = b.memberHealthy(ctx, m)
		if last == nil {
			if !quiet {
				b.p.Hostf(m.Name, "healthy")
			}
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("etcd/wait: member %s not healthy after %s: %w", m.Name, b.opt.WaitTimeout, last)
}

func (b *Bootstrapper) memberHealthy(ctx context.Context, m member) error {
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	cli, err := etcd.NewClient(cctx, []string{m.clientURL}, b.creds.tls, 2*time.Second, b.etcdDial())
	if err != nil {
		return err
	}
	defer cli.Close()
	st, err := cli.Status(cctx, m.clientURL)
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

// wait waits for every member to be healthy, proves quorum with a write and a linearizable read,
// and records the cluster ID and member IDs in the state dir.
func (b *Bootstrapper) wait(ctx context.Context) error {
	err := b.forEach(ctx, func(ctx context.Context, m member) error {
		return b.waitMember(ctx, m, b.plans[m.Name].action == report.ActionUnchanged)
	})
	if err != nil {
		return err
	}
	cli, err := b.etcdClient(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	changed := false
	for _, p := range b.plans {
		changed = changed || p.action != report.ActionUnchanged
	}
	if changed { // a no-op re-run writes nothing, not even the check key
		if err := etcd.CheckQuorum(qctx, cli, "hactl/bootstrap-check"); err != nil {
			return fmt.Errorf("etcd/wait: quorum check: %w", err)
		}
	}
	resp, err := cli.MemberList(qctx)
	if err != nil {
		return fmt.Errorf("etcd/wait: member list: %w", err)
	}
	b.st.ClusterID = fmt.Sprintf("%x", resp.Header.ClusterId)
	var errs *multierror.Error
	for _, m := range b.members {
		found := false
		for _, lm := range resp.Members {
			for _, u := range lm.PeerURLs {
				if u == m.peerURL {
					found = true
					rec := b.memberRecord(m)
					rec.ID = fmt.Sprintf("%x", lm.ID)
					rec.PeerURL, rec.ClientURL = m.peerURL, m.clientURL
				}
			}
		}
		if !found {
			errs = multierror.Append(errs, fmt.Errorf("%s: not in the member list after bootstrap", m.Name))
		}
	}
	if err := state.Save(b.spec.Spec.StateDir, b.st); err != nil {
		return err
	}
	if err := errs.ErrorOrNil(); err != nil {
		return err
	}
	check := "linearizable member list OK"
	if changed {
		check = "write + linearizable read OK"
	}
	b.p.Infof("  quorum: %d/%d members healthy, %s, cluster ID %s", len(b.members), len(resp.Members), check, b.st.ClusterID)
	return nil
}

// run runs one remote command on host and logs it (with its duration) in verbose mode.
func (b *Bootstrapper) run(ctx context.Context, host, step, cmd string, opts ...provision.RunOption) (provision.Result, error) {
	start := time.Now()
	res, err := b.client(host).Run(ctx, step, cmd, opts...)
	first, _, _ := strings.Cut(cmd, "\n")
	if len(first) > 120 {
		first = first[:120] + "..."
	}
	b.p.Debugf("%s: [%s] %s (%s, err=%v)", host, step, first, time.Since(start).Round(time.Millisecond), err)
	return res, err
}

// etcdDial routes the etcd client through the bastion when the spec has one (members may only be
// reachable from it); TLS with the members stays end to end.
func (b *Bootstrapper) etcdDial() etcd.Option {
	if b.dialer == nil || !b.dialer.HasBastion() {
		return nil
	}
	return etcd.WithDialer(b.dialer.DialTCP)
}
