package kubesched

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/hactl/hactl/api/v1alpha1"
)

// Maintenance annotations next to the label (scheduler/plugins/maintenanceguard quotes them).
const (
	MaintenanceSinceAnnotation  = "hactl.io/maintenance-since"
	MaintenanceReasonAnnotation = "hactl.io/maintenance-reason"
)

// MaintenanceLabel is the node label that marks maintenance for c (nil: no spec):
// spec.scheduler.maintenanceLabel, else v1alpha1.DefaultMaintenanceLabel.
func MaintenanceLabel(c *v1alpha1.Cluster) string {
	if c != nil && c.Spec.Scheduler != nil && c.Spec.Scheduler.MaintenanceLabel != "" {
		return c.Spec.Scheduler.MaintenanceLabel
	}
	return v1alpha1.DefaultMaintenanceLabel
}

// CheckSpecNode returns a *UsageError when node is not a Kubernetes node of c (checked before any
// host is contacted).
func CheckSpecNode(c *v1alpha1.Cluster, node string) error {
	var names []string
	for _, h := range c.KubeNodes() {
		names = append(names, h.Name)
	}
	if !slices.Contains(names, node) {
		return &UsageError{"NODE", fmt.Sprintf("%q is not a Kubernetes node of the spec (nodes: %s)", node, strings.Join(names, ", "))}
	}
	return nil
}

// SetMaintenance marks node for maintenance (on: label set to "true", the since and reason
// annotations) or clears the mark (off: all three removed), in one merge patch. MaintenanceGuard then
// keeps new pods of hactl-scheduler off the node; pods on it stay. Errors: *UsageError when the API
// has no such node; the API's error otherwise.
func SetMaintenance(ctx context.Context, cs kubernetes.Interface, label, node string, on bool, reason string, now time.Time) error {
	var labels, annotations map[string]any
	if on {
		labels = map[string]any{label: "true"}
		annotations = map[string]any{MaintenanceSinceAnnotation: now.UTC().Format(time.RFC3339), MaintenanceReasonAnnotation: nil}
		if reason != "" {
			annotations[MaintenanceReasonAnnotation] = reason
		}
	} else {
		labels = map[string]any{label: nil}
		annotations = map[string]any{MaintenanceSinceAnnotation: nil, MaintenanceReasonAnnotation: nil}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels, "annotations": annotations}})
	if err != nil {
		return err
	}
	_, err = cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
	if apierrors.IsNotFound(err) {
		return &UsageError{"NODE", fmt.Sprintf("the cluster has no node %q (kubectl get nodes lists them)", node)}
	}
	if err != nil {
		return fmt.Errorf("node %s: %w", node, err)
	}
	return nil
}
