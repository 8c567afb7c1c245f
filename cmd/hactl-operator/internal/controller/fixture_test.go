package controller

import (
	"context"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/hactl/hactl/cmd/hactl-operator/internal/testenv"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/internal/etcdtest"
	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
)

// fixture is one test's kube-apiserver (envtest), real 3-member etcd and the Secret "etcd-client"
// (namespace default) holding its client certificate.
type fixture struct {
	cfg    *rest.Config
	c      client.Client
	etcd   *etcdtest.Cluster
	id     string            // the etcd cluster ID
	secret map[string][]byte // the Secret's data
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	cfg, c := testenv.Start(t)
	ec := etcdtest.Start(t, 3)
	st, err := etcd.Status(context.Background(), ec.Endpoints(), ec.Files())
	if err != nil {
		t.Fatal(err)
	}
	files := ec.Files()
	data := map[string][]byte{}
	for k, p := range map[string]string{SecretCA: files.CA, SecretCert: files.Cert, SecretKey: files.Key} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		data[k] = b
	}
	must(t, c.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "etcd-client", Namespace: "default"}, Data: data}))
	return &fixture{cfg: cfg, c: c, etcd: ec, id: st.ClusterID, secret: data}
}

// cluster is an EtcdCluster name of the fixture's etcd (its members, the client Secret secret).
func (f *fixture) cluster(name, id, secret string) *hactlv1.EtcdCluster {
	e := &hactlv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: hactlv1.EtcdClusterSpec{ClusterID: id, ClientCertificateSecret: hactlv1.SecretRef{Name: secret}}}
	for i, m := range f.etcd.Members() {
		e.Spec.Members = append(e.Spec.Members, hactlv1.MemberEndpoint{Name: m.Name, ClientURL: f.etcd.Endpoints()[i]})
	}
	return e
}

// start runs a manager (metrics off, controller names allowed again: each test registers the
// same controllers) with setup's reconcilers until the test ends.
func (f *fixture) start(t *testing.T, setup func(mgr ctrl.Manager) error) {
	t.Helper()
	mgr, err := ctrl.NewManager(f.cfg, ctrl.Options{Scheme: testenv.Scheme(t), Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		t.Fatal(err)
	}
	must(t, setup(mgr))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}

// mustStatus is the etcd cluster's status; an error fails the test.
func mustStatus(t *testing.T, ec *etcdtest.Cluster) *etcd.ClusterStatus {
	t.Helper()
	st, err := etcd.Status(context.Background(), ec.Endpoints(), ec.Files())
	if err != nil {
		t.Fatal(err)
	}
	return st
}
