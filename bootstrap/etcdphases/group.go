// Package etcdphases is the etcd phase group of `hactl bootstrap`, `hactl plan` and `hactl
// restore`: preflight → pki → detect → plan → etcd/install → etcd/start → etcd/wait. Together they
// converge a set of SSH hosts into a TLS etcd cluster. Every phase is idempotent: a re-run on a
// healthy cluster changes nothing and restarts nothing; a re-run after an interrupted run finishes
// the rest. The group's state (facts, plans, the cluster record, the live cluster) is shared with
// the restore group through the exported accessors of Group.
package etcdphases

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/bootstrap/runctx"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/internal/sumcache"
	"github.com/hactl/hactl/phase"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/report"
	"github.com/hactl/hactl/state"
)

// Phase titles: the identity other groups insert their phases by (phase.List).
const (
	PhasePreflight = "preflight"
	PhasePKI       = "pki"
	PhaseDetect    = "detect"
	PhasePlan      = "plan"
	PhaseInstall   = "etcd/install"
	PhaseStart     = "etcd/start"
	PhaseWait      = "etcd/wait"
)

// Options configure the group.
type Options struct {
	// IgnorePreflightErrors names preflight checks (see Checks) whose failures become warnings; "all"
	// ignores every check.
	IgnorePreflightErrors []string
	// WaitTimeout bounds waiting for quorum, for a member to be healthy and for a learner to catch
	// up (default DefaultWaitTimeout).
	WaitTimeout time.Duration
	// SumCache keeps the local binaries' sha256 between runs (sumcache.Default() in commands); nil
	// hashes them every run.
	SumCache *sumcache.Cache
	// ReplaceLost names members whose data dir was lost while the running cluster still lists them
	// (`hactl bootstrap --replace-lost`): each is removed (the quorum guard of etcd/membership) and
	// added back as a new learner on the same host, instead of refused with *MemberDataLostError. A
	// named member whose data is intact is refused (*ReplaceLostIntactError).
	ReplaceLost []string
	// JoinOnly names the one member this run may add (`hactl etcd member replace`): the plan is
	// refused when any other member would be changed, started or restarted, and members of the
	// running cluster the spec does not list are not warned about (the caller removes them).
	JoinOnly string
}

// OwnedUnit is etcd's unit as hactl renders it: no drop-in and no environment file of hactl's, so
// any on a member overrides the spec (runctx.Run.Manage refuses it).
var OwnedUnit = provision.OwnedUnitFiles{Unit: etcd.UnitName, Fragment: etcd.RemoteUnitPath}

// DefaultWaitTimeout is Options.WaitTimeout's default.
const DefaultWaitTimeout = 2 * time.Minute

// Member is one etcd host: its spec entry and its etcd identity (name, address, URLs).
type Member struct {
	etcd.Member
	Host      v1alpha1.Host
	PeerURL   string
	ClientURL string
}

// HostPlan is what will happen on one member.
type HostPlan struct {
	Action report.Action
	// Upload are the files whose remote checksum differs.
	Upload []DesiredFile
	// Download: the etcd binaries are (re)installed from spec.etcd.download (another or no release
	// recorded, or a binary missing or changed).
	Download bool
	// Restart: etcd must be (re)started after the upload.
	Restart bool
	// ID is the member ID when known.
	ID uint64
	// ReplaceID is the ID of the member whose data dir was lost (report.ActionReplace): removed
	// before the host joins again.
	ReplaceID uint64
	// From is the etcd version the member runs ("3.5.36") when the restart upgrades it to
	// spec.etcd.version (a rolling upgrade); "" otherwise.
	From string
}

// rolls reports whether member name is restarted in the rolling restart of a running cluster
// (Start): its files are installed right before its own restart rather than in etcd/install, so a
// roll that stops at one member leaves the members after it untouched (old binary, old flags).
func (g *Group) rolls(name string) bool {
	p := g.ledger.plans[name]
	return g.live != nil && p != nil && p.Restart && p.Action != report.ActionJoin && p.Action != report.ActionReplace
}

// Group is the etcd phases' state for one run.
type Group struct {
	run     *runctx.Run
	opt     Options
	members []Member
	files   *fileSet

	ledger ledger // facts and plans by member name

	st       *state.Cluster // cluster.json (in memory only during a dry run when it did not exist)
	creds    *Credentials
	live     *LiveCluster // nil when no running cluster was found
	recovery *recovery    // set when the state dir was (or, in a dry run, would be) recovered from the members

	clusterVersion string // after an upgrade: the cluster version etcd/start saw (Start.waitClusterVersion)
}

// New prepares the group and registers the facts its preflight needs from every member with run
// (runctx.Run.Need). It contacts nothing. Errors: the spec's members cannot be built (etcd.MembersFromSpec).
func New(run *runctx.Run, opt Options) (*Group, error) {
	if opt.WaitTimeout == 0 {
		opt.WaitTimeout = DefaultWaitTimeout
	}
	spec := run.Spec
	if opt.SumCache == nil {
		opt.SumCache = sumcache.New("")
	}
	g := &Group{run: run, opt: opt, files: newFileSet(spec, opt.SumCache), ledger: ledger{facts: map[string]*Facts{}, plans: map[string]*HostPlan{}}}
	ms, err := etcd.MembersFromSpec(spec)
	if err != nil {
		return nil, err
	}
	for i, h := range spec.EtcdHosts() {
		g.members = append(g.members, Member{Member: ms[i], Host: h, PeerURL: ms[i].PeerURL(), ClientURL: ms[i].ClientURL()})
	}
	for _, m := range g.members {
		run.Need(m.Host, g.files.factsRequest())
		run.Manage(m.Host, OwnedUnit)
	}
	return g, nil
}

