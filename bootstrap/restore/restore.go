// Package restore is the restore phase group: `hactl restore` rolls a whole cluster back to a
// snapshot (Restore), and `hactl bootstrap --restore-from` seeds a new cluster's empty data dirs from
// one before their first start (Seed, spliced into bootstrap's phase list by Splice). Both reuse the
// etcd phase group (etcdphases) for preflight, pki, detect, start and wait.
package restore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-multierror"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hactl/hactl/bootstrap/etcdphases"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/internal/shell"
	"github.com/hactl/hactl/phase"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/report"
	"github.com/hactl/hactl/state"
	"github.com/hactl/hactl/ui"
)

// Options turn a run into a restore of the whole cluster from one snapshot (hactl restore):
// every member's data dir is moved aside (never deleted) and rebuilt from the snapshot with etcdutl,
// each member under its own name and peer URL, with the full initial cluster and a NEW cluster token
// (a restored cluster is a new cluster: etcd docs, "Disaster recovery"), revisions bumped and marked
// compacted so that watchers (kube-apiserver) can't silently miss events.
type Options struct {
	// Snapshot is the local path of the verified raw etcd snapshot (decrypted, decompressed) and
	// SHA256 its hex sha256: the copy shipped to every member is checked against it on the host.
	Snapshot string
	SHA256   string
	// Revision is the snapshot's revision (etcdutl snapshot status); after the restore the cluster's
	// revision must be at least Revision + BumpRevision.
	Revision int64
	// BumpRevision is etcdutl's --bump-revision (default DefaultBumpRevision).
	BumpRevision int64
	// Force restores even though every member is healthy (a restore rolls the whole cluster back).
	Force bool
	// Confirm is asked, after the plan is printed, whether to go on; nil means yes (--yes).
	Confirm func(question string) (bool, error)
	// ForgetPrefixes are key prefixes deleted once the restored cluster runs: elections whose
	// holders' keys the snapshot brought back (hactl backup agent's), so that their Leases need not
	// run out before a new holder is elected.
	ForgetPrefixes []string
}

// DefaultBumpRevision is how far a restore moves revisions forward: far beyond what any client can
// have seen since the snapshot (etcd's disaster recovery docs and kubeadm use 1e9), so revisions keep
// increasing for watchers and caches.
const DefaultBumpRevision = 1_000_000_000

// RefusedError: the cluster is healthy and --force was not given, or the user declined.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return "restore refused: " + e.Reason }

// Group is one restore's (or seed's) decisions.
type Group struct {
	eg       *etcdphases.Group
	opt      Options
	stamp    string            // UTC time of the run, in the moved-aside names
	token    string            // the new cluster token
	aside    map[string]string // member → where its data dir was moved
	remote   string            // the snapshot's path on the members
	restored bool              // every member's data dir was rebuilt
	// newCluster: bootstrap --restore-from (new hosts, new cluster seeded from the snapshot).
	newCluster bool
	revision   int64 // the restored cluster's revision (restore/verify)
}

const etcdUnit = "etcd.service"

// Phase titles: the identity of the group's phases in a phase.List.
const (
	PhasePlan   = "restore/plan"
	PhaseShip   = "restore/ship"
	PhaseStop   = "restore/stop"
	PhaseData   = "restore/data"
	PhaseStart  = "restore/start"
	PhaseVerify = "restore/verify"
	PhaseCheck  = "restore/check"
	PhaseSeed   = "restore/seed"
)

// NewGroup prepares a restore (newCluster false) or a seed (true) on the etcd group eg. Errors:
// opt names no verified snapshot.
func NewGroup(eg *etcdphases.Group, opt Options, newCluster bool) (*Group, error) {
	if opt.Snapshot == "" || opt.SHA256 == "" {
		return nil, errors.New("restore: no verified snapshot")
	}
	if opt.BumpRevision == 0 {
		opt.BumpRevision = DefaultBumpRevision
	}
	return &Group{eg: eg, opt: opt, aside: map[string]string{}, newCluster: newCluster}, nil
}

