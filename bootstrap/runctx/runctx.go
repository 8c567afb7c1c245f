// Package runctx is the small context the phase groups of one bootstrap or restore run share: the
// spec, the printer, the dry-run flag, and the SSH side — one connection per host, opened once,
// and one facts command per host that gathers what every group asked for (provision.FactsRequest).
// It holds no decisions: those live in the groups (etcdphases, frontphases, restore).
package runctx

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/lb"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/ui"
)

// DesiredFile is one file a host must have, as the groups plan it.
type DesiredFile struct {
	Path  string
	Mode  fs.FileMode
	Local string // local file to stream (binaries); empty when Data is set
	Data  []byte
	Sum   string // sha256 hex; empty when not known yet (dry run before the PKI exists)
	Note  string // why it changes, for the plan
}

// Sum is the sha256 of b in hex (DesiredFile.Sum).
func Sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// Remote is what phases use of a host's SSH connection (a *provision.Client; tests use fakes).
type Remote interface {
	provision.Conn
	Upload(ctx context.Context, step string, files []provision.File) error
	Commands() int
}

var _ Remote = (*provision.Client)(nil)

// Run is one run's shared context. It is not reused across runs. Build it with New; Close it at
// the end (the connections close).
type Run struct {
	Spec    *v1alpha1.Cluster
	Printer *ui.Printer
	// DryRun: nothing on any host and nothing in the state dir changes.
	DryRun bool
	// SSH says how hosts are reached (host keys, prompt for secrets).
	SSH provision.SpecOptions
	// AllowForeignOverrides keeps going on a host where files hactl does not own override a unit it
	// manages (Manage): each is a warning instead of a *provision.ForeignOverridesError.
	AllowForeignOverrides bool
	// OverridesFlag is the command's flag that sets AllowForeignOverrides, named in the refusal (""
	// when the command has none: the refusal then only says to remove the files).
	OverridesFlag string

	mu      sync.Mutex
	dialer  *provision.Dialer
	clients *provision.Pool[Remote] // dialled with dialer, made at the first Connect that dials
	facts   map[string]*provision.Facts
	needs   []need                                // in the order groups asked
	owned   map[string][]provision.OwnedUnitFiles // by host: the units groups manage (Manage)
	foreign map[string][]provision.Override       // by host: what Connect found
}

type need struct {
	host v1alpha1.Host
	req  provision.FactsRequest
}

// New returns the context of a run over spec. It contacts nothing.
func New(spec *v1alpha1.Cluster, p *ui.Printer, dryRun bool, ssh provision.SpecOptions) *Run {
	r := &Run{Spec: spec, Printer: p, DryRun: dryRun, SSH: ssh, facts: map[string]*provision.Facts{}, owned: map[string][]provision.OwnedUnitFiles{},
		foreign: map[string][]provision.Override{}}
	r.clients = provision.NewPoolFunc(r.dialTarget)
	return r
}

// Need registers that a group needs the facts req from host h. Connect gathers every host's
// requests merged, in one command per host.
func (r *Run) Need(h v1alpha1.Host, req provision.FactsRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.needs = append(r.needs, need{host: h, req: req})
}

// Manage registers that a group manages units on host h, each with the files hactl (or kubeadm)
// writes for it: the facts command reports what systemd reads for them (provision.FactsRequest's
// UnitFiles), and Connect refuses the host when anything else overrides them (see
// AllowForeignOverrides).
func (r *Run) Manage(h v1alpha1.Host, units ...provision.OwnedUnitFiles) {
	names := make([]string, len(units))
	for i, u := range units {
		names[i] = u.Unit
	}
	r.Need(h, provision.FactsRequest{UnitFiles: names})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.owned[h.Name] = append(r.owned[h.Name], units...)
}

// ForeignOverrides returns what overrides host's managed units (nil before Connect, or none).
func (r *Run) ForeignOverrides(host string) []provision.Override {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.foreign[host]
}

// checkOverrides compares host's unit files in f with the files the groups own (Manage): the result is a
// *provision.ForeignOverridesError unless the run is a dry run or AllowForeignOverrides, which print
// each override as a warning instead (plan shows them, naming host, file and setting).
func (r *Run) checkOverrides(host string, f *provision.Facts) error {
	r.mu.Lock()
	var found []provision.Override
	for _, own := range r.owned[host] {
		found = append(found, provision.Overrides(own, f.UnitFiles[own.Unit])...)
	}
	r.foreign[host] = found
	r.mu.Unlock()
	switch {
	case len(found) == 0:
		return nil
	case r.AllowForeignOverrides:
		for _, o := range found {
			r.Printer.Warnf("%s: %s: kept (%s)", host, o, r.OverridesFlag)
		}
		return nil
	case r.DryRun:
		for _, o := range found {
			r.Printer.Warnf("%s: %s: it overrides what hactl renders; bootstrap refuses this host until the file is removed (or %s)", host, o, r.OverridesFlag)
		}
		return nil
	}
	return &provision.ForeignOverridesError{Host: host, Overrides: found, Flag: r.OverridesFlag}
}

