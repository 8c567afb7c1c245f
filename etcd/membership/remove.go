package membership

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/ui"
)

// Cluster is how membership reaches the members: their client URLs (the spec's; members etcd lists
// beyond them are probed at the URLs they advertise), hactl's client certificate, and the dial
// options (e.g. through the bastion).
type Cluster struct {
	Endpoints []string
	TLS       etcd.TLSFiles
	Options   []etcd.Option
}

// Retirer stops a removed member on its host: the etcd unit stopped and disabled, the data dir
// moved aside (never deleted). peerURLs are the member's (empty when it is no member any more),
// so the host can be checked to be the member's. It returns where the data dir went ("" when there
// was none).
type Retirer interface {
	Retire(ctx context.Context, member string, peerURLs []string, stamp string) (aside string, err error)
}

// RemoveOptions are one removal.
type RemoveOptions struct {
	Cluster Cluster
	// Name is the member's name (its host's name in the spec).
	Name string
	// ID, when not 0, picks the member by its ID instead (Name then only labels it).
	ID uint64
	// Force removes it even when the remaining members would lose their quorum.
	Force bool
	// DryRun stops after the plan.
	DryRun bool
	// Confirm is asked with the plan before anything changes; nil: no question (--yes).
	Confirm func(plan string) (bool, error)
	// Host retires the member on its host after the removal; nil: the host is left as it is.
	Host    Retirer
	Printer *ui.Printer
}

// RemoveResult is what a removal did (`-o json`).
type RemoveResult struct {
	Member string `json:"member"`
	ID     string `json:"id"`
	// WasLeader: leadership was moved to NewLeader first.
	WasLeader bool   `json:"wasLeader"`
	NewLeader string `json:"newLeader,omitempty"`
	Removed   bool   `json:"removed"`
	// DataDirAside is where the member's data dir was moved on its host.
	DataDirAside string `json:"dataDirAside,omitempty"`
	// HostError says why the host was not retired (unreachable, a command failed).
	HostError string `json:"hostError,omitempty"`
	Plan      string `json:"plan"`
}

// NotMemberError: no member of the running cluster has that name (exit 2, nothing changed).
type NotMemberError struct {
	Name    string
	Members []string
}

func (e *NotMemberError) Error() string {
	return fmt.Sprintf("%s is not a member of the etcd cluster (members: %s)", e.Name, orNone(e.Members))
}

// ExitCode: refused input.
func (e *NotMemberError) ExitCode() int { return 2 }

// ErrNotConfirmed is returned when the plan was declined.
var ErrNotConfirmed = errors.New("not confirmed: nothing was changed")

// view is the cluster read before a change: the member list with each member's health, leader and
// raft index, from a linearizable member list and every member's endpoint.
type view struct {
	status  *etcd.ClusterStatus
	members []Voter
	byID    map[uint64]etcd.EndpointStatus
	urls    map[uint64][]string
	peers   map[uint64][]string
	names   map[uint64]string
	leader  uint64
}

func readView(ctx context.Context, c Cluster) (*view, error) {
	st, err := etcd.Status(ctx, c.Endpoints, c.TLS, c.Options...)
	if err != nil {
		return nil, fmt.Errorf("etcd status: %w", err)
	}
	if !st.QuorumReachable || st.MemberListError != "" {
		return nil, fmt.Errorf("etcd status: the cluster has no quorum (no endpoint served a linearizable read%s): a membership change needs one; restore from a snapshot instead (hactl restore)", suffix(st.MemberListError))
	}
	// Members the spec does not list are probed at the client URLs they advertise.
	extra := []string{}
	for _, m := range st.Members {
		for _, u := range m.ClientURLs {
			if !slices.Contains(c.Endpoints, u) && !slices.Contains(extra, u) {
				extra = append(extra, u)
			}
		}
	}
	if len(extra) > 0 {
		if st, err = etcd.Status(ctx, append(slices.Clone(c.Endpoints), extra...), c.TLS, c.Options...); err != nil {
			return nil, fmt.Errorf("etcd status: %w", err)
		}
	}
	if !st.QuorumReachable || st.MemberListError != "" {
		return nil, fmt.Errorf("etcd status: the cluster has no quorum (no endpoint served a linearizable read%s): a membership change needs one", suffix(st.MemberListError))
	}
	v := &view{status: st, byID: map[uint64]etcd.EndpointStatus{}, urls: map[uint64][]string{}, peers: map[uint64][]string{}, names: map[uint64]string{}}
	for _, ep := range st.Endpoints {
		id, err := strconv.ParseUint(ep.MemberID, 16, 64)
		if err != nil || !ep.Reachable {
			continue
		}
		if prev, ok := v.byID[id]; !ok || (!prev.Healthy && ep.Healthy) {
			v.byID[id] = ep
		}
	}
	if id, err := strconv.ParseUint(st.LeaderID, 16, 64); err == nil {
		v.leader = id
	}
	for _, m := range st.Members {
		id, err := strconv.ParseUint(m.ID, 16, 64)
		if err != nil {
			continue
		}
		v.members = append(v.members, Voter{Name: m.Name, ID: id, Learner: m.IsLearner, Healthy: v.byID[id].Healthy})
		v.urls[id], v.peers[id], v.names[id] = m.ClientURLs, m.PeerURLs, m.Name
	}
	return v, nil
}

