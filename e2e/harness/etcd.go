package harness

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

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
