// Package maintenanceguard is the MaintenanceGuard filter plugin: a node carrying the maintenance label
// (hactl.io/maintenance, set by `hactl maintenance start NODE`) receives no new pod, and the pod's
// unschedulable reason names the node. Pods already on it stay (draining is a separate step). A pod that
// tolerates a taint of the label's key (operator Exists, or Equal to the label's value) is let through,
// as a DaemonSet's pods tolerate node.kubernetes.io/unschedulable.
package maintenanceguard

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/hactl/hactl/scheduler/apis/config"
	"github.com/hactl/hactl/scheduler/apis/config/validation"
)

// Name is the plugin's name in the registry and in KubeSchedulerConfiguration.
const Name = "MaintenanceGuard"

// SinceAnnotation and ReasonAnnotation are the node annotations `hactl maintenance start` writes next
// to the label; the filter's reason quotes them when present.
const (
	SinceAnnotation  = "hactl.io/maintenance-since"
	ReasonAnnotation = "hactl.io/maintenance-reason"
)

// MaintenanceGuard filters out nodes under maintenance.
type MaintenanceGuard struct {
	label string
}

var (
	_ fwk.FilterPlugin      = &MaintenanceGuard{}
	_ fwk.EnqueueExtensions = &MaintenanceGuard{}
	_ fwk.SignPlugin        = &MaintenanceGuard{}
)

// New builds the plugin from its args (*config.MaintenanceGuardArgs); it returns the args' validation
// errors with their field path under "args".
func New(_ context.Context, obj runtime.Object, _ fwk.Handle) (fwk.Plugin, error) {
	args, ok := obj.(*config.MaintenanceGuardArgs)
	if !ok {
		return nil, fmt.Errorf("%s: want args of type MaintenanceGuardArgs, got %T (is pluginConfig's apiVersion kubescheduler.config.k8s.io/v1?)", Name, obj)
	}
	if err := validation.ValidateMaintenanceGuardArgs(field.NewPath("args"), args); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	return &MaintenanceGuard{label: args.Label}, nil
}

// Name returns Name.
func (g *MaintenanceGuard) Name() string { return Name }

// SignPod signs the pod's tolerations, the only part of the pod the filter reads.
func (g *MaintenanceGuard) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	return []fwk.SignFragment{{Key: fwk.TolerationsSignerName, Value: fwk.TolerationsSigner(pod)}}, nil
}

// Filter rejects a node carrying the label as UnschedulableAndUnresolvable (preemption cannot help),
// with a reason naming the node and, when annotated, since when and why.
func (g *MaintenanceGuard) Filter(_ context.Context, _ fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	node := nodeInfo.Node()
	if node == nil {
		return fwk.NewStatus(fwk.Error, "node not found")
	}
	value, marked := node.Labels[g.label]
	if !marked || g.tolerated(pod, value) {
		return nil
	}
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, Reason(node, g.label))
}

// Reason is the unschedulable reason for node under maintenance by label: "node w-b is under
// maintenance (hactl.io/maintenance since 2026-12-02T07:00:00Z: kernel upgrade)".
func Reason(node *v1.Node, label string) string {
	msg := fmt.Sprintf("node %s is under maintenance (%s", node.Name, label)
	if s := node.Annotations[SinceAnnotation]; s != "" {
		msg += " since " + s
	}
	if r := node.Annotations[ReasonAnnotation]; r != "" {
		msg += ": " + r
	}
	return msg + ")"
}

func (g *MaintenanceGuard) tolerated(pod *v1.Pod, value string) bool {
	for _, t := range pod.Spec.Tolerations {
		if t.Key != g.label || (t.Effect != "" && t.Effect != v1.TaintEffectNoSchedule) {
			continue
		}
		if t.Operator == v1.TolerationOpExists || t.Value == value {
			return true
		}
	}
	return false
}

// EventsToRegister requeues pods this plugin rejected when a node is added or its labels change in a
// way that may clear the mark, and when a pod's tolerations change.
func (g *MaintenanceGuard) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeLabel}, QueueingHintFn: g.afterNodeChange},
		{Event: fwk.ClusterEvent{Resource: fwk.TargetPod, ActionType: fwk.UpdatePodToleration}},
	}, nil
}

func (g *MaintenanceGuard) afterNodeChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	_, node, err := util.As[*v1.Node](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	if _, marked := node.Labels[g.label]; marked {
		logger.V(5).Info("node still under maintenance", "pod", klog.KObj(pod), "node", klog.KObj(node))
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}
