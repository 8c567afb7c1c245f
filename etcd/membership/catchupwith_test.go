package membership

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// statusSeq is a Client whose Status answers applied indexes in turn, as the leader (member 1);
// its membership calls are never made (WaitApplied makes none; WaitCaughtUp none for a leader).
type statusSeq struct {
	Client
	applied []uint64
	calls   int
}

func (s *statusSeq) Status(context.Context, string) (*clientv3.StatusResponse, error) {
	i := min(s.calls, len(s.applied)-1)
	s.calls++
	return &clientv3.StatusResponse{Header: &etcdserverpb.ResponseHeader{MemberId: 1}, Leader: 1, RaftAppliedIndex: s.applied[i]}, nil
}

func TestWaitApplied(t *testing.T) {
	ctx := context.Background()
	// A member that leads is done only once it applied the index given.
	s := &statusSeq{applied: []uint64{3, 7, 9, 12}}
	cu, err := WaitApplied(ctx, s, "m", 9, 10*time.Second, time.Millisecond)
	if err != nil || cu != (CaughtUp{Applied: 9, Committed: 9}) || s.calls != 3 {
		t.Errorf("got %+v, %v after %d calls; want applied 9 of 9 after 3", cu, err, s.calls)
	}
	// The timeout reports the index given and the last applied.
	s = &statusSeq{applied: []uint64{4}}
	_, err = WaitApplied(ctx, s, "m", 9, 20*time.Millisecond, time.Millisecond)
	var ce *CatchUpError
	if !errors.As(err, &ce) || ce.Applied != 4 || ce.Committed != 9 || ce.Err != nil {
		t.Errorf("timeout: %v", err)
	}
	// A member that never answers: the timeout still reports the index given.
	_, err = WaitApplied(ctx, downStatus{}, "m", 9, 20*time.Millisecond, time.Millisecond)
	if !errors.As(err, &ce) || ce.Committed != 9 || ce.Err == nil || !ce.FromMember {
		t.Errorf("member down: %v (%+v)", err, ce)
	}
	// Index 0: the first status that answers is enough.
	s = &statusSeq{applied: []uint64{1}}
	if cu, err := WaitApplied(ctx, s, "m", 0, time.Second, time.Millisecond); err != nil || cu != (CaughtUp{Applied: 1}) || s.calls != 1 {
		t.Errorf("index 0: %+v, %v after %d calls", cu, err, s.calls)
	}
	// Without an index, a member that leads is done at once (WaitCaughtUp).
	s = &statusSeq{applied: []uint64{0}}
	if cu, err := WaitCaughtUp(ctx, s, "m", time.Second); err != nil || !cu.Leader {
		t.Errorf("leader: %+v, %v", cu, err)
	}
}

// downStatus is a member that never answers.
type downStatus struct{}

func (downStatus) Status(context.Context, string) (*clientv3.StatusResponse, error) {
	return nil, errors.New("connection refused")
}
