// Package deploy builds and applies what `hactl operator deploy` puts into a cluster: the CRDs,
// the operator's namespace, ServiceAccount and least-privilege RBAC (a Role in its namespace
// only: the operator watches that namespace), the Secret with the operator's own etcd client
// certificate (issued from the state dir's etcd CA; the CA key never leaves the state dir), the
// EtcdCluster built from cluster.yaml and hactl's state, and the Deployment (2 replicas on
// different nodes, spread over zones) with its PodDisruptionBudget. Everything is applied
// server-side as hactl's field manager, so a re-run converges.
package deploy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/backup/schedule"
	"github.com/hactl/hactl/etcd"
	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
	"github.com/hactl/hactl/operator/crds"
	"github.com/hactl/hactl/pki"
	"github.com/hactl/hactl/specload"
	"github.com/hactl/hactl/state"
)

// Defaults and names.
const (
	DefaultNamespace = "hactl-system"
	// Name is the Deployment's, ServiceAccount's, Role's and Lease's name.
	Name = "hactl-operator"
	// ClientSecret is the Secret holding the operator's etcd client certificate.
	ClientSecret = "hactl-operator-etcd-client"
	// ClientCertBase is the certificate's file base name in the state dir's pki/.
	ClientCertBase = "hactl-operator-etcd-client"
	// ClientCN is its common name.
	ClientCN = "hactl-operator"
	// S3Secret holds the object store's access key (keys accessKeyID, secretAccessKey and
	// sessionToken); S3CASecret the CA of spec.backup.objectStore.tls.caFile (key ca.crt).
	S3Secret   = "hactl-operator-s3"
	S3CASecret = "hactl-operator-s3-ca"
	// UID is the non-root user the image runs as.
	UID = 65532
)

// UsageError is input refused before the cluster is contacted (exit 2): Field names what to fix.
type UsageError struct{ Field, Msg string }

func (e *UsageError) Error() string { return e.Field + ": " + e.Msg }

// ExitCode is 2.
func (e *UsageError) ExitCode() int { return 2 }

// Options are what the manifests are built from.
type Options struct {
	Cluster   *v1alpha1.Cluster
	Namespace string // default DefaultNamespace
	Image     string // the operator image reference
	// Replicas is the Deployment's replica count, 1 to MaxReplicas (CheckReplicas); 0 here is
	// DefaultReplicas (a caller's unset field). The CLI's --replicas is checked with CheckReplicas
	// before anything is contacted, so an explicit 0 is refused there, never read as the default.
	Replicas int32
	// PullPolicy is the container's imagePullPolicy (default IfNotPresent).
	PullPolicy corev1.PullPolicy
	// DryRun writes nothing: the operator's client certificate is neither issued nor renewed (the
	// Secret shows what exists, if anything).
	DryRun bool
	// Backup is the operator's snapshot schedule; nil (or a spec without spec.backup) schedules
	// none.
	Backup *BackupOptions
	// Getenv reads the object store credentials' environment variables (os.Getenv when nil).
	Getenv func(string) string
	// Healing is the operator's self-healing onto spec.etcd.spares; nil with spares: report
	// only (the spares' certificates are issued all the same, so turning autoReplace on later
	// needs no CA).
	Healing *HealingOptions
	// RequeuePeriod is how often the operator looks at the EtcdCluster again (its
	// --requeue-period); 0 leaves the operator's default, DefaultRequeuePeriod. At least
	// MinRequeuePeriod: each look asks every member.
	RequeuePeriod time.Duration
}

// DefaultReplicas and MaxReplicas are the operator Deployment's replica count when Options leaves
// it 0, and the most it may have (one holds the Lease, the others wait).
const (
	DefaultReplicas = 2
	MaxReplicas     = 5
)

// CheckReplicas refuses a replica count outside 1..MaxReplicas (*UsageError at --replicas, exit
// 2): 0 replicas of the operator is no operator, so an explicit 0 is never read as the default.
func CheckReplicas(n int32) error {
	if n < 1 || n > MaxReplicas {
		return &UsageError{"--replicas", fmt.Sprintf("%d: between 1 and %d (one holds the Lease, the others wait)", n, MaxReplicas)}
	}
	return nil
}

// CheckBackupEvery refuses a --backup-every the timers' slot rule does not accept
// (schedule.OnCalendar: whole minutes dividing an hour or whole hours dividing a day; 0 too, which
// BackupOptions reads as the default only when a caller leaves it unset) as a *UsageError, exit 2.
func CheckBackupEvery(every time.Duration) error {
	if _, err := schedule.OnCalendar(every, true); err != nil {
		return &UsageError{"--backup-every", err.Error()}
	}
	return nil
}

