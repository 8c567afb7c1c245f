package membership

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/hactl/hactl/etcd"
)

// The learner join, as etcd's runtime reconfiguration guide describes it, is hactl's only way to add
// a member to a running cluster (bootstrap's join and --replace-lost, `hactl etcd member replace`
// through bootstrap/join, the operator's heal):
//
//  1. AddLearner: MemberAddAsLearner with the new member's peer URL (unless a member has it already);
//  2. the new member started (etcd.StartCommand) with --initial-cluster-state existing and the
//     member list etcd returned as --initial-cluster (JoinInitialCluster);
//  3. WaitCaughtUp: the new member's raft applied index reached the leader's committed index;
//  4. Promote.
//
// RemoveMember is the one MemberRemove of hactl's removals (Remove, the heal's lost member and its
// rolled-back learner). Each step is idempotent, so a caller that records the step reached (the
// operator's status.healing, bootstrap's state dir) resumes where it stopped.

// Client is what the join protocol asks of the running cluster: clientv3.Client's membership calls
// and a member's status (Maintenance.Status, which dials the endpoint given). *clientv3.Client
// satisfies it.
type Client interface {
	MemberList(ctx context.Context, opts ...clientv3.OpOption) (*clientv3.MemberListResponse, error)
	MemberAddAsLearner(ctx context.Context, peerAddrs []string) (*clientv3.MemberAddResponse, error)
	MemberPromote(ctx context.Context, id uint64) (*clientv3.MemberPromoteResponse, error)
	MemberRemove(ctx context.Context, id uint64) (*clientv3.MemberRemoveResponse, error)
	Status(ctx context.Context, endpoint string) (*clientv3.StatusResponse, error)
}

// Per-request bounds of the protocol's calls.
const (
	addTimeout    = 10 * time.Second
	listTimeout   = etcd.DefaultRequestTimeout
	statusTimeout = 3 * time.Second
	// catchUpPoll is how often WaitCaughtUp asks the new member's status.
	catchUpPoll = 500 * time.Millisecond
)

// AddLearner adds peerURL to the cluster as a learner, unless a member has that peer URL already
// (a retry after the add: that member's ID, and the member list as it is now). It returns the new
// member's ID and the member list etcd returned, in which the new member has no name until it
// starts. etcd's strict reconfiguration check refuses an add (rpctypes.ErrUnhealthy) until the
// leader has been connected to every voting member for 5 s (etcdserver HealthInterval), e.g. right
// after the previous joiner was promoted: AddLearner retries that refusal, with backoff, for up to
// retry (0: one attempt; the caller retries), calling refused (when not nil) with each. Errors:
// the member list's ("member list: ..."), etcd's add refusal (the last one once retry passed), ctx's.
func AddLearner(ctx context.Context, cl Client, peerURL string, retry time.Duration, refused func(error)) (uint64, []*etcdserverpb.Member, error) {
	lctx, cancel := context.WithTimeout(ctx, listTimeout)
	ml, err := cl.MemberList(lctx)
	cancel()
	if err != nil {
		return 0, nil, fmt.Errorf("member list: %w", err)
	}
	if m := MemberByPeer(ml.Members, peerURL); m != nil {
		return m.ID, ml.Members, nil
	}
	var resp *clientv3.MemberAddResponse
	err = within(ctx, retry, func(ctx context.Context) (bool, error) {
		actx, cancel := context.WithTimeout(ctx, addTimeout)
		defer cancel()
		var err error
		resp, err = cl.MemberAddAsLearner(actx, []string{peerURL})
		if errors.Is(err, rpctypes.ErrUnhealthy) || errors.Is(err, rpctypes.ErrGRPCUnhealthy) {
			if refused != nil {
				refused(err)
			}
			return false, err
		}
		return true, err
	})
	if err != nil {
		return 0, nil, err
	}
	return resp.Member.ID, resp.Members, nil
}

