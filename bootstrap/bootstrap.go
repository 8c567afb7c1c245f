// Package bootstrap implements `hactl bootstrap` and `hactl plan`: an ordered list of phases
// (preflight → pki → detect → plan → etcd/install → etcd/start → etcd/wait) that converges a set of
// SSH hosts into a TLS etcd cluster. Every phase is idempotent: a re-run on a healthy cluster changes
// nothing and restarts nothing; a re-run after an interrupted run finishes the rest.
package bootstrap

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/lb"
	"github.com/hactl/hactl/phase"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/report"
	"github.com/hactl/hactl/state"
	"github.com/hactl/hactl/ui"
)

// Options configure one bootstrap run.
type Options struct {
	// Cluster is the loaded, defaulted and validated spec.
	Cluster *v1alpha1.Cluster
	// AcceptNewHostKeys appends unknown SSH host keys to the known_hosts file (changed keys are
	// always refused).
	AcceptNewHostKeys bool
	// DryRun stops after the plan is printed: nothing on any host and nothing in the state dir changes.
	DryRun bool
	// SkipPhases names phases (or prefixes ending in "/") not to run.
	SkipPhases []string
	// IgnorePreflightErrors names preflight checks (see Checks) whose failures become warnings; "all"
	// ignores every check.
	IgnorePreflightErrors []string
	// WaitTimeout bounds waiting for quorum after start (default 2m).
	WaitTimeout time.Duration
	// Printer receives progress lines.
	Printer *ui.Printer
	// Prompt asks for a key passphrase or the sudo password when the spec names no environment
	// variable for it (nil: no terminal, nothing is asked).
	Prompt provision.Prompter
	// Restore, when set, makes the run a restore of the whole cluster from a snapshot (restore.go)
	// instead of a bootstrap.
	Restore *RestoreOptions
	// RestoreFrom, when set, makes the bootstrap build a NEW cluster whose data comes from a snapshot
	// (disaster recovery onto other hosts): every member must be new (no data, no running cluster);
	// each data dir is seeded with etcdutl snapshot restore before the first start.
	RestoreFrom *RestoreOptions
}

// member is one etcd host: its spec entry and its etcd identity (name, address, URLs).
type member struct {
	etcd.Member
	host      v1alpha1.Host
	peerURL   string
	clientURL string
}

// hostPlan is what will happen on one member.
type hostPlan struct {
	action report.Action
	upload []desiredFile // files whose remote checksum differs
	// download: the etcd binaries are (re)installed from spec.etcd.download (another or no release
	// recorded, or a binary missing or changed)
	download bool
	restart  bool   // etcd must be (re)started after the upload
	id       uint64 // member ID when known
}

// Bootstrapper holds one run's state; it is not reused across runs.
type Bootstrapper struct {
	opt     Options
	spec    *v1alpha1.Cluster
	p       *ui.Printer
	members []member

	mu      sync.Mutex
	dialer  *provision.Dialer // set by preflight
	clients map[string]remote
	facts   map[string]*Facts
	sums    map[string]string // local binary path → sha256

	st       *state.Cluster // cluster.json (in memory only during a dry run when it did not exist)
	creds    *credentials
	live     *liveCluster // nil when no running cluster was found
	recovery *recovery    // set when the state dir was (or, in a dry run, would be) recovered from the members
	plans    map[string]*hostPlan
	started  time.Time

	// Control-plane and LB hosts (front.go, lbinstall.go).
	fronts     []frontHost
	frontFacts map[string]*frontFacts
	frontPlans map[string]*frontPlan
	lbCfg      *lb.Config    // nil without spec.loadBalancer
	lbSecret   lb.AuthSecret // the VRRP secret, when spec.loadBalancer.auth is set
	vipHolder  string        // the LB host holding the VIP after lb/wait

	rs               *restoreRun // a restore run (Options.Restore)
	restoredRevision int64
}