// RestorePhases are the phases of `hactl restore`: the etcd group's preflight, pki and detect, then
// plan (refusal, confirmation), ship, stop, data, start (every member founding), etcd/wait, verify.
func (r *Group) RestorePhases() (phase.List, error) {
	eg := r.eg.Phases()
	first, err := eg.Pick(etcdphases.PhasePreflight, etcdphases.PhasePKI, etcdphases.PhaseDetect)
	if err != nil {
		return nil, err
	}
	wait, err := eg.Pick(etcdphases.PhaseWait)
	if err != nil {
		return nil, err
	}
	return append(first,
		phase.Func{Name: PhasePlan, Fn: r.plan},
		phase.Func{Name: PhaseShip, Fn: r.ship, Changes: true},
		phase.Func{Name: PhaseStop, Fn: r.stop, Changes: true},
		phase.Func{Name: PhaseData, Fn: r.data, Changes: true},
		&etcdphases.Start{G: r.eg, Name: PhaseStart},
		wait[0],
		phase.Func{Name: PhaseVerify, Fn: r.verify, Changes: true},
	), nil
}

// Splice returns bootstrap's phase list l with the seed's phases in it (bootstrap --restore-from):
// restore/check right after plan (refused before anything is installed: bootstrap's load balancer
// phases come before etcd/install), restore/ship and restore/seed before etcd/start (the data dirs
// are seeded before the first start), and restore/verify after etcd/wait. Errors: l lacks one of
// those phases (*phase.UnknownPhaseError).
func (r *Group) Splice(l phase.List) (phase.List, error) {
	l, err := l.InsertAfter(etcdphases.PhasePlan, phase.Func{Name: PhaseCheck, Fn: r.seedCheck})
	if err != nil {
		return nil, err
	}
	if l, err = l.InsertBefore(etcdphases.PhaseStart,
		phase.Func{Name: PhaseShip, Fn: r.ship, Changes: true},
		phase.Func{Name: PhaseSeed, Fn: r.seed, Changes: true}); err != nil {
		return nil, err
	}
	return l.InsertAfter(etcdphases.PhaseWait, phase.Func{Name: PhaseVerify, Fn: r.verify, Changes: true})
}

// Revision is the restored cluster's revision (0 before restore/verify).
func (r *Group) Revision() int64 { return r.revision }

// plan refuses a restore of a healthy cluster without Force, decides the new token and the
// moved-aside names, prints the plan and asks for confirmation.
func (r *Group) plan(ctx context.Context) error {
	healthy := r.eg.Live() != nil
	if healthy {
		for _, m := range r.eg.Members() {
			if err := r.eg.MemberHealthy(ctx, m); err != nil {
				healthy = false
				r.eg.Run().Printer.Hostf(m.Name, "not healthy: %v", err)
			}
		}
	}
	if healthy && !r.opt.Force {
		return &RefusedError{Reason: fmt.Sprintf("every member of cluster %x is healthy: a restore rolls the whole cluster back to the snapshot (revision %d), losing every write since; add --force if that is what you want", r.eg.Live().ClusterID(), r.opt.Revision)}
	}
	tok, err := etcdphases.NewToken(r.eg.Run().Spec.Metadata.Name)
	if err != nil {
		return err
	}
	r.stamp = time.Now().UTC().Format("20060102T150405Z")
	r.token = tok
	r.remote = fmt.Sprintf("/var/lib/hactl/restore-%s.db", r.stamp)
	dataDir := r.eg.Run().Spec.Spec.Etcd.DataDir
	var rows [][]string
	for _, m := range r.eg.Members() {
		r.aside[m.Name] = dataDir + ".pre-restore-" + r.stamp
		r.eg.SetPlan(m.Name, report.ActionRestore, true)
		rows = append(rows, []string{m.Name, m.Host.Zone, dataDir + " → " + r.aside[m.Name], m.PeerURL})
	}
	var sb strings.Builder
	ui.Table(&sb, []string{"MEMBER", "ZONE", "DATA DIR MOVED ASIDE (kept)", "RESTORED AS (peer URL)"}, rows)
	for _, line := range strings.Split(strings.TrimRight(sb.String(), "\n"), "\n") {
		r.eg.Run().Printer.Infof("  %s", line)
	}
	r.eg.Run().Printer.Infof("  snapshot %s (sha256 %s, revision %d) → every member; etcd stopped on ALL members; restored with a new cluster token,", r.opt.Snapshot, etcdphases.ShortSum(r.opt.SHA256), r.opt.Revision)
	r.eg.Run().Printer.Infof("  revisions bumped by %d and marked compacted; then started together. Every write since the snapshot is rolled back.", r.opt.BumpRevision)
	if r.opt.Confirm != nil {
		ok, err := r.opt.Confirm(fmt.Sprintf("Restore cluster %s on %d members from this snapshot?", r.eg.Run().Spec.Metadata.Name, len(r.eg.Members())))
		if err != nil {
			return err
		}
		if !ok {
			return &RefusedError{Reason: "not confirmed; nothing was changed"}
		}
	}
	return nil
}

