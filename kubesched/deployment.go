package kubesched

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/kubeadm/images"
	"github.com/hactl/hactl/ui"
)

// In a pod the configuration comes from a ConfigMap mounted here.
const (
	podConfigDir   = "/etc/hactl-scheduler"
	configMapName  = User + "-config"
	controlPlaneNS = "kube-system"
)

// Objects returns everything the Deployment mode applies, in order: the ServiceAccount, the RBAC
// (RBAC with the ServiceAccount as subject), the ConfigMap with the configuration (in-cluster
// client), the Deployment and its PodDisruptionBudget. The Deployment: s.Replicas replicas, required
// anti-affinity per hostname (never two on one node), spread across zones (ScheduleAnyway), priority
// class system-cluster-critical, the control planes' NoSchedule taint tolerated, liveness and
// readiness on the secure port, non-root without capabilities; its pods carry the configuration's
// sha256, so a changed configuration rolls them. The PodDisruptionBudget lets one replica go at a time.
func Objects(s *v1alpha1.Scheduler, image string) ([]any, []byte, error) {
	config, err := ConfigYAML(s, "")
	if err != nil {
		return nil, nil, err
	}
	sa := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: User, Namespace: controlPlaneNS}
	objs := []any{&corev1.ServiceAccount{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: metav1.ObjectMeta{Name: User, Namespace: controlPlaneNS, Labels: labels()},
	}}
	objs = append(objs, RBAC(s, sa)...)
	objs = append(objs, &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: configMapName, Namespace: controlPlaneNS, Labels: labels()},
		Data:       map[string]string{"config.yaml": string(config)},
	})
	replicas := int32(s.Replicas)
	podLabels := labels()
	port := intstr.FromInt(s.SecurePort)
	probe := func(path string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: port, Scheme: corev1.URISchemeHTTPS}},
			InitialDelaySeconds: 5, PeriodSeconds: 10, TimeoutSeconds: 5, FailureThreshold: 3}
	}
	no, yes, uid := false, true, int64(UID)
	one := intstr.FromInt(1)
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{NameLabel: User}}
	objs = append(objs, &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: User, Namespace: controlPlaneNS, Labels: labels()},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: selector,
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &one, MaxSurge: ptrIntstr(intstr.FromInt(0))}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: map[string]string{ConfigHashAnnotation: sum(config)}},
				Spec: corev1.PodSpec{
					ServiceAccountName: User,
					PriorityClassName:  "system-cluster-critical",
					SecurityContext: &corev1.PodSecurityContext{RunAsUser: &uid, RunAsGroup: &uid, RunAsNonRoot: &yes,
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{LabelSelector: selector, TopologyKey: "kubernetes.io/hostname"}},
					}},
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: s.TopologyKey,
						WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: selector}},
					Tolerations: []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
					Containers: []corev1.Container{{
						Name: User, Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
						Command:        []string{"/usr/local/bin/hactl-scheduler", "--config=" + podConfigDir + "/config.yaml", "--secure-port=" + strconv.Itoa(s.SecurePort)},
						Ports:          []corev1.ContainerPort{{Name: "https", ContainerPort: int32(s.SecurePort)}},
						LivenessProbe:  probe("/livez"),
						ReadinessProbe: probe("/readyz"),
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: mustQuantity("100m"), corev1.ResourceMemory: mustQuantity("64Mi")}},
						SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
						VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: podConfigDir, ReadOnly: true}},
					}},
					Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{
						ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: configMapName}}}}},
				},
			},
		},
	}, &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: metav1.ObjectMeta{Name: User, Namespace: controlPlaneNS, Labels: labels()},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one, Selector: selector},
	})
	return objs, config, nil
}

func ptrIntstr(v intstr.IntOrString) *intstr.IntOrString { return &v }

// APIDeployOptions are one `hactl scheduler deploy --kubeconfig`.
type APIDeployOptions struct {
	// Scheduler is defaulted and validated (v1alpha1.ValidateStandaloneScheduler or the spec's).
	Scheduler *v1alpha1.Scheduler
	// Field is the prefix of field paths in errors ("spec.scheduler", or "--" for flags).
	Field string
	Image string
	// Platforms are the image's (from its archive, images.ArchivePlatforms); when set, every node
	// must be able to run one of them.
	Platforms []images.Platform
	DryRun    bool
	Wait      time.Duration
	Out       io.Writer
	Printer   *ui.Printer
}

