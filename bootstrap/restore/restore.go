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
	"regexp"
	"strings"
	"sync"
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
	// Snapshot may be "" when Fetch is set (the members fetch it; Fetch.Local is the fallback).
	Snapshot string
	SHA256   string
	// Fetch, when set, has every member fetch the snapshot from the object store itself, in
	// parallel, while the cluster still runs; a member that cannot (no curl or zstd, the store
	// unreachable from it, a copy whose sha256 is not SHA256) is sent the copy verified here instead.
	Fetch *HostFetch
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

// HostFetch is a stored snapshot the members fetch themselves: a presigned GET with curl, the
// object decompressed on the host, the result's sha256 compared with Options.SHA256 before it is
// put where restore/data reads it.
type HostFetch struct {
	// Name is the object's key and Endpoint the store's URL, for messages.
	Name, Endpoint string
	// Compression is the stored object's: "zstd" (decompressed with zstd on the host) or "none".
	Compression string
	// StoredSize is the object's size in bytes (for the figures).
	StoredSize int64
	// CAPEM is the store's CA bundle, written next to the snapshot for curl --cacert (nil: the
	// host's own trust store).
	CAPEM []byte
	// Presign returns a URL that reads the object until expiry: a bearer secret, sent to the host
	// on stdin only.
	Presign func(ctx context.Context, expiry time.Duration) (string, error)
	// Local returns the snapshot downloaded and verified on this machine, for the members that
	// could not fetch it (called at most once per ship, only when one could not).
	Local func(ctx context.Context) (string, error)
}

// presignExpiry is how long a member's fetch URL works: presigned just before the fetch, it need
// only outlive the download (S3 allows up to 7 days; shorter leaks less).
const presignExpiry = 30 * time.Minute

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
	// cp holds and releases the spec's control planes around a restore (nil: none, or a seed).
	cp *controlPlane
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
	if (opt.Snapshot == "" && opt.Fetch == nil) || opt.SHA256 == "" {
		return nil, errors.New("restore: no verified snapshot")
	}
	if f := opt.Fetch; f != nil && (f.Presign == nil || f.Local == nil) {
		return nil, errors.New("restore: a host fetch needs Presign and Local")
	}
	if opt.BumpRevision == 0 {
		opt.BumpRevision = DefaultBumpRevision
	}
	r := &Group{eg: eg, opt: opt, aside: map[string]string{}, newCluster: newCluster}
	if cps := eg.Run().Spec.ControlPlaneHosts(); len(cps) > 0 && !newCluster {
		r.cp = &controlPlane{r: r, hosts: cps, held: map[string]bool{}}
		for _, h := range cps {
			eg.Run().Need(h, provision.FactsRequest{}) // connected by preflight, beside the members
		}
	}
	return r, nil
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
	l := append(first,
		phase.Func{Name: PhasePlan, Fn: r.plan},
		phase.Func{Name: PhaseShip, Fn: r.ship, Changes: true},
	)
	if r.cp != nil {
		l = append(l, phase.Func{Name: PhaseHold, Fn: r.cp.hold, Changes: true})
	}
	l = append(l,
		phase.Func{Name: PhaseStop, Fn: r.stop, Changes: true},
		phase.Func{Name: PhaseData, Fn: r.data, Changes: true},
		&etcdphases.Start{G: r.eg, Name: PhaseStart},
		wait[0],
		phase.Func{Name: PhaseVerify, Fn: r.verify, Changes: true},
	)
	if r.cp != nil {
		l = append(l, phase.Func{Name: PhaseRelease, Fn: r.cp.release, Changes: true})
	}
	return l, nil
}