// ship copies the snapshot to every member (sha256 checked on the host) while the cluster
// still runs, so the outage starts only when everything is in place.
func (r *Group) ship(ctx context.Context) error {
	st, err := os.Stat(r.opt.Snapshot)
	if err != nil {
		return fmt.Errorf("restore/ship: %w", err)
	}
	return r.eg.ForEach(ctx, func(ctx context.Context, m etcdphases.Member) error {
		f, err := os.Open(r.opt.Snapshot)
		if err != nil {
			return fmt.Errorf("restore/ship: %w", err)
		}
		defer f.Close()
		start := time.Now()
		if err := r.eg.Run().Upload(ctx, m.Name, PhaseShip, []provision.File{{Path: r.remote, Mode: 0o600, Reader: f, Size: st.Size(), SHA256: r.opt.SHA256}}); err != nil {
			return err
		}
		r.eg.Run().Printer.Hostf(m.Name, "snapshot copied (%.1f MiB in %s, sha256 checked)", float64(st.Size())/(1<<20), time.Since(start).Round(time.Millisecond))
		return nil
	})
}

// stopCommand stops etcd on a member for a restore: SIGKILL first, then the unit stopped (held
// stopped until restore/start). A graceful stop of every member at once is slow: each etcd first
// tries to hand leadership over to peers that are stopping too (measured in the lab: 7 s, all of
// it downtime); a killed member's data dir is crash-consistent (etcd fsyncs its WAL before
// acknowledging), which is all the moved-aside copy needs for a rollback.
const stopCommand = "systemctl kill --signal=SIGKILL " + etcdUnit + " 2>/dev/null || true; systemctl stop " + etcdUnit

// stop stops etcd on every member (a restore replaces the whole cluster at once).
func (r *Group) stop(ctx context.Context) error {
	return r.eg.ForEach(ctx, func(ctx context.Context, m etcdphases.Member) error {
		sctx, cancel := r.eg.Run().StepCtx(ctx)
		defer cancel()
		if _, err := r.eg.Run().Exec(sctx, m.Name, PhaseStop, stopCommand); err != nil {
			return err
		}
		r.eg.Run().Printer.Hostf(m.Name, "etcd stopped")
		return nil
	})
}

// restoreScript moves the data dir aside and runs etcdutl snapshot restore for one member.
func (r *Group) restoreScript(m etcdphases.Member) string {
	dataDir := r.eg.Run().Spec.Spec.Etcd.DataDir
	q := shell.Quote
	return strings.Join([]string{
		"set -eu",
		fmt.Sprintf("if [ -e %s ]; then mv %s %s; fi", q(dataDir), q(dataDir), q(r.aside[m.Name])),
		fmt.Sprintf("%s snapshot restore %s --name %s --data-dir %s --initial-cluster %s --initial-cluster-token %s --initial-advertise-peer-urls %s --bump-revision %d --mark-compacted",
			q(filepath.Join(etcd.RemoteBinDir, "etcdutl")), q(r.remote), q(m.Name), q(dataDir), q(r.eg.FoundingCluster()), q(r.token), q(m.PeerURL), r.opt.BumpRevision),
		"chmod 0700 " + q(dataDir),
		"rm -f " + q(r.remote),
	}, "\n")
}