// New prepares a run. It contacts nothing.
func New(opt Options) (*Bootstrapper, error) {
	if opt.Cluster == nil {
		return nil, errors.New("bootstrap: no cluster spec")
	}
	if opt.WaitTimeout == 0 {
		opt.WaitTimeout = 2 * time.Minute
	}
	b := &Bootstrapper{
		opt:     opt,
		spec:    opt.Cluster,
		p:       opt.Printer,
		clients: map[string]remote{},
		facts:   map[string]*Facts{},
		sums:    map[string]string{},
		plans:   map[string]*hostPlan{},

		frontFacts: map[string]*frontFacts{},
		frontPlans: map[string]*frontPlan{},
	}
	ms, err := etcd.MembersFromSpec(b.spec)
	if err != nil {
		return nil, err
	}
	for i, h := range b.spec.EtcdHosts() {
		b.members = append(b.members, member{Member: ms[i], host: h, peerURL: ms[i].PeerURL(), clientURL: ms[i].ClientURL()})
	}
	b.fronts = b.frontHosts()
	for _, r := range []*RestoreOptions{opt.Restore, opt.RestoreFrom} {
		if r == nil {
			continue
		}
		if opt.Restore != nil && opt.RestoreFrom != nil {
			return nil, errors.New("restore and restore-from are exclusive")
		}
		if r.Snapshot == "" || r.SHA256 == "" {
			return nil, errors.New("restore: no verified snapshot")
		}
		if r.BumpRevision == 0 {
			r.BumpRevision = DefaultBumpRevision
		}
		b.rs = &restoreRun{opt: *r, aside: map[string]string{}, newCluster: opt.RestoreFrom != nil}
	}
	return b, nil
}

// Phases returns the ordered phase list (also used for --skip-phases help).
func (b *Bootstrapper) Phases() []phase.Phase {
	if b.rs != nil && !b.rs.newCluster {
		return b.restorePhases()
	}
	phases := []phase.Phase{
		phase.Func{Name: "preflight", Fn: b.preflight},
		phase.Func{Name: "kube/preflight", Fn: b.frontPreflight, Condition: b.anyFront},
		phase.Func{Name: "pki", Fn: b.pki},
		phase.Func{Name: "detect", Fn: b.detect},
		phase.Func{Name: "plan", Fn: b.plan},
		phase.Func{Name: "kube/plan", Fn: b.frontPlanPhase, Condition: b.frontFactsKnown},
		phase.Func{Name: "etcd/install", Fn: b.install, Changes: true, Condition: b.anyUploads},
		phase.Func{Name: "etcd/start", Fn: b.start, Changes: true, Condition: b.anyStarts},
		phase.Func{Name: "etcd/wait", Fn: b.wait, Changes: true},
		phase.Func{Name: "kube/etcd-certs", Fn: b.etcdCerts, Changes: true, Condition: b.anyCertUploads},
		phase.Func{Name: "lb/packages", Fn: b.lbPackages, Changes: true, Condition: b.anyPackages},
		phase.Func{Name: "lb/install", Fn: b.lbInstall, Changes: true, Condition: b.anyLBChanges},
		phase.Func{Name: "lb/wait", Fn: b.lbWait, Changes: true, Condition: b.hasLB},
	}
	if b.rs != nil { // bootstrap --restore-from: seed the data dirs before the first start
		var out []phase.Phase
		for _, ph := range phases {
			switch ph.(phase.Func).Name {
			case "etcd/install": // refused before anything is installed
				out = append(out, phase.Func{Name: "restore/check", Fn: b.seedCheck})
			case "etcd/start":
				out = append(out,
					phase.Func{Name: "restore/ship", Fn: b.restoreShip, Changes: true},
					phase.Func{Name: "restore/seed", Fn: b.seedData, Changes: true})
			case "kube/etcd-certs":
				out = append(out, phase.Func{Name: "restore/verify", Fn: b.restoreVerify, Changes: true})
			}
			out = append(out, ph)
		}
		return out
	}
	return phases
}

// Run executes the phases and returns the summary. The summary is returned (partially filled) even
// when err is not nil.
func (b *Bootstrapper) Run(ctx context.Context) (*report.Cluster, error) {
	b.started = time.Now()
	defer b.closeClients()
	r := &phase.Runner{Phases: b.Phases(), Skip: b.opt.SkipPhases, DryRun: b.opt.DryRun, Reporter: b.p}
	err := r.Run(ctx)
	return b.result(), err
}

func (b *Bootstrapper) closeClients() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.clients {
		c.Close()
	}
	if b.dialer != nil {
		b.dialer.Close()
	}
}

// remote is what bootstrap uses of a host's SSH connection (a *provision.Client; tests use fakes).
type remote interface {
	Run(ctx context.Context, step, command string, opts ...provision.RunOption) (provision.Result, error)
	Upload(ctx context.Context, step string, files []provision.File) error
	Commands() int
	Close() error
}

var _ remote = (*provision.Client)(nil)

func (b *Bootstrapper) client(name string) remote {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.clients[name]
}

