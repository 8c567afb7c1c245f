package bootstrap

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-multierror"

	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/internal/shell"
	"github.com/hactl/hactl/phase"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/report"
	"github.com/hactl/hactl/state"
	"github.com/hactl/hactl/ui"
)

// RestoreOptions turn a run into a restore of the whole cluster from one snapshot (hactl restore):
// every member's data dir is moved aside (never deleted) and rebuilt from the snapshot with etcdutl,
// each member under its own name and peer URL, with the full initial cluster and a NEW cluster token
// (a restored cluster is a new cluster: etcd docs, "Disaster recovery"), revisions bumped and marked
// compacted so that watchers (kube-apiserver) can't silently miss events.
type RestoreOptions struct {
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
}

// DefaultBumpRevision is how far a restore moves revisions forward: far beyond what any client can
// have seen since the snapshot (etcd's disaster recovery docs and kubeadm use 1e9), so revisions keep
// increasing for watchers and caches.
const DefaultBumpRevision = 1_000_000_000

// RestoreRefusedError: the cluster is healthy and --force was not given, or the user declined.
type RestoreRefusedError struct{ Reason string }

func (e *RestoreRefusedError) Error() string { return "restore refused: " + e.Reason }

// restoreRun is one restore's decisions.
type restoreRun struct {
	opt      RestoreOptions
	stamp    string            // UTC time of the run, in the moved-aside names
	token    string            // the new cluster token
	aside    map[string]string // member → where its data dir was moved
	remote   string            // the snapshot's path on the members
	restored bool              // every member's data dir was rebuilt
	// newCluster: bootstrap --restore-from (new hosts, new cluster seeded from the snapshot).
	newCluster bool
}

// RestorePhases are the phases of a restore run (Options.Restore set).
func (b *Bootstrapper) restorePhases() []phase.Phase {
	return []phase.Phase{
		phase.Func{Name: "preflight", Fn: b.preflight},
		phase.Func{Name: "pki", Fn: b.pki},
		phase.Func{Name: "detect", Fn: b.detect},
		phase.Func{Name: "restore/plan", Fn: b.restorePlan},
		phase.Func{Name: "restore/ship", Fn: b.restoreShip, Changes: true},
		phase.Func{Name: "restore/stop", Fn: b.restoreStop, Changes: true},
		phase.Func{Name: "restore/data", Fn: b.restoreData, Changes: true},
		phase.Func{Name: "restore/start", Fn: b.start, Changes: true},
		phase.Func{Name: "etcd/wait", Fn: b.wait, Changes: true},
		phase.Func{Name: "restore/verify", Fn: b.restoreVerify, Changes: true},
	}
}

