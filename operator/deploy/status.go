package deploy

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/hactl/hactl/api/v1alpha1"
	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
)

// Status is what `hactl status` shows of the operator: its Deployment, the Lease holder and the
// EtcdCluster's phase, conditions and newest snapshot.
type Status struct {
	// Namespace is where it was looked for.
	Namespace string `json:"namespace"`
	// Deployed: the Deployment exists.
	Deployed bool `json:"deployed"`
	// Replicas and AvailableReplicas are the Deployment's.
	Replicas          int32 `json:"replicas"`
	AvailableReplicas int32 `json:"availableReplicas"`
	// Holder is the Lease's holderIdentity ("" when none); RenewTime its last renewal.
	Holder    string    `json:"holderIdentity,omitempty"`
	RenewTime time.Time `json:"renewTime,omitempty"`
	// Phase, Leader (the etcd leader as the operator saw it), Conditions and LastSnapshot are the
	// EtcdCluster's status; ObservedAt the newest condition transition.
	Phase        hactlv1.Phase        `json:"phase,omitempty"`
	Leader       string               `json:"leader,omitempty"`
	Conditions   []metav1.Condition   `json:"conditions,omitempty"`
	LastSnapshot *hactlv1.SnapshotRef `json:"lastSnapshot,omitempty"`
	// Healing is the member replacement in progress; Heals the finished ones (the EtcdCluster's
	// status.healing and status.heals).
	Healing *hactlv1.HealingStatus `json:"healing,omitempty"`
	Heals   []hactlv1.HealRecord   `json:"heals,omitempty"`
}

// ReadStatus reads the operator's Deployment and Lease in namespace and the EtcdCluster
// clusterName there. A missing Deployment is Deployed false and no error; a missing EtcdCluster
// (or CRD) leaves its fields empty. Errors: the API server's, other than not found.
func ReadStatus(ctx context.Context, cfg *rest.Config, namespace, clusterName string) (*Status, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	st := &Status{Namespace: namespace}
	d, err := cs.AppsV1().Deployments(namespace).Get(ctx, Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return st, nil
	case err != nil:
		return nil, fmt.Errorf("deployment %s/%s: %w", namespace, Name, err)
	}
	st.Deployed, st.AvailableReplicas = true, d.Status.AvailableReplicas
	if d.Spec.Replicas != nil {
		st.Replicas = *d.Spec.Replicas
	}
	l, err := cs.CoordinationV1().Leases(namespace).Get(ctx, Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, fmt.Errorf("lease %s/%s: %w", namespace, Name, err)
	default:
		if l.Spec.HolderIdentity != nil {
			st.Holder = *l.Spec.HolderIdentity
		}
		if l.Spec.RenewTime != nil {
			st.RenewTime = l.Spec.RenewTime.Time
		}
	}
	ec, err := getEtcdCluster(ctx, dyn, namespace, clusterName)
	if err != nil || ec == nil {
		if err != nil {
			return nil, err
		}
		return st, nil
	}
	st.Phase, st.Leader, st.Conditions, st.LastSnapshot = ec.Status.Phase, ec.Status.Leader, ec.Status.Conditions, ec.Status.LastSnapshot
	st.Healing, st.Heals = ec.Status.Healing, ec.Status.Heals
	return st, nil
}

// Drift says, for each heal of heals that succeeded, what cluster.yaml (c) must still change to
// describe the cluster the operator left: the new member's spare is not yet an etcd host of the
// spec, or the lost member still is. A heal whose result the spec already shows says nothing. The
// words are the ones hactl status, plan and bootstrap print; none means the spec agrees.
func Drift(c *v1alpha1.Cluster, heals []hactlv1.HealRecord) []string {
	etcdHost := map[string]bool{}
	for _, h := range c.EtcdHosts() {
		etcdHost[h.Name] = true
	}
	replaced := map[string]bool{} // members a later heal replaced again
	var out []string
	for i := len(heals) - 1; i >= 0; i-- {
		h := heals[i]
		if h.Result != hactlv1.HealSucceeded {
			continue
		}
		if replaced[h.Spare] { // a later heal replaced the new member again: that one speaks
			replaced[h.Member] = true
			continue
		}
		replaced[h.Member] = true
		if etcdHost[h.Spare] && !etcdHost[h.Member] {
			continue
		}
		out = append(out, fmt.Sprintf("%s was replaced by %s at %s (hactl-operator's heal): move %s from spec.etcd.spares into the etcd hosts of cluster.yaml in place of %s, then run hactl operator adopt",
			h.Member, h.Spare, h.FinishedAt.UTC().Format(time.RFC3339), h.Spare, h.Member))
	}
	slices.Reverse(out)
	return out
}