// data rebuilds every member's data dir from the snapshot, then installs units and markers
// carrying the new token. If any member fails, every member is put back as it was (its data dir
// back in place, a half-restored one moved aside as *.failed-restore-<stamp>) and etcd started again:
// a failed restore leaves the old cluster running.
func (r *Group) data(ctx context.Context) error {
	err := r.eg.ForEach(ctx, func(ctx context.Context, m etcdphases.Member) error {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Minute) // etcdutl rewrites the whole DB
		defer cancel()
		start := time.Now()
		if _, err := r.eg.Run().Exec(sctx, m.Name, PhaseData, r.restoreScript(m)); err != nil {
			return err
		}
		r.eg.Run().Printer.Hostf(m.Name, "data dir moved aside to %s; restored as %s in %s", r.aside[m.Name], m.Name, time.Since(start).Round(time.Millisecond))
		return nil
	})
	if err != nil {
		if rerr := r.rollback(ctx); rerr != nil {
			return multierror.Append(err, fmt.Errorf("rolling back: %w", rerr))
		}
		return fmt.Errorf("restore failed; every member is back on its previous data dir and etcd was started again: %w", err)
	}
	r.restored = true
	// The new cluster: new token, every member founding, IDs and cluster ID to be learnt.
	st := r.eg.State()
	st.Token, st.ClusterID = r.token, ""
	for _, m := range r.eg.Members() {
		st.Members[m.Name] = &state.Member{InitialCluster: r.eg.FoundingCluster(), InitialClusterState: string(etcd.StateNew), PeerURL: m.PeerURL, ClientURL: m.ClientURL}
	}
	if err := r.eg.SaveState(); err != nil {
		return err
	}
	r.eg.ForgetLive() // restore/start starts every member together, as founding members
	return r.eg.ForEach(ctx, func(ctx context.Context, m etcdphases.Member) error {
		up, err := r.eg.UnitFiles(m)
		if err != nil {
			return err
		}
		sctx, cancel := r.eg.Run().StepCtx(ctx)
		defer cancel()
		return r.eg.Run().Upload(sctx, m.Name, PhaseData, up)
	})
}

// rollback puts every member's old data dir back and starts etcd (old unit, old token).
func (r *Group) rollback(ctx context.Context) error {
	dataDir := r.eg.Run().Spec.Spec.Etcd.DataDir
	q := shell.Quote
	return r.eg.ForEach(ctx, func(ctx context.Context, m etcdphases.Member) error {
		failed := dataDir + ".failed-restore-" + r.stamp
		cmd := strings.Join([]string{
			"set -eu",
			fmt.Sprintf("if [ -e %s ]; then", q(r.aside[m.Name])),
			fmt.Sprintf("  if [ -e %s ]; then mv %s %s; fi", q(dataDir), q(dataDir), q(failed)),
			fmt.Sprintf("  mv %s %s", q(r.aside[m.Name]), q(dataDir)),
			"fi",
			"rm -f " + q(r.remote),
			"systemctl start --no-block " + etcdUnit,
		}, "\n")
		sctx, cancel := r.eg.Run().StepCtx(ctx)
		defer cancel()
		if _, err := r.eg.Run().Exec(sctx, m.Name, "restore/rollback", cmd); err != nil {
			return err
		}
		r.eg.Run().Printer.Hostf(m.Name, "rolled back: previous data dir in place, etcd started")
		return nil
	})
}

// verify checks the restored cluster's revision went past the snapshot's plus the bump,
// and says what to restart next.
func (r *Group) verify(ctx context.Context) error {
	cli, err := r.eg.Client(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	vctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := cli.Get(vctx, "hactl/restore-check")
	if err != nil {
		return fmt.Errorf("restore/verify: %w", err)
	}
	want := r.opt.Revision + r.opt.BumpRevision
	if resp.Header.Revision < want {
		return fmt.Errorf("restore/verify: the cluster's revision is %d, want at least %d (snapshot revision %d + bump %d)",
			resp.Header.Revision, want, r.opt.Revision, r.opt.BumpRevision)
	}
	r.revision = resp.Header.Revision
	for _, p := range r.opt.ForgetPrefixes {
		if n, err := forget(vctx, cli, p, r.opt.Revision); err != nil { // the snapshot's keys only
			r.eg.Run().Printer.Warnf("restore/verify: deleting the restored election keys under %s: %v (their Leases run out on their own)", p, err)
		} else if n > 0 {
			r.eg.Run().Printer.Infof("  deleted %d restored election key(s) under %s (a new holder is elected at once)", n, p)
		}
	}
	r.eg.Run().Printer.Infof("  restored: cluster ID %s, revision %d (snapshot %d + %d), every member healthy", r.eg.State().ClusterID, resp.Header.Revision, r.opt.Revision, r.opt.BumpRevision)
	r.eg.Run().Printer.Infof("  previous data dirs kept as %s.pre-restore-%s on every member", r.eg.Run().Spec.Spec.Etcd.DataDir, r.stamp)
	if cps := r.eg.Run().Spec.ControlPlaneHosts(); len(cps) > 0 {
		var names []string
		for _, h := range cps {
			names = append(names, h.Name)
		}
		r.eg.Run().Printer.Infof("  next: restart kube-apiserver on %s (its watch cache predates the restore), then the controllers and kubelets", strings.Join(names, ", "))
	}
	return nil
}

// forget deletes the keys under prefix that came with the snapshot (created at or before rev, the
// snapshot's revision): each only if it is still that key (its create revision
// compared in a transaction), so a key an election holder created after the restore is never
// deleted. It returns how many were deleted.
func forget(ctx context.Context, cli *clientv3.Client, prefix string, rev int64) (int, error) {
	if !strings.HasSuffix(prefix, "/") || strings.Trim(prefix, "/") == "" {
		return 0, fmt.Errorf("prefix %q: want a non-root prefix ending in /", prefix)
	}
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return 0, err
	}
	n := 0
	for _, kv := range resp.Kvs {
		if kv.CreateRevision > rev {
			continue
		}
		k := string(kv.Key)
		t, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", kv.CreateRevision)).Then(clientv3.OpDelete(k)).Commit()
		if err != nil {
			return n, err
		}
		if t.Succeeded {
			n++
		}
	}
	return n, nil
}