// restorePlan refuses a restore of a healthy cluster without Force, decides the new token and the
// moved-aside names, prints the plan and asks for confirmation.
func (b *Bootstrapper) restorePlan(ctx context.Context) error {
	r := b.rs
	healthy := b.live != nil
	if healthy {
		for _, m := range b.members {
			if err := b.memberHealthy(ctx, m); err != nil {
				healthy = false
				b.p.Hostf(m.Name, "not healthy: %v", err)
			}
		}
	}
	if healthy && !r.opt.Force {
		return &RestoreRefusedError{Reason: fmt.Sprintf("every member of cluster %x is healthy: a restore rolls the whole cluster back to the snapshot (revision %d), losing every write since; add --force if that is what you want", b.live.clusterID, r.opt.Revision)}
	}
	tok := make([]byte, 8)
	if _, err := rand.Read(tok); err != nil {
		return err
	}
	r.stamp = time.Now().UTC().Format("20060102T150405Z")
	r.token = b.spec.Metadata.Name + "-" + hex.EncodeToString(tok)
	r.remote = fmt.Sprintf("/var/lib/hactl/restore-%s.db", r.stamp)
	dataDir := b.spec.Spec.Etcd.DataDir
	var rows [][]string
	for _, m := range b.members {
		r.aside[m.Name] = dataDir + ".pre-restore-" + r.stamp
		b.plans[m.Name] = &hostPlan{action: report.ActionRestore, restart: true}
		rows = append(rows, []string{m.Name, m.host.Zone, dataDir + " → " + r.aside[m.Name], m.peerURL})
	}
	var sb strings.Builder
	ui.Table(&sb, []string{"MEMBER", "ZONE", "DATA DIR MOVED ASIDE (kept)", "RESTORED AS (peer URL)"}, rows)
	for _, line := range strings.Split(strings.TrimRight(sb.String(), "\n"), "\n") {
		b.p.Infof("  %s", line)
	}
	b.p.Infof("  snapshot %s (sha256 %s, revision %d) → every member; etcd stopped on ALL members; restored with a new cluster token,", r.opt.Snapshot, shortSum(r.opt.SHA256), r.opt.Revision)
	b.p.Infof("  revisions bumped by %d and marked compacted; then started together. Every write since the snapshot is rolled back.", r.opt.BumpRevision)
	if r.opt.Confirm != nil {
		ok, err := r.opt.Confirm(fmt.Sprintf("Restore cluster %s on %d members from this snapshot?", b.spec.Metadata.Name, len(b.members)))
		if err != nil {
			return err
		}
		if !ok {
			return &RestoreRefusedError{Reason: "not confirmed; nothing was changed"}
		}
	}
	return nil
}

// restoreShip copies the snapshot to every member (sha256 checked on the host) while the cluster
// still runs, so the outage starts only when everything is in place.
func (b *Bootstrapper) restoreShip(ctx context.Context) error {
	r := b.rs
	st, err := os.Stat(r.opt.Snapshot)
	if err != nil {
		return fmt.Errorf("restore/ship: %w", err)
	}
	return b.forEach(ctx, func(ctx context.Context, m member) error {
		f, err := os.Open(r.opt.Snapshot)
		if err != nil {
			return fmt.Errorf("restore/ship: %w", err)
		}
		defer f.Close()
		start := time.Now()
		if err := b.client(m.Name).Upload(ctx, "restore/ship", []provision.File{{Path: r.remote, Mode: 0o600, Reader: f, Size: st.Size(), SHA256: r.opt.SHA256}}); err != nil {
			return err
		}
		b.p.Hostf(m.Name, "snapshot copied (%.1f MiB in %s, sha256 checked)", float64(st.Size())/(1<<20), time.Since(start).Round(time.Millisecond))
		return nil
	})
}

// restoreStop stops etcd on every member (a restore replaces the whole cluster at once).
func (b *Bootstrapper) restoreStop(ctx context.Context) error {
	return b.forEach(ctx, func(ctx context.Context, m member) error {
		sctx, cancel := b.stepCtx(ctx)
		defer cancel()
		if _, err := b.run(sctx, m.Name, "restore/stop", "systemctl stop "+unitName); err != nil {
			return err
		}
		b.p.Hostf(m.Name, "etcd stopped")
		return nil
	})
}

// restoreScript moves the data dir aside and runs etcdutl snapshot restore for one member.
func (b *Bootstrapper) restoreScript(m member) string {
	r := b.rs
	dataDir := b.spec.Spec.Etcd.DataDir
	q := shell.Quote
	return strings.Join([]string{
		"set -eu",
		fmt.Sprintf("if [ -e %s ]; then mv %s %s; fi", q(dataDir), q(dataDir), q(r.aside[m.Name])),
		fmt.Sprintf("%s snapshot restore %s --name %s --data-dir %s --initial-cluster %s --initial-cluster-token %s --initial-advertise-peer-urls %s --bump-revision %d --mark-compacted",
			q(filepath.Join(etcd.RemoteBinDir, "etcdutl")), q(r.remote), q(m.Name), q(dataDir), q(b.foundingCluster()), q(r.token), q(m.peerURL), r.opt.BumpRevision),
		"chmod 0700 " + q(dataDir),
		"rm -f " + q(r.remote),
	}, "\n")
}