// electionWait bounds how long a change waits for a healthy leader: right after the leader died
// the others still name it until an election (etcd's election timeout, 1 s by default).
const electionWait = 20 * time.Second

// readSettledView is readView once the leader it names is a healthy member (or electionWait
// passed: the last view's error says why).
func readSettledView(ctx context.Context, c Cluster) (*view, error) {
	var v *view
	var last error
	err := wait.PollUntilContextTimeout(ctx, time.Second, electionWait, true, func(ctx context.Context) (bool, error) {
		v, last = readView(ctx, c)
		if last != nil {
			return false, nil
		}
		if v.leader == 0 || !v.byID[v.leader].Healthy {
			last = fmt.Errorf("no healthy leader yet (the members name %x)", v.leader)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		if last != nil {
			return nil, last
		}
		return nil, err
	}
	return v, nil
}

func suffix(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}

// pick returns the member with that ID when id is not 0, else the one named name.
func (v *view) pick(name string, id uint64) (Voter, error) {
	if id == 0 {
		return v.find(name)
	}
	for _, m := range v.members {
		if m.ID == id {
			return m, nil
		}
	}
	var names []string
	for _, m := range v.members {
		names = append(names, label(m))
	}
	slices.Sort(names)
	return Voter{}, &NotMemberError{Name: fmt.Sprintf("%s (ID %x)", name, id), Members: names}
}

// find returns the member named name.
func (v *view) find(name string) (Voter, error) {
	var names []string
	var found []Voter
	for _, m := range v.members {
		if name != "" && m.Name == name {
			found = append(found, m)
		}
		names = append(names, label(m))
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		slices.Sort(names)
		return Voter{}, &NotMemberError{Name: name, Members: names}
	}
	var ids []string
	for _, m := range found {
		ids = append(ids, fmt.Sprintf("%x (peer %s)", m.ID, strings.Join(v.peers[m.ID], ",")))
	}
	return Voter{}, &AmbiguousMemberError{Name: name, IDs: ids}
}

// AmbiguousMemberError: several members carry that name (etcd allows it, e.g. a dead member and
// its re-added successor); hactl removes none of them (exit 2).
type AmbiguousMemberError struct {
	Name string
	IDs  []string
}

func (e *AmbiguousMemberError) Error() string {
	return fmt.Sprintf("%d members are named %s: %s; hactl will not guess which to remove: remove the dead one with etcdctl member remove ID", len(e.IDs), e.Name, strings.Join(e.IDs, "; "))
}

// ExitCode: refused input.
func (e *AmbiguousMemberError) ExitCode() int { return 2 }

// transferee is the healthy voter, other than id, with the highest raft index: the one leadership
// moves to (etcd's MoveLeader needs a voter that is caught up).
func (v *view) transferee(id uint64) (Voter, bool) {
	var best Voter
	var bestIndex uint64
	found := false
	for _, m := range v.members {
		if m.ID == id || m.Learner || !m.Healthy {
			continue
		}
		if idx := v.byID[m.ID].RaftIndex; !found || idx > bestIndex {
			best, bestIndex, found = m, idx, true
		}
	}
	return best, found
}

// endpointsExcept are the client URLs of every healthy member but id.
func (v *view) endpointsExcept(id uint64) []string {
	var out []string
	for _, m := range v.members {
		if m.ID != id && m.Healthy {
			out = append(out, v.urls[m.ID]...)
		}
	}
	return out
}

// Remove removes the member o.Name: the quorum guard (CheckRemoval, unless o.Force), the plan
// (confirmed through o.Confirm), leadership moved off it first when it leads (MoveLeader to the
// healthy voter with the highest raft index), MemberRemove through the other members, then its host
// retired (o.Host: unit stopped and disabled, data dir moved aside). The result is returned also on
// failure. Errors: *NotMemberError and *QuorumError (exit 2) before anything changed; ErrNotConfirmed;
// a step's error (status, move-leader, member remove); after the member was removed, the host's
// error (the member is gone from the cluster; the result's HostError says what to do on the host).
func Remove(ctx context.Context, o RemoveOptions) (*RemoveResult, error) {
	v, err := readSettledView(ctx, o.Cluster)
	if err != nil {
		return nil, err
	}
	target, err := v.pick(o.Name, o.ID)
	if err != nil {
		return nil, err
	}
	res := &RemoveResult{Member: o.Name, ID: fmt.Sprintf("%x", target.ID), WasLeader: target.ID == v.leader}
	if err := CheckRemoval(v.members, target.ID); err != nil {
		var qe *QuorumError
		if !o.Force || !errors.As(err, &qe) || qe.Remaining == 0 {
			return res, err
		}
		o.Printer.Warnf("--force: %v", err)
	}
	stamp := time.Now().UTC().Format("20060102T150405Z")
	var plan []string
	var to Voter
	if res.WasLeader {
		var ok bool
		if to, ok = v.transferee(target.ID); !ok {
			return res, fmt.Errorf("%s leads and no other voting member is healthy to take over", o.Name)
		}
		res.NewLeader = to.Name
		plan = append(plan, fmt.Sprintf("move leadership from %s to %s (raft index %d)", o.Name, to.Name, v.byID[to.ID].RaftIndex))
	}
	kind := "voting member"
	if target.Learner {
		kind = "learner"
	}
	plan = append(plan, fmt.Sprintf("remove %s %s (ID %x) from the cluster", kind, o.Name, target.ID))
	if o.Host != nil {
		plan = append(plan, fmt.Sprintf("on %s: stop and disable etcd, move its data dir aside (suffix .removed-%s; never deleted)", o.Name, stamp))
	}
	for i := range plan {
		plan[i] = fmt.Sprintf("  %d. %s", i+1, plan[i])
	}
	res.Plan = strings.Join(plan, "\n")
	if o.DryRun {
		return res, nil
	}
	if err := confirmPlan(o.Confirm, res.Plan); err != nil {
		return res, err
	}
	if o.Confirm != nil {
		// The answer may come minutes later: the guard runs again on a fresh view.
		if v, err = readSettledView(ctx, o.Cluster); err != nil {
			return res, err
		}
		if target, err = v.pick(o.Name, o.ID); err != nil {
			return res, err
		}
		if err := CheckRemoval(v.members, target.ID); err != nil && !o.Force {
			return res, err
		}
		if (target.ID == v.leader) != res.WasLeader {
			return res, fmt.Errorf("%s's leadership changed while the plan was confirmed: run it again", o.Name)
		}
	}
	if res.WasLeader {
		if err := moveLeader(ctx, o.Cluster, v.urls[target.ID], to.ID); err != nil {
			return res, fmt.Errorf("etcd/move-leader %s → %s: %w", o.Name, to.Name, err)
		}
		o.Printer.Hostf(o.Name, "leadership moved to %s", to.Name)
	}
	cli, err := etcd.NewClient(ctx, v.endpointsExcept(target.ID), o.Cluster.TLS, etcd.DefaultDialTimeout, o.Cluster.Options...)
	if err != nil {
		return res, fmt.Errorf("etcd/member-remove %s: %w", o.Name, err)
	}
	defer cli.Close()
	if _, err := RemoveMember(ctx, cli, target.ID, healthRetry); err != nil {
		return res, fmt.Errorf("etcd/member-remove %s (ID %x): %w", o.Name, target.ID, err)
	}
	res.Removed = true
	o.Printer.Hostf(o.Name, "member %x removed from the cluster", target.ID)
	if o.Host == nil {
		return res, nil
	}
	aside, err := o.Host.Retire(ctx, o.Name, v.peers[target.ID], stamp)
	res.DataDirAside = aside
	if err != nil {
		res.HostError = fmt.Sprintf("%v: the member is out of the cluster, but its host still has the unit: stop and disable etcd there and move its data dir aside when it is reachable", err)
		return res, fmt.Errorf("etcd/retire %s: %w", o.Name, err)
	}
	if aside == "" {
		o.Printer.Hostf(o.Name, "etcd stopped and disabled; it had no data dir")
	} else {
		o.Printer.Hostf(o.Name, "etcd stopped and disabled; data dir kept as %s", aside)
	}
	return res, nil
}

// healthRetry bounds how long a removal waits out etcd's "unhealthy cluster" refusal: with
// --strict-reconfig-check (the default) a member counts as active only once it has been connected
// for HealthInterval (5 s, etcd server's rule), so right after a member (re)joined a removal is
// refused for a few seconds although it is safe.
const healthRetry = 20 * time.Second

// moveLeader asks the leader (through its own endpoints: etcd answers MoveLeader only there) to
// hand leadership to id; etcd answers once the transfer is done (or failed).
func moveLeader(ctx context.Context, c Cluster, leaderURLs []string, id uint64) error {
	cli, err := etcd.NewClient(ctx, leaderURLs, c.TLS, etcd.DefaultDialTimeout, c.Options...)
	if err != nil {
		return err
	}
	defer cli.Close()
	mctx, cancel := context.WithTimeout(ctx, etcd.DefaultRequestTimeout)
	defer cancel()
	if _, err := cli.MoveLeader(mctx, id); err != nil {
		return err
	}
	return nil
}

// ClusterFromSpec is how membership reaches the members of the spec c: every etcd host's client URL
// and hactl's client certificate from the state dir; opts as etcd.NewClient takes them (e.g. the
// bastion's dialer). Errors: the spec's members cannot be derived (etcd.MembersFromSpec).
func ClusterFromSpec(c *v1alpha1.Cluster, opts ...etcd.Option) (Cluster, error) {
	members, err := etcd.MembersFromSpec(c)
	if err != nil {
		return Cluster{}, err
	}
	cl := Cluster{Endpoints: etcd.ClientURLs(members), TLS: etcd.HactlClientTLS(c)}
	for _, o := range opts {
		if o != nil {
			cl.Options = append(cl.Options, o)
		}
	}
	return cl, nil
}
