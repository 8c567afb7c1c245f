package deploy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/kubeadm/images"
	"github.com/hactl/hactl/kubeapi"
	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/ui"
)

// Ready is what WaitReady saw: the Deployment's available replicas and the EtcdCluster's phase.
type Ready struct {
	AvailableReplicas int32         `json:"availableReplicas"`
	Phase             hactlv1.Phase `json:"phase"`
	Leader            string        `json:"leader,omitempty"`
	// Conditions are the EtcdCluster's, as TYPE=STATUS (REASON).
	Conditions []string `json:"conditions,omitempty"`
}

// WaitReady waits up to timeout until the Deployment has an available replica and the EtcdCluster
// clusterName has been observed by it (a phase other than Pending, and observedGeneration at its
// generation). Errors: the timeout, with what was last seen (the pods' state to look at next).
func WaitReady(ctx context.Context, cfg *rest.Config, namespace, clusterName string, timeout time.Duration) (Ready, error) {
	var r Ready
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return r, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return r, err
	}
	var last error
	err = wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(pctx context.Context) (bool, error) {
		// Each look has its own bound, so the last error is a real one, not the poll's deadline.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(pctx), 10*time.Second)
		defer cancel()
		d, err := cs.AppsV1().Deployments(namespace).Get(ctx, Name, metav1.GetOptions{})
		if err != nil {
			last = err
			return false, nil
		}
		r.AvailableReplicas = d.Status.AvailableReplicas
		u, err := dyn.Resource(hactlv1.GroupVersion.WithResource("etcdclusters")).Namespace(namespace).Get(ctx, clusterName, metav1.GetOptions{})
		if err != nil {
			last = err
			return false, nil
		}
		var ec hactlv1.EtcdCluster
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ec); err != nil {
			return false, err
		}
		r.Phase, r.Leader, r.Conditions = ec.Status.Phase, ec.Status.Leader, nil
		for _, c := range ec.Status.Conditions {
			r.Conditions = append(r.Conditions, fmt.Sprintf("%s=%s (%s)", c.Type, c.Status, c.Reason))
		}
		last = fmt.Errorf("%d available replica(s), EtcdCluster phase %q (observed generation %d of %d; conditions %s)",
			r.AvailableReplicas, r.Phase, ec.Status.ObservedGeneration, ec.Generation, strings.Join(r.Conditions, ", "))
		return r.AvailableReplicas > 0 && r.Phase != "" && r.Phase != hactlv1.PhasePending && ec.Status.ObservedGeneration == ec.Generation, nil
	})
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || wait.Interrupted(err) {
			return r, fmt.Errorf("hactl-operator not ready after %s: %w; its pods: %s", timeout, last, podsSummary(ctx, cs, namespace))
		}
		return r, err
	}
	return r, nil
}

// podsSummary describes the operator's pods for an error: phase, each container's waiting or
// terminated reason and message, restarts, and the last lines of the first unready pod's log.
func podsSummary(ctx context.Context, cs kubernetes.Interface, namespace string) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + Name})
	if err != nil {
		return "cannot list them: " + err.Error()
	}
	if len(pods.Items) == 0 {
		return "none (kubectl -n " + namespace + " get events)"
	}
	var parts []string
	logged := false
	for _, p := range pods.Items {
		desc := fmt.Sprintf("%s on %s: %s", p.Name, p.Spec.NodeName, p.Status.Phase)
		for _, c := range p.Status.Conditions {
			if c.Type == "PodScheduled" && c.Status != "True" {
				desc += fmt.Sprintf(" (unschedulable: %s)", c.Message)
			}
		}
		ready := false
		for _, c := range p.Status.ContainerStatuses {
			ready = ready || c.Ready
			switch {
			case c.State.Waiting != nil:
				desc += fmt.Sprintf(", %s waiting: %s %s", c.Name, c.State.Waiting.Reason, c.State.Waiting.Message)
			case c.State.Terminated != nil:
				desc += fmt.Sprintf(", %s terminated: %s (exit %d)", c.Name, c.State.Terminated.Reason, c.State.Terminated.ExitCode)
			}
			if c.RestartCount > 0 {
				desc += fmt.Sprintf(", %d restarts", c.RestartCount)
			}
		}
		if !ready {
			if w := kubeapi.PodWarning(ctx, cs, namespace, p.Name); w != "" {
				desc += " (event " + w + ")"
			}
		}
		if !ready && !logged && p.Status.Phase != "Pending" {
			tail := int64(15)
			if b, err := cs.CoreV1().Pods(namespace).GetLogs(p.Name, &corev1.PodLogOptions{TailLines: &tail}).DoRaw(ctx); err == nil && len(b) > 0 {
				desc += "; its log ends:\n" + string(b)
				logged = true
			}
		}
		parts = append(parts, desc)
	}
	return strings.Join(parts, "; ")
}

// ImportArchive streams the image archive at path into the containerd of every Kubernetes node of
// c over SSH (as `kind load image-archive` does for kind's nodes), in parallel up to
// spec.ssh.maxParallel, each node reported on p. Errors: per node (*provision.HostError,
// aggregated).
func ImportArchive(ctx context.Context, c *v1alpha1.Cluster, prompt provision.Prompter, path string, p *ui.Printer) error {
	d, err := provision.FromSpec(c, provision.SpecOptions{Prompt: prompt})
	if err != nil {
		return fmt.Errorf("ssh: %w", err)
	}
	defer d.Close()
	return provision.ForEach(ctx, c.KubeNodes(), c.Spec.SSH.MaxParallel, func(h v1alpha1.Host) string { return h.Name }, func(ctx context.Context, h v1alpha1.Host) error {
		cli, err := d.Dial(ctx, provision.TargetOf(h))
		if err != nil {
			return err
		}
		defer cli.Close()
		start := time.Now()
		if err := images.Import(ctx, cli, "operator/image", path); err != nil {
			return err
		}
		p.Hostf(h.Name, "operator/image: imported in %s", time.Since(start).Round(100*time.Millisecond))
		return nil
	})
}