// forEach runs fn on every member with the spec's concurrency cap; errors are aggregated per host.
func (b *Bootstrapper) forEach(ctx context.Context, fn func(ctx context.Context, m member) error) error {
	return provision.ForEach(ctx, b.members, b.spec.Spec.SSH.MaxParallel,
		func(m member) string { return m.Name }, fn)
}

// stepCtx bounds one remote step by spec.ssh.commandTimeout.
func (b *Bootstrapper) stepCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, b.spec.Spec.SSH.CommandTimeout.Duration)
}

// loadOrNewState reads cluster.json; when it is missing it recovers it from the members if they
// carry this cluster (recoverState), or makes a new record with a fresh cluster token.
func (b *Bootstrapper) loadOrNewState(ctx context.Context) error {
	st, err := state.Load(b.spec.Spec.StateDir)
	if err != nil {
		return err
	}
	if st != nil && st.Name != b.spec.Metadata.Name {
		return fmt.Errorf("state dir %s belongs to cluster %q, not %q: point spec.stateDir at this cluster's own directory",
			b.spec.Spec.StateDir, st.Name, b.spec.Metadata.Name)
	}
	if st == nil {
		if b.carriesCluster() != "" {
			return b.recoverState(ctx)
		}
		tok := make([]byte, 8)
		if _, err := rand.Read(tok); err != nil {
			return fmt.Errorf("generating cluster token: %w", err)
		}
		st = &state.Cluster{Name: b.spec.Metadata.Name, Token: b.spec.Metadata.Name + "-" + hex.EncodeToString(tok), Members: map[string]*state.Member{}}
	}
	b.st = st
	return nil
}

// formed reports whether the cluster formed at some point: a cluster ID was recorded, or (state
// recovered from the members, no ID yet) a member holds etcd data.
func (b *Bootstrapper) formed() bool {
	return b.st.ClusterID != "" || (b.recovery != nil && b.recovery.anyData)
}

// foundingCluster is the --initial-cluster of the founding members: every etcd host in the spec.
func (b *Bootstrapper) foundingCluster() string {
	ms := make([]etcd.Member, len(b.members))
	for i, m := range b.members {
		ms[i] = m.Member
	}
	return etcd.InitialCluster(ms)
}

func (b *Bootstrapper) anyUploads() bool {
	for name, p := range b.plans {
		if len(p.upload) > 0 || p.download || (b.facts[name] != nil && len(b.facts[name].Stale) > 0) {
			return true
		}
	}
	return false
}

func (b *Bootstrapper) anyStarts() bool {
	for _, p := range b.plans {
		if p.restart || p.action == report.ActionJoin || p.action == report.ActionCreate || p.action == report.ActionResume || p.action == report.ActionStart {
			return true
		}
	}
	return false
}

func (b *Bootstrapper) result() *report.Cluster {
	r := &report.Cluster{Cluster: b.spec.Metadata.Name, DryRun: b.opt.DryRun, Duration: time.Since(b.started).Round(time.Millisecond).String()}
	if b.st != nil {
		r.ClusterID = b.st.ClusterID
	}
	for _, m := range b.members {
		mr := report.Member{Name: m.Name, Zone: m.host.Zone, Address: m.Address.String()}
		if p := b.plans[m.Name]; p != nil {
			mr.Action = p.action
			for _, f := range p.upload {
				mr.Changes = append(mr.Changes, f.Path)
			}
			if p.download {
				mr.Changes = append(mr.Changes, b.remoteBinaries()...)
			}
			sort.Strings(mr.Changes)
		}
		if b.st != nil && b.st.Members[m.Name] != nil {
			mr.ID = b.st.Members[m.Name].ID
		}
		if c := b.client(m.Name); c != nil {
			mr.Commands = c.Commands()
		}
		r.Members = append(r.Members, mr)
	}
	r.RestoredRevision = b.restoredRevision
	if b.lbCfg != nil {
		r.VIP, r.VIPHolder = b.lbCfg.VIP.Addr().String(), b.vipHolder
	}
	for _, h := range b.fronts {
		hr := report.Host{Name: h.host.Name, Zone: h.host.Zone, Address: h.addr.String(), Action: "unchanged"}
		for _, role := range h.host.Roles {
			hr.Roles = append(hr.Roles, string(role))
		}
		if p := b.frontPlans[h.host.Name]; p != nil {
			hr.Changes = p.describe()
		}
		if len(hr.Changes) > 0 {
			hr.Action = "changed"
		}
		if c := b.client(h.host.Name); c != nil {
			hr.Commands = c.Commands()
		}
		r.Hosts = append(r.Hosts, hr)
	}
	return r
}
