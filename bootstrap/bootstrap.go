// Package bootstrap implements `hactl bootstrap` and `hactl plan`: it composes the phase groups —
// etcd (etcdphases), the kube front and load balancer (frontphases), and, for --restore-from, the
// seed (restore) — into one ordered phase list over one shared run context (runctx), runs it, and
// reports what each member and host got (report.Cluster).
package bootstrap

import (
	"context"
	"errors"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/bootstrap/etcdphases"
	"github.com/hactl/hactl/bootstrap/frontphases"
	"github.com/hactl/hactl/bootstrap/kubephases"
	"github.com/hactl/hactl/bootstrap/restore"
	"github.com/hactl/hactl/bootstrap/runctx"
	"github.com/hactl/hactl/internal/sumcache"
	"github.com/hactl/hactl/phase"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/report"
	"github.com/hactl/hactl/ui"
)

// OverridesFlag is bootstrap's and plan's flag for Options.AllowForeignOverrides.
const OverridesFlag = "--allow-foreign-overrides"

// Checks lists every preflight check name, for --ignore-preflight-errors.
var Checks = append(append([]string{}, etcdphases.Checks...), kubephases.Checks...)

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
	// AllowForeignOverrides keeps going on hosts where a drop-in, environment file or unit file hactl
	// does not own overrides a unit it manages (etcd, HAProxy, Keepalived, kubelet, containerd): each
	// is a warning instead of a *provision.ForeignOverridesError at preflight (runctx.Run).
	AllowForeignOverrides bool
	// WaitTimeout bounds waiting for quorum after start (default 2m).
	WaitTimeout time.Duration
	// ReplaceLost names etcd members whose data dir was lost: removed and added back as new
	// learners on the same hosts (etcdphases.Options.ReplaceLost).
	ReplaceLost []string
	// Printer receives progress lines.
	Printer *ui.Printer
	// Prompt asks for a key passphrase or the sudo password when the spec names no environment
	// variable for it (nil: no terminal, nothing is asked).
	Prompt provision.Prompter
	// SumCache keeps the local etcd binaries' sha256 between runs (nil: hashed every run).
	SumCache *sumcache.Cache
	// RestoreFrom, when set, makes the bootstrap build a NEW cluster whose data comes from a snapshot
	// (disaster recovery onto other hosts): every member must be new (no data, no running cluster);
	// each data dir is seeded with etcdutl snapshot restore before the first start.
	RestoreFrom *restore.Options
}

// Bootstrapper is one run: its groups and their phase list. It is not reused across runs.
type Bootstrapper struct {
	opt    Options
	run    *runctx.Run
	etcd   *etcdphases.Group
	front  *frontphases.Group
	kube   *kubephases.Group
	seed   *restore.Group
	phases phase.List
}