// SeedRefusedError: bootstrap --restore-from found a host that is not new.
type SeedRefusedError struct{ Host, Reason string }

func (e *SeedRefusedError) Error() string {
	return fmt.Sprintf("%s: bootstrap --restore-from builds a NEW cluster from the snapshot, but %s: use `hactl restore` to roll an existing cluster back", e.Host, e.Reason)
}

// seedCheck (bootstrap --restore-from) refuses unless every member is a founding member of a cluster
// that never formed: no etcd data on any host, no running cluster.
func (r *Group) seedCheck(ctx context.Context) error {
	if r.eg.Live() != nil {
		return &SeedRefusedError{Host: r.eg.Members()[0].Name, Reason: fmt.Sprintf("a cluster (%x) is already running there", r.eg.Live().ClusterID())}
	}
	if r.eg.State().ClusterID != "" {
		return &SeedRefusedError{Host: r.eg.Members()[0].Name, Reason: fmt.Sprintf("the state dir %s records cluster %s", r.eg.Run().Spec.Spec.StateDir, r.eg.State().ClusterID)}
	}
	for _, m := range r.eg.Members() {
		if f := r.eg.Facts(m.Name); f != nil && f.Data != etcdphases.DataAbsent && f.Data != etcdphases.DataEmpty {
			return &SeedRefusedError{Host: m.Name, Reason: fmt.Sprintf("its data dir %s is not empty (%s)", r.eg.Run().Spec.Spec.Etcd.DataDir, f.Data)}
		}
	}
	r.stamp = time.Now().UTC().Format("20060102T150405Z")
	r.token = r.eg.State().Token
	r.remote = fmt.Sprintf("/var/lib/hactl/restore-%s.db", r.stamp)
	r.eg.Run().Printer.Infof("  new cluster %s seeded from %s (revision %d, sha256 %s), revisions bumped by %d", r.eg.Run().Spec.Metadata.Name, r.opt.Snapshot, r.opt.Revision, etcdphases.ShortSum(r.opt.SHA256), r.opt.BumpRevision)
	return nil
}

// seed runs etcdutl snapshot restore into every (empty) data dir with the bootstrap's token.
func (r *Group) seed(ctx context.Context) error {
	dataDir := r.eg.Run().Spec.Spec.Etcd.DataDir
	q := shell.Quote
	return r.eg.ForEach(ctx, func(ctx context.Context, m etcdphases.Member) error {
		cmd := strings.Join([]string{
			"set -eu",
			fmt.Sprintf("if [ -d %s ]; then rmdir %s; fi", q(dataDir), q(dataDir)), // empty (checked): etcdutl creates it
			fmt.Sprintf("%s snapshot restore %s --name %s --data-dir %s --initial-cluster %s --initial-cluster-token %s --initial-advertise-peer-urls %s --bump-revision %d --mark-compacted",
				q(filepath.Join(etcd.RemoteBinDir, "etcdutl")), q(r.remote), q(m.Name), q(dataDir), q(r.eg.FoundingCluster()), q(r.token), q(m.PeerURL), r.opt.BumpRevision),
			"chmod 0700 " + q(dataDir),
			"rm -f " + q(r.remote),
		}, "\n")
		sctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		if _, err := r.eg.Run().Exec(sctx, m.Name, PhaseSeed, cmd); err != nil {
			return err
		}
		r.eg.Run().Printer.Hostf(m.Name, "data dir seeded from the snapshot")
		return nil
	})
}
