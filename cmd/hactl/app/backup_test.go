package app

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/backup/s3test"
	"github.com/hactl/hactl/specload"
)

// backupSpec writes a spec whose spec.backup points at srv (credentials from HACTL_TEST_S3_*).
func backupSpec(t *testing.T, endpoint, extra string) string {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "cluster.yaml")
	spec := fmt.Sprintf(`apiVersion: hactl.io/v1alpha1
kind: Cluster
metadata:
  name: lab
spec:
  stateDir: state
  hosts:
  - {name: cp-a, address: 10.0.1.11, zone: az-a, roles: [etcd]}
  - {name: cp-b, address: 10.0.1.12, zone: az-b, roles: [etcd]}
  - {name: cp-c, address: 10.0.1.13, zone: az-c, roles: [etcd]}
  etcd:
    version: v3.6.16
    binaries: {etcd: bin/etcd}
  backup:
    objectStore:
      endpoint: %s
      bucket: %s
      prefix: hactl
      plainHTTP: true
      credentials:
        env: {accessKeyID: HACTL_TEST_S3_ACCESS, secretAccessKey: HACTL_TEST_S3_SECRET}
%s`, endpoint, s3test.Bucket, extra)
	if err := os.WriteFile(p, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// putFakeSnapshot stores a snapshot the way Take does, from a synthetic etcd stream (junk DB +
// etcd's trailer), so the commands have something to list, verify and prune.
func putFakeSnapshot(t *testing.T, st backup.Store, stem string) {
	t.Helper()
	ctx := context.Background()
	db := make([]byte, 4096)
	rand.Read(db)
	sum := sha256.Sum256(db)
	key := "hactl/lab/snapshots/" + stem + ".db"
	res, err := backup.Upload(ctx, st, key, bytes.NewReader(append(db, sum[:]...)), backup.UploadOptions{PartSize: 5 << 20, Compression: "none", EtcdTrailer: true})
	if err != nil {
		t.Fatal(err)
	}
	m := backup.Metadata{Format: 1, Cluster: "lab", Key: key, MetadataKey: "hactl/lab/snapshots/" + stem + ".json", Compression: "none",
		RawSizeBytes: res.RawSizeBytes, RawSHA256: res.RawSHA256, StoredSizeBytes: res.StoredSizeBytes, StoredSHA256: res.StoredSHA256}
	b, _ := json.Marshal(m)
	if _, err := st.Put(ctx, m.MetadataKey, bytes.NewReader(b), backup.PutOptions{Size: int64(len(b))}); err != nil {
		t.Fatal(err)
	}
}

func TestBackupCommands(t *testing.T) {
	srv := s3test.Start(t)
	t.Setenv("HACTL_TEST_S3_ACCESS", s3test.AccessKey)
	t.Setenv("HACTL_TEST_S3_SECRET", s3test.SecretKey)
	spec := backupSpec(t, srv.Endpoint, "")
	st, err := backup.NewS3(backup.S3Config{Endpoint: srv.Endpoint, Bucket: s3test.Bucket, Region: s3test.Region, PlainHTTP: true,
		Credentials: specload.BackupCredentials{AccessKeyID: s3test.AccessKey, SecretAccessKey: s3test.SecretKey}})
	if err != nil {
		t.Fatal(err)
	}
	for _, stem := range []string{"20261201T010000Z-rev000000000000010-cp-a", "20261201T020000Z-rev000000000000020-cp-b", "20261201T030000Z-rev000000000000030-cp-a"} {
		putFakeSnapshot(t, st, stem)
	}

	out, stderr, code := runCmd(t, "backup", "list", "-f", spec)
	if code != 0 || strings.Count(out, "cp-a") != 2 || !strings.Contains(out, "20261201T030000Z-rev000000000000030-cp-a") {
		t.Fatalf("list: exit %d\n%s\n%s", code, out, stderr)
	}
	out, _, code = runCmd(t, "backup", "list", "-f", spec, "-o", "json")
	var l backup.Listing
	if code != 0 || json.Unmarshal([]byte(out), &l) != nil || len(l.Snapshots) != 3 {
		t.Fatalf("list -o json: exit %d\n%s", code, out)
	}

	// Snapshot names complete from the store, newest first, after "latest".
	out, _, _ = runCmd(t, "__complete", "backup", "verify", "-f", spec, "")
	if want := "latest\n20261201T030000Z-rev000000000000030-cp-a\n20261201T020000Z-rev000000000000020-cp-b\n20261201T010000Z-rev000000000000010-cp-a\n:4\n"; out != want {
		t.Errorf("verify completes\n%s\nwant\n%s", out, want)
	}
	out, _, _ = runCmd(t, "__complete", "restore", "-f", spec, "--from", "s3://")
	if !strings.HasPrefix(out, "s3://"+s3test.Bucket+"/hactl/lab/snapshots/20261201T030000Z-rev000000000000030-cp-a.db\n") || strings.Count(out, "s3://") != 3 {
		t.Errorf("restore --from completes\n%s", out)
	}

	// The fake DBs are no bbolt files: every hash matches, etcd's integrity check fails: exit 3.
	_, stderr, code = runCmd(t, "backup", "verify", "-f", spec)
	if code != 3 || !strings.Contains(stderr, "etcd integrity check") {
		t.Errorf("verify: exit %d, want 3 naming etcd's integrity check\n%s", code, stderr)
	}
	_, stderr, code = runCmd(t, "backup", "verify", "-f", spec, "20261201T999999Z")
	if code != 1 || !strings.Contains(stderr, "no complete snapshot") {
		t.Errorf("verify unknown: exit %d\n%s", code, stderr)
	}

	// Retention keeping nothing: exit 2 before anything is contacted.
	_, stderr, code = runCmd(t, "backup", "prune", "-f", spec, "--yes")
	if code != 2 || !strings.Contains(stderr, "keeps no snapshot") {
		t.Errorf("prune without policy: exit %d\n%s", code, stderr)
	}
	// No terminal and no --yes: refused (exit 2).
	if _, _, code = runCmd(t, "backup", "prune", "-f", spec, "--keep-last", "1"); code != 2 {
		t.Errorf("prune without --yes on a non-terminal: exit %d, want 2", code)
	}
	out, _, code = runCmd(t, "backup", "prune", "-f", spec, "--keep-last", "1", "--dry-run")
	if code != 0 || !strings.Contains(out, "1 kept, 2 to delete") {
		t.Errorf("dry run: exit %d\n%s", code, out)
	}
	out, stderr, code = runCmd(t, "backup", "prune", "-f", spec, "--keep-last", "1", "--yes")
	if code != 0 {
		t.Fatalf("prune: exit %d\n%s\n%s", code, out, stderr)
	}
	out, _, _ = runCmd(t, "backup", "list", "-f", spec)
	if strings.Contains(out, "rev000000000000010") || strings.Contains(out, "rev000000000000020") || !strings.Contains(out, "rev000000000000030") {
		t.Errorf("after prune:\n%s", out)
	}
}

func TestBackupBadInput(t *testing.T) {
	srv := s3test.Start(t)
	spec := backupSpec(t, srv.Endpoint, "")
	// Credentials' variables unset: exit 2 naming the field and the variable.
	t.Setenv("HACTL_TEST_S3_ACCESS", "")
	t.Setenv("HACTL_TEST_S3_SECRET", "")
	_, stderr, code := runCmd(t, "backup", "list", "-f", spec)
	if code != 2 || !strings.Contains(stderr, "spec.backup.objectStore.credentials.env.accessKeyID") || !strings.Contains(stderr, "HACTL_TEST_S3_ACCESS") {
		t.Errorf("missing credentials: exit %d\n%s", code, stderr)
	}
	// Wrong bucket: exit 1 naming endpoint, region and lookup style.
	t.Setenv("HACTL_TEST_S3_ACCESS", s3test.AccessKey)
	t.Setenv("HACTL_TEST_S3_SECRET", s3test.SecretKey)
	bad := strings.Replace(string(must(os.ReadFile(spec))), "bucket: "+s3test.Bucket, "bucket: no-such-bucket", 1)
	os.WriteFile(spec, []byte(bad), 0o600)
	_, stderr, code = runCmd(t, "backup", "list", "-f", spec)
	if code != 1 || !strings.Contains(stderr, srv.Endpoint) || !strings.Contains(stderr, "region us-east-1") || !strings.Contains(stderr, "bucket lookup path") {
		t.Errorf("bucket check: exit %d\n%s", code, stderr)
	}
	if strings.Contains(stderr, s3test.SecretKey) {
		t.Error("secret in the output")
	}
	// No spec.backup: exit 2.
	noBackup := filepath.Join(t.TempDir(), "cluster.yaml")
	os.WriteFile(noBackup, []byte(strings.Split(bad, "  backup:")[0]), 0o600)
	if _, stderr, code = runCmd(t, "backup", "list", "-f", noBackup); code != 2 || !strings.Contains(stderr, "spec.backup is not set") {
		t.Errorf("no spec.backup: exit %d\n%s", code, stderr)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