// restoreData rebuilds every member's data dir from the snapshot, then installs units and markers
// carrying the new token. If any member fails, every member is put back as it was (its data dir
// back in place, a half-restored one moved aside as *.failed-restore-<stamp>) and etcd started again:
// a failed restore leaves the old cluster running.
func (b *Bootstrapper) restoreData(ctx context.Context) error {
	r := b.rs
	err := b.forEach(ctx, func(ctx context.Context, m member) error {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Minute) // etcdutl rewrites the whole DB
		defer cancel()
		start := time.Now()
		if _, err := b.run(sctx, m.Name, "restore/data", b.restoreScript(m)); err != nil {
			return err
		}
		b.p.Hostf(m.Name, "data dir moved aside to %s; restored as %s in %s", r.aside[m.Name], m.Name, time.Since(start).Round(time.Millisecond))
		return nil
	})
	if err != nil {
		if rerr := b.restoreRollback(ctx); rerr != nil {
			return multierror.Append(err, fmt.Errorf("rolling back: %w", rerr))
		}
		return fmt.Errorf("restore failed; every member is back on its previous data dir and etcd was started again: %w", err)
	}
	r.restored = true
	// The new cluster: new token, every member founding, IDs and cluster ID to be learnt.
	b.st.Token, b.st.ClusterID = r.token, ""
	for _, m := range b.members {
		b.st.Members[m.Name] = &state.Member{InitialCluster: b.foundingCluster(), InitialClusterState: string(etcd.StateNew), PeerURL: m.peerURL, ClientURL: m.clientURL}
	}
	if err := state.Save(b.spec.Spec.StateDir, b.st); err != nil {
		return err
	}
	b.live = nil // restore/start starts every member together, as founding members
	return b.forEach(ctx, func(ctx context.Context, m member) error {
		files, err := b.desiredFiles(m, b.st.Members[m.Name])
		if err != nil {
			return err
		}
		var up []provision.File
		for _, f := range files {
			if f.Path == remoteUnit || f.Path == remoteMarker {
				up = append(up, provision.File{Path: f.Path, Mode: f.Mode, Content: f.Data, SHA256: f.Sum})
			}
		}
		sctx, cancel := b.stepCtx(ctx)
		defer cancel()
		return b.client(m.Name).Upload(sctx, "restore/data", up)
	})
}

// restoreRollback puts every member's old data dir back and starts etcd (old unit, old token).
func (b *Bootstrapper) restoreRollback(ctx context.Context) error {
	r := b.rs
	dataDir := b.spec.Spec.Etcd.DataDir
	q := shell.Quote
	return b.forEach(ctx, func(ctx context.Context, m member) error {
		failed := dataDir + ".failed-restore-" + r.stamp
		cmd := strings.Join([]string{
			"set -eu",
			fmt.Sprintf("if [ -e %s ]; then", q(r.aside[m.Name])),
			fmt.Sprintf("  if [ -e %s ]; then mv %s %s; fi", q(dataDir), q(dataDir), q(failed)),
			fmt.Sprintf("  mv %s %s", q(r.aside[m.Name]), q(dataDir)),
			"fi",
			"rm -f " + q(r.remote),
			"systemctl start --no-block " + unitName,
		}, "\n")
		sctx, cancel := b.stepCtx(ctx)
		defer cancel()
		if _, err := b.run(sctx, m.Name, "restore/rollback", cmd); err != nil {
			return err
		}
		b.p.Hostf(m.Name, "rolled back: previous data dir in place, etcd started")
		return nil
	})
}