// CheckRequeuePeriod refuses a --requeue-period under MinRequeuePeriod (*UsageError, exit 2), the
// operator's own lower bound.
func CheckRequeuePeriod(d time.Duration) error {
	if d < MinRequeuePeriod {
		return &UsageError{"--requeue-period", fmt.Sprintf("%s: at least %s (each look asks every member)", d, MinRequeuePeriod)}
	}
	return nil
}

// DefaultRequeuePeriod and MinRequeuePeriod are hactl-operator's --requeue-period default and
// lower bound (cmd/hactl-operator/internal/options).
const (
	DefaultRequeuePeriod = 30 * time.Second
	MinRequeuePeriod     = 5 * time.Second
)

// BackupOptions are the operator's snapshot schedule: every Every (whole minutes dividing an
// hour or whole hours dividing a day, as the timers', schedule.OnCalendar) into spec.backup's
// object store, pruned with Policy after each snapshot (the zero Policy prunes nothing).
type BackupOptions struct {
	Every  time.Duration
	Policy backup.Policy
}

// Plan is the objects to apply, in order (CRDs and the namespace first), with the Secret's data
// kept out of what Print shows.
type Plan struct {
	Objects []*unstructured.Unstructured
}

// Build checks o and returns the objects. It reads the state dir (the cluster ID, the etcd CA)
// and issues or renews the operator's client certificate there (pki.CA.EnsureClient). Errors:
// *UsageError for a bad namespace, image or replica count, or a cluster that hactl has not
// bootstrapped (no cluster ID, no CA); file errors otherwise.
func Build(o Options) (*Plan, error) {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.Replicas == 0 {
		o.Replicas = DefaultReplicas
	}
	if o.PullPolicy == "" {
		o.PullPolicy = corev1.PullIfNotPresent
	}
	if msgs := validation.IsDNS1123Label(o.Namespace); len(msgs) > 0 {
		return nil, &UsageError{"--namespace", fmt.Sprintf("%q: %s", o.Namespace, msgs[0])}
	}
	if o.Image == "" {
		return nil, &UsageError{"--image", "no operator image: give a registry reference, or --image-archive bin/hactl-operator-image.tar (make operator-image)"}
	}
	if err := CheckReplicas(o.Replicas); err != nil {
		return nil, err
	}
	if o.RequeuePeriod != 0 {
		if err := CheckRequeuePeriod(o.RequeuePeriod); err != nil {
			return nil, err
		}
	}
	c := o.Cluster
	st, err := state.Load(c.Spec.StateDir)
	if err != nil {
		return nil, err
	}
	if st == nil || st.ClusterID == "" {
		return nil, &UsageError{"spec.stateDir", fmt.Sprintf("%s records no etcd cluster ID: run hactl bootstrap first (the EtcdCluster names the cluster it watches)", c.Spec.StateDir)}
	}
	pkiDir := filepath.Join(c.Spec.StateDir, "pki")
	if _, err := os.Stat(pki.KeyPath(pkiDir, pki.CABase)); err != nil {
		return nil, &UsageError{"spec.stateDir", fmt.Sprintf("no etcd CA in %s (%v): run hactl bootstrap first", pkiDir, err)}
	}
	ca, _, err := pki.LoadOrCreateCA(pkiDir)
	if err != nil {
		return nil, err
	}
	if !o.DryRun {
		if _, err := ca.EnsureClient(pkiDir, ClientCertBase, ClientCN); err != nil {
			return nil, fmt.Errorf("operator client certificate: %w", err)
		}
	}
	secretData := map[string][]byte{}
	for key, path := range map[string]string{"ca.crt": pki.CertPath(pkiDir, pki.CABase), corev1.TLSCertKey: pki.CertPath(pkiDir, ClientCertBase), corev1.TLSPrivateKeyKey: pki.KeyPath(pkiDir, ClientCertBase)} {
		b, err := os.ReadFile(path)
		if err != nil && !(o.DryRun && errors.Is(err, os.ErrNotExist)) {
			return nil, err
		}
		secretData[key] = b
	}
	members, err := etcd.MembersFromSpec(c)
	if err != nil {
		return nil, err
	}

	p := &Plan{}
	files, names, err := crds.Files()
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		var u unstructured.Unstructured
		if err := yaml.Unmarshal(files[n], &u.Object); err != nil {
			return nil, fmt.Errorf("CRD %s: %w", n, err)
		}
		p.Objects = append(p.Objects, &u)
	}
	ns, labels := o.Namespace, map[string]string{"app.kubernetes.io/name": Name, "app.kubernetes.io/managed-by": "hactl"}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}
	}
	ec := &hactlv1.EtcdCluster{
		ObjectMeta: meta(c.Metadata.Name),
		Spec: hactlv1.EtcdClusterSpec{
			ClusterID:               st.ClusterID,
			ElectionTimeout:         &metav1.Duration{Duration: c.Spec.Etcd.ElectionTimeout.Duration},
			ClientCertificateSecret: hactlv1.SecretRef{Name: ClientSecret},
		},
	}
	zones := map[string]string{}
	for _, h := range c.Spec.Hosts {
		zones[h.Name] = h.Zone
	}
	for _, m := range members {
		ec.Spec.Members = append(ec.Spec.Members, hactlv1.MemberEndpoint{Name: m.Name, ClientURL: m.ClientURL(), Zone: zones[m.Name]})
	}
	if msgs := validation.IsDNS1123Subdomain(c.Metadata.Name); len(msgs) > 0 {
		return nil, &UsageError{"metadata.name", fmt.Sprintf("%q cannot name the EtcdCluster: %s", c.Metadata.Name, msgs[0])}
	}
	backupSecrets, err := backupSpec(ec, o)
	if err != nil {
		return nil, err
	}
	healSecrets, err := healingSpec(ec, o, ca, pkiDir, st.Token)
	if err != nil {
		return nil, err
	}
	selector := map[string]string{"app.kubernetes.io/name": Name}
	args := []string{"--leader-elect", "--leader-election-id=" + Name, "--health-probe-bind-address=:8081", "--metrics-bind-address=:8080"}
	if o.RequeuePeriod != 0 {
		args = append(args, "--requeue-period="+o.RequeuePeriod.String())
	}
	podSpec := corev1.PodSpec{
		ServiceAccountName: Name,
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](UID), RunAsGroup: ptr.To[int64](UID),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			// Never two replicas on one node; spread over zones when the nodes allow.
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: selector}, TopologyKey: corev1.LabelHostname,
			}},
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{
				LabelSelector: &metav1.LabelSelector{MatchLabels: selector}, TopologyKey: corev1.LabelTopologyZone,
			}}},
		}},
		Containers: []corev1.Container{{
			Name: "operator", Image: o.Image, ImagePullPolicy: o.PullPolicy,
			Args:           args,
			Env:            []corev1.EnvVar{{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}},
			Ports:          []corev1.ContainerPort{{Name: "metrics", ContainerPort: 8080}, {Name: "probes", ContainerPort: 8081}},
			LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("probes")}}, PeriodSeconds: 10},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("probes")}}, PeriodSeconds: 5},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: mustQuantity("50m"), corev1.ResourceMemory: mustQuantity("64Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: mustQuantity("256Mi")},
			},
			SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			},
			// A heal writes the spare's SSH key and pinned host keys (0600) here for its
			// connection, and removes them after; memory-backed, never on the node's disk.
			VolumeMounts: []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}},
		}},
		Volumes: []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(mustQuantity("16Mi")),
		}}}},
	}
	typed := []runtime.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}},
		&corev1.ServiceAccount{ObjectMeta: meta(Name)},
		&rbacv1.Role{ObjectMeta: meta(Name), Rules: Rules(healingSecrets(ec)...)},
		&rbacv1.RoleBinding{ObjectMeta: meta(Name),
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: Name, Namespace: ns}}},
		&corev1.Secret{ObjectMeta: meta(ClientSecret), Type: corev1.SecretTypeTLS, Data: secretData},
	}
	for _, bs := range append(backupSecrets, healSecrets...) {
		bs.ObjectMeta = meta(bs.Name)
		typed = append(typed, bs)
	}
	typed = append(typed,
		ec,
		&appsv1.Deployment{ObjectMeta: meta(Name), Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(o.Replicas), Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: podSpec},
		}},
	)
	if o.Replicas > 1 {
		typed = append(typed, &policyv1.PodDisruptionBudget{ObjectMeta: meta(Name), Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: selector},
		}})
	}
	for _, obj := range typed {
		u, err := toUnstructured(obj)
		if err != nil {
			return nil, err
		}
		p.Objects = append(p.Objects, u)
	}
	return p, nil
}

