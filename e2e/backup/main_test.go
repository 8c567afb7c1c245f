//go:build e2e

// Package backupe2e runs the real hactl's backup and restore commands against the lab: a 3-member
// etcd cluster on cp-a/b/c (bootstrapped by hactl) and the lab's object store, a real MinIO server on
// objstore (172.28.0.31:9000) with a bucket and a bucket-scoped access key the lab created. The
// access key reaches hactl only through the environment variables spec.backup names (exported once
// for the package, never on a command line or in the test log). One lab for the package, always
// torn down; run with `make e2e` (or go test -tags e2e -p 1 -timeout 40m ./e2e/backup/).
//
// lb-a, lb-b and spare-c (no etcd there) are the other machines `drill restore --onto` rebuilds on.
//
// Each test stores its snapshots under its own spec.backup.objectStore.prefix, so tests don't see
// each other's snapshots.
package backupe2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/e2e/harness"
	"github.com/hactl/hactl/e2e/lab"
)

var suite harness.Suite

func TestMain(m *testing.M) {
	os.Exit(harness.Main(m, "e2e/backup", lab.Options{Members: 3, Dir: ".lab-e2e-backup", ObjectStore: true, Spares: true}, &suite))
}

// members are the etcd hosts of the suite's cluster.
var members = []string{"cp-a", "cp-b", "cp-c"}

// exportOnce exports the object store's access key into this process (the hactl processes the tests
// start inherit it), as a user does with `. .lab/objstore.env`.
var exportOnce = sync.OnceValue(func() error {
	o, err := suite.Lab.ObjectStore()
	if err != nil {
		return err
	}
	return o.Setenv()
})

// objectStore returns the lab's object store with the access key exported.
func objectStore(t *testing.T) lab.ObjectStore {
	t.Helper()
	if err := exportOnce(); err != nil {
		t.Fatal(err)
	}
	o, err := suite.Lab.ObjectStore()
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// labSpec returns the suite's cluster spec (a fresh copy to modify): the lab's 3-member spec without
// the load balancer (this suite is about etcd's data) and with spec.backup storing snapshots under
// prefix (the lab's object store, access key from the environment).
func labSpec(t *testing.T, prefix string) *v1alpha1.Cluster {
	t.Helper()
	c := suite.Spec(t, 3)
	lab.WithoutLoadBalancer(c)
	lab.WithBackup(c)
	c.Spec.Backup.ObjectStore.Prefix = prefix
	return c
}

// cluster makes sure the suite's cluster runs (hactl bootstrap is idempotent: the first test
// creates it, later ones find it converged) and returns the path of its spec with snapshots under
// prefix.
func cluster(t *testing.T, prefix string) string {
	t.Helper()
	_, spec := clusterWith(t, prefix, nil)
	return spec
}

// deltaCluster is cluster with spec.backup.deltaEvery at 5 s (the shortest allowed: the agents'
// deltas come quickly, and a drill's --max-rpo may be as short as that), returning the spec too.
func deltaCluster(t *testing.T, prefix string) (*v1alpha1.Cluster, string) {
	t.Helper()
	return clusterWith(t, prefix, func(c *v1alpha1.Cluster) { c.Spec.Backup.DeltaEvery.Duration = 5 * time.Second })
}

// clusterWith is cluster with edit (when not nil) applied to the spec before it is written.
func clusterWith(t *testing.T, prefix string, edit func(*v1alpha1.Cluster)) (*v1alpha1.Cluster, string) {
	t.Helper()
	objectStore(t)
	c := labSpec(t, prefix)
	if edit != nil {
		edit(c)
	}
	spec := harness.WriteSpec(t, c, "cluster.yaml")
	suite.MustHactl(t, "bootstrap", "-f", spec)
	return c, spec
}

// wantExit runs hactl and fails the test unless it exits code with every one of wants in its
// standard error.
func wantExit(t *testing.T, code int, wants []string, args ...string) harness.Result {
	t.Helper()
	r := suite.Hactl(t, args...)
	checkExit(t, r, code, wants, args)
	return r
}

func checkExit(t *testing.T, r harness.Result, code int, wants []string, args []string) {
	t.Helper()
	if r.Code != code {
		t.Errorf("hactl %s: exit %d, want %d", strings.Join(args, " "), r.Code, code)
	}
	for _, w := range wants {
		if !strings.Contains(r.Stderr, w) {
			t.Errorf("hactl %s: stderr does not say %q", strings.Join(args, " "), w)
		}
	}
}

// backupNow runs `hactl backup now -o json` and returns the new snapshot's metadata.
func backupNow(t *testing.T, spec string, extra ...string) *backup.Metadata {
	t.Helper()
	var rep struct {
		Snapshot *backup.Metadata `json:"snapshot"`
	}
	harness.DecodeJSON(t, suite.MustHactl(t, append([]string{"backup", "now", "-f", spec, "-o", "json"}, extra...)...), &rep)
	if rep.Snapshot == nil {
		t.Fatal("backup now -o json reported no snapshot")
	}
	return rep.Snapshot
}

// list runs `hactl backup list -o json`.
func list(t *testing.T, spec string) backup.Listing {
	t.Helper()
	var l backup.Listing
	harness.DecodeJSON(t, suite.MustHactl(t, "backup", "list", "-f", spec, "-o", "json"), &l)
	return l
}

// listQuiet is list for polling loops: the command line and exit code are logged, the output only
// when hactl fails (which fails the test).
func listQuiet(t *testing.T, spec string) backup.Listing {
	t.Helper()
	r := suite.HactlQuiet(t, "backup", "list", "-f", spec, "-o", "json")
	if r.Code != 0 {
		t.Fatalf("hactl backup list: %s", r)
	}
	var l backup.Listing
	harness.DecodeJSON(t, r, &l)
	return l
}

// client returns an etcd client of the suite's cluster with hactl's client certificate from the
// state dir (read again on every call: bootstrap may have recovered or rewritten it).
func client(t *testing.T) *clientv3.Client {
	t.Helper()
	var eps []string
	for _, h := range members {
		eps = append(eps, suite.Endpoint(t, h))
	}
	return harness.EtcdClient(t, filepath.Join(suite.Lab.Dir(), "state-3"), eps...)
}

// clusterID returns the etcd cluster ID the members report.
func clusterID(t *testing.T, cli *clientv3.Client) uint64 {
	t.Helper()
	r, err := cli.MemberList(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return r.Header.ClusterId
}

// count returns how many keys key matches (0 or 1).
func count(t *testing.T, cli *clientv3.Client, key string) int64 {
	t.Helper()
	r, err := cli.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return r.Count
}

// put writes key=value and returns the revision of the write.
func put(t *testing.T, cli *clientv3.Client, key, value string) int64 {
	t.Helper()
	r, err := cli.Put(context.Background(), key, value)
	if err != nil {
		t.Fatal(err)
	}
	return r.Header.Revision
}

// rootS3 returns a minio-go client of the lab's object store with MinIO's root credentials (to
// tamper with stored objects as an attacker or a broken disk would).
func rootS3(t *testing.T) (*minio.Client, lab.ObjectStore) {
	t.Helper()
	o := objectStore(t)
	cli, err := o.RootClient()
	if err != nil {
		t.Fatal(err)
	}
	return cli, o
}