// DeployThroughAPI applies Objects through cs after the checks only the cluster can answer (exit 2,
// nothing applied): every preferred zone is the zone of a node, there are at least Replicas
// nodes a replica may run on (schedulable, no taint but the control planes'), and every node's
// architecture is one of o.Platforms (when given: an image loaded with kind load for another
// architecture fails only at exec). Then it waits until
// every replica runs the configuration Ready and one holds the Lease. With DryRun it prints the
// objects and contacts nothing.
func DeployThroughAPI(ctx context.Context, cs kubernetes.Interface, o APIDeployOptions) error {
	s := o.Scheduler
	if o.Image == "" {
		return &UsageError{"--image", "the image reference the nodes can run (kind: `kind load image-archive bin/hactl-scheduler-image.tar`, then --image-archive reads the reference from it)"}
	}
	objs, config, err := Objects(s, o.Image)
	if err != nil {
		return err
	}
	if o.DryRun {
		out, err := YAML(objs)
		if err != nil {
			return err
		}
		_, err = o.Out.Write(out)
		return err
	}
	warnings, err := checkNodes(ctx, cs, s, o.Field, o.Platforms)
	if err != nil {
		return err
	}
	for _, w := range warnings {
		o.Printer.Warnf("scheduler/nodes: %s", w)
	}
	if err := Apply(ctx, cs, objs); err != nil {
		return err
	}
	o.Printer.Infof("scheduler/apply: ServiceAccount, RBAC, ConfigMap, Deployment (%d replicas), PodDisruptionBudget in %s", s.Replicas, controlPlaneNS)
	wait := o.Wait
	if wait == 0 {
		wait = 3 * time.Minute
	}
	st, err := WaitReady(ctx, cs, s, wait, sum(config), s.Replicas)
	if err != nil {
		return err
	}
	o.Printer.Infof("scheduler/wait: %d replicas Ready, Lease %s/%s held by %s", s.Replicas, s.LeaderElection.ResourceNamespace, s.LeaderElection.ResourceName, st.Lease.Holder)
	return nil
}

// removeWait bounds how long RemoveThroughAPI waits for the Deployment's pods to go.
const removeWait = 2 * time.Minute

// checkNodes checks spec.scheduler against the cluster's nodes before anything is applied. Errors
// (*UsageError naming the field under prefix): a preferred zone that no node has while other zones
// exist (a typo), more replicas than nodes that can run one. Warnings: with preferredZones, the
// nodes without the zone label (TopologyKey): ZonePreference scores them 0, and on a cluster with
// no zone label at all (kind's default) the preference has no effect.
func checkNodes(ctx context.Context, cs kubernetes.Interface, s *v1alpha1.Scheduler, prefix string, platforms []images.Platform) (warnings []string, err error) {
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("nodes: %w", err)
	}
	zones := map[string]bool{}
	var unlabelled, foreign []string
	runnable := 0
	for _, n := range nodes.Items {
		if arch := n.Status.NodeInfo.Architecture; len(platforms) > 0 && !images.Runs(platforms, arch) {
			foreign = append(foreign, n.Name+" ("+n.Status.NodeInfo.OperatingSystem+"/"+arch+")")
		}
		if z := n.Labels[s.TopologyKey]; z != "" {
			zones[z] = true
		} else {
			unlabelled = append(unlabelled, n.Name)
		}
		ok := !n.Spec.Unschedulable
		for _, t := range n.Spec.Taints {
			if t.Key != "node-role.kubernetes.io/control-plane" && (t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute) {
				ok = false
			}
		}
		if ok {
			runnable++
		}
	}
	slices.Sort(unlabelled)
	var errs field.ErrorList
	p := field.NewPath(prefix)
	if len(s.PreferredZones) > 0 && len(unlabelled) > 0 {
		effect := "ZonePreference scores them 0"
		if len(zones) == 0 {
			effect = "no node has a zone, so the zone preference has no effect"
		}
		warnings = append(warnings, fmt.Sprintf("%d node(s) without the label %s: %s (%s; label them, e.g. kubectl label node %s %s=%s)",
			len(unlabelled), s.TopologyKey, strings.Join(unlabelled, ", "), effect, unlabelled[0], s.TopologyKey, s.PreferredZones[0].Zone))
	}
	for i, z := range s.PreferredZones {
		if len(zones) > 0 && !zones[z.Zone] {
			have := slices.Sorted(maps.Keys(zones))
			errs = append(errs, field.Invalid(p.Child("preferredZones").Index(i).Child("zone"), z.Zone,
				fmt.Sprintf("no node has %s=%s (zones: %s)", s.TopologyKey, z.Zone, strings.Join(have, ", "))))
		}
	}
	if len(foreign) > 0 {
		ps := images.JoinPlatforms(platforms)
		errs = append(errs, field.Invalid(field.NewPath("--image-archive"), ps,
			"the image is for "+ps+" only; these nodes cannot run it: "+strings.Join(foreign, ", ")))
	}
	if s.Replicas > runnable {
		errs = append(errs, field.Invalid(p.Child("replicas"), s.Replicas, fmt.Sprintf(
			"required anti-affinity puts one replica per node, and %d of the cluster's %d nodes can run one (schedulable, no taint but the control planes'): set at most %d", runnable, len(nodes.Items), runnable)))
	}
	if len(errs) > 0 {
		return warnings, &UsageError{prefix, errs.ToAggregate().Error()}
	}
	return warnings, nil
}

