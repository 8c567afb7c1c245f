package membership

import (
	"context"
	"fmt"
	"slices"

	"github.com/hashicorp/go-multierror"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/internal/bastion"
	"github.com/hactl/hactl/internal/exitcode"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/state"
	"github.com/hactl/hactl/ui"
)

// ShrinkSpecOptions are one `hactl etcd member remove` on the cluster of a spec.
type ShrinkSpecOptions struct {
	// Spec is the loaded spec; Names the members to remove (their hosts' names).
	Spec  *v1alpha1.Cluster
	Names []string
	// Force, DryRun, Confirm and Printer are ShrinkOptions'.
	Force, DryRun bool
	Confirm       func(plan string) (bool, error)
	Printer       *ui.Printer
	// Prompt answers SSH's questions (the bastion, the retired members' hosts).
	Prompt provision.Prompter
	// AlsoOnHost is SSHRetirer's: run on each retired member's host after etcd is retired there.
	AlsoOnHost func(ctx context.Context, member string, cli *provision.Client) error
}

// ShrinkSpec is Shrink on the cluster of o.Spec: the members reached through the bastion
// (OpenFromSpec), the zones and spec.etcd.acceptZoneQuorumLoss from the spec's etcd hosts, the
// removed members that the spec still lists retired over SSH (SSHRetirer), and the removed
// members' records then dropped from the state dir (ForgetRemoved). It returns Shrink's result (nil
// when nothing was tried) and the names the spec still lists as etcd hosts.
//
// Errors: the bastion's or the SSH dialer's, wrapped as "ssh: …"; the spec's members that cannot
// be derived → *exitcode.UsageError; Shrink's, with ForgetRemoved's appended (go-multierror).
func ShrinkSpec(ctx context.Context, o ShrinkSpecOptions) (res *ShrinkResult, inSpec []string, err error) {
	c := o.Spec
	cl, closeTunnel, err := OpenFromSpec(c, c, o.Prompt)
	if err != nil {
		return nil, nil, err
	}
	defer closeTunnel()
	so := ShrinkOptions{Cluster: cl, Names: o.Names, Zones: map[string]string{}, AcceptZoneQuorumLoss: c.Spec.Etcd.AcceptZoneQuorumLoss,
		Force: o.Force, DryRun: o.DryRun, Confirm: o.Confirm, Printer: o.Printer}
	for _, h := range c.Spec.Hosts {
		if h.HasRole(v1alpha1.RoleEtcd) {
			so.Zones[h.Name] = h.Zone
			if slices.Contains(o.Names, h.Name) {
				inSpec = append(inSpec, h.Name)
			}
		}
	}
	if len(inSpec) > 0 {
		d, err := provision.FromSpec(c, provision.SpecOptions{Prompt: o.Prompt})
		if err != nil {
			return nil, inSpec, fmt.Errorf("ssh: %w", err)
		}
		defer d.Close()
		so.Host = SSHRetirer{Spec: c, Dialer: d, AlsoOnHost: o.AlsoOnHost}
	}
	res, err = Shrink(ctx, so)
	if res != nil {
		if ferr := ForgetRemoved(c, res.Removals...); ferr != nil {
			err = multierror.Append(err, ferr).ErrorOrNil()
		}
	}
	return res, inSpec, err
}

// ForgetRemoved drops the removed members' records (removals that did remove their member; nil
// ones are skipped) from c's state dir (state.ForgetRemoved), so that their hosts join later as new
// members (hactl etcd member replace --with, hactl bootstrap). Errors: the state dir's, wrapped
// with what stays.
func ForgetRemoved(c *v1alpha1.Cluster, removals ...*RemoveResult) error {
	removed := map[string]string{}
	for _, r := range removals {
		if r != nil && r.Removed {
			removed[r.Member] = r.ID
		}
	}
	if len(removed) == 0 {
		return nil
	}
	if err := state.ForgetRemoved(c.Spec.StateDir, removed); err != nil {
		return fmt.Errorf("state dir %s: the removed members' records stay: %w", c.Spec.StateDir, err)
	}
	return nil
}

// OpenFromSpec reaches the members of the spec members (ClusterFromSpec) through the bastion of the
// spec c (bastion.Open, SSH's questions answered with prompt; without a bastion, directly): usually
// one spec, but a member replace reaches the cluster after the replacement through the spec's
// bastion. closeFn closes the tunnel (nil on an error).
//
// Errors: the bastion's, wrapped as "ssh: …"; members' members that cannot be derived →
// *exitcode.UsageError (exit 2).
func OpenFromSpec(c, members *v1alpha1.Cluster, prompt provision.Prompter) (cl Cluster, closeFn func(), err error) {
	tunnel, err := bastion.Open(c, prompt)
	if err != nil {
		return cl, nil, fmt.Errorf("ssh: %w", err)
	}
	if cl, err = ClusterFromSpec(members, tunnel.Etcd()); err != nil {
		tunnel.Close()
		return cl, nil, &exitcode.UsageError{Err: err}
	}
	return cl, tunnel.Close, nil
}
