package join

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/go-multierror"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/etcd/membership"
	"github.com/hactl/hactl/internal/exitcode"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/state"
	"github.com/hactl/hactl/ui"
)

// ReplaceOptions are one `hactl etcd member replace OLD --with NEW` on the cluster of a spec.
type ReplaceOptions struct {
	// Spec is the loaded spec (before the replacement); Old and New the members' host names.
	Spec     *v1alpha1.Cluster
	Old, New string
	// Force, DryRun and Printer are membership.ReplaceOptions'.
	Force, DryRun bool
	Printer       *ui.Printer
	// NewConfirm makes the question asked once with the whole plan (nil function: no question);
	// it is called after the spec's checks, before any host is contacted, and its error returned.
	// Nil NewConfirm: no question.
	NewConfirm func() (func(plan string) (bool, error), error)
	// Prompt answers SSH's questions; AcceptNewHostKeys appends unknown host keys (NEW's).
	Prompt            provision.Prompter
	AcceptNewHostKeys bool
	// WaitTimeout bounds the learner's catch-up and the members' health.
	WaitTimeout time.Duration
	// AlsoOnHost is membership.SSHRetirer's: run on OLD's host after etcd is retired there.
	AlsoOnHost func(ctx context.Context, member string, cli *provision.Client) error
}

// Replace is membership.Replace on the cluster of o.Spec: the spec after the replacement (Spec),
// NEW refused when the state dir records it as a member, NEW's peer URL, the members reached through
// the bastion at the URLs of the spec after the replacement, NEW joined by a Joiner, OLD retired
// over SSH, and a removed OLD's record then dropped from the state dir (membership.ForgetRemoved).
// It returns membership.Replace's result (nil when nothing was tried).
//
// Errors: Spec's (*SpecError); *membership.AlreadyMemberError; the spec's members that cannot be
// derived → *exitcode.UsageError; NewConfirm's; the bastion's or the SSH dialer's, wrapped as
// "ssh: …"; membership.Replace's, with ForgetRemoved's appended (go-multierror).
func Replace(ctx context.Context, o ReplaceOptions) (*membership.ReplaceResult, error) {
	c, p := o.Spec, o.Printer
	after, err := Spec(c, o.Old, o.New)
	if err != nil {
		return nil, err
	}
	if err := newHostIsNoMember(c, o.New); err != nil {
		return nil, err
	}
	members, err := etcd.MembersFromSpec(after)
	if err != nil {
		return nil, &exitcode.UsageError{Err: err}
	}
	var peerURL string
	for _, m := range members {
		if m.Name == o.New {
			peerURL = m.PeerURL()
		}
	}
	var confirm func(string) (bool, error)
	if o.NewConfirm != nil {
		if confirm, err = o.NewConfirm(); err != nil {
			return nil, err
		}
	}
	// The cluster after the replacement: OLD is probed at the client URLs it advertises.
	cl, closeTunnel, err := membership.OpenFromSpec(c, after, o.Prompt)
	if err != nil {
		return nil, err
	}
	defer closeTunnel()
	sshOpts := provision.SpecOptions{Prompt: o.Prompt, AcceptNewHostKeys: o.AcceptNewHostKeys, OnNewHostKey: p.NewHostKey}
	d, err := provision.FromSpec(c, sshOpts)
	if err != nil {
		return nil, fmt.Errorf("ssh: %w", err)
	}
	defer d.Close()
	res, err := membership.Replace(ctx, membership.ReplaceOptions{
		Cluster: cl, Old: o.Old, New: o.New, NewPeerURL: peerURL, Force: o.Force, DryRun: o.DryRun, Confirm: confirm,
		Joiner:  &Joiner{Spec: after, Printer: p, SSH: sshOpts, WaitTimeout: o.WaitTimeout},
		Host:    membership.SSHRetirer{Spec: c, Dialer: d, AlsoOnHost: o.AlsoOnHost},
		Printer: p,
	})
	if res != nil {
		if ferr := membership.ForgetRemoved(c, res.Removal); ferr != nil {
			err = multierror.Append(err, ferr).ErrorOrNil()
		}
	}
	return res, err
}

// newHostIsNoMember refuses, from the state dir alone, a NEW that hactl recorded as a member.
func newHostIsNoMember(c *v1alpha1.Cluster, host string) error {
	st, err := state.Load(c.Spec.StateDir)
	if err != nil || st == nil {
		return nil // the cluster's own answer decides (membership.AlreadyMemberError)
	}
	for _, h := range c.Spec.Hosts {
		if h.Name == host && h.HasRole(v1alpha1.RoleEtcd) {
			if rec := st.Members[host]; rec != nil && rec.ID != "" {
				return &membership.AlreadyMemberError{Host: host, ID: rec.ID, PeerURL: rec.PeerURL}
			}
		}
	}
	return nil
}