// backupSpec sets ec.Spec.Backup from the cluster's spec.backup and o.Backup, and returns the
// Secrets it refers to (names only in their ObjectMeta). Errors (*UsageError): an interval the
// slots can't follow, a policy keeping nothing, credentials that can't be read (the spec's
// variables unset, the file unreadable), a CA file that can't be read, bad recipients.
func backupSpec(ec *hactlv1.EtcdCluster, o Options) ([]*corev1.Secret, error) {
	c := o.Cluster
	if o.Backup == nil {
		return nil, nil
	}
	if c.Spec.Backup == nil {
		return nil, &UsageError{"--backup-every", "the spec has no spec.backup: add the object store there (hactl backup's section) for the operator to snapshot into"}
	}
	every := o.Backup.Every
	if every == 0 {
		every = 5 * time.Minute
	}
	if err := CheckBackupEvery(every); err != nil {
		return nil, err
	}
	if o.Backup.Policy != (backup.Policy{}) {
		if err := o.Backup.Policy.Validate(); err != nil {
			return nil, &UsageError{"--keep-last", err.Error()}
		}
	}
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	creds, err := specload.ReadBackupCredentials(c, getenv)
	if err != nil {
		return nil, &UsageError{"spec.backup.objectStore.credentials", err.Error()}
	}
	recipients, err := specload.BackupRecipients(c)
	if err != nil {
		return nil, &UsageError{"spec.backup.encryption", err.Error()}
	}
	store := c.Spec.Backup.ObjectStore
	b := &hactlv1.BackupSpec{
		ObjectStore: hactlv1.ObjectStore{Endpoint: store.Endpoint, Bucket: store.Bucket, Prefix: store.Prefix, Region: store.Region,
			BucketLookup: store.BucketLookup, PlainHTTP: store.PlainHTTP},
		CredentialsSecret:    hactlv1.SecretRef{Name: S3Secret},
		Every:                &metav1.Duration{Duration: every},
		Compression:          c.Spec.Backup.Compression,
		EncryptionRecipients: recipients,
	}
	if b.Compression == "" {
		b.Compression = v1alpha1.DefaultBackupCompression
	}
	if p := o.Backup.Policy; p != (backup.Policy{}) {
		r := &hactlv1.Retention{}
		for _, f := range []struct {
			n   int
			dst **int32
		}{{p.KeepLast, &r.KeepLast}, {p.KeepHourly, &r.KeepHourly}, {p.KeepDaily, &r.KeepDaily}} {
			if f.n > 0 {
				*f.dst = ptr.To(int32(f.n))
			}
		}
		b.Retention = r
	}
	data := map[string][]byte{"accessKeyID": []byte(creds.AccessKeyID), "secretAccessKey": []byte(creds.SecretAccessKey)}
	if creds.SessionToken != "" {
		data["sessionToken"] = []byte(creds.SessionToken)
	}
	secrets := []*corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Name: S3Secret}, Type: corev1.SecretTypeOpaque, Data: data}}
	if store.TLS != nil && store.TLS.CAFile != "" {
		pem, err := os.ReadFile(store.TLS.CAFile)
		if err != nil {
			return nil, &UsageError{"spec.backup.objectStore.tls.caFile", err.Error()}
		}
		secrets = append(secrets, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: S3CASecret}, Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"ca.crt": pem}})
		b.ObjectStore.CASecret = &hactlv1.SecretRef{Name: S3CASecret}
	}
	ec.Spec.Backup = b
	return secrets, nil
}