// Problems judges st: no replica available, no Lease holder, a holder that stopped renewing (older
// than twice leaseDuration, or no renewal recorded), and each EtcdCluster condition that is bad
// (Available or BackupFresh false, Degraded or QuorumAtRisk true), with its message. Nothing
// deployed is no problem.
func (st *Status) Problems(leaseDuration time.Duration, now time.Time) []string {
	if !st.Deployed {
		return nil
	}
	var out []string
	if st.AvailableReplicas == 0 {
		out = append(out, fmt.Sprintf("no replica of %d available", st.Replicas))
	}
	switch {
	case st.Holder == "":
		out = append(out, fmt.Sprintf("no replica holds Lease %s/%s", st.Namespace, Name))
	case st.RenewTime.IsZero():
		out = append(out, fmt.Sprintf("Lease %s/%s held by %s records no renewal", st.Namespace, Name, st.Holder))
	case now.Sub(st.RenewTime) > 2*leaseDuration:
		out = append(out, fmt.Sprintf("Lease %s/%s last renewed %s ago by %s: its holder stopped renewing", st.Namespace, Name, now.Sub(st.RenewTime).Round(time.Second), st.Holder))
	}
	for _, c := range st.Conditions {
		bad := (c.Type == hactlv1.ConditionAvailable || c.Type == hactlv1.ConditionBackupFresh) && c.Status == metav1.ConditionFalse ||
			(c.Type == hactlv1.ConditionDegraded || c.Type == hactlv1.ConditionQuorumAtRisk) && c.Status == metav1.ConditionTrue
		if bad {
			out = append(out, fmt.Sprintf("%s=%s (%s): %s", c.Type, c.Status, c.Reason, c.Message))
		}
	}
	return out
}

// LeaseDuration is the operator's default leaseDuration (hactl-operator --leader-elect-lease-duration),
// which Deployments made by Build keep.
const LeaseDuration = 15 * time.Second

// BackedUpClusters lists the EtcdClusters in namespace whose spec.backup is set: the ones whose
// operator takes scheduled snapshots (what the Lease drill's slot check counts). No CRD installed
// is an empty list. Errors: the API server's, other than not found, or an object that does not
// convert.
func BackedUpClusters(ctx context.Context, cfg *rest.Config, namespace string) ([]hactlv1.EtcdCluster, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	l, err := dyn.Resource(hactlv1.GroupVersion.WithResource("etcdclusters")).Namespace(namespace).List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("listing etcdclusters in %s: %w", namespace, err)
	}
	var out []hactlv1.EtcdCluster
	for _, u := range l.Items {
		var ec hactlv1.EtcdCluster
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ec); err != nil {
			return nil, fmt.Errorf("etcdcluster %s/%s: %w", namespace, u.GetName(), err)
		}
		if ec.Spec.Backup != nil {
			out = append(out, ec)
		}
	}
	return out, nil
}

// DriftError refuses `hactl bootstrap` and `plan` while the operator's heals are not yet in
// cluster.yaml: run on that spec, bootstrap would put the lost member back and leave the spare's
// member out, undoing the heal. Drift is Drift's words, one per heal.
type DriftError struct {
	Drift []string
}

func (e *DriftError) Error() string {
	return fmt.Sprintf("cluster.yaml does not describe the cluster hactl-operator left, so hactl changes nothing until it does: %s", strings.Join(e.Drift, "; "))
}

// getEtcdCluster reads the EtcdCluster name in namespace through dyn: nil when it (or its CRD) does
// not exist. Errors: the API's and the conversion's, naming the object.
func getEtcdCluster(ctx context.Context, dyn dynamic.Interface, namespace, name string) (*hactlv1.EtcdCluster, error) {
	u, err := dyn.Resource(hactlv1.GroupVersion.WithResource("etcdclusters")).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("etcdcluster %s/%s: %w", namespace, name, err)
	}
	var ec hactlv1.EtcdCluster
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ec); err != nil {
		return nil, fmt.Errorf("etcdcluster %s/%s: %w", namespace, name, err)
	}
	return &ec, nil
}