// RemoveThroughAPI deletes what DeployThroughAPI applied: the Deployment first, in the foreground,
// waiting up to removeWait until it and its pods are gone (no replica renews the Lease any more),
// then the scheduler's Lease (a leftover holder would delay a later deploy by a leaseDuration),
// the PodDisruptionBudget, ConfigMap, ServiceAccount and RBAC. Objects already gone are not errors.
// Errors: the first refused delete, named; the Deployment still there after removeWait.
func RemoveThroughAPI(ctx context.Context, cs kubernetes.Interface, s *v1alpha1.Scheduler) error {
	ns := controlPlaneNS
	del := metav1.DeleteOptions{}
	ignore := func(err error) error {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	le := s.LeaderElection
	steps := []struct {
		what string
		fn   func() error
	}{
		{"Deployment", func() error {
			fg := metav1.DeletePropagationForeground
			if err := cs.AppsV1().Deployments(ns).Delete(ctx, User, metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil {
				return err
			}
			err := wait.PollUntilContextTimeout(ctx, time.Second, removeWait, true, func(ctx context.Context) (bool, error) {
				_, err := cs.AppsV1().Deployments(ns).Get(ctx, User, metav1.GetOptions{})
				return apierrors.IsNotFound(err), nil
			})
			if err != nil {
				return fmt.Errorf("still there %s after its deletion (its pods still terminating?): %w", removeWait, err)
			}
			return nil
		}},
		{"Lease " + le.ResourceNamespace + "/" + le.ResourceName, func() error {
			return cs.CoordinationV1().Leases(le.ResourceNamespace).Delete(ctx, le.ResourceName, del)
		}},
		{"PodDisruptionBudget", func() error { return cs.PolicyV1().PodDisruptionBudgets(ns).Delete(ctx, User, del) }},
		{"ConfigMap", func() error { return cs.CoreV1().ConfigMaps(ns).Delete(ctx, configMapName, del) }},
		{"ServiceAccount", func() error { return cs.CoreV1().ServiceAccounts(ns).Delete(ctx, User, del) }},
	}
	for _, o := range RBAC(s, rbacv1.Subject{}) {
		switch v := o.(type) {
		case *rbacv1.ClusterRoleBinding:
			steps = append(steps, struct {
				what string
				fn   func() error
			}{"ClusterRoleBinding " + v.Name, func() error { return cs.RbacV1().ClusterRoleBindings().Delete(ctx, v.Name, del) }})
		case *rbacv1.Role:
			steps = append(steps, struct {
				what string
				fn   func() error
			}{"Role " + v.Name, func() error { return cs.RbacV1().Roles(v.Namespace).Delete(ctx, v.Name, del) }})
		case *rbacv1.RoleBinding:
			steps = append(steps, struct {
				what string
				fn   func() error
			}{"RoleBinding " + v.Name, func() error { return cs.RbacV1().RoleBindings(v.Namespace).Delete(ctx, v.Name, del) }})
		}
	}
	for _, st := range steps {
		if err := ignore(st.fn()); err != nil {
			return fmt.Errorf("delete %s: %w", st.what, err)
		}
	}
	return nil
}
