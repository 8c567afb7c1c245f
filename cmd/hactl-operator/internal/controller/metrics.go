package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
	"github.com/hactl/hactl/operator/observe"
)

// The operator's metrics (controller-runtime's registry, served on --metrics-bind-address next to
// controller-runtime's own, leader_election_master_status among them). Only the replica holding
// the Lease reconciles, so only it exports the per-cluster series; a replica that loses the Lease
// exits (controller-runtime), so no stale series outlive a takeover. The label cluster is
// "<namespace>/<name>" of the EtcdCluster. deploy/prometheus/hactl-operator.rules.yaml alerts on
// them.
var (
	metricMembers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hactl_operator_etcd_members", Help: "etcd members in the EtcdCluster's spec.",
	}, []string{"cluster"})
	metricHealthy = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hactl_operator_etcd_healthy_members", Help: "etcd members that answered and served a linearizable read at the last look.",
	}, []string{"cluster"})
	metricHasLeader = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hactl_operator_etcd_has_leader", Help: "1 when the last look found an etcd leader, else 0.",
	}, []string{"cluster"})
	metricCondition = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hactl_operator_condition", Help: "The EtcdCluster's conditions: 1 for status True, 0 for False (Unknown: no series).",
	}, []string{"cluster", "type", "reason"})
	metricLastSnapshot = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hactl_operator_last_snapshot_timestamp_seconds", Help: "When the newest snapshot in the object store was stored (Unix seconds).",
	}, []string{"cluster"})
	metricSnapshots = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hactl_operator_snapshots_total", Help: "Scheduled snapshots this replica attempted, by result (stored, failed).",
	}, []string{"cluster", "result"})
	metricFreeSpares = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hactl_operator_free_spares", Help: "Spares of spec.healing that run no member (only with spec.healing).",
	}, []string{"cluster"})
	metricHealingSince = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hactl_operator_heal_started_timestamp_seconds", Help: "When the member replacement in progress started (Unix seconds); no series without one.",
	}, []string{"cluster"})
	metricHeals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hactl_operator_heals_total", Help: "Member replacements this replica finished, by result (Succeeded, Failed).",
	}, []string{"cluster", "result"})
)

func init() {
	metrics.Registry.MustRegister(metricMembers, metricHealthy, metricHasLeader, metricCondition, metricLastSnapshot, metricSnapshots,
		metricFreeSpares, metricHealingSince, metricHeals)
}

// recordMetrics sets the per-cluster gauges from the status just written.
func recordMetrics(ec *hactlv1.EtcdCluster, st *hactlv1.EtcdClusterStatus) {
	cluster := ec.Namespace + "/" + ec.Name
	healthy := 0
	for _, m := range st.Members {
		if m.Healthy {
			healthy++
		}
	}
	metricMembers.WithLabelValues(cluster).Set(float64(len(ec.Spec.Members)))
	metricHealthy.WithLabelValues(cluster).Set(float64(healthy))
	leader := 0.0
	if st.Leader != "" {
		leader = 1
	}
	metricHasLeader.WithLabelValues(cluster).Set(leader)
	metricCondition.DeletePartialMatch(prometheus.Labels{"cluster": cluster})
	for _, c := range st.Conditions {
		switch c.Status {
		case metav1.ConditionTrue:
			metricCondition.WithLabelValues(cluster, c.Type, c.Reason).Set(1)
		case metav1.ConditionFalse:
			metricCondition.WithLabelValues(cluster, c.Type, c.Reason).Set(0)
		}
	}
	if st.LastSnapshot != nil {
		metricLastSnapshot.WithLabelValues(cluster).Set(float64(st.LastSnapshot.Time.Unix()))
	} else {
		metricLastSnapshot.DeleteLabelValues(cluster)
	}
	if ec.Spec.Healing != nil {
		metricFreeSpares.WithLabelValues(cluster).Set(float64(observe.FreeSpares(ec.Spec, nil)))
	} else {
		metricFreeSpares.DeleteLabelValues(cluster)
	}
	if st.Healing != nil {
		metricHealingSince.WithLabelValues(cluster).Set(float64(st.Healing.StartedAt.Unix()))
	} else {
		metricHealingSince.DeleteLabelValues(cluster)
	}
}

// forgetMetrics drops a deleted EtcdCluster's series.
func forgetMetrics(namespace, name string) {
	l := prometheus.Labels{"cluster": namespace + "/" + name}
	for _, v := range []*prometheus.GaugeVec{metricMembers, metricHealthy, metricHasLeader, metricCondition, metricLastSnapshot, metricFreeSpares, metricHealingSince} {
		v.DeletePartialMatch(l)
	}
	metricSnapshots.DeletePartialMatch(l)
	metricHeals.DeletePartialMatch(l)
}
