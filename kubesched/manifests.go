package kubesched

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/hactl/hactl/api/v1alpha1"
)

// ConfigHashAnnotation on the static pod is the sha256 of the configuration it runs with: a changed
// configuration changes the manifest, and kubelet restarts the scheduler with it.
const ConfigHashAnnotation = "scheduler.hactl.io/config-sha256"

// StaticPod returns the static pod manifest of hactl-scheduler on a control-plane host: host
// network, the image, the configuration and kubeconfig from Dir (read-only), bound to s.BindAddress
// (default 127.0.0.1, as kubeadm's kube-scheduler binds 127.0.0.1:10259) on s.SecurePort, probed on
// /livez and /readyz at loopback, non-root (UID) with no capabilities and a read-only root filesystem.
func StaticPod(s *v1alpha1.Scheduler, image string, config []byte) ([]byte, error) {
	sum := sha256.Sum256(config)
	port := intstr.FromInt(s.SecurePort)
	probe := func(path string, failures int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: s.ProbeHost(), Path: path, Port: port, Scheme: corev1.URISchemeHTTPS}},
			TimeoutSeconds:   15,
			PeriodSeconds:    10,
			FailureThreshold: failures,
		}
	}
	no, yes, uid := false, true, int64(UID)
	dirType := corev1.HostPathDirectory
	pod := corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: User, Namespace: "kube-system",
			Labels:      map[string]string{"component": User, "tier": "control-plane", NameLabel: User},
			Annotations: map[string]string{ConfigHashAnnotation: hex.EncodeToString(sum[:])},
		},
		Spec: corev1.PodSpec{
			HostNetwork:       true,
			PriorityClassName: "system-node-critical",
			SecurityContext: &corev1.PodSecurityContext{
				RunAsUser: &uid, RunAsGroup: &uid, RunAsNonRoot: &yes,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:            User,
				Image:           image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"/usr/local/bin/hactl-scheduler",
					"--config=" + ConfigFile,
					"--authentication-kubeconfig=" + KubeconfigFile,
					"--authorization-kubeconfig=" + KubeconfigFile,
					"--bind-address=" + s.BindAddress,
					"--secure-port=" + strconv.Itoa(s.SecurePort),
				},
				LivenessProbe:  probe("/livez", 8),
				ReadinessProbe: probe("/readyz", 3),
				StartupProbe:   probe("/livez", 24),
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: mustQuantity("100m"), corev1.ResourceMemory: mustQuantity("64Mi")}},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: Dir, ReadOnly: true}},
			}},
			Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: Dir, Type: &dirType}}}},
		},
	}
	return yaml.Marshal(pod)
}

// RBAC returns the objects a second scheduler needs, nothing more, bound to subject (the User for
// static pods, the ServiceAccount in Deployment mode), as one multi-document YAML:
//   - kube-scheduler's own ClusterRoles system:kube-scheduler (pods, bindings, nodes, events, and
//     creating Leases; it updates only the Lease named kube-scheduler) and system:volume-scheduler;
//   - a Role on exactly the scheduler's Lease (get, update), which system:kube-scheduler lacks;
//   - extension-apiserver-authentication-reader in kube-system, for the secure port's delegated
//     authentication (as kubeadm grants kube-scheduler).
func RBAC(s *v1alpha1.Scheduler, subject rbacv1.Subject) []any {
	le := s.LeaderElection
	name := func(suffix string) string { return User + ":" + suffix }
	objs := []any{
		clusterRoleBinding(name("kube-scheduler"), "system:kube-scheduler", subject),
		clusterRoleBinding(name("volume-scheduler"), "system:volume-scheduler", subject),
		&rbacv1.Role{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
			ObjectMeta: metav1.ObjectMeta{Name: name("lease"), Namespace: le.ResourceNamespace, Labels: labels()},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
				ResourceNames: []string{le.ResourceName}, Verbs: []string{"get", "update"}}},
		},
		roleBinding(name("lease"), le.ResourceNamespace, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name("lease")}, subject),
		roleBinding(name("extension-apiserver-authentication-reader"), "kube-system",
			rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "extension-apiserver-authentication-reader"}, subject),
	}
	return objs
}

// YAML renders objects as one multi-document YAML.
func YAML(objects []any) ([]byte, error) {
	var b bytes.Buffer
	for _, o := range objects {
		// Through a map, to leave out what the API server writes (the empty status of a Deployment or
		// PodDisruptionBudget, metadata.creationTimestamp: null): what is printed is what is applied.
		j, err := json.Marshal(o)
		if err != nil {
			return nil, fmt.Errorf("rendering %T: %w", o, err)
		}
		var m map[string]any
		if err := json.Unmarshal(j, &m); err != nil {
			return nil, fmt.Errorf("rendering %T: %w", o, err)
		}
		delete(m, "status")
		if meta, ok := m["metadata"].(map[string]any); ok && meta["creationTimestamp"] == nil {
			delete(meta, "creationTimestamp")
		}
		out, err := yaml.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("rendering %T: %w", o, err)
		}
		b.WriteString("---\n")
		b.Write(out)
	}
	return b.Bytes(), nil
}

// NameLabel is on every object and pod of the scheduler, static or Deployment (value User).
const NameLabel = "app.kubernetes.io/name"

// Selector selects the scheduler's pods and objects.
const Selector = NameLabel + "=" + User

func labels() map[string]string {
	return map[string]string{"app.kubernetes.io/managed-by": "hactl", NameLabel: User}
}

func clusterRoleBinding(name, role string, subject rbacv1.Subject) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels()},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{subject},
	}
}

func roleBinding(name, ns string, ref rbacv1.RoleRef, subject rbacv1.Subject) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels()},
		RoleRef:    ref,
		Subjects:   []rbacv1.Subject{subject},
	}
}

// UserSubject is the static pods' RBAC subject: the client certificate's user.
func UserSubject() rbacv1.Subject {
	return rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: User}
}

func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }
