//go:build e2e

package backupe2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/minio/minio-go/v7"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/e2e/harness"
	"github.com/hactl/hactl/e2e/lab"
	"github.com/hactl/hactl/report"
)

// writeKeys writes n keys of about 100 bytes under prefix, 100 puts per transaction, through hactl's
// client certificate, and returns the revision of the last write.
func writeKeys(t *testing.T, cli *clientv3.Client, prefix string, n int) int64 {
	t.Helper()
	ctx := context.Background()
	var rev int64
	val := strings.Repeat("v", 100)
	for i := 0; i < n; i += 100 {
		var ops []clientv3.Op
		for j := i; j < min(i+100, n); j++ {
			ops = append(ops, clientv3.OpPut(fmt.Sprintf("%s%06d", prefix, j), val))
		}
		r, err := cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			t.Fatalf("txn at key %d: %v", i, err)
		}
		rev = r.Header.Revision
	}
	return rev
}

// TestBackupVerifyList: 10,000 keys → backup now (zstd, the default) → verify (sha256, etcd's
// integrity check: every key is in the snapshot) → list as a table and as JSON.
func TestBackupVerifyList(t *testing.T) {
	spec := cluster(t, "")
	cli := client(t)
	rev := writeKeys(t, cli, "e2e/backup/bulk/", 10_000)

	m := backupNow(t, spec)
	if m.Revision < rev || m.Compression != "zstd" || m.Encrypted() || m.ClusterMembers != 3 ||
		!strings.HasPrefix(m.Key, "lab3/snapshots/") || !strings.HasSuffix(m.Key, ".db.zst") ||
		m.StoredSizeBytes <= 0 || m.StoredSizeBytes >= m.RawSizeBytes || len(m.RawSHA256) != 64 {
		t.Errorf("snapshot metadata (after writing up to revision %d): %+v", rev, m)
	}
	if fmt.Sprintf("%x", clusterID(t, cli)) != m.ClusterID {
		t.Errorf("metadata cluster ID %s, cluster reports %x", m.ClusterID, clusterID(t, cli))
	}

	var res backup.VerifyResult
	harness.DecodeJSON(t, suite.MustHactl(t, "backup", "verify", "-f", spec, "-o", "json"), &res)
	if res.Key != m.Key || res.TotalKeys < 10_000 || res.Revision < m.Revision || res.Marker == "" {
		t.Errorf("verify latest: %+v; want %s with >= 10000 keys at revision >= %d, marker written", res, m.Key, m.Revision)
	}

	r := suite.MustHactl(t, "backup", "list", "-f", spec)
	stem := strings.TrimSuffix(filepath.Base(m.Key), ".db.zst")
	for _, want := range []string{"REVISION", "VERIFIED", stem, fmt.Sprint(m.Revision), "zstd"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("backup list does not show %q:\n%s", want, r.Stdout)
		}
	}
	l := list(t, spec)
	if len(l.Snapshots) != 1 || l.Snapshots[0].Stem != stem || l.Snapshots[0].Verified == nil ||
		l.Snapshots[0].Metadata.RawSHA256 != m.RawSHA256 || len(l.Orphans) != 0 {
		t.Errorf("backup list -o json: %+v", l)
	}
}

// newIdentity generates an age identity into a 0600 file and returns the file and its recipient.
func newIdentity(t *testing.T, name string) (string, string) {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte("# "+name+"\n"+id.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p, id.Recipient().String()
}

// TestBackupEncrypted: zstd + age. The stored object is not readable without the identity; verify
// and restore need the right one (a missing or wrong identity is exit 2, nothing touched).
func TestBackupEncrypted(t *testing.T) {
	cluster(t, "age")
	idFile, recipient := newIdentity(t, "backup.key")
	wrongFile, _ := newIdentity(t, "other.key")
	c := labSpec(t, "age")
	c.Spec.Backup.Compression = "zstd"
	c.Spec.Backup.Encryption = &v1alpha1.BackupEncryption{Recipients: []string{recipient}}
	spec := harness.WriteSpec(t, c, "age.yaml")
	cli := client(t)
	put(t, cli, "e2e/backup/age/secret", "only for the identity")

	m := backupNow(t, spec)
	if !m.Encrypted() || m.Recipients[0] != recipient || !strings.HasSuffix(m.Key, ".db.zst.age") {
		t.Fatalf("encrypted snapshot metadata: %+v", m)
	}
	// The stored bytes are age's, not etcd's.
	s3, o := rootS3(t)
	obj, err := s3.GetObject(context.Background(), o.Bucket, m.Key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 64)
	n, _ := io.ReadFull(obj, head)
	obj.Close()
	if !bytes.HasPrefix(head[:n], []byte("age-encryption.org/v1")) {
		t.Errorf("stored object does not start with an age header: %q", head[:n])
	}

	wantExit(t, 2, []string{"identit"}, "backup", "verify", "-f", spec)
	wantExit(t, 2, []string{"identit"}, "backup", "verify", "-f", spec, "--identity-file", wrongFile)
	var res backup.VerifyResult
	harness.DecodeJSON(t, suite.MustHactl(t, "backup", "verify", "-f", spec, "--identity-file", idFile, "-o", "json"), &res)
	if res.Key != m.Key || res.Revision < m.Revision {
		t.Errorf("verify with the identity: %+v", res)
	}
	if r := suite.MustHactl(t, "backup", "list", "-f", spec); !strings.Contains(r.Stdout, "age") {
		t.Errorf("backup list does not show the encryption:\n%s", r.Stdout)
	}

	// A restore with the wrong identity is refused before any member is touched.
	id := clusterID(t, cli)
	wantExit(t, 2, []string{"identit"}, "restore", "-f", spec, "--from", "latest", "--identity-file", wrongFile, "--force", "--yes")
	if clusterID(t, cli) != id || count(t, cli, "e2e/backup/age/secret") != 1 {
		t.Error("a refused restore changed the cluster")
	}

	// With the identity: decrypted here and streamed to every member (never fetched by a host: the
	// identity stays on this machine); the key written after the snapshot is rolled back.
	put(t, cli, "e2e/backup/age/after", "rolled back")
	r := suite.MustHactl(t, "restore", "-f", spec, "--from", "latest", "--identity-file", idFile, "--force", "--yes")
	for _, h := range members {
		if !hostSaid(r.Stderr, h, "snapshot copied from here") || hostSaid(r.Stderr, h, "fetched") {
			t.Errorf("%s was not sent the decrypted snapshot from hactl:\n%s", h, r.Stderr)
		}
		// The pipeline exits with head's status, 0 whatever grep finds: an error is docker exec failing.
		if out, err := suite.Lab.Exec(context.Background(), h, "sh", "-c", "grep -rl AGE-SECRET-KEY /var/lib/hactl /etc /tmp /root 2>/dev/null | head -1"); err != nil || strings.TrimSpace(out) != "" {
			t.Errorf("%s: an age identity is on the host (or the search failed: %v): %s", h, err, out)
		}
	}
	cli2 := client(t)
	if clusterID(t, cli2) == id || count(t, cli2, "e2e/backup/age/secret") != 1 || count(t, cli2, "e2e/backup/age/after") != 0 {
		t.Errorf("encrypted restore: cluster ID %x (was %x), secret %d, after %d; want a new ID, 1 and 0",
			clusterID(t, cli2), id, count(t, cli2, "e2e/backup/age/secret"), count(t, cli2, "e2e/backup/age/after"))
	}
}

// hostSaid reports whether hactl's progress has a line of host's saying what.
func hostSaid(stderr, host, what string) bool {
	for _, line := range strings.Split(stderr, "\n") {
		if strings.Contains(line, host) && strings.Contains(line, what) {
			return true
		}
	}
	return false
}

// blockStore makes host's connections to the object store at endpoint ("ip:port") fail (refused by
// iptables) until the test ends.
func blockStore(t *testing.T, host, endpoint string) {
	t.Helper()
	ip, port, err := net.SplitHostPort(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	rule := "OUTPUT -p tcp -d " + ip + " --dport " + port + " -j REJECT --reject-with tcp-reset"
	suite.ExecOn(t, host, "sh", "-c", "iptables -I "+rule)
	t.Cleanup(func() {
		if out, err := suite.Lab.Exec(context.Background(), host, "sh", "-c", "iptables -D "+rule); err != nil {
			t.Errorf("%s: removing the rule that blocks the object store: %v: %s", host, err, out)
		}
	})
}

// tamper replaces the stored object key with what change makes of its bytes (as a broken disk or
// an attacker would), with MinIO's root credentials.
func tamper(t *testing.T, key string, change func([]byte) []byte) {
	t.Helper()
	ctx := context.Background()
	s3, o := rootS3(t)
	obj, err := s3.GetObject(ctx, o.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(obj)
	obj.Close()
	if err != nil {
		t.Fatal(err)
	}
	b = change(b)
	if _, err := s3.PutObject(ctx, o.Bucket, key, bytes.NewReader(b), int64(len(b)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("tampered with s3://%s/%s: now %d bytes", o.Bucket, key, len(b))
}

// TestTamperedSnapshotIsRefused: one flipped byte in a stored snapshot → verify exits 3 and restore
// --force refuses it (exit 3) with the cluster untouched; the same for an empty and a truncated
// object.
func TestTamperedSnapshotIsRefused(t *testing.T) {
	spec := cluster(t, "tamper")
	cli := client(t)
	put(t, cli, "e2e/backup/tamper/before", "x")
	m := backupNow(t, spec)
	suite.MustHactl(t, "backup", "verify", "-f", spec, "--no-record")
	id := clusterID(t, cli)
	src := "s3://" + lab.ObjectStoreBucket + "/" + m.Key

	for _, tc := range []struct {
		name   string
		change func([]byte) []byte
	}{
		{"one flipped byte", func(b []byte) []byte { b[len(b)/2] ^= 0x01; return b }},
		{"empty object", func([]byte) []byte { return nil }},
		{"truncated object", func(b []byte) []byte { return b[:len(b)/2] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig := tamperKeep(t, m.Key, tc.change)
			defer tamper(t, m.Key, func([]byte) []byte { return orig })
			wantExit(t, 3, nil, "backup", "verify", "-f", spec, "--no-record")
			wantExit(t, 3, []string{"refused before any member was touched"}, "restore", "-f", spec, "--from", src, "--force", "--yes")
			after := fmt.Sprintf("e2e/backup/tamper/after-%d", time.Now().UnixNano())
			put(t, cli, after, "written after the refused restore")
			if count(t, cli, after) != 1 || count(t, cli, "e2e/backup/tamper/before") != 1 || clusterID(t, cli) != id {
				t.Errorf("the cluster changed under a refused restore")
			}
		})
	}
	// Put back, it verifies again.
	suite.MustHactl(t, "backup", "verify", "-f", spec, "--no-record")
}

// tamperKeep is tamper returning the original bytes.
func tamperKeep(t *testing.T, key string, change func([]byte) []byte) []byte {
	t.Helper()
	var orig []byte
	tamper(t, key, func(b []byte) []byte {
		orig = bytes.Clone(b)
		return change(b)
	})
	return orig
}

// TestRestoreLatest: a sentinel before a backup and one after, plus a newer data object without its
// metadata (an upload that never finished): it is never "latest"; restore --from latest brings back
// the first sentinel only, bumps the revision by at least 1e9 and gives the cluster a new ID.
func TestRestoreLatest(t *testing.T) {
	spec := cluster(t, "restore")
	cli := client(t)
	put(t, cli, "e2e/backup/restore/before", "kept")
	m := backupNow(t, spec)
	afterRev := put(t, cli, "e2e/backup/restore/after", "rolled back")
	oldID := clusterID(t, cli)

	// A data object newer than every snapshot, without metadata: an interrupted upload.
	s3, o := rootS3(t)
	stem, err := backup.Stem(time.Now().Add(time.Hour), afterRev+10, "cp-a", "")
	if err != nil {
		t.Fatal(err)
	}
	fake := backup.SnapshotsPrefix("restore", "lab3") + stem + ".db.zst"
	junk := bytes.Repeat([]byte("not a snapshot "), 1000)
	if _, err := s3.PutObject(context.Background(), o.Bucket, fake, bytes.NewReader(junk), int64(len(junk)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	l := list(t, spec)
	if latest := l.Latest(); latest == nil || latest.Metadata.Key != m.Key || len(l.Orphans) != 1 || l.Orphans[0].Key != fake {
		t.Fatalf("listing with an upload without metadata: latest %+v, orphans %+v; want %s latest and %s an orphan", latest, l.Orphans, m.Key, fake)
	}
	var vr backup.VerifyResult
	harness.DecodeJSON(t, suite.MustHactl(t, "backup", "verify", "latest", "-f", spec, "-o", "json"), &vr)
	if vr.Key != m.Key {
		t.Errorf("verify latest checked %s, want %s", vr.Key, m.Key)
	}
	wantExit(t, 2, []string{"no complete snapshot"}, "restore", "-f", spec, "--from", "s3://"+o.Bucket+"/"+fake, "--force", "--yes")

	// cp-c cannot reach the object store (its connections to MinIO are refused): it is sent the copy
	// verified here, while cp-a and cp-b fetch the snapshot themselves.
	blockStore(t, "cp-c", o.Endpoint)
	r := suite.MustHactl(t, "restore", "-f", spec, "--from", "latest", "--force", "--yes", "-o", "json")
	var res report.Cluster
	harness.DecodeJSON(t, r, &res)
	if !strings.Contains(r.Stderr, m.Key) {
		t.Errorf("restore --from latest does not name the snapshot it chose (%s)", m.Key)
	}
	for _, h := range []string{"cp-a", "cp-b"} {
		if !hostSaid(r.Stderr, h, "snapshot fetched from the object store by the host") {
			t.Errorf("%s did not fetch the snapshot itself:\n%s", h, r.Stderr)
		}
	}
	if !strings.Contains(r.Stderr, "cp-c: could not fetch the snapshot from the object store itself") || !hostSaid(r.Stderr, "cp-c", "snapshot copied from here") ||
		strings.Count(r.Stderr, "downloading and verifying") != 1 {
		t.Errorf("cp-c, cut off from the store, was not sent the copy verified here (downloaded once):\n%s", r.Stderr)
	}
	if strings.Contains(r.Stderr, "X-Amz-Signature") {
		t.Errorf("a presigned URL is in hactl's output:\n%s", r.Stderr)
	}
	if res.RestoredRevision < m.Revision+1_000_000_000 {
		t.Errorf("restored revision %d, want >= %d + 1e9", res.RestoredRevision, m.Revision)
	}
	cli2 := client(t)
	if count(t, cli2, "e2e/backup/restore/before") != 1 || count(t, cli2, "e2e/backup/restore/after") != 0 {
		t.Errorf("after restore: before=%d after=%d; want 1 and 0", count(t, cli2, "e2e/backup/restore/before"), count(t, cli2, "e2e/backup/restore/after"))
	}
	if newID := clusterID(t, cli2); newID == oldID {
		t.Errorf("cluster ID %x unchanged by the restore", newID)
	}
	if rev := put(t, cli2, "e2e/backup/restore/new", "x"); rev <= m.Revision+1_000_000_000 {
		t.Errorf("a write after the restore landed at revision %d, want > %d", rev, m.Revision+1_000_000_000)
	}
	// Backups keep working on the restored cluster (its new ID is in the new metadata).
	m2 := backupNow(t, spec)
	if m2.ClusterID == m.ClusterID || m2.Revision <= m.Revision+1_000_000_000 {
		t.Errorf("backup after the restore: cluster %s revision %d", m2.ClusterID, m2.Revision)
	}
}

// TestPrune: --keep-last N keeps exactly the newest N, plus the newest verified snapshot when it is
// older; a policy keeping nothing is refused.
func TestPrune(t *testing.T) {
	spec := cluster(t, "prune")
	cli := client(t)
	var ms []*backup.Metadata
	for i := range 4 {
		if i > 0 {
			// Object names start with the snapshot's start in whole seconds (StartedAt, by this
			// machine's clock): the next one starts in a later second, so the names sort in the order
			// the snapshots were taken, whatever revision each member reports.
			time.Sleep(time.Until(ms[i-1].StartedAt.Add(time.Second)))
		}
		put(t, cli, "e2e/backup/prune/n", fmt.Sprint(i))
		ms = append(ms, backupNow(t, spec))
	}
	stems := func() []string {
		var out []string
		for _, s := range list(t, spec).Snapshots {
			out = append(out, s.Metadata.Key)
		}
		return out
	}
	wantExit(t, 2, []string{"keep"}, "backup", "prune", "-f", spec, "--keep-last", "0", "--yes")
	if got := stems(); len(got) != 4 {
		t.Fatalf("%d snapshots before pruning, want 4: %v", len(got), got)
	}

	// The oldest is the newest verified: kept beside the newest two.
	suite.MustHactl(t, "backup", "verify", ms[0].Key, "-f", spec)
	suite.MustHactl(t, "backup", "prune", "-f", spec, "--keep-last", "2", "--dry-run")
	if got := stems(); len(got) != 4 {
		t.Errorf("--dry-run deleted something: %v", got)
	}
	suite.MustHactl(t, "backup", "prune", "-f", spec, "--keep-last", "2", "--yes")
	if got, want := strings.Join(stems(), " "), strings.Join([]string{ms[0].Key, ms[2].Key, ms[3].Key}, " "); got != want {
		t.Errorf("after prune --keep-last 2 with the oldest verified:\n got %s\nwant %s", got, want)
	}
	// Once the newest is verified, exactly N remain.
	suite.MustHactl(t, "backup", "verify", "latest", "-f", spec)
	suite.MustHactl(t, "backup", "prune", "-f", spec, "--keep-last", "2", "--yes")
	if got, want := strings.Join(stems(), " "), strings.Join([]string{ms[2].Key, ms[3].Key}, " "); got != want {
		t.Errorf("after prune --keep-last 2 with the newest verified:\n got %s\nwant %s", got, want)
	}
	// Data objects are gone with their metadata (nothing orphaned).
	if l := list(t, spec); len(l.Orphans) != 0 {
		t.Errorf("prune left orphans: %+v", l.Orphans)
	}
}

// TestBadInputs: each is refused with the thing named and nothing changed (exit 2 when found here, 1
// when found remotely).
func TestBadInputs(t *testing.T) {
	spec := cluster(t, "")
	cli := client(t)
	if len(list(t, spec).Snapshots) == 0 {
		backupNow(t, spec)
	}
	id := clusterID(t, cli)

	// Missing credentials: the variable is named, never its value.
	for _, v := range []string{lab.AccessKeyIDEnv, lab.SecretAccessKeyEnv} {
		r := suite.WithEnv(v+"=").Hactl(t, "backup", "now", "-f", spec)
		checkExit(t, r, 2, []string{v}, []string{"backup", "now", "(" + v + " unset)"})
	}
	// A bucket that can't be used: endpoint, region and lookup style named.
	c := labSpec(t, "")
	c.Spec.Backup.ObjectStore.Bucket = "no-such-bucket"
	wrong := harness.WriteSpec(t, c, "wrong-bucket.yaml")
	wantExit(t, 1, []string{lab.ObjectStoreEndpoint(), lab.ObjectStoreRegion, "path", "no-such-bucket"}, "backup", "list", "-f", wrong)
	wantExit(t, 1, []string{lab.ObjectStoreEndpoint()}, "backup", "now", "-f", wrong)
	// A key that doesn't exist.
	wantExit(t, 2, []string{"nonexistent"}, "restore", "-f", spec, "--from", "s3://"+lab.ObjectStoreBucket+"/nonexistent", "--force", "--yes")
	// A spec with another member count than the snapshot's cluster (same cluster name and state
	// dir, five etcd hosts): refused without --force before any host is contacted.
	five := suite.Spec(t, 5)
	lab.WithoutLoadBalancer(five)
	lab.WithBackup(five)
	five.Metadata.Name = "lab3"
	five.Spec.StateDir = filepath.Join(suite.Lab.Dir(), "state-3")
	wantExit(t, 2, []string{"3-member", "--force"}, "restore", "-f", harness.WriteSpec(t, five, "five.yaml"), "--from", "latest", "--yes")
	// Retention that keeps nothing.
	wantExit(t, 2, nil, "backup", "prune", "-f", spec, "--yes")

	if clusterID(t, cli) != id {
		t.Error("a refused command changed the cluster")
	}
}
