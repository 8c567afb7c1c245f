package drill

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/provision"
)

// Observation is one member's answer to a Status request (or its failure).
type Observation struct {
	Member string
	// At is when the answer arrived (monotonic clock).
	At time.Time
	OK bool
	// MemberID, Leader (member IDs; Leader 0 = the member knows no leader), raft term, commit index
	// and applied index, as etcd's Maintenance.Status reports them.
	MemberID     uint64
	Leader       uint64
	Term         uint64
	RaftIndex    uint64
	AppliedIndex uint64
}

// memberWatch asks every member for its status every PollInterval, each member in its own goroutine
// on its own single-endpoint connection, so a dead or partitioned member never delays the others. A
// plain gRPC stub is used (clientv3's Maintenance.Status dials a new connection per call).
type memberWatch struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu  sync.Mutex
	obs []Observation
}

// watchMembers starts polling members (name → client URL). Each request is bounded by timeout.
func watchMembers(ctx context.Context, members map[string]string, files etcd.TLSFiles, timeout time.Duration, opts ...etcd.Option) (*memberWatch, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &memberWatch{cancel: cancel}
	var clients []*clientv3.Client
	for name, url := range members {
		cli, err := etcd.NewClient(ctx, []string{url}, files, timeout, opts...)
		if err != nil {
			cancel()
			for _, c := range clients {
				c.Close()
			}
			return nil, err
		}
		clients = append(clients, cli)
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			defer cli.Close()
			w.poll(ctx, name, pb.NewMaintenanceClient(cli.ActiveConnection()), timeout)
		}()
	}
	return w, nil
}

func (w *memberWatch) poll(ctx context.Context, name string, mc pb.MaintenanceClient, timeout time.Duration) {
	t := time.NewTicker(PollInterval)
	defer t.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, timeout)
		resp, err := mc.Status(rctx, &pb.StatusRequest{})
		cancel()
		if ctx.Err() != nil {
			return
		}
		o := Observation{Member: name, At: time.Now(), OK: err == nil}
		if err == nil {
			o.MemberID, o.Leader, o.Term = resp.Header.GetMemberId(), resp.Leader, resp.RaftTerm
			o.RaftIndex, o.AppliedIndex = resp.RaftIndex, resp.RaftAppliedIndex
		}
		w.mu.Lock()
		w.obs = append(w.obs, o)
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// snapshot returns a copy of the observations so far, in arrival order.
func (w *memberWatch) snapshot() []Observation {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Observation(nil), w.obs...)
}

// stop ends the polling and returns every observation.
func (w *memberWatch) stop() []Observation {
	w.cancel()
	w.wg.Wait()
	return w.snapshot()
}

// latest returns each member's newest successful observation.
func latest(obs []Observation) map[string]Observation {
	out := map[string]Observation{}
	for _, o := range obs {
		if o.OK {
			out[o.Member] = o
		}
	}
	return out
}

// newLeaderAt returns the first observation after t0 in which a member other than the ones in
// exclude reports a leader that is neither 0 nor old: when the survivors had elected a new leader.
func newLeaderAt(obs []Observation, t0 time.Time, old uint64, exclude map[string]bool) (Observation, bool) {
	for _, o := range obs {
		if o.OK && o.At.After(t0) && !exclude[o.Member] && o.Leader != 0 && o.Leader != old {
			return o, true
		}
	}
	return Observation{}, false
}

// leaderChanged reports whether any observation after t0 names a leader other than old.
func leaderChanged(obs []Observation, t0 time.Time, old uint64) bool {
	for _, o := range obs {
		if o.OK && o.At.After(t0) && o.Leader != 0 && o.Leader != old {
			return true
		}
	}
	return false
}

// watchThroughHost polls member name's status on its own loopback through the SSH connection cli
// (loopback is exempt from a drill's iptables rules, so a partitioned member can still be watched:
// did it step down?). The member's server certificate carries the loopback addresses.
func watchThroughHost(ctx context.Context, name string, cli *provision.Client, addr netip.Addr, port int, files etcd.TLSFiles, timeout time.Duration) (*memberWatch, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &memberWatch{cancel: cancel}
	dial := etcd.WithDialer(func(ctx context.Context, a string) (net.Conn, error) { return cli.DialContext(ctx, a) })
	ec, err := etcd.NewClient(ctx, []string{etcd.URL("https", etcd.Loopback(addr), port)}, files, timeout, dial)
	if err != nil {
		cancel()
		return nil, err
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer ec.Close()
		w.poll(ctx, name, pb.NewMaintenanceClient(ec.ActiveConnection()), timeout)
	}()
	return w, nil
}

// steppedDownAt returns the first observation after t0 in which the member no longer reports
// itself (id) as leader.
func steppedDownAt(obs []Observation, t0 time.Time, id uint64) (Observation, bool) {
	for _, o := range obs {
		if o.OK && o.At.After(t0) && o.Leader != id {
			return o, true
		}
	}
	return Observation{}, false
}
