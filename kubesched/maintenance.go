package kubesched

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/internal/shell"
	"github.com/hactl/hactl/provision"
)

// Maintenance annotations next to the label (scheduler/plugins/maintenanceguard quotes them).
const (
	MaintenanceSinceAnnotation  = "hactl.io/maintenance-since"
	MaintenanceReasonAnnotation = "hactl.io/maintenance-reason"
)

// MaintenanceLabel is the node label that marks maintenance for c: spec.scheduler.maintenanceLabel,
// else v1alpha1.DefaultMaintenanceLabel.
func MaintenanceLabel(c *v1alpha1.Cluster) string {
	if s := c.Spec.Scheduler; s != nil && s.MaintenanceLabel != "" {
		return s.MaintenanceLabel
	}
	return v1alpha1.DefaultMaintenanceLabel
}

// SetMaintenance marks node for maintenance (on: the label set to "true", the since and reason
// annotations) or clears the mark (off: all three removed), through a control plane as admin.
// MaintenanceGuard then keeps new pods of hactl-scheduler off the node; pods on it stay. Errors:
// *UsageError when node is not a Kubernetes node of the spec (found before any host is contacted);
// the kubectl failure per control plane otherwise.
func SetMaintenance(ctx context.Context, c *v1alpha1.Cluster, p provision.Prompter, node string, on bool, reason string, now time.Time) error {
	var names []string
	for _, h := range c.KubeNodes() {
		names = append(names, h.Name)
	}
	if !slices.Contains(names, node) {
		return &UsageError{"NODE", fmt.Sprintf("%q is not a Kubernetes node of the spec (nodes: %s)", node, strings.Join(names, ", "))}
	}
	d, err := provision.FromSpec(c, provision.SpecOptions{Prompt: p})
	if err != nil {
		return fmt.Errorf("ssh: %w", err)
	}
	defer d.Close()
	label := MaintenanceLabel(c)
	n := shell.Quote(node)
	var args string
	if on {
		args = fmt.Sprintf("annotate node %s --overwrite %s %s && kubectl --kubeconfig /etc/kubernetes/admin.conf label node %s --overwrite %s",
			n, shell.Quote(MaintenanceSinceAnnotation+"="+now.UTC().Format(time.RFC3339)), shell.Quote(MaintenanceReasonAnnotation+"="+reason), n, shell.Quote(label+"=true"))
	} else {
		args = fmt.Sprintf("label node %s %s && kubectl --kubeconfig /etc/kubernetes/admin.conf annotate node %s %s %s",
			n, shell.Quote(label+"-"), n, shell.Quote(MaintenanceSinceAnnotation+"-"), shell.Quote(MaintenanceReasonAnnotation+"-"))
	}
	_, err = kubectl(ctx, d, c, "maintenance", args, nil)
	return err
}