// releaseControlPlane starts kubelet again on every control plane restore/hold stopped it on and
// restore/release has not (a restore that failed or was interrupted after restore/hold), without
// waiting for the kube-apiservers (etcd may not serve): Run calls it after failed phases, so that no
// control plane is left stopped. nil when nothing is held. Errors, per host: kubelet's start.
func (r *Group) releaseControlPlane(ctx context.Context) error {
	if r.cp == nil || !r.cp.pending() {
		return nil
	}
	r.eg.Run().Printer.Warnf("%s: the restore did not finish: starting kubelet again on the control planes it stopped", PhaseRelease)
	return r.cp.releaseAndWait(ctx, false)
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
	r.eg.Run().Printer.Infof("  snapshot %s (sha256 %s, revision %d) → every member; etcd stopped on ALL members; restored with a new cluster token,", r.source(), etcdphases.ShortSum(r.opt.SHA256), r.opt.Revision)
	r.eg.Run().Printer.Infof("  revisions bumped by %d and marked compacted; then started together. Every write since the snapshot is rolled back.", r.opt.BumpRevision)
	if r.cp != nil {
		var names []string
		for _, h := range r.cp.hosts {
			names = append(names, h.Name)
		}
		r.eg.Run().Printer.Infof("  Control planes %s, where kubelet is installed: kubelet stopped and %s killed before etcd", strings.Join(names, ", "), strings.Join(heldContainers, ", "))
		r.eg.Run().Printer.Infof("  stops; kubelet started again once etcd serves the snapshot, each kube-apiserver waited for (/readyz): the Kubernetes API is down meanwhile.")
	}
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

// source names the snapshot in messages: the local file or the object the members fetch.
func (r *Group) source() string {
	if r.opt.Snapshot == "" && r.opt.Fetch != nil {
		return r.opt.Fetch.Name + " (fetched by every member from " + r.opt.Fetch.Endpoint + ")"
	}
	return r.opt.Snapshot
}

// ship puts the snapshot on every member (sha256 checked on the host) while the cluster still
// runs, so the outage starts only when everything is in place: with Fetch, every member fetches it
// from the object store itself, in parallel; the members that cannot, and every member without
// Fetch, are sent the copy verified here, all at once.
func (r *Group) ship(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			r.unship(ctx)
		}
	}()
	send := map[string]bool{}
	if r.opt.Fetch == nil {
		for _, m := range r.eg.Members() {
			send[m.Name] = true
		}
	} else {
		var mu sync.Mutex
		err := r.eg.ForEach(ctx, func(ctx context.Context, m etcdphases.Member) error {
			if err := r.fetch(ctx, m); err != nil {
				r.eg.Run().Printer.Warnf("%s: could not fetch the snapshot from the object store itself: %v; sending it from here instead", m.Name, err)
				mu.Lock()
				send[m.Name] = true
				mu.Unlock()
			}
			return nil
		})
		if err != nil { // not every member was tried (cancelled)
			return err
		}
		if len(send) == 0 {
			return nil
		}
	}
	path := r.opt.Snapshot
	if path == "" {
		var err error
		if path, err = r.opt.Fetch.Local(ctx); err != nil {
			return fmt.Errorf("restore/ship: %w", err)
		}
	}
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("restore/ship: %w", err)
	}
	return r.eg.ForEach(ctx, func(ctx context.Context, m etcdphases.Member) error {
		if !send[m.Name] {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("restore/ship: %w", err)
		}
		defer f.Close()
		start := time.Now()
		if err := r.eg.Run().Upload(ctx, m.Name, PhaseShip, []provision.File{{Path: r.remote, Mode: 0o600, Reader: f, Size: st.Size(), SHA256: r.opt.SHA256}}); err != nil {
			return err
		}
		r.eg.Run().Printer.Hostf(m.Name, "snapshot copied from here (%s in %s, sha256 checked)", ui.Size(st.Size()), time.Since(start).Round(time.Millisecond))
		return nil
	})
}

// unship removes the snapshot's copies from every member after a failed restore/ship (best effort:
// a member that cannot be reached keeps its copy, named after the run's time, in /var/lib/hactl).
func (r *Group) unship(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	q := shell.Quote
	_ = r.eg.ForEach(ctx, func(ctx context.Context, m etcdphases.Member) error {
		if _, err := r.eg.Run().Exec(ctx, m.Name, PhaseShip, "rm -f "+q(r.remote)+" "+q(r.remote+".part")+" "+q(r.remote+".ca.pem")); err != nil {
			r.eg.Run().Printer.Warnf("%s: removing the snapshot's copy %s: %v", m.Name, r.remote, err)
		}
		return nil
	})
}

// fetch has member m fetch the snapshot from the object store itself (fetchScript): the URL,
// presigned for this fetch, goes on stdin as curl's config, never on a command line.
func (r *Group) fetch(ctx context.Context, m etcdphases.Member) error {
	f := r.opt.Fetch
	url, err := f.Presign(ctx, presignExpiry)
	if err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, presignExpiry)
	defer cancel()
	start := time.Now()
	if len(f.CAPEM) > 0 { // a file for curl --cacert (a bundle can be too big for a command line)
		if err := r.eg.Run().Upload(sctx, m.Name, PhaseShip, []provision.File{{Path: r.remote + ".ca.pem", Mode: 0o600, Content: f.CAPEM}}); err != nil {
			return err
		}
	}
	if _, err := r.eg.Run().Exec(sctx, m.Name, PhaseShip, fetchScript(r.remote, r.opt.SHA256, f.Compression, len(f.CAPEM) > 0),
		provision.WithStdin(strings.NewReader(curlConfig(url)))); err != nil {
		var ce *provision.CommandError
		if errors.As(err, &ce) && ce.ExitCode > 0 && ce.Stderr != "" {
			return &FetchError{Cmd: ce}
		}
		return err
	}
	r.eg.Run().Printer.Hostf(m.Name, "snapshot fetched from the object store by the host (%s stored, in %s, sha256 checked)", ui.Size(f.StoredSize), time.Since(start).Round(time.Millisecond))
	return nil
}

