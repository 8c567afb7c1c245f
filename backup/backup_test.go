package backup

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/backup/s3test"
	"github.com/hactl/hactl/specload"
)

func testConfig(srv *s3test.Server) S3Config {
	return S3Config{Endpoint: srv.Endpoint, Bucket: s3test.Bucket, Region: s3test.Region, Lookup: v1alpha1.BucketLookupPath, PlainHTTP: true,
		Credentials: specload.BackupCredentials{AccessKeyID: s3test.AccessKey, SecretAccessKey: s3test.SecretKey}}
}

func testStore(t *testing.T, srv *s3test.Server) *S3 {
	t.Helper()
	st, err := NewS3(testConfig(srv))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// startEtcd runs a single real etcd member (embed, plain HTTP on 127.0.0.1) holding about dbMiB
// MiB of values, and returns a client talking to it only.
func startEtcd(t *testing.T, dbMiB int) (*clientv3.Client, string) {
	t.Helper()
	var ports []int
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
		l.Close()
	}
	client := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	cu, _ := url.Parse(client)
	pu, _ := url.Parse(peer)
	cfg := embed.NewConfig()
	cfg.Name = "m0"
	cfg.Dir = filepath.Join(t.TempDir(), "m0.etcd")
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = "m0=" + peer
	cfg.LogLevel = "error"
	cfg.Logger = "zap"
	cfg.LogOutputs = []string{"stderr"}
	e, err := startEmbed(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	val := make([]byte, 256<<10)
	for i := range dbMiB * 4 {
		rand.Read(val)
		if _, err := cli.Put(ctx, fmt.Sprintf("/registry/k%05d", i), string(val)); err != nil {
			t.Fatal(err)
		}
	}
	return cli, client
}

// startEmbed starts cfg and waits until the member serves.
func startEmbed(t *testing.T, cfg *embed.Config) (*embed.Etcd, error) {
	t.Helper()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case <-time.After(30 * time.Second):
		e.Close()
		return nil, errors.New("etcd not ready after 30s")
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestTakeVerifyMultipart streams a ~12 MiB DB in 5 MiB parts (S3's minimum), three in flight,
// then lists and verifies it.
func TestTakeVerifyMultipart(t *testing.T) {
	srv := s3test.Start(t)
	store := testStore(t, srv)
	cli, ep := startEtcd(t, 12)
	ctx := ctxT(t)
	var lines []string
	m, err := Take(ctx, cli, ep, store, TakeOptions{Cluster: "lab", Prefix: "hactl", Member: "m0", Compression: "none",
		Threads: 3, HactlVersion: "test", partSize: 5 << 20,
		Progress: func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v\n%s", m, strings.Join(lines, "\n"))
	if m.StoredSizeBytes < 12<<20 || m.StoredSizeBytes != m.RawSizeBytes || m.RawSHA256 != m.StoredSHA256 {
		t.Errorf("sizes/hashes %d %d %s %s: want ≥ 12 MiB stored as is", m.StoredSizeBytes, m.RawSizeBytes, m.RawSHA256, m.StoredSHA256)
	}
	if !strings.HasPrefix(m.Key, "hactl/lab/snapshots/") || !strings.HasSuffix(m.Key, "-m0.db") || m.MetadataKey != strings.TrimSuffix(m.Key, ".db")+".json" {
		t.Errorf("keys %s %s", m.Key, m.MetadataKey)
	}
	if m.ClusterID == "" || m.MemberID == "" || m.Revision < 48 || m.EtcdVersion == "" || m.DBSizeBytes == 0 || m.PartSizeBytes != 5<<20 {
		t.Errorf("metadata %+v", m)
	}
	l, err := List(ctx, store, "hactl", "lab")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Snapshots) != 1 || l.Latest().Data.Key != m.Key || l.Latest().Revision != m.Revision || len(l.Orphans)+len(l.Incomplete)+len(l.Problems) != 0 {
		t.Fatalf("listing %+v", l)
	}
	res, err := Verify(ctx, store, l.Latest(), VerifyOptions{TempDir: t.TempDir(), Record: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Revision < m.Revision || res.TotalKeys != 48 || res.Marker == "" {
		t.Errorf("verify %+v, want revision ≥ %d, 48 keys, a marker", res, m.Revision)
	}
	l, _ = List(ctx, store, "hactl", "lab")
	if l.NewestVerified() == nil || l.NewestVerified().Verified.Revision != res.Revision {
		t.Errorf("marker not listed: %+v", l.Latest())
	}
}

// TestTakeCompressedEncrypted: zstd + age round trip; identities are required and must match;
// a flipped byte in the stored object fails verification naming the stored sha256.
func TestTakeCompressedEncrypted(t *testing.T) {
	srv := s3test.Start(t)
	store := testStore(t, srv)
	cli, ep := startEtcd(t, 2)
	ctx := ctxT(t)
	id, _ := age.GenerateX25519Identity()
	other, _ := age.GenerateX25519Identity()
	m, err := Take(ctx, cli, ep, store, TakeOptions{Cluster: "lab", Member: "m0", Compression: "zstd",
		Recipients: []string{id.Recipient().String()}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(m.Key, ".db.zst.age") || !m.Encrypted() || m.Compression != "zstd" || m.StoredSHA256 == m.RawSHA256 {
		t.Fatalf("metadata %+v", m)
	}
	l, err := List(ctx, store, "", "lab")
	if err != nil || len(l.Snapshots) != 1 {
		t.Fatalf("list: %v %+v", err, l)
	}
	s := l.Latest()
	if _, err := Verify(ctx, store, s, VerifyOptions{TempDir: t.TempDir()}); !errors.Is(err, ErrNoIdentity) {
		t.Errorf("no identity: %v, want ErrNoIdentity", err)
	}
	if _, err := Verify(ctx, store, s, VerifyOptions{TempDir: t.TempDir(), Identities: []age.Identity{other}}); !errors.Is(err, ErrWrongIdentity) {
		t.Errorf("wrong identity: %v, want ErrWrongIdentity", err)
	}
	res, err := Verify(ctx, store, s, VerifyOptions{TempDir: t.TempDir(), Identities: []age.Identity{id}})
	if err != nil || res.TotalKeys != 8 {
		t.Fatalf("verify: %v %+v", err, res)
	}

	// Flip one byte in the middle of the stored object.
	rc, info, err := store.Get(ctx, m.Key)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(rc)
	rc.Close()
	data[len(data)/2] ^= 0x01
	if _, err := store.Put(ctx, m.Key, bytes.NewReader(data), PutOptions{Size: info.Size}); err != nil {
		t.Fatal(err)
	}
	_, err = Verify(ctx, store, s, VerifyOptions{TempDir: t.TempDir(), Identities: []age.Identity{id}})
	wantMismatch(t, err, "stored sha256")
}

// wantMismatch fails unless err is a *MismatchError whose What contains what.
func wantMismatch(t *testing.T, err error, what string) {
	t.Helper()
	var me *MismatchError
	if !errors.As(err, &me) || !strings.Contains(me.What, what) {
		t.Fatalf("err = %v, want a %s mismatch", err, what)
	}
	t.Log(err)
}

// TestVerifyEtcdIntegrity: a stream whose hashes all match but which is no bbolt DB is refused by
// etcd's own check (etcdutl's snapshot status).
func TestVerifyEtcdIntegrity(t *testing.T) {
	srv := s3test.Start(t)
	store := testStore(t, srv)
	cli, ep := startEtcd(t, 1)
	ctx := ctxT(t)
	m, err := Take(ctx, cli, ep, store, TakeOptions{Cluster: "lab", Member: "m0", Compression: "none"})
	if err != nil {
		t.Fatal(err)
	}
	// A well-formed stream whose content is not a bbolt DB: our hashes match (the metadata is
	// rewritten to fit), etcd's trailer matches, and only etcdutl's check refuses it.
	junk := make([]byte, 512*64)
	rand.Read(junk)
	stream := append(junk, sha256Sum(junk)...)
	res, err := Upload(ctx, store, m.Key, bytes.NewReader(stream), UploadOptions{PartSize: 5 << 20, Compression: "none", EtcdTrailer: true})
	if err != nil {
		t.Fatal(err)
	}
	m.RawSizeBytes, m.RawSHA256, m.StoredSizeBytes, m.StoredSHA256 = res.RawSizeBytes, res.RawSHA256, res.StoredSizeBytes, res.StoredSHA256
	if err := putJSON(ctx, store, m.MetadataKey, m); err != nil {
		t.Fatal(err)
	}
	l, _ := List(ctx, store, "", "lab")
	_, err = Verify(ctx, store, l.Latest(), VerifyOptions{TempDir: t.TempDir()})
	wantMismatch(t, err, "etcd integrity check")
}

// TestUploadPartLimit: a stream larger than the part limit allows is refused before the limit,
// the upload is aborted, and nothing is stored under the key.
func TestUploadPartLimit(t *testing.T) {
	srv := s3test.Start(t)
	store := testStore(t, srv)
	ctx := ctxT(t)
	data := make([]byte, 16<<20)
	rand.Read(data)
	key := "lab/snapshots/20260101T000000Z-rev000000000000001-m0.db"
	_, err := Upload(ctx, store, key, bytes.NewReader(data), UploadOptions{PartSize: 5 << 20, Threads: 2, maxParts: 3})
	if !errors.Is(err, ErrPartLimit) {
		t.Fatalf("err = %v, want ErrPartLimit", err)
	}
	t.Log(err)
	if _, err := store.Stat(ctx, key); !errors.Is(err, ErrNotFound) {
		t.Errorf("stat after the failed upload: %v, want ErrNotFound", err)
	}
	if ups, err := store.ListIncompleteUploads(ctx, "lab/"); err != nil || len(ups) != 0 {
		t.Errorf("incomplete uploads %v %v, want none", ups, err)
	}
	// Within the limit it succeeds.
	if _, err := Upload(ctx, store, key, bytes.NewReader(data[:9<<20]), UploadOptions{PartSize: 5 << 20, Threads: 2, maxParts: 3}); err != nil {
		t.Fatal(err)
	}
}

// TestUploadTrailer: a snapshot stream cut short (etcd's sha256 missing) is refused.
func TestUploadTrailer(t *testing.T) {
	srv := s3test.Start(t)
	store := testStore(t, srv)
	ctx := ctxT(t)
	junk := make([]byte, 4096)
	_, err := Upload(ctx, store, "lab/x.db", bytes.NewReader(junk), UploadOptions{PartSize: 5 << 20, EtcdTrailer: true})
	if !errors.Is(err, ErrTrailer) {
		t.Fatalf("err = %v, want ErrTrailer", err)
	}
	if _, err := store.Stat(ctx, "lab/x.db"); !errors.Is(err, ErrNotFound) {
		t.Errorf("stat: %v, want ErrNotFound", err)
	}
}

// TestListIgnoresIncomplete: data objects without metadata and in-progress multipart uploads are
// never listed as snapshots (nor chosen as latest).
func TestListIgnoresIncomplete(t *testing.T) {
	srv := s3test.Start(t)
	store := testStore(t, srv)
	ctx := ctxT(t)
	put := func(key, body string) {
		if _, err := store.Put(ctx, key, strings.NewReader(body), PutOptions{Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
	}
	dir := SnapshotsPrefix("p", "lab")
	put(dir+"20260101T000000Z-rev000000000000010-m0.db", "old")
	putJSON(ctx, store, dir+"20260101T000000Z-rev000000000000010-m0.json", Metadata{Key: dir + "20260101T000000Z-rev000000000000010-m0.db", MetadataKey: dir + "20260101T000000Z-rev000000000000010-m0.json", Revision: 10})
	put(dir+"20260102T000000Z-rev000000000000020-m0.db.zst", "newer, no metadata")
	put(dir+"notes.txt", "unknown")
	l, err := List(ctx, store, "p", "lab")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Snapshots) != 1 || l.Latest().Revision != 10 || len(l.Orphans) != 1 || len(l.Unknown) != 1 {
		t.Fatalf("listing %+v", l)
	}
	if l.Find("20260101T000000Z-rev000000000000010-m0") == nil || l.Find("20260102T000000Z-rev000000000000020-m0") != nil {
		t.Error("Find")
	}
}

// TestBucketCheck: a missing bucket and wrong credentials name the endpoint, region and lookup.
func TestBucketCheck(t *testing.T) {
	srv := s3test.Start(t)
	ctx := ctxT(t)
	if err := testStore(t, srv).CheckBucket(ctx); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(srv)
	cfg.Bucket = "no-such-bucket"
	st, _ := NewS3(cfg)
	err := st.CheckBucket(ctx)
	var be *BucketError
	if !errors.As(err, &be) {
		t.Fatalf("err = %v, want *BucketError", err)
	}
	for _, want := range []string{srv.Endpoint, "region us-east-1", "bucket lookup path", "no-such-bucket"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	cfg = testConfig(srv)
	cfg.Credentials.SecretAccessKey = "wrong-secret-value"
	st, _ = NewS3(cfg)
	if err := st.CheckBucket(ctx); err == nil || strings.Contains(err.Error(), "wrong-secret-value") || !strings.Contains(err.Error(), srv.Endpoint) {
		t.Errorf("wrong credentials: %v", err)
	}
	cfg.Credentials.SecretAccessKey = ""
	if _, err := NewS3(cfg); err == nil {
		t.Error("missing credentials accepted")
	}
}

func sha256Sum(b []byte) []byte {
	h := sha256.Sum256(b)
	return h[:]
}
