package harness

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/drill/workload"
	"github.com/hactl/hactl/etcd"
)

// Endpoint returns the etcd client URL of the lab host named host (https://<address>:2379). An
// unknown host fails the test (t.Fatal).
func (s *Suite) Endpoint(t *testing.T, host string) string {
	t.Helper()
	h, err := s.Lab.Host(host)
	if err != nil {
		t.Fatal(err)
	}
	return "https://" + h.Address + ":2379"
}

// EtcdClient returns an etcd client of endpoints with hactl's client certificate from the spec's
// state dir (<stateDir>/pki; read at each call: bootstrap may have recovered or rewritten it),
// dialling for at most 5 s. It is closed when the test ends. An error fails the test (t.Fatal).
func EtcdClient(t *testing.T, stateDir string, endpoints ...string) *clientv3.Client {
	t.Helper()
	pkiDir := filepath.Join(stateDir, "pki")
	cli, err := etcd.NewClient(context.Background(), endpoints, etcd.TLSFiles{
		CA: filepath.Join(pkiDir, "ca.crt"), Cert: filepath.Join(pkiDir, "hactl-etcd-client.crt"), Key: filepath.Join(pkiDir, "hactl-etcd-client.key"),
	}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// SaveSnapshot streams a snapshot from cli (etcd's Maintenance.Snapshot) into a file named name in a
// new temp dir of the test and returns its path. An error fails the test (t.Fatal).
func SaveSnapshot(t *testing.T, cli *clientv3.Client, name string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	rc, err := cli.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := io.Copy(f, rc); err != nil {
		t.Fatal(err)
	}
	return p
}

// Writer is the drills' writer (drill/workload, 50 writes/s, each acknowledged write recorded)
// running against a cluster's members while a test changes the cluster.
type Writer struct {
	t *testing.T
	// Client is the writer's etcd client (over the endpoints it was started with).
	Client *clientv3.Client
	run    *workload.Run
}

// StartWriter starts the writer under /hactl-e2e/<name>/<time>/ on the cluster of spec c, through
// the client URLs of its etcd hosts (the client balances over those that answer) with the client
// certificate of c's state dir; it is stopped at the test's end at the latest.
func (s *Suite) StartWriter(t *testing.T, name string, c *v1alpha1.Cluster) *Writer {
	t.Helper()
	var endpoints []string
	for _, h := range c.EtcdHosts() {
		endpoints = append(endpoints, s.Endpoint(t, h.Name))
	}
	w := &Writer{t: t, Client: EtcdClient(t, c.Spec.StateDir, endpoints...)}
	run, err := workload.Start(context.Background(), workload.Config{Client: w.Client, Prefix: "/hactl-e2e/" + name + "/" + time.Now().UTC().Format("150405") + "/", Rate: 50})
	if err != nil {
		t.Fatal(err)
	}
	w.run = run
	t.Cleanup(func() {
		if w.run != nil {
			w.run.Stop()
		}
	})
	return w
}

// Verify stops the writer and reads every acknowledged write back: the test fails when one is
// lost or a read was stale, or when no write was acknowledged at all. It logs the count and the
// longest gap between acknowledged writes.
func (w *Writer) Verify(during string) workload.Stats {
	w.t.Helper()
	rec := w.run.Stop()
	w.run = nil
	v, err := workload.Verify(context.Background(), w.Client, rec)
	if err != nil {
		w.t.Fatal(err)
	}
	if !v.OK() {
		w.t.Errorf("acknowledged writes lost or stale reads %s: %+v", during, v)
	}
	if v.Acked == 0 { // nothing lost of nothing: the check above proved nothing
		w.t.Errorf("no write acknowledged %s: nothing to read back: %+v", during, v)
	}
	st := rec.Stats(time.Time{})
	w.t.Logf("writer: %d acknowledged %s, longest write gap %s", st.Acked, during, st.LongestGap)
	return st
}