// New prepares a run. It contacts nothing. Errors: no spec, the spec's members cannot be built,
// RestoreFrom names no verified snapshot.
func New(opt Options) (*Bootstrapper, error) {
	if opt.Cluster == nil {
		return nil, errors.New("bootstrap: no cluster spec")
	}
	b := &Bootstrapper{opt: opt}
	b.run = runctx.New(opt.Cluster, opt.Printer, opt.DryRun, provision.SpecOptions{AcceptNewHostKeys: opt.AcceptNewHostKeys, Prompt: opt.Prompt, OnNewHostKey: opt.Printer.NewHostKey})
	b.run.AllowForeignOverrides, b.run.OverridesFlag = opt.AllowForeignOverrides, OverridesFlag
	var err error
	if b.etcd, err = etcdphases.New(b.run, etcdphases.Options{IgnorePreflightErrors: opt.IgnorePreflightErrors, WaitTimeout: opt.WaitTimeout, SumCache: opt.SumCache, ReplaceLost: opt.ReplaceLost}); err != nil {
		return nil, err
	}
	b.front = frontphases.New(b.run)
	if b.kube, err = kubephases.New(b.run, kubephases.Options{IgnorePreflightErrors: opt.IgnorePreflightErrors, SumCache: opt.SumCache}); err != nil {
		return nil, err
	}
	if b.phases, err = phaseList(b.etcd.Phases(), b.front.Phases(), b.kube.Phases()); err != nil {
		return nil, err
	}
	if opt.RestoreFrom != nil {
		if b.seed, err = restore.NewGroup(b.etcd, *opt.RestoreFrom, true); err != nil {
			return nil, err
		}
		if b.phases, err = b.seed.Splice(b.phases); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// phaseList interleaves the etcd, front and Kubernetes groups: lb/preflight and kube/preflight right
// after preflight, lb/plan and kube/plan after plan (so a dry run shows every plan), kube/binaries
// next (the Kubernetes binaries' checksums and versions are proven before anything is installed on
// any host), lb/packages and lb/install before etcd/install, kube/etcd-certs and lb/wait after
// etcd/wait, then the rest of the Kubernetes group (runtime, kubelet, images, init, join, cni,
// wait). The load balancer goes in first because nothing in it depends on etcd (its backends are
// the kube-apiservers, which come later), while Keepalived's first election takes a fixed time (a
// new BACKUP claims the VIP only after the Master_Down_Interval, 3 × advert_int plus a skew: RFC
// 3768 §6.1): that time runs while etcd is installed and started instead of after it, and lb/wait
// only confirms the holder.
func phaseList(etcd, front, kube phase.List) (phase.List, error) {
	pick := func(l phase.List, titles ...string) phase.List {
		if l == nil {
			return nil
		}
		out, err := l.Pick(titles...)
		if err != nil {
			panic(err) // the groups' own titles: a programming error
		}
		return out
	}
	pre := append(pick(front, frontphases.PhasePreflight), pick(kube, kubephases.PhasePreflight)...)
	plan := append(pick(front, frontphases.PhasePlan), pick(kube, kubephases.PhasePlan, kubephases.PhaseBinaries)...)
	lb := pick(front, frontphases.PhasePackages, frontphases.PhaseInstall)
	rest := append(pick(front, frontphases.PhaseEtcdCerts, frontphases.PhaseWait), pick(kube, kubephases.PhaseRuntime, kubephases.PhaseKubelet,
		kubephases.PhaseImages, kubephases.PhaseInit, kubephases.PhaseJoin, kubephases.PhaseCNI, kubephases.PhaseWait)...)
	l, err := etcd.InsertAfter(etcdphases.PhasePreflight, pre...)
	if err != nil {
		return nil, err
	}
	if l, err = l.InsertAfter(etcdphases.PhasePlan, plan...); err != nil {
		return nil, err
	}
	if l, err = l.InsertBefore(etcdphases.PhaseInstall, lb...); err != nil {
		return nil, err
	}
	return l.InsertAfter(etcdphases.PhaseWait, rest...)
}

// Phases returns the ordered phase list (also used for --skip-phases help).
func (b *Bootstrapper) Phases() []phase.Phase { return b.phases }

// Run executes the phases and returns the summary. The summary is returned (partially filled) even
// when err is not nil.
func (b *Bootstrapper) Run(ctx context.Context) (*report.Cluster, error) {
	started := time.Now()
	defer b.run.Close()
	r := &phase.Runner{Phases: b.phases, Skip: b.opt.SkipPhases, DryRun: b.opt.DryRun, Reporter: b.opt.Printer}
	err := r.Run(ctx)
	res := &report.Cluster{Cluster: b.opt.Cluster.Metadata.Name, ClusterID: b.etcd.ClusterID(), DryRun: b.opt.DryRun,
		Duration: time.Since(started).Round(time.Millisecond).String(), Members: b.etcd.Report(), Hosts: mergeHosts(b.opt.Cluster, b.front.Report(), b.kube.Report())}
	res.VIP, res.VIPHolder = b.front.VIP()
	res.EtcdClusterVersion = b.etcd.ClusterVersion()
	if b.seed != nil {
		res.RestoredRevision = b.seed.Revision()
	}
	return res, err
}

// mergeHosts joins the front and Kubernetes groups' host reports (a control-plane host is in
// both), in spec order.
func mergeHosts(c *v1alpha1.Cluster, groups ...[]report.Host) []report.Host {
	byName := map[string]*report.Host{}
	for _, g := range groups {
		for _, h := range g {
			if have := byName[h.Name]; have != nil {
				have.Changes = append(have.Changes, h.Changes...)
				if h.Action == "changed" {
					have.Action = "changed"
				}
				continue
			}
			hc := h
			byName[h.Name] = &hc
		}
	}
	var out []report.Host
	for _, h := range c.Spec.Hosts {
		if r := byName[h.Name]; r != nil {
			out = append(out, *r)
		}
	}
	return out
}
