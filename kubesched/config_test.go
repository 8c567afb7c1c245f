package kubesched

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/internal/golden"
)

// labScheduler returns a defaulted, valid spec.scheduler of the lab's three zones.
func labScheduler(t *testing.T, mutate func(s *v1alpha1.Scheduler)) *v1alpha1.Scheduler {
	t.Helper()
	c := &v1alpha1.Cluster{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind, Metadata: v1alpha1.ObjectMeta{Name: "lab"},
		Spec: v1alpha1.ClusterSpec{Scheduler: &v1alpha1.Scheduler{PreferredZones: []v1alpha1.PreferredZone{{Zone: "az-a", Weight: 100}, {Zone: "az-b", Weight: 50}}}}}
	if mutate != nil {
		mutate(c.Spec.Scheduler)
	}
	v1alpha1.SetDefaults(c, v1alpha1.Dirs{Base: "/specs"})
	return c.Spec.Scheduler
}

func TestConfigGolden(t *testing.T) {
	out, err := ConfigYAML(labScheduler(t, nil), KubeconfigFile)
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "testdata/config.yaml", out, "go test ./kubesched -update")
}

// TestConfigValidatedByScheduler: every rendered variant passes hactl-scheduler's own validation
// (bin/hactl-scheduler validate, built by hack/build-scheduler.sh): what a run of the scheduler
// would refuse, hactl must not render.
func TestConfigValidatedByScheduler(t *testing.T) {
	bin, err := filepath.Abs("../bin/hactl-scheduler")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("HACTL_REQUIRE_SCHEDULER") == "1" {
			t.Fatalf("%s missing: run hack/build-scheduler.sh (make scheduler-bin)", bin)
		}
		t.Skipf("%s missing (hack/build-scheduler.sh builds it; make test sets HACTL_REQUIRE_SCHEDULER=1)", bin)
	}
	w := int32(2)
	for name, mutate := range map[string]func(s *v1alpha1.Scheduler){
		"default":  nil,
		"no zones": func(s *v1alpha1.Scheduler) { s.PreferredZones = nil },
		"rtc": func(s *v1alpha1.Scheduler) {
			s.BinPacking = &v1alpha1.BinPacking{Strategy: v1alpha1.BinPackingRequestedToCapacity}
		},
		"more plugins": func(s *v1alpha1.Scheduler) {
			s.Plugins = map[string]v1alpha1.PluginSet{"score": {Enabled: []v1alpha1.SchedulerPlugin{{Name: "ImageLocality", Weight: &w}}}}
		},
		"tuned election": func(s *v1alpha1.Scheduler) {
			s.LeaderElection = v1alpha1.SchedulerLeaderElection{LeaseDuration: d(5), RenewDeadline: d(3), RetryPeriod: d(1)}
		},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := ConfigYAML(labScheduler(t, mutate), "")
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(path, out, 0o600); err != nil {
				t.Fatal(err)
			}
			res, err := exec.Command(bin, "validate", "--config", path).CombinedOutput()
			if err != nil || !strings.Contains(string(res), "valid") {
				t.Fatalf("hactl-scheduler validate: %v\n%s\n%s", err, res, out)
			}
		})
	}
}

func d(s int) v1alpha1.Duration { return v1alpha1.Duration{Duration: time.Duration(s) * time.Second} }

// TestManifestsGolden: the static pod, the RBAC and the Deployment mode's objects as YAML.
func TestManifestsGolden(t *testing.T) {
	s := labScheduler(t, nil)
	cfg, err := ConfigYAML(s, KubeconfigFile)
	if err != nil {
		t.Fatal(err)
	}
	pod, err := StaticPod(s, "ghcr.io/hactl/hactl-scheduler:dev", cfg)
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "testdata/static-pod.yaml", pod, "go test ./kubesched -update")
	objs, _, err := Objects(s, "ghcr.io/hactl/hactl-scheduler:dev")
	if err != nil {
		t.Fatal(err)
	}
	out, err := YAML(objs)
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "testdata/deployment.yaml", out, "go test ./kubesched -update")
	for _, want := range []string{"resourceNames:\n  - hactl-scheduler", "name: system:kube-scheduler", "name: system:volume-scheduler",
		"name: extension-apiserver-authentication-reader", "topologyKey: kubernetes.io/hostname", "priorityClassName: system-cluster-critical",
		"kind: PodDisruptionBudget", "maxUnavailable: 1"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("Deployment mode's objects lack %q", want)
		}
	}
}

func TestKubeconfigDue(t *testing.T) {
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	cert := func(notAfter time.Time) string {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: User}, NotBefore: now.Add(-time.Hour), NotAfter: notAfter}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	}
	for name, tc := range map[string]struct {
		probe string
		want  bool
	}{
		"missing":       {"image\n", true},
		"fresh":         {"kubeconfig\ncert " + cert(now.Add(300*24*time.Hour)) + "\n", false},
		"expiring soon": {"kubeconfig\ncert " + cert(now.Add(10*24*time.Hour)) + "\n", true},
		"no cert":       {"kubeconfig\n", true},
		"garbage":       {"kubeconfig\ncert !!!\n", true},
	} {
		if got, why := kubeconfigDue(tc.probe, now); got != tc.want {
			t.Errorf("%s: due %t (%s), want %t", name, got, why, tc.want)
		}
	}
}
