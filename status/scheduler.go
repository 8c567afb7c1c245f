package status

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/kubeapi"
	"github.com/hactl/hactl/kubesched"
	"github.com/hactl/hactl/ui"
)

// SchedulerStatus is the hactl-scheduler section of `hactl status` (spec.scheduler): its replicas and
// its Lease, through the API over SSH (kubesched.ReadStatus).
type SchedulerStatus struct {
	kubesched.Status
	// Error is why the API could not be asked.
	Error string `json:"error,omitempty"`
	// Problems: no holder, a holder that stopped renewing, replicas not Ready (also in
	// Report.Problems, prefixed "scheduler: ").
	Problems []string `json:"problems,omitempty"`
}

// collectScheduler reads hactl-scheduler's status through api (apiErr: why there is none).
func collectScheduler(ctx context.Context, c *v1alpha1.Cluster, api *kubeapi.Client, apiErr error) *SchedulerStatus {
	ss := &SchedulerStatus{}
	if apiErr != nil {
		ss.Error = apiErr.Error()
		ss.Problems = []string{"the API could not be asked: " + apiErr.Error()}
		return ss
	}
	st, err := kubesched.ReadStatus(ctx, api, c.Spec.Scheduler)
	if err != nil {
		ss.Error = err.Error()
		ss.Problems = []string{err.Error()}
		return ss
	}
	ss.Status = st
	ss.Problems = SchedulerProblems(st, c.Spec.Scheduler, time.Now())
	return ss
}

// SchedulerProblems judges st: replicas deployed but none holding the Lease, a holder whose last
// renewal is older than twice the lease duration (renewTime is the holder's clock: the margin
// absorbs skew), replicas not Ready. Nothing deployed is not a problem (deploy is a separate step).
func SchedulerProblems(st kubesched.Status, s *v1alpha1.Scheduler, now time.Time) []string {
	var out []string
	if len(st.Replicas) == 0 {
		return nil
	}
	ld := s.LeaderElection.LeaseDuration.Duration
	switch {
	case st.Lease.Holder == "":
		out = append(out, fmt.Sprintf("no replica holds Lease %s/%s", st.Lease.Namespace, st.Lease.Name))
	case now.Sub(st.Lease.RenewTime) > 2*ld:
		out = append(out, fmt.Sprintf("Lease %s/%s last renewed %s ago by %s (lease duration %s): its holder stopped renewing",
			st.Lease.Namespace, st.Lease.Name, now.Sub(st.Lease.RenewTime).Round(time.Second), st.Lease.Holder, ld))
	}
	for _, r := range st.Replicas {
		if !r.Ready {
			out = append(out, fmt.Sprintf("replica %s on %s not Ready", r.Pod, r.Node))
		}
	}
	return out
}

func (r *Report) addScheduler(ss *SchedulerStatus) {
	if ss == nil {
		return
	}
	r.Scheduler = ss
	for _, p := range ss.Problems {
		r.Problems = append(r.Problems, "scheduler: "+p)
	}
	r.Healthy = len(r.Problems) == 0
}

func printScheduler(w io.Writer, ss *SchedulerStatus) {
	l := ss.Lease
	fmt.Fprintf(w, "\nscheduler: Lease %s/%s", l.Namespace, l.Name)
	if ss.Error != "" {
		fmt.Fprintf(w, ": %s\n", ss.Error)
		return
	}
	if len(ss.Replicas) == 0 {
		fmt.Fprintln(w, ": not deployed (hactl scheduler deploy)")
		return
	}
	renew := "-"
	if !l.RenewTime.IsZero() {
		renew = l.RenewTime.Format(time.RFC3339)
	}
	fmt.Fprintf(w, " held by %s, renewed %s, %d transitions\n", dash(l.Holder), renew, l.Transitions)
	var rows [][]string
	for _, rep := range ss.Replicas {
		ready, leader := "Ready", ""
		if !rep.Ready {
			ready = "NOT READY"
			if reason, _, _ := strings.Cut(rep.Waiting, ":"); reason != "" {
				ready += " (" + reason + ")"
			}
		}
		if rep.Leader {
			leader = "leader"
		}
		rows = append(rows, []string{"  " + rep.Pod, rep.Node, ready, fmt.Sprint(rep.Restarts), leader})
	}
	ui.Table(w, []string{"  REPLICA", "NODE", "STATUS", "RESTARTS", "LEADER"}, rows)
}