// restoreVerify checks the restored cluster's revision went past the snapshot's plus the bump,
// and says what to restart next.
func (b *Bootstrapper) restoreVerify(ctx context.Context) error {
	r := b.rs
	cli, err := b.etcdClient(ctx)
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
	b.restoredRevision = resp.Header.Revision
	b.p.Infof("  restored: cluster ID %s, revision %d (snapshot %d + %d), every member healthy", b.st.ClusterID, resp.Header.Revision, r.opt.Revision, r.opt.BumpRevision)
	b.p.Infof("  previous data dirs kept as %s.pre-restore-%s on every member", b.spec.Spec.Etcd.DataDir, r.stamp)
	if cps := b.spec.ControlPlaneHosts(); len(cps) > 0 {
		var names []string
		for _, h := range cps {
			names = append(names, h.Name)
		}
		b.p.Infof("  next: restart kube-apiserver on %s (its watch cache predates the restore), then the controllers and kubelets", strings.Join(names, ", "))
	}
	return nil
}

// SeedRefusedError: bootstrap --restore-from found a host that is not new.
type SeedRefusedError struct{ Host, Reason string }

func (e *SeedRefusedError) Error() string {
	return fmt.Sprintf("%s: bootstrap --restore-from builds a NEW cluster from the snapshot, but %s: use `hactl restore` to roll an existing cluster back", e.Host, e.Reason)
}

// seedCheck (bootstrap --restore-from) refuses unless every member is a founding member of a cluster
// that never formed: no etcd data on any host, no running cluster.
func (b *Bootstrapper) seedCheck(ctx context.Context) error {
	r := b.rs
	if b.live != nil {
		return &SeedRefusedError{Host: b.members[0].Name, Reason: fmt.Sprintf("a cluster (%x) is already running there", b.live.clusterID)}
	}
	if b.st.ClusterID != "" {
		return &SeedRefusedError{Host: b.members[0].Name, Reason: fmt.Sprintf("the state dir %s records cluster %s", b.spec.Spec.StateDir, b.st.ClusterID)}
	}
	for _, m := range b.members {
		if f := b.facts[m.Name]; f != nil && f.Data != DataAbsent && f.Data != DataEmpty {
			return &SeedRefusedError{Host: m.Name, Reason: fmt.Sprintf("its data dir %s is not empty (%s)", b.spec.Spec.Etcd.DataDir, f.Data)}
		}
	}
	r.stamp = time.Now().UTC().Format("20060102T150405Z")
	r.token = b.st.Token
	r.remote = fmt.Sprintf("/var/lib/hactl/restore-%s.db", r.stamp)
	b.p.Infof("  new cluster %s seeded from %s (revision %d, sha256 %s), revisions bumped by %d", b.spec.Metadata.Name, r.opt.Snapshot, r.opt.Revision, shortSum(r.opt.SHA256), r.opt.BumpRevision)
	return nil
}

// seedData runs etcdutl snapshot restore into every (empty) data dir with the bootstrap's token.
func (b *Bootstrapper) seedData(ctx context.Context) error {
	r := b.rs
	dataDir := b.spec.Spec.Etcd.DataDir
	q := shell.Quote
	return b.forEach(ctx, func(ctx context.Context, m member) error {
		cmd := strings.Join([]string{
			"set -eu",
			fmt.Sprintf("if [ -d %s ]; then rmdir %s; fi", q(dataDir), q(dataDir)), // empty (checked): etcdutl creates it
			fmt.Sprintf("%s snapshot restore %s --name %s --data-dir %s --initial-cluster %s --initial-cluster-token %s --initial-advertise-peer-urls %s --bump-revision %d --mark-compacted",
				q(filepath.Join(etcd.RemoteBinDir, "etcdutl")), q(r.remote), q(m.Name), q(dataDir), q(b.foundingCluster()), q(r.token), q(m.peerURL), r.opt.BumpRevision),
			"chmod 0700 " + q(dataDir),
			"rm -f " + q(r.remote),
		}, "\n")
		sctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		if _, err := b.run(sctx, m.Name, "restore/seed", cmd); err != nil {
			return err
		}
		b.p.Hostf(m.Name, "data dir seeded from the snapshot")
		return nil
	})
}