// FactsStep names the facts command in errors and logs.
const FactsStep = "preflight/facts"

// Connect opens the SSH connection of every host a group needs (Need), with the spec's concurrency
// cap, gathers each host's facts with one command, then calls then(ctx, host) for that host (nil:
// nothing more). Hosts already connected (SetClient) are not dialled again; hosts whose facts are
// already known (SetFacts) are not asked again. Errors (the connection's, the command's, then's)
// are aggregated per host (provision.ForEach); the facts of the hosts that answered are kept.
func (r *Run) Connect(ctx context.Context, then func(ctx context.Context, host string) error) error {
	r.mu.Lock()
	var hosts []v1alpha1.Host
	reqs := map[string]provision.FactsRequest{}
	for _, n := range r.needs {
		if _, ok := reqs[n.host.Name]; !ok {
			hosts = append(hosts, n.host)
		}
		reqs[n.host.Name] = reqs[n.host.Name].Merge(n.req)
		if n.host.PrivateAddress != "" {
			reqs[n.host.Name] = reqs[n.host.Name].Merge(provision.FactsRequest{Addrs: true})
		}
	}
	dial := false
	for _, h := range hosts {
		_, ok := r.clients.Get(h.Name)
		dial = dial || !ok
	}
	r.mu.Unlock()
	if dial {
		if err := r.ensureDialer(); err != nil {
			return err
		}
	}
	return provision.ForEach(ctx, hosts, r.Spec.Spec.SSH.MaxParallel, func(h v1alpha1.Host) string { return h.Name },
		func(ctx context.Context, h v1alpha1.Host) error {
			c, err := r.dial(ctx, h)
			if err != nil {
				return err
			}
			if r.Facts(h.Name) == nil {
				sctx, cancel := r.StepCtx(ctx)
				start := time.Now()
				f, err := provision.GatherFacts(sctx, c, FactsStep, reqs[h.Name])
				cancel()
				r.Printer.Debugf("%s: [%s] gathered facts (%s, err=%v)", h.Name, FactsStep, time.Since(start).Round(time.Millisecond), err)
				if err != nil {
					return err
				}
				r.SetFacts(h.Name, f)
				if err := checkPrivateAddress(h, f); err != nil {
					return err
				}
				if err := r.checkOverrides(h.Name, f); err != nil {
					return err
				}
			}
			if then == nil {
				return nil
			}
			return then(ctx, h.Name)
		})
}

func (r *Run) ensureDialer() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dialer != nil {
		return nil
	}
	d, err := provision.FromSpec(r.Spec, r.SSH)
	if err != nil {
		return fmt.Errorf("ssh: %w", err)
	}
	r.dialer = d
	return nil
}

// dial returns h's connection, opening it when there is none (the pool's, dialled by dialTarget).
func (r *Run) dial(ctx context.Context, h v1alpha1.Host) (Remote, error) {
	return r.clients.Client(ctx, provision.TargetOf(h))
}

// dialTarget opens t's connection with the run's dialer (ensureDialer made it) and logs it.
func (r *Run) dialTarget(ctx context.Context, t provision.Target) (Remote, error) {
	r.mu.Lock()
	d := r.dialer
	r.mu.Unlock()
	start := time.Now()
	c, err := d.Dial(ctx, t)
	r.Printer.Debugf("%s: [connect] ssh connection and privilege probe (%s, err=%v)", t.Name, time.Since(start).Round(time.Millisecond), err)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Client returns host's connection (nil before Connect, or when it failed).
func (r *Run) Client(host string) Remote {
	c, _ := r.clients.Get(host)
	return c
}

// SetClient sets host's connection (tests set fakes).
func (r *Run) SetClient(host string, c Remote) { r.clients.Set(host, c) }

// Facts returns host's gathered facts (nil before Connect, or when it failed).
func (r *Run) Facts(host string) *provision.Facts {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.facts[host]
}

// SetFacts sets host's facts (Connect; tests).
func (r *Run) SetFacts(host string, f *provision.Facts) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.facts[host] = f
}

