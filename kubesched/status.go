package kubesched

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hactl/hactl/api/v1alpha1"
)

// Status is the scheduler's replicas and its Lease, as `hactl scheduler status` prints them.
type Status struct {
	Lease    LeaseStatus `json:"lease"`
	Replicas []Replica   `json:"replicas"`
}

// LeaseStatus is the Lease's spec: holderIdentity, renewTime (the holder's clock), transitions.
type LeaseStatus struct {
	Namespace   string    `json:"namespace"`
	Name        string    `json:"name"`
	Holder      string    `json:"holderIdentity"`
	RenewTime   time.Time `json:"renewTime"`
	Transitions int32     `json:"leaseTransitions"`
	Duration    int32     `json:"leaseDurationSeconds"`
}

// Replica is one scheduler pod.
type Replica struct {
	Pod      string `json:"pod"`
	Node     string `json:"node"`
	Ready    bool   `json:"ready"`
	Restarts int32  `json:"restarts"`
	Leader   bool   `json:"leader"`
	// ConfigSHA256 is the sha256 of the configuration the replica runs (ConfigHashAnnotation).
	ConfigSHA256 string `json:"configSHA256,omitempty"`
	// Waiting is why its container is not running, when kubelet says (e.g. ImagePullBackOff:
	// the message).
	Waiting string `json:"waiting,omitempty"`
}

// stuckReasons are kubelet's waiting reasons that no amount of waiting mends: the image cannot be
// pulled or the configuration makes the container exit.
var stuckReasons = []string{"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "CreateContainerConfigError", "CrashLoopBackOff"}

// ReadStatus reads the Lease of s and the scheduler's pods (label Selector in kube-system, static or
// Deployment). A missing Lease is an empty holder, not an error.
func ReadStatus(ctx context.Context, cs kubernetes.Interface, s *v1alpha1.Scheduler) (Status, error) {
	le := s.LeaderElection
	st := Status{Lease: LeaseStatus{Namespace: le.ResourceNamespace, Name: le.ResourceName}}
	l, err := cs.CoordinationV1().Leases(le.ResourceNamespace).Get(ctx, le.ResourceName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return st, fmt.Errorf("Lease %s/%s: %w", le.ResourceNamespace, le.ResourceName, err)
	default:
		if h := l.Spec.HolderIdentity; h != nil {
			st.Lease.Holder = *h
		}
		if t := l.Spec.RenewTime; t != nil {
			st.Lease.RenewTime = t.Time
		}
		if n := l.Spec.LeaseTransitions; n != nil {
			st.Lease.Transitions = *n
		}
		if n := l.Spec.LeaseDurationSeconds; n != nil {
			st.Lease.Duration = *n
		}
	}
	pods, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: Selector})
	if err != nil {
		return st, fmt.Errorf("scheduler pods: %w", err)
	}
	holderHost := HolderHost(st.Lease.Holder)
	for _, p := range pods.Items {
		r := Replica{Pod: p.Name, Node: p.Spec.NodeName, ConfigSHA256: p.Annotations[ConfigHashAnnotation]}
		for _, c := range p.Status.Conditions {
			if c.Type == "Ready" {
				r.Ready = c.Status == "True"
			}
		}
		for _, c := range p.Status.ContainerStatuses {
			r.Restarts += c.RestartCount
			if w := c.State.Waiting; w != nil && w.Reason != "" {
				r.Waiting = w.Reason
				if w.Message != "" {
					r.Waiting += ": " + w.Message
				}
			}
		}
		r.Leader = holderHost != "" && (holderHost == r.Pod || (p.Spec.HostNetwork && holderHost == r.Node))
		st.Replicas = append(st.Replicas, r)
	}
	return st, nil
}

// HolderHost is the hostname part of a holderIdentity: client-go's leader election in kube-scheduler
// and kube-controller-manager writes hostname "_" UUID (cmd/kube-scheduler/app/options).
func HolderHost(holder string) string {
	h, _, _ := strings.Cut(holder, "_")
	return h
}

// WaitReady polls until replicas replicas run the configuration of sha256 config and are Ready (so
// the old ones, which held the Lease with the previous configuration, are gone), and a holder renewed
// the Lease within its duration; or wait passes.
func WaitReady(ctx context.Context, cs kubernetes.Interface, s *v1alpha1.Scheduler, wait time.Duration, config string, replicas int) (Status, error) {
	deadline := time.Now().Add(wait)
	for {
		st, err := ReadStatus(ctx, cs, s)
		current := 0
		for _, r := range st.Replicas {
			if r.Ready && r.ConfigSHA256 == config {
				current++
			}
		}
		if err == nil && current == replicas && st.Lease.Holder != "" && time.Since(st.Lease.RenewTime) < s.LeaderElection.LeaseDuration.Duration {
			return st, nil
		}
		// A replica of the new configuration that cannot start is reported at once, not at the deadline.
		for _, r := range st.Replicas {
			reason, _, _ := strings.Cut(r.Waiting, ":")
			if r.ConfigSHA256 == config && slices.Contains(stuckReasons, reason) && (reason != "CrashLoopBackOff" || r.Restarts >= 2) {
				return st, fmt.Errorf("scheduler/wait: replica %s on %s: %s; see kubectl -n kube-system describe pod %s (and logs)", r.Pod, r.Node, r.Waiting, r.Pod)
			}
		}
		if time.Now().After(deadline) {
			if err != nil {
				return st, fmt.Errorf("scheduler/wait: %w", err)
			}
			return st, fmt.Errorf("scheduler/wait: after %s, %d of %d replicas run the new configuration Ready (%s), Lease %s/%s holder %q: see kubectl -n kube-system logs -l %s",
				wait, current, replicas, describeReplicas(st.Replicas, config), s.LeaderElection.ResourceNamespace, s.LeaderElection.ResourceName, st.Lease.Holder, Selector)
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// describeReplicas says, per pod, what WaitReady saw: "pod on node: new|old configuration, Ready|not
// Ready[, waiting: reason][, N restarts]", joined by "; " ("no pods" when there are none).
func describeReplicas(rs []Replica, config string) string {
	if len(rs) == 0 {
		return "no pods"
	}
	parts := make([]string, 0, len(rs))
	for _, r := range rs {
		conf := "old configuration"
		if r.ConfigSHA256 == config {
			conf = "new configuration"
		}
		ready := "Ready"
		if !r.Ready {
			ready = "not Ready"
		}
		d := fmt.Sprintf("%s on %s: %s, %s", r.Pod, r.Node, conf, ready)
		if r.Waiting != "" {
			d += ", waiting: " + r.Waiting
		}
		if r.Restarts > 0 {
			d += fmt.Sprintf(", %d restarts", r.Restarts)
		}
		parts = append(parts, d)
	}
	return strings.Join(parts, "; ")
}