// Rules are the operator's permissions, all in its own namespace: its custom resources and their
// status, the Secrets it reads by name (its client certificate, the object store's, and
// healingSecrets: the spares' certificates and the SSH key; no list or watch of Secrets), its
// Lease, and events. EtcdClusters are updated (not only their status) to record a heal's new
// member in spec.members.
func Rules(healingSecrets ...string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{hactlv1.GroupVersion.Group}, Resources: []string{"etcdclusters"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
		// EtcdSnapshots mirror the bucket (created, deleted), carry the finalizer (update) and get
		// their key when taken on demand.
		{APIGroups: []string{hactlv1.GroupVersion.Group}, Resources: []string{"etcdsnapshots"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		{APIGroups: []string{hactlv1.GroupVersion.Group}, Resources: []string{"etcdclusters/status", "etcdsnapshots/status"}, Verbs: []string{"get", "update", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: append([]string{ClientSecret, S3Secret, S3CASecret}, healingSecrets...), Verbs: []string{"get"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{Name}, Verbs: []string{"get", "update"}},
		// events.k8s.io for the reconcilers' events, the core group for client-go's leader election events.
		{APIGroups: []string{"events.k8s.io", ""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}
}

// Print writes the plan as a YAML stream, every Secret's data replaced by the sizes (secrets never
// reach a terminal or a log).
func (p *Plan) Print() ([]byte, error) {
	var out []byte
	for _, u := range p.Objects {
		obj := u.DeepCopy()
		if obj.GetKind() == "Secret" {
			data, _, _ := unstructured.NestedMap(obj.Object, "data")
			red := map[string]any{}
			for k, v := range data {
				s, _ := v.(string)
				red[k] = fmt.Sprintf("<redacted: %d bytes base64>", len(s))
			}
			_ = unstructured.SetNestedMap(obj.Object, red, "data")
		}
		b, err := yaml.Marshal(obj.Object)
		if err != nil {
			return nil, err
		}
		out = append(out, "---\n"...)
		out = append(out, b...)
	}
	return out, nil
}

func toUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	gvk, err := kindOf(obj)
	if err != nil {
		return nil, err
	}
	u.SetGroupVersionKind(gvk)
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}

var errUnknownKind = errors.New("deploy: unknown object kind")