// Commands returns the number of SSH commands sent to host so far (0 without a connection).
func (r *Run) Commands(host string) int {
	if c := r.Client(host); c != nil {
		return c.Commands()
	}
	return 0
}

// StepCtx bounds one remote step by spec.ssh.commandTimeout.
func (r *Run) StepCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.Spec.Spec.SSH.CommandTimeout.Duration)
}

// Exec runs one remote command on host and logs it (first line, duration, error) in the debug log.
// The caller bounds ctx (StepCtx). Errors: the connection's (*provision.CommandError), or an error
// naming the host when it has no connection.
func (r *Run) Exec(ctx context.Context, host, step, cmd string, opts ...provision.RunOption) (provision.Result, error) {
	c := r.Client(host)
	if c == nil {
		return provision.Result{}, fmt.Errorf("host %s: step %s: not connected", host, step)
	}
	start := time.Now()
	res, err := c.Run(ctx, step, cmd, opts...)
	first, _, _ := strings.Cut(cmd, "\n")
	if len(first) > 120 {
		first = first[:120] + "..."
	}
	r.Printer.Debugf("%s: [%s] %s (%s, err=%v)", host, step, first, time.Since(start).Round(time.Millisecond), err)
	return res, err
}

// ExplainUnit returns err, a failed start, restart or reload of units on host, with the last journal
// lines of the first of them that has any (provision.ExplainUnitFailure on host's connection): the
// cause in the service's own words. ctx must be the caller's, not a step context that has run out.
// err unchanged when nil, without a connection, or when no journal could be read.
func (r *Run) ExplainUnit(ctx context.Context, host, step string, err error, units ...string) error {
	c := r.Client(host)
	if err == nil || c == nil {
		return err
	}
	return provision.ExplainUnitFailure(ctx, c, step, err, units...)
}

// Upload uploads files to host atomically (provision.Client.Upload). Errors as Exec's.
func (r *Run) Upload(ctx context.Context, host, step string, files []provision.File) error {
	c := r.Client(host)
	if c == nil {
		return fmt.Errorf("host %s: step %s: not connected", host, step)
	}
	return c.Upload(ctx, step, files)
}

// EtcdDial routes etcd clients through the bastion when the spec has one (members may only be
// reachable from it; TLS with the members stays end to end); nil otherwise.
func (r *Run) EtcdDial() etcd.Option {
	r.mu.Lock()
	d := r.dialer
	r.mu.Unlock()
	if d == nil || !d.HasBastion() {
		return nil
	}
	return etcd.WithDialer(d.DialTCP)
}

// Close closes every connection and the dialer.
func (r *Run) Close() {
	_ = r.clients.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dialer != nil {
		r.dialer.Close()
	}
}

// PrivateAddressError is a host whose spec.hosts[*].privateAddress is none of its interfaces'
// addresses (found by the facts command, `ip -json address show`): etcd's peers and kubelet would
// use an address the host does not have.
type PrivateAddressError struct {
	Host    string
	Address string
	// Has are the host's addresses, e.g. "eth0 172.28.0.11/24".
	Has []string
}

func (e *PrivateAddressError) Error() string {
	return fmt.Sprintf("privateAddress %s (spec.hosts, host %s) is on no interface of this host (it has %s): give the address the host has on the cluster network, or leave privateAddress out",
		e.Address, e.Host, strings.Join(e.Has, ", "))
}

// checkPrivateAddress returns a *PrivateAddressError when h has a privateAddress that f's
// interface addresses do not hold.
func checkPrivateAddress(h v1alpha1.Host, f *provision.Facts) error {
	if h.PrivateAddress == "" {
		return nil
	}
	want, err := netip.ParseAddr(h.PrivateAddress)
	if err != nil {
		return fmt.Errorf("privateAddress: %w", err)
	}
	if f.AddrsJSON == nil {
		return fmt.Errorf("privateAddress %s: the host's addresses could not be read (`ip -json address show` gave nothing: is iproute2 installed?)", want)
	}
	addrs, err := lb.ParseIPAddrJSON(f.AddrsJSON)
	if err != nil {
		return fmt.Errorf("privateAddress: %w", err)
	}
	var has []string
	for _, a := range addrs {
		if a.Prefix.Addr().Unmap() == want.Unmap() {
			return nil
		}
		if !a.Prefix.Addr().IsLoopback() && !a.Prefix.Addr().IsLinkLocalUnicast() {
			has = append(has, a.Interface+" "+a.Prefix.String())
		}
	}
	return &PrivateAddressError{Host: h.Name, Address: h.PrivateAddress, Has: has}
}
