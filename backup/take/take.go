// Package take implements `hactl backup now`: it picks the member to snapshot (the leader, or the
// one asked for), asks it over TLS with hactl's client certificate (through the spec's bastion when
// there is one), streams its snapshot into the object store with backup.Take, and applies a
// retention policy afterwards when one is given. It is a sub-package so that backup itself needs
// neither etcd's client setup nor SSH.
package take

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/internal/bastion"
	"github.com/hactl/hactl/internal/exitcode"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/specload"
	"github.com/hactl/hactl/ui"
)

// Options configure Run.
type Options struct {
	// Cluster is the loaded spec (spec.backup set); Store its object store (backup.OpenStore).
	Cluster *v1alpha1.Cluster
	Store   backup.Store
	// Member snapshots this etcd host (by name) instead of the leader.
	Member string
	// OnlyIfLeader takes no snapshot (and is no error) when the chosen member is not the leader.
	OnlyIfLeader bool
	// Slot is the scheduled slot (backup.TimeFormat) naming the object, "" for an unscheduled run.
	Slot string
	// Timeout (> 0) bounds connecting to each member and each status request.
	Timeout time.Duration
	// Prune, when not zero, is applied after a stored snapshot (no confirmation: the policy was given
	// explicitly), with `backup prune`'s one-hour grace for incomplete uploads.
	Prune backup.Policy
	// Prompt asks for a key passphrase or the sudo password of the bastion; nil asks nothing.
	Prompt provision.Prompter
	// Printer gets the progress lines; required.
	Printer *ui.Printer
	// HactlVersion is recorded in the snapshot's metadata.
	HactlVersion string
}

// Report is `hactl backup now -o json`.
type Report struct {
	// Skipped says why no snapshot was taken (--only-if-leader on a follower); then Snapshot is nil.
	Skipped  string           `json:"skipped,omitempty"`
	Snapshot *backup.Metadata `json:"snapshot,omitempty"`
}

// Print writes the stored snapshot as a one-row table (key, revision, member, DB size, stored size,
// stored sha256); nothing for a skipped run (the progress said why).
func (r *Report) Print(w io.Writer) {
	if m := r.Snapshot; m != nil {
		ui.Table(w, []string{"KEY", "REVISION", "MEMBER", "DB SIZE", "STORED", "SHA256"}, [][]string{{
			m.Key, fmt.Sprint(m.Revision), m.MemberName, fmt.Sprint(m.DBSizeBytes), fmt.Sprint(m.StoredSizeBytes), m.StoredSHA256,
		}})
	}
}

// Run asks every member for its status, chooses the leader (or o.Member), and streams its snapshot
// into o.Store (backup.Take); with o.OnlyIfLeader and a chosen member that is not the leader it
// returns a report saying so and takes nothing. With o.Prune set it then prunes.
//
// The report is nil on failure, except when the snapshot is stored and pruning failed (the error
// then says so). Errors: o.Member not in the spec, bad recipients → *exitcode.UsageError (exit 2);
// SSH to the bastion; no reachable leader or the chosen member unreachable; etcd's client, the
// snapshot stream or the store (wrapped "backup now: ").
func Run(ctx context.Context, o Options) (*Report, error) {
	c := o.Cluster
	members, err := etcd.MembersFromSpec(c)
	if err != nil {
		return nil, err
	}
	if o.Member != "" {
		var names []string
		for _, m := range members {
			names = append(names, m.Name)
		}
		if !strings.Contains(","+strings.Join(names, ",")+",", ","+o.Member+",") {
			return nil, &exitcode.UsageError{Err: fmt.Errorf("--member %q: not an etcd member of the spec; members: %s", o.Member, strings.Join(names, ", "))}
		}
	}
	recipients, err := specload.BackupRecipients(c)
	if err != nil {
		return nil, &exitcode.UsageError{Err: err}
	}
	tunnel, err := bastion.Open(c, o.Prompt)
	if err != nil {
		return nil, err
	}
	defer tunnel.Close()
	dial := tunnel.Etcd()
	files := etcd.HactlClientTLS(c)
	st, err := etcd.StatusWithTimeout(ctx, etcd.ClientURLs(members), files, o.Timeout, o.Timeout, dial)
	if err != nil {
		return nil, fmt.Errorf("backup now: status of cluster %s: %w", c.Metadata.Name, err)
	}
	chosen := choose(st, members, o.Member)
	switch {
	case chosen == nil:
		return nil, fmt.Errorf("backup now: no reachable member of cluster %s is the leader (no quorum?); pick one with --member", c.Metadata.Name)
	case !chosen.Reachable:
		return nil, fmt.Errorf("backup now: member %s (%s) is unreachable: %s", o.Member, chosen.Endpoint, chosen.Error)
	}
	name := cmp.Or(chosen.MemberName, o.Member)
	if o.OnlyIfLeader && !chosen.IsLeader {
		rep := &Report{Skipped: fmt.Sprintf("member %s is not the leader (leader: %s): no snapshot taken", name, cmp.Or(st.LeaderName, "-"))}
		o.Printer.Infof("%s", rep.Skipped)
		return rep, nil
	}
	cli, err := etcd.NewClient(ctx, []string{chosen.Endpoint}, files, o.Timeout, dial)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	b := c.Spec.Backup
	m, err := backup.Take(ctx, cli, chosen.Endpoint, o.Store, backup.TakeOptions{
		Cluster: c.Metadata.Name, Prefix: b.ObjectStore.Prefix, Member: name, Slot: o.Slot,
		Compression: b.Compression, Recipients: recipients, HactlVersion: o.HactlVersion,
		Progress: o.Printer.Infof,
	})
	if err != nil {
		return nil, fmt.Errorf("backup now: %w", err)
	}
	rep := &Report{Snapshot: m}
	if o.Prune != (backup.Policy{}) {
		if err := prune(ctx, o); err != nil {
			return rep, fmt.Errorf("backup now: the snapshot %s is stored, but pruning failed: %w", m.Key, err)
		}
	}
	return rep, nil
}

// choose returns the endpoint to snapshot: the reachable leader, or with member set that member's
// endpoint (reachable or not); nil when there is none.
func choose(st *etcd.ClusterStatus, members []etcd.Member, member string) *etcd.EndpointStatus {
	url := ""
	for _, m := range members {
		if m.Name == member {
			url = m.ClientURL()
		}
	}
	var chosen *etcd.EndpointStatus
	for i := range st.Endpoints {
		ep := &st.Endpoints[i]
		if (member == "" && ep.Reachable && ep.IsLeader) || (member != "" && ep.Endpoint == url) {
			chosen = ep
		}
	}
	return chosen
}

// prune applies o.Prune to the cluster's snapshots and deltas (backup.Prune) with `backup prune`'s
// one-hour grace for incomplete uploads.
func prune(ctx context.Context, o Options) error {
	_, err := backup.Prune(ctx, o.Store, backup.RetentionOptions{Prefix: o.Cluster.Spec.Backup.ObjectStore.Prefix, Cluster: o.Cluster.Metadata.Name,
		Policy: o.Prune, Grace: time.Hour}, o.Printer.Infof)
	return err
}