// JoinInitialCluster is the --initial-cluster the new member id, named name, starts with: from the
// member list etcd returned (AddLearner's, or MemberList's later), name=peerURL for every peer URL
// of every member, sorted. A peer URL's name is names[peerURL] when names has it (the spec's names
// for the spec's members), else name for id itself (etcd lists it without a name until it starts),
// else the name etcd lists. Errors: another member without a name (added, never started: etcd would
// refuse the flag).
func JoinInitialCluster(members []*etcdserverpb.Member, id uint64, name string, names map[string]string) (string, error) {
	var parts []string
	for _, m := range members {
		for _, u := range m.PeerURLs {
			n := m.Name
			if m.ID == id {
				n = name
			}
			if sn, ok := names[u]; ok {
				n = sn
			}
			if n == "" {
				return "", fmt.Errorf("member %x has no name yet (added, never started): only one member may join at a time", m.ID)
			}
			parts = append(parts, n+"="+u)
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, ","), nil
}

// CaughtUp is what WaitCaughtUp saw last: the member's raft applied index and the leader's committed
// index it had to reach (read once, the first time the leader answered); Leader when the member
// leads (nothing to catch up with: both 0).
type CaughtUp struct {
	Applied, Committed uint64
	Leader             bool
}

// CatchUpError is WaitCaughtUp's timeout: the indexes last seen, and Err, the last error asking for
// them (nil when the last attempt read both), FromMember when Err is the member's own status error.
type CatchUpError struct {
	CaughtUp
	Timeout    time.Duration
	Err        error
	FromMember bool
}

func (e *CatchUpError) Error() string {
	return fmt.Sprintf("not caught up within %s: %v", e.Timeout, e.Cause())
}

// Unwrap is Err.
func (e *CatchUpError) Unwrap() error { return e.Err }

// Cause is why: Err, or the two indexes ("raft applied index A, the leader had committed C").
func (e *CatchUpError) Cause() error {
	if e.Err != nil {
		return e.Err
	}
	return fmt.Errorf("raft applied index %d, the leader had committed %d", e.Applied, e.Committed)
}

// WaitCaughtUp waits, for at most timeout, until the member serving clientURL has applied every
// entry the leader had committed when first asked (its raft applied index ≥ the leader's raft
// committed index then): hactl's one catch-up rule, for a learner before Promote and for a member
// restarted in a rolling restart before the next one goes down. It returns at once when the member
// leads. The member's status is asked every 500 ms; errors asking it or the leader (a learner just
// started may not answer yet) are retried. Errors: *CatchUpError on the timeout, ctx's.
func WaitCaughtUp(ctx context.Context, cl Client, clientURL string, timeout time.Duration) (CaughtUp, error) {
	var committed uint64 // read once, the first time the leader answers
	return waitCaughtUp(ctx, cl, clientURL, timeout, catchUpPoll, CaughtUp{}, func(ctx context.Context, st *clientv3.StatusResponse) (uint64, bool, error) {
		if st.Leader != 0 && st.Leader == st.Header.GetMemberId() {
			return 0, true, nil
		}
		if committed == 0 {
			c, err := leaderCommitted(ctx, cl, st.Leader)
			if err != nil {
				return 0, false, err
			}
			if c == 0 { // no leader serves index 0: asked again
				return 0, false, fmt.Errorf("the leader %x reported raft index 0", st.Leader)
			}
			committed = c
		}
		return committed, false, nil
	})
}

// Statuser is the one etcd call WaitApplied makes: a member's status, as clientv3.Maintenance's
// Status (a Client is one).
type Statuser interface {
	Status(ctx context.Context, endpoint string) (*clientv3.StatusResponse, error)
}

// WaitApplied is WaitCaughtUp's rule with the index to reach given: it waits, for at most timeout,
// until the member serving clientURL has applied committed (its raft applied index ≥ committed),
// asking its status every poll and retrying errors. The caller read the leader's committed index
// beforehand: a drill reads it from the survivors before it puts members back (the returning members
// may have no leader to ask) and times the catch-up to that fixed index. A member that leads is done
// only once it has applied it too; committed 0 is reached by the first status that answers.
// Errors: *CatchUpError on the timeout, ctx's.
func WaitApplied(ctx context.Context, s Statuser, clientURL string, committed uint64, timeout, poll time.Duration) (CaughtUp, error) {
	return waitCaughtUp(ctx, s, clientURL, timeout, poll, CaughtUp{Committed: committed}, func(context.Context, *clientv3.StatusResponse) (uint64, bool, error) {
		return committed, false, nil
	})
}

// waitCaughtUp is the loop of WaitCaughtUp and WaitApplied: the member's status every poll; target
// gives, from a status that answered, the index to reach, or leads (done at once), or its error
// (retried like the status'). cu is what a timeout reports before anything answered.
func waitCaughtUp(ctx context.Context, s Statuser, clientURL string, timeout, poll time.Duration, cu CaughtUp,
	target func(ctx context.Context, st *clientv3.StatusResponse) (committed uint64, leads bool, err error)) (CaughtUp, error) {
	deadline := time.Now().Add(timeout)
	for {
		st, err := status(ctx, s, clientURL)
		fromMember := err != nil
		if err == nil {
			var leads bool
			var committed uint64
			if committed, leads, err = target(ctx, st); err == nil {
				if leads {
					return CaughtUp{Leader: true}, nil
				}
				cu.Committed, cu.Applied = committed, st.RaftAppliedIndex
				if cu.Applied >= cu.Committed {
					return cu, nil
				}
			}
		}
		if time.Now().After(deadline) {
			return cu, &CatchUpError{CaughtUp: cu, Timeout: timeout, Err: err, FromMember: fromMember}
		}
		select {
		case <-ctx.Done():
			return cu, ctx.Err()
		case <-time.After(poll):
		}
	}
}

func status(ctx context.Context, cl Statuser, endpoint string) (*clientv3.StatusResponse, error) {
	sctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	return cl.Status(sctx, endpoint)
}

// leaderCommitted is the raft index the leader had committed (its status' raft index), asked at the
// first client URL the member list gives it.
func leaderCommitted(ctx context.Context, cl Client, leader uint64) (uint64, error) {
	lctx, cancel := context.WithTimeout(ctx, listTimeout)
	ml, err := cl.MemberList(lctx)
	cancel()
	if err != nil {
		return 0, fmt.Errorf("member list: %w", err)
	}
	m := MemberByID(ml.Members, leader)
	if m == nil || len(m.ClientURLs) == 0 {
		return 0, fmt.Errorf("leader %x is not in the member list", leader)
	}
	lst, err := status(ctx, cl, m.ClientURLs[0])
	if err != nil {
		return 0, fmt.Errorf("status of the leader %x: %w", leader, err)
	}
	return lst.RaftIndex, nil
}

// NoSuchMemberError is Promote's error when the member is not in the member list (the learner was
// removed meanwhile).
type NoSuchMemberError struct{ ID uint64 }

func (e *NoSuchMemberError) Error() string {
	return fmt.Sprintf("member %x is not in the member list", e.ID)
}

// Promote promotes learner id to a voting member, unless it is a voter already (promoted false: an
// earlier, interrupted run promoted it). Call it once WaitCaughtUp returned: etcd refuses to promote
// a learner that is behind (rpctypes.ErrLearnerNotReady). Promote retries etcd's refusals, with
// backoff, for up to retry (0: one attempt; the caller retries). Errors: *NoSuchMemberError (not
// retried), the member list's ("member list: ..."), etcd's (the last one once retry passed), ctx's.
func Promote(ctx context.Context, cl Client, id uint64, retry time.Duration) (promoted bool, err error) {
	err = within(ctx, retry, func(ctx context.Context) (bool, error) {
		lctx, cancel := context.WithTimeout(ctx, listTimeout)
		defer cancel()
		ml, err := cl.MemberList(lctx)
		if err != nil {
			return false, fmt.Errorf("member list: %w", err)
		}
		m := MemberByID(ml.Members, id)
		switch {
		case m == nil:
			return true, &NoSuchMemberError{ID: id}
		case !m.IsLearner:
			return true, nil
		}
		_, err = cl.MemberPromote(lctx, id)
		switch {
		case err == nil:
			promoted = true
		case errors.Is(err, rpctypes.ErrMemberNotLearner), errors.Is(err, rpctypes.ErrGRPCMemberNotLearner):
			err = nil
		}
		return err == nil, err
	})
	return promoted, err
}

// RemoveMember removes member id through cl, unless it is no member any more (removed false: an
// earlier attempt removed it): the one MemberRemove of hactl's removals. etcd refuses a removal
// right after a member (re)joined (rpctypes.ErrUnhealthy: with --strict-reconfig-check a member
// counts as active only once connected for 5 s) or when the rest would have no active quorum;
// RemoveMember retries that refusal, with backoff, for up to retry (0: one attempt; the caller
// retries). Errors: the member list's ("member list: ..."), etcd's (the last refusal once retry
// passed), ctx's.
func RemoveMember(ctx context.Context, cl Client, id uint64, retry time.Duration) (removed bool, err error) {
	lctx, cancel := context.WithTimeout(ctx, listTimeout)
	ml, err := cl.MemberList(lctx)
	cancel()
	if err != nil {
		return false, fmt.Errorf("member list: %w", err)
	}
	if MemberByID(ml.Members, id) == nil {
		return false, nil
	}
	err = within(ctx, retry, func(ctx context.Context) (bool, error) {
		rctx, cancel := context.WithTimeout(ctx, etcd.DefaultRequestTimeout)
		defer cancel()
		_, err := cl.MemberRemove(rctx, id)
		switch {
		case err == nil:
			removed = true
		case errors.Is(err, rpctypes.ErrMemberNotFound), errors.Is(err, rpctypes.ErrGRPCMemberNotFound):
			err = nil
		case errors.Is(err, rpctypes.ErrUnhealthy), errors.Is(err, rpctypes.ErrGRPCUnhealthy):
			return false, err
		}
		return true, err
	})
	return removed, err
}

// MemberByID is the member of members with that ID (nil when none).
func MemberByID(members []*etcdserverpb.Member, id uint64) *etcdserverpb.Member {
	for _, m := range members {
		if m.ID == id {
			return m
		}
	}
	return nil
}

// MemberByPeer is the member of members with that peer URL (nil when none).
func MemberByPeer(members []*etcdserverpb.Member, peerURL string) *etcdserverpb.Member {
	for _, m := range members {
		if slices.Contains(m.PeerURLs, peerURL) {
			return m
		}
	}
	return nil
}

// within calls try at once and, while it returns done false, again with backoff (from 200 ms, ×1.5
// with 10% jitter, at most 2 s apart) until retry passed or ctx ended. It returns try's last error,
// or ctx's when ctx ended while waiting.
func within(ctx context.Context, retry time.Duration, try func(ctx context.Context) (done bool, err error)) error {
	deadline := time.Now().Add(retry)
	b := wait.Backoff{Duration: 200 * time.Millisecond, Factor: 1.5, Jitter: 0.1, Cap: 2 * time.Second, Steps: math.MaxInt32}
	for {
		done, err := try(ctx)
		left := time.Until(deadline)
		if done || left <= 0 {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		t := time.NewTimer(min(b.Step(), left))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}