// FetchError is a member's failed fetch of the snapshot from the object store: its message is the
// script's own reason (curl's error and status, a missing tool, another sha256), not the script.
type FetchError struct {
	Cmd *provision.CommandError // its Host names the member
}

func (e *FetchError) Error() string {
	return presignedRE.ReplaceAllString(strings.ReplaceAll(e.Cmd.Stderr, "\n", "; "), "<presigned URL>")
}

// presignedRE matches a presigned URL (or its query) in a host's output, to keep it out of messages.
var presignedRE = regexp.MustCompile(`\S*X-Amz-(Signature|Credential)\S*`)

// Unwrap returns the *provision.CommandError.
func (e *FetchError) Unwrap() error { return e.Cmd }

// curlConfig is curl's config (read with --config -) naming url: the only way the presigned URL
// reaches the host. Backslashes and double quotes are escaped as curl's config syntax wants.
func curlConfig(url string) string {
	return "url = \"" + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(url) + "\"\n"
}

// fetchScript is the member's side of a host fetch: curl (-q: no ~/.curlrc, which could print the
// URL) reads the presigned URL from its config on stdin, and the object is decompressed (zstd) into
// remote.part; its sha256 must be sha before it is renamed to remote, where restore/data reads it.
// With withCA, remote.ca.pem (uploaded first) is curl's --cacert. A missing curl or zstd (exit 10),
// curl's failure or a transfer slower than 1 KiB/s for 30 s (11), another sha256 (12) or a failed
// decompression (13) exits with the reason on stderr; every temporary file, the CA's included, is
// removed on every exit.
func fetchScript(remote, sha, compression string, withCA bool) string {
	q := shell.Quote
	curl := `curl -q -fsS --connect-timeout 5 --retry 2 --speed-limit 1024 --speed-time 30 --config -`
	if withCA {
		curl += ` --cacert "$ca"`
	}
	lines := []string{
		"set -eu",
		"umask 077",
		"part=" + q(remote+".part") + " ca=" + q(remote+".ca.pem"),
		`trap 'rm -f "$part" "$part.curl" "$part.zstd" "$ca"' EXIT`,
		`command -v curl >/dev/null 2>&1 || { echo "curl is not installed" >&2; exit 10; }`,
	}
	if compression == "zstd" {
		lines = append(lines, `command -v zstd >/dev/null 2>&1 || { echo "zstd is not installed (the snapshot is stored zstd-compressed)" >&2; exit 10; }`)
	}
	lines = append(lines,
		"mkdir -p "+q(filepath.Dir(remote)),
		`rm -f "$part" "$part.curl" "$part.zstd"`)
	if compression == "zstd" {
		// No pipefail in POSIX sh: each side's failure is kept in a file; the sha256 check catches the rest.
		lines = append(lines, `{ `+curl+` || echo $? > "$part.curl" || true; } | { zstd -dcq > "$part" || echo $? > "$part.zstd" || true; }`)
	} else {
		lines = append(lines, curl+` -o "$part" || echo $? > "$part.curl" || true`)
	}
	lines = append(lines,
		// curl's 23 is "could not write": zstd stopped reading, and zstd's own message says why.
		`c=$(cat "$part.curl" 2>/dev/null || true); z=$(cat "$part.zstd" 2>/dev/null || true)`,
		`if [ -n "$z" ] && { [ -z "$c" ] || [ "$c" = 23 ]; }; then echo "decompressing the snapshot failed (zstd exited $z)" >&2; exit 13; fi`,
		`if [ -n "$c" ]; then echo "curl exited $c" >&2; exit 11; fi`,
		`got=$(sha256sum "$part" | cut -d' ' -f1)`,
		fmt.Sprintf(`if [ "$got" != %s ]; then echo "the fetched copy's sha256 is $got, want %s" >&2; exit 12; fi`, q(sha), sha),
		`mv "$part" `+q(remote),
	)
	return strings.Join(lines, "\n")
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

// verify checks the restored cluster's revision went past the snapshot's plus the bump
// (restore/release then restarts the control planes).
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
	r.eg.Run().Printer.Infof("  new cluster %s seeded from %s (revision %d, sha256 %s), revisions bumped by %d", r.eg.Run().Spec.Metadata.Name, r.source(), r.opt.Revision, etcdphases.ShortSum(r.opt.SHA256), r.opt.BumpRevision)
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
