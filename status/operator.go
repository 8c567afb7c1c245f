package status

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/kubeapi"
	"github.com/hactl/hactl/operator/deploy"
	"github.com/hactl/hactl/ui"
)

// OperatorStatus is the hactl-operator section of `hactl status` (spec.kubernetes): its replicas,
// its Lease holder and the EtcdCluster's phase, conditions and newest snapshot, through the API
// over SSH (deploy.ReadStatus, namespace deploy.DefaultNamespace).
type OperatorStatus struct {
	deploy.Status
	// Error is why the API could not be asked.
	Error string `json:"error,omitempty"`
	// Drift is what cluster.yaml must still change after the operator's heals (deploy.Drift).
	Drift []string `json:"drift,omitempty"`
	// Problems (also in Report.Problems, prefixed "operator: "): Status.Problems and Drift, or the
	// error reading them (not an unreachable API: the Kubernetes section has that).
	Problems []string `json:"problems,omitempty"`
}

// collectOperator reads hactl-operator's status in namespace ns through api (apiErr: why there is none).
func collectOperator(ctx context.Context, c *v1alpha1.Cluster, ns string, api *kubeapi.Client, apiErr error) *OperatorStatus {
	ops := &OperatorStatus{}
	ops.Namespace = ns
	if apiErr != nil {
		// Whether the operator runs is unknown; the Kubernetes section reports the API itself.
		ops.Error = "the API could not be asked: " + apiErr.Error()
		return ops
	}
	st, err := deploy.ReadStatus(ctx, api.Config, ns, c.Metadata.Name)
	if err != nil {
		ops.Error = err.Error()
		ops.Problems = []string{err.Error()}
		return ops
	}
	ops.Status = *st
	ops.Problems = st.Problems(deploy.LeaseDuration, time.Now())
	ops.Drift = deploy.Drift(c, st.Heals)
	ops.Problems = append(ops.Problems, ops.Drift...)
	return ops
}

func (r *Report) addOperator(ops *OperatorStatus) {
	if ops == nil || (!ops.Deployed && ops.Error == "") {
		return
	}
	r.Operator = ops
	for _, p := range ops.Problems {
		r.Problems = append(r.Problems, "operator: "+p)
	}
	r.Healthy = len(r.Problems) == 0
}

func printOperator(w io.Writer, ops *OperatorStatus) {
	fmt.Fprintf(w, "\noperator: %s/%s", ops.Namespace, deploy.Name)
	if ops.Error != "" {
		fmt.Fprintf(w, ": %s\n", ops.Error)
		return
	}
	fmt.Fprintf(w, " %d/%d available, Lease held by %s; EtcdCluster %s, etcd leader %s\n", ops.AvailableReplicas, ops.Replicas, dash(ops.Holder), dash(string(ops.Phase)), dash(ops.Leader))
	var rows [][]string
	for _, c := range ops.Conditions {
		rows = append(rows, []string{"  " + c.Type, string(c.Status), c.Reason, c.Message})
	}
	if len(rows) > 0 {
		ui.Table(w, []string{"  CONDITION", "STATUS", "REASON", "MESSAGE"}, rows)
	}
	if s := ops.LastSnapshot; s != nil {
		fmt.Fprintf(w, "  last snapshot %s (revision %d, %d bytes) at %s\n", s.Name, s.Revision, s.SizeBytes, s.Time.UTC().Format(time.RFC3339))
	}
	if h := ops.Healing; h != nil {
		fmt.Fprintf(w, "  healing: replacing %s (ID %s) by a member on %s, step %s since %s (attempt %d)\n", h.Member, h.MemberID, h.Spare, h.Step, h.StepAt.UTC().Format(time.RFC3339), h.Attempts+1)
	}
	for _, d := range ops.Drift {
		fmt.Fprintf(w, "  drift: %s\n", d)
	}
}
