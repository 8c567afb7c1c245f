package deploy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/pki"
	"github.com/hactl/hactl/state"
)

func testCluster(t *testing.T, bootstrapped bool) *v1alpha1.Cluster {
	t.Helper()
	dir := t.TempDir()
	c := &v1alpha1.Cluster{Metadata: v1alpha1.ObjectMeta{Name: "prod"}}
	c.Spec.StateDir = dir
	c.Spec.Etcd.ClientPort, c.Spec.Etcd.PeerPort = 2379, 2380
	c.Spec.Etcd.ElectionTimeout.Duration = 1500 * time.Millisecond
	for i, z := range []string{"az-a", "az-b", "az-c"} {
		c.Spec.Hosts = append(c.Spec.Hosts, v1alpha1.Host{Name: "cp-" + string(rune('a'+i)), Address: "10.0.0." + string(rune('1'+i)), Zone: z, Roles: []v1alpha1.Role{v1alpha1.RoleEtcd}})
	}
	if bootstrapped {
		if _, _, err := pki.LoadOrCreateCA(filepath.Join(dir, "pki")); err != nil {
			t.Fatal(err)
		}
		if err := state.Save(dir, &state.Cluster{Name: "prod", Token: "t", ClusterID: "c1a55e", Members: map[string]*state.Member{}}); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func kinds(p *Plan) []string {
	var out []string
	for _, u := range p.Objects {
		out = append(out, u.GetKind())
	}
	return out
}

func find(p *Plan, kind string) *unstructured.Unstructured {
	for _, u := range p.Objects {
		if u.GetKind() == kind {
			return u
		}
	}
	return nil
}

func TestBuild(t *testing.T) {
	c := testCluster(t, true)
	p, err := Build(Options{Cluster: c, Image: "ghcr.io/hactl/hactl-operator:dev"})
	if err != nil {
		t.Fatal(err)
	}
	want := "CustomResourceDefinition CustomResourceDefinition Namespace ServiceAccount Role RoleBinding Secret EtcdCluster Deployment PodDisruptionBudget"
	if got := strings.Join(kinds(p), " "); got != want {
		t.Errorf("kinds in order:\n%s\nwant\n%s", got, want)
	}
	ec := find(p, "EtcdCluster")
	id, _, _ := unstructured.NestedString(ec.Object, "spec", "clusterID")
	members, _, _ := unstructured.NestedSlice(ec.Object, "spec", "members")
	et, _, _ := unstructured.NestedString(ec.Object, "spec", "electionTimeout")
	if id != "c1a55e" || len(members) != 3 || et != "1.5s" || ec.GetNamespace() != DefaultNamespace || ec.GetName() != "prod" {
		t.Errorf("EtcdCluster %v", ec.Object)
	}
	if m := members[0].(map[string]any); m["name"] != "cp-a" || m["clientURL"] != "https://10.0.0.1:2379" {
		t.Errorf("member 0: %v", m)
	}
	// The operator's own client certificate was issued in the state dir and is in the Secret.
	if _, err := os.Stat(pki.CertPath(filepath.Join(c.Spec.StateDir, "pki"), ClientCertBase)); err != nil {
		t.Errorf("client certificate: %v", err)
	}
	data, _, _ := unstructured.NestedStringMap(find(p, "Secret").Object, "data")
	for _, k := range []string{"ca.crt", "tls.crt", "tls.key"} {
		if data[k] == "" {
			t.Errorf("Secret lacks %s", k)
		}
	}
	// The CA key never goes into the cluster.
	caKey, _ := os.ReadFile(pki.KeyPath(filepath.Join(c.Spec.StateDir, "pki"), pki.CABase))
	out, err := p.Print()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range data {
		if strings.Contains(string(out), v) {
			t.Error("Print shows Secret data")
		}
	}
	if !strings.Contains(string(out), "<redacted:") || strings.Contains(string(out), string(caKey)) {
		t.Error("Print does not redact, or holds the CA key")
	}
	// Least privilege: Secrets by name and get only; nothing cluster-wide.
	for _, r := range Rules() {
		for _, res := range r.Resources {
			if res == "secrets" && (strings.Join(r.ResourceNames, ",") != ClientSecret+","+S3Secret+","+S3CASecret || strings.Join(r.Verbs, ",") != "get") {
				t.Errorf("secret rule %+v", r)
			}
		}
	}
	dep := find(p, "Deployment")
	replicas, _, _ := unstructured.NestedInt64(dep.Object, "spec", "replicas")
	anti, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "affinity", "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
	nonRoot, _, _ := unstructured.NestedBool(dep.Object, "spec", "template", "spec", "securityContext", "runAsNonRoot")
	if replicas != 2 || len(anti) != 1 || !nonRoot {
		t.Errorf("deployment: replicas %d, required anti-affinity %d, runAsNonRoot %v", replicas, len(anti), nonRoot)
	}
	if p1, _ := Build(Options{Cluster: c, Image: "x", Replicas: 1}); find(p1, "PodDisruptionBudget") != nil {
		t.Error("a PodDisruptionBudget for one replica would block every drain")
	}
	// The requeue period is the operator's own default unless given: no flag in the args.
	args := func(p *Plan) string {
		cs, _, _ := unstructured.NestedSlice(find(p, "Deployment").Object, "spec", "template", "spec", "containers")
		a, _, _ := unstructured.NestedStringSlice(cs[0].(map[string]any), "args")
		return strings.Join(a, " ")
	}
	if a := args(p); strings.Contains(a, "--requeue-period") {
		t.Errorf("args %q: a requeue period nobody asked for", a)
	}
	p5, err := Build(Options{Cluster: c, Image: "x", RequeuePeriod: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if a := args(p5); !strings.HasSuffix(a, " --requeue-period=5s") {
		t.Errorf("args %q: want --requeue-period=5s", a)
	}
}

func TestBuildDryRunWritesNothing(t *testing.T) {
	c := testCluster(t, true)
	if _, err := Build(Options{Cluster: c, Image: "x", DryRun: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(pki.CertPath(filepath.Join(c.Spec.StateDir, "pki"), ClientCertBase)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a dry run issued the client certificate (%v)", err)
	}
}

func TestBuildRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		o     func(*Options)
		field string
	}{
		{"no image", func(o *Options) { o.Image = "" }, "--image"},
		{"namespace", func(o *Options) { o.Namespace = "Hactl_System" }, "--namespace"},
		{"replicas", func(o *Options) { o.Replicas = 9 }, "--replicas"},
		{"requeue period", func(o *Options) { o.RequeuePeriod = time.Second }, "--requeue-period"},
		{"not bootstrapped", func(o *Options) { o.Cluster = testCluster(t, false) }, "spec.stateDir"},
		{"backups without spec.backup", func(o *Options) { o.Backup = &BackupOptions{} }, "--backup-every"},
		{"every 7m", func(o *Options) { withBackup(o); o.Backup.Every = 7 * time.Minute }, "--backup-every"},
		{"every 90s", func(o *Options) { withBackup(o); o.Backup.Every = 90 * time.Second }, "--backup-every"},
		{"negative retention", func(o *Options) { withBackup(o); o.Backup.Policy.KeepLast = -1 }, "--keep-last"},
		{"credentials unset", func(o *Options) {
			withBackup(o)
			o.Getenv = func(string) string { return "" }
		}, "spec.backup.objectStore.credentials"},
		{"CA file missing", func(o *Options) {
			withBackup(o)
			o.Cluster.Spec.Backup.ObjectStore.PlainHTTP = false
			o.Cluster.Spec.Backup.ObjectStore.TLS = &v1alpha1.ObjectStoreTLS{CAFile: filepath.Join(t.TempDir(), "none.pem")}
		}, "spec.backup.objectStore.tls.caFile"},
	} {
		o := Options{Cluster: testCluster(t, true), Image: "x"}
		tc.o(&o)
		_, err := Build(o)
		var ue *UsageError
		if !errors.As(err, &ue) || ue.Field != tc.field || ue.ExitCode() != 2 {
			t.Errorf("%s: %v, want a usage error naming %s", tc.name, err, tc.field)
		}
	}
}

// withBackup gives o's cluster a spec.backup (credentials from variables o.Getenv answers) and
// o a schedule.
func withBackup(o *Options) {
	o.Cluster.Spec.Backup = &v1alpha1.Backup{ObjectStore: v1alpha1.ObjectStore{
		Endpoint: "minio.example:9000", Bucket: "etcd", Prefix: "backups", PlainHTTP: true,
		Credentials: v1alpha1.ObjectStoreCredentials{Env: &v1alpha1.CredentialsEnv{AccessKeyID: "AK", SecretAccessKey: "SK", SessionToken: "ST"}},
	}}
	o.Getenv = func(k string) string {
		return map[string]string{"AK": "access", "SK": "secret-key-value", "ST": "token"}[k]
	}
	o.Backup = &BackupOptions{Every: time.Minute, Policy: backup.Policy{KeepLast: 3}}
}

func TestBuildBackup(t *testing.T) {
	o := Options{Cluster: testCluster(t, true), Image: "x"}
	withBackup(&o)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o.Cluster.Spec.Backup.ObjectStore.PlainHTTP = false
	o.Cluster.Spec.Backup.ObjectStore.TLS = &v1alpha1.ObjectStoreTLS{CAFile: ca}
	p, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	want := "CustomResourceDefinition CustomResourceDefinition Namespace ServiceAccount Role RoleBinding Secret Secret Secret EtcdCluster Deployment PodDisruptionBudget"
	if got := strings.Join(kinds(p), " "); got != want {
		t.Errorf("kinds in order:\n%s\nwant\n%s", got, want)
	}
	b, _, _ := unstructured.NestedMap(find(p, "EtcdCluster").Object, "spec", "backup")
	store := b["objectStore"].(map[string]any)
	if b["every"] != "1m0s" || b["compression"] != "zstd" || store["bucket"] != "etcd" || store["prefix"] != "backups" ||
		b["credentialsSecret"].(map[string]any)["name"] != S3Secret || store["caSecret"].(map[string]any)["name"] != S3CASecret {
		t.Errorf("spec.backup %v", b)
	}
	if r := b["retention"].(map[string]any); r["keepLast"] != int64(3) || r["keepDaily"] != nil {
		t.Errorf("retention %v", r)
	}
	secrets := map[string]map[string]string{}
	for _, u := range p.Objects {
		if u.GetKind() == "Secret" {
			d, _, _ := unstructured.NestedStringMap(u.Object, "data")
			secrets[u.GetName()] = d
		}
	}
	if d := secrets[S3Secret]; d["accessKeyID"] == "" || d["secretAccessKey"] == "" || d["sessionToken"] == "" {
		t.Errorf("S3 Secret keys %v", d)
	}
	if secrets[S3CASecret]["ca.crt"] == "" {
		t.Error("no CA Secret")
	}
	out, err := p.Print()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "secret-key-value") || strings.Contains(string(out), secrets[S3Secret]["secretAccessKey"]) {
		t.Error("Print shows the secret access key")
	}
	// No retention given: the EtcdCluster prunes nothing.
	o.Backup.Policy = backup.Policy{}
	p, err = Build(o)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok, _ := unstructured.NestedMap(find(p, "EtcdCluster").Object, "spec", "backup", "retention"); ok {
		t.Errorf("retention %v without a policy", r)
	}
}

func TestCheckGivenValues(t *testing.T) {
	var ue *UsageError
	for _, tc := range []struct {
		err  error
		flag string
	}{
		{CheckReplicas(0), "--replicas"}, {CheckReplicas(-1), "--replicas"}, {CheckReplicas(6), "--replicas"},
		{CheckBackupEvery(0), "--backup-every"}, {CheckBackupEvery(7 * time.Minute), "--backup-every"},
		{CheckGracePeriod(0), "--grace-period"},
	} {
		if !errors.As(tc.err, &ue) || ue.Field != tc.flag || ue.ExitCode() != 2 {
			t.Errorf("%v: want a *UsageError at %s", tc.err, tc.flag)
		}
	}
	for _, err := range []error{CheckReplicas(1), CheckReplicas(5), CheckBackupEvery(5 * time.Minute), CheckGracePeriod(time.Second)} {
		if err != nil {
			t.Errorf("refused: %v", err)
		}
	}
}
