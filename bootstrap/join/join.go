// Package join adds one host to a running etcd cluster through the etcd phases of `hactl bootstrap`
// (preflight, pki, detect, plan, etcd/install, etcd/start's learner join, etcd/wait), refusing to
// change any other member: the membership.Joiner behind `hactl etcd member replace`. Spec derives
// the spec of the cluster after a replacement, on which the join runs.
package join

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/bootstrap/etcdphases"
	"github.com/hactl/hactl/bootstrap/runctx"
	"github.com/hactl/hactl/internal/sumcache"
	"github.com/hactl/hactl/phase"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/specload"
	"github.com/hactl/hactl/ui"
)

// Joiner implements membership.Joiner on Spec, the spec in which the joining host carries role etcd.
type Joiner struct {
	Spec    *v1alpha1.Cluster
	Printer *ui.Printer
	SSH     provision.SpecOptions
	// WaitTimeout bounds each wait (etcdphases.Options.WaitTimeout; 0: its default).
	WaitTimeout time.Duration
}

// Join runs the etcd phases with etcdphases.Options.JoinOnly = host and returns the member ID the
// state dir recorded. Errors: a phase's (wrapped with its title by the runner), or the ID missing.
func (j *Joiner) Join(ctx context.Context, host string) (uint64, error) {
	run := runctx.New(j.Spec, j.Printer, false, j.SSH)
	defer run.Close()
	g, err := etcdphases.New(run, etcdphases.Options{JoinOnly: host, WaitTimeout: j.WaitTimeout, SumCache: sumcache.Default()})
	if err != nil {
		return 0, err
	}
	runner := &phase.Runner{Phases: g.Phases(), Reporter: j.Printer}
	if err := runner.Run(ctx); err != nil {
		return 0, err
	}
	rec := g.State().Members[host]
	if rec == nil || rec.ID == "" {
		return 0, fmt.Errorf("%s: joined, but the state dir holds no member ID for it", host)
	}
	return strconv.ParseUint(rec.ID, 16, 64)
}

// SpecError is a replacement Spec refuses: the field path and why (exit 2).
type SpecError struct{ Errs field.ErrorList }

func (e *SpecError) Error() string {
	return "the cluster after the replacement breaks the spec's rules: " + e.Errs.ToAggregate().Error()
}

// ExitCode: refused input.
func (e *SpecError) ExitCode() int { return 2 }

// Spec returns the spec of the cluster after replacing member old by one on host newHost. When
// newHost has role etcd in c already (the user edited the spec to the end state first: old without
// the etcd role or without a host entry), that is c itself. Otherwise it is a copy of c in which
// newHost carries role etcd and old does not (old's entry dropped when etcd was its only role),
// validated as a spec file is (the zone topology check included). c is not changed. Errors:
// *SpecError naming the field path: newHost no host of c, the same host, old no etcd host of c
// (newHost without the role), both with role etcd, or a rule the result breaks.
func Spec(c *v1alpha1.Cluster, old, newHost string) (*v1alpha1.Cluster, error) {
	p := field.NewPath("spec", "hosts")
	oi, ni := -1, -1
	for i, h := range c.Spec.Hosts {
		switch h.Name {
		case old:
			oi = i
		case newHost:
			ni = i
		}
	}
	switch {
	case old == newHost:
		return nil, &SpecError{field.ErrorList{field.Invalid(p, newHost, "--with names the member being replaced: name another host of the spec")}}
	case ni < 0:
		return nil, &SpecError{field.ErrorList{field.Invalid(p, newHost, "--with must name a host of the spec: add the new host to spec.hosts (name, address, zone, roles) first")}}
	case c.Spec.Hosts[ni].HasRole(v1alpha1.RoleEtcd):
		// The spec already describes the cluster after the replacement (NEW an etcd host, OLD not).
		if oi >= 0 && c.Spec.Hosts[oi].HasRole(v1alpha1.RoleEtcd) {
			return nil, &SpecError{field.ErrorList{field.Invalid(p.Index(oi).Child("roles"), old, "both OLD and NEW have role etcd: drop OLD's etcd role (or its host entry) so the spec describes the cluster after the replacement, or give NEW no etcd role yet")}}
		}
		out := *c
		return &out, nil
	case oi < 0 || !c.Spec.Hosts[oi].HasRole(v1alpha1.RoleEtcd):
		return nil, &SpecError{field.ErrorList{field.Invalid(p, old, "OLD must be a host of the spec with role etcd (the member's name), unless NEW has the etcd role already")}}
	}
	out := *c
	out.Spec.Hosts = nil
	for i, h := range c.Spec.Hosts {
		h.Roles = append([]v1alpha1.Role(nil), h.Roles...)
		switch i {
		case oi:
			var keep []v1alpha1.Role
			for _, r := range h.Roles {
				if r != v1alpha1.RoleEtcd {
					keep = append(keep, r)
				}
			}
			if len(keep) == 0 {
				continue
			}
			h.Roles = keep
		case ni:
			if !h.HasRole(v1alpha1.RoleEtcd) {
				h.Roles = append(h.Roles, v1alpha1.RoleEtcd)
			}
		}
		out.Spec.Hosts = append(out.Spec.Hosts, h)
	}
	if errs, _ := specload.Validate(&out); len(errs) > 0 {
		return nil, &SpecError{Errs: errs}
	}
	return &out, nil
}