// Phases returns the group's phases in bootstrap's order.
func (g *Group) Phases() phase.List {
	return phase.List{
		&Preflight{g}, &PKI{g}, &Detect{g}, &Plan{g},
		&Install{g}, &Start{G: g, Name: PhaseStart}, &Wait{g},
	}
}

// Run returns the run's shared context.
func (g *Group) Run() *runctx.Run { return g.run }

// Members returns the etcd members in spec order.
func (g *Group) Members() []Member { return g.members }

// Facts returns what preflight found on member name (nil before preflight).
func (g *Group) Facts(name string) *Facts { return g.ledger.factsOf(name) }

// SetPlan replaces member name's plan (a restore rebuilds every member: ActionRestore, restart).
func (g *Group) SetPlan(name string, action report.Action, restart bool) {
	g.ledger.setPlan(name, &HostPlan{Action: action, Restart: restart})
}

// State returns the cluster record (nil before pki).
func (g *Group) State() *state.Cluster { return g.st }

// SaveState writes the cluster record to the state dir (atomically).
func (g *Group) SaveState() error { return state.Save(g.run.Spec.Spec.StateDir, g.st) }

// Live returns the running cluster detect found (nil when none answered).
func (g *Group) Live() *LiveCluster { return g.live }

// ForgetLive makes the next start treat every member as founding (a restored cluster is new).
func (g *Group) ForgetLive() { g.live = nil }

// ForEach runs fn on every member with the spec's concurrency cap; errors are aggregated per host.
func (g *Group) ForEach(ctx context.Context, fn func(ctx context.Context, m Member) error) error {
	return provision.ForEach(ctx, g.members, g.run.Spec.Spec.SSH.MaxParallel,
		func(m Member) string { return m.Name }, fn)
}

// loadOrNewState reads cluster.json; when it is missing it recovers it from the members if they
// carry this cluster (recoverState), or makes a new record with a fresh cluster token.
func (ph *PKI) loadOrNewState(ctx context.Context) error {
	g := ph.g
	spec := g.run.Spec
	st, err := state.Load(spec.Spec.StateDir)
	if err != nil {
		return err
	}
	if st != nil && st.Name != spec.Metadata.Name {
		return fmt.Errorf("state dir %s belongs to cluster %q, not %q: point spec.stateDir at this cluster's own directory",
			spec.Spec.StateDir, st.Name, spec.Metadata.Name)
	}
	if st == nil {
		if ph.carriesCluster() != "" {
			return (&recoverer{g}).recoverState(ctx)
		}
		tok, err := NewToken(spec.Metadata.Name)
		if err != nil {
			return err
		}
		st = &state.Cluster{Name: spec.Metadata.Name, Token: tok, Members: map[string]*state.Member{}}
	}
	g.st = st
	return nil
}

// NewToken returns a fresh etcd cluster token for cluster name: "<name>-<16 hex digits>" from
// crypto/rand (etcd docs: a unique --initial-cluster-token per cluster keeps members of different
// clusters from joining each other).
func NewToken(name string) (string, error) {
	tok := make([]byte, 8)
	if _, err := rand.Read(tok); err != nil {
		return "", fmt.Errorf("generating cluster token: %w", err)
	}
	return name + "-" + hex.EncodeToString(tok), nil
}

// FoundingCluster is the --initial-cluster of the founding members: every etcd host in the spec.
func (g *Group) FoundingCluster() string {
	ms := make([]etcd.Member, len(g.members))
	for i, m := range g.members {
		ms[i] = m.Member
	}
	return etcd.InitialCluster(ms)
}

// KnownClientURLs lists the spec's client URLs and those recorded in the state dir (they differ
// after spec.etcd.clientPort changed), without duplicates.
func (g *Group) KnownClientURLs() []string {
	seen := map[string]bool{}
	var out []string
	add := func(u string) {
		if u != "" && !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	for _, m := range g.members {
		add(m.ClientURL)
	}
	for _, m := range g.members {
		if rec := g.st.Members[m.Name]; rec != nil {
			add(rec.ClientURL)
		}
	}
	return out
}

// Report returns every member's outcome for the run's report, in spec order.
func (g *Group) Report() []report.Member {
	var out []report.Member
	for _, m := range g.members {
		mr := report.Member{Name: m.Name, Zone: m.Host.Zone, Address: m.Address.String(), Commands: g.run.Commands(m.Name)}
		if p := g.ledger.plans[m.Name]; p != nil {
			mr.Action = p.Action
			for _, f := range p.Upload {
				mr.Changes = append(mr.Changes, f.Path)
			}
			if p.Download {
				mr.Changes = append(mr.Changes, g.files.remoteBinaries()...)
			}
			if p.From != "" {
				mr.UpgradedFrom = "v" + p.From
			}
			sort.Strings(mr.Changes)
		}
		if g.st != nil && g.st.Members[m.Name] != nil {
			mr.ID = g.st.Members[m.Name].ID
		}
		out = append(out, mr)
	}
	return out
}

// ClusterID is the recorded cluster ID ("" before the cluster formed or before pki).
func (g *Group) ClusterID() string {
	if g.st == nil {
		return ""
	}
	return g.st.ClusterID
}
