package lab

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/backup/s3test"
	"github.com/hactl/hactl/internal/shell"
	"github.com/hactl/hactl/specload"
)

func TestObjectStoreHostShape(t *testing.T) {
	without, err := hostsFor(Options{Members: 3})
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(without, func(h Host) bool { return h.Name == ObjectStoreHost }) {
		t.Fatal("the object store is started without Options.ObjectStore")
	}
	hosts, err := hostsFor(Options{Members: 3, Mirror: true, ObjectStore: true})
	if err != nil {
		t.Fatal(err)
	}
	h := hosts[len(hosts)-1]
	if h.Name != "objstore" || h.Address != "172.28.0.31" || h.Zone != "az-c" || len(h.Roles) != 0 ||
		h.Container != "hactl-lab-objstore" || !isLabName(h.Container) || h.KubeNode() {
		t.Errorf("objstore host: %+v", h)
	}
	for _, v := range h.Volumes {
		if !isLabName(strings.SplitN(v, ":", 2)[0]) {
			t.Errorf("volume %q would survive lab down", v)
		}
	}
	cmds := containerCommands(h, "img:1", "/lab/init")
	want := "run -d --name hactl-lab-objstore --hostname objstore --network hactl-lab --ip 172.28.0.31 " +
		strings.Join(containerFlags, " ") + " -v hactl-lab-objstore-data:/srv/minio img:1 /lib/systemd/systemd"
	if len(cmds) != 1 || strings.Join(cmds[0], " ") != want {
		t.Errorf("docker commands:\n got %q\nwant %q", cmds, want)
	}
	// Pinned outside docker's range and distinct from every other host.
	seen := map[string]string{}
	all, _ := hostsFor(Options{Members: 5, Bastion: true, IPv6: true, Mirror: true, ObjectStore: true})
	for _, h := range all {
		if other, dup := seen[h.Address]; dup {
			t.Errorf("%s and %s share %s", h.Name, other, h.Address)
		}
		seen[h.Address] = h.Name
	}
}

func TestBackupSpec(t *testing.T) {
	b := BackupSpec()
	o := b.ObjectStore
	if o.Endpoint != "172.28.0.31:9000" || !o.PlainHTTP || o.TLS != nil || o.Bucket != ObjectStoreBucket ||
		o.BucketLookup != "path" || o.Credentials.File != "" || o.Credentials.Env == nil ||
		o.Credentials.Env.AccessKeyID != AccessKeyIDEnv || o.Credentials.Env.SecretAccessKey != SecretAccessKeyEnv ||
		o.Credentials.Env.SessionToken != SessionTokenEnv {
		t.Errorf("spec.backup = %+v", o)
	}
	dir := t.TempDir()
	paths, err := WriteObjectStoreSpecs(dir, "/repo/bin")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		// Names of variables only: no key could be inline (the lab writes specs before it has keys).
		if !strings.Contains(string(raw), "plainHTTP: true") || !strings.Contains(string(raw), "accessKeyID: "+AccessKeyIDEnv) {
			t.Errorf("%s: spec.backup missing or not explicit:\n%s", p, raw)
		}
		c, _, err := specload.Load(p)
		if err != nil {
			t.Fatalf("hactl's loader rejects %s: %v", p, err)
		}
		if c.Spec.Backup == nil || c.Spec.Backup.ObjectStore.Endpoint != ObjectStoreEndpoint() {
			t.Errorf("%s: spec.backup = %+v", p, c.Spec.Backup)
		}
		// hactl's own environment check names the missing variables.
		err = c.ValidationError(p, specload.ValidateBackupEnvironment(c, func(string) string { return "" }))
		if err == nil || !strings.Contains(err.Error(), AccessKeyIDEnv) {
			t.Errorf("%s without the environment: %v, want an error naming %s", p, err, AccessKeyIDEnv)
		}
	}
	// Without the object store the specs stay as they were.
	plain, err := WriteSpecs(t.TempDir(), "/repo/bin")
	if err != nil {
		t.Fatal(err)
	}
	if raw, _ := os.ReadFile(plain[0]); strings.Contains(string(raw), "backup:") {
		t.Errorf("%s has spec.backup without the object store", plain[0])
	}
}

func TestObjectStoreEnvFileRoundTrip(t *testing.T) {
	dir := t.TempDir()
	o := ObjectStore{Endpoint: ObjectStoreEndpoint(), Bucket: ObjectStoreBucket, Region: ObjectStoreRegion,
		AccessKeyID: "AK1", SecretAccessKey: "s3cr'et/+=", SessionToken: "eyJ.a-b_c.d",
		RootUser: objectStoreRootUser, RootPassword: "pw-123_abc", EnvFile: filepath.Join(dir, ObjectStoreEnvFile)}
	if err := os.WriteFile(o.EnvFile, []byte(envFileText(o)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, objectStoreRootFile), []byte(rootEnv(o.RootUser, o.RootPassword)), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := readObjectStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if *got != o {
		t.Errorf("round trip:\n got %+v\nwant %+v", *got, o)
	}
	if env := o.Environ(); len(env) != 3 || env[0] != AccessKeyIDEnv+"=AK1" {
		t.Errorf("Environ = %q", env)
	}
	// A shell reads the same values.
	if _, err := os.Stat("/bin/sh"); err == nil {
		out, err := runCmd(context.Background(), nil, nil, "sh", "-c", ". "+shell.Quote(o.EnvFile)+` && printf '%s|%s' "$`+SecretAccessKeyEnv+`" "$`+SessionTokenEnv+`"`)
		if err != nil || out != o.SecretAccessKey+"|"+o.SessionToken {
			t.Errorf("sh reads %q (%v), want %q", out, err, o.SecretAccessKey+"|"+o.SessionToken)
		}
	}
	if _, err := readObjectStore(t.TempDir()); err == nil {
		t.Error("readObjectStore of an empty dir succeeded")
	}
}

func TestObjectStoreUnit(t *testing.T) {
	u := objectStoreUnitText()
	for _, want := range []string{"EnvironmentFile=/etc/default/hactl-lab-minio", "--address :9000",
		"server /srv/minio/data", "--console-address 127.0.0.1:9001", "MINIO_BROWSER=off", "Restart=always"} {
		if !strings.Contains(u, want) {
			t.Errorf("unit lacks %q:\n%s", want, u)
		}
	}
	s := objectStoreScript()
	if !strings.Contains(s, "umask 077\ncat > /etc/default/hactl-lab-minio\n") || !strings.Contains(s, "/minio/health/ready") {
		t.Errorf("script:\n%s", s)
	}
	if strings.Contains(s, "MINIO_ROOT_PASSWORD") {
		t.Error("the root password would be on a command line")
	}
	p := filepath.Join(t.TempDir(), objectStoreUnit)
	if err := os.WriteFile(p, []byte(u), 0o644); err != nil {
		t.Fatal(err)
	}
	// systemd-analyze verify checks the unit offline where it exists (the binary itself is absent here).
	if out, err := runCmd(context.Background(), nil, nil, "systemd-analyze", "verify", p); err != nil &&
		!strings.Contains(err.Error(), "executable file not found") && !strings.Contains(out+err.Error(), objectStoreBinary) {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestProvisionBucket runs ProvisionBucket against a real MinIO (bin/minio) on loopback: the bucket
// is created (and found again on a second run), the access key works on it and nowhere else.
func TestProvisionBucket(t *testing.T) {
	srv := s3test.Start(t)
	ctx := context.Background()
	v, err := ProvisionBucket(ctx, srv.Endpoint, s3test.AccessKey, s3test.SecretKey, "lab-bucket", ObjectStoreRegion, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if v.AccessKeyID == "" || v.SecretAccessKey == "" || v.SessionToken == "" || v.AccessKeyID == s3test.AccessKey {
		t.Fatalf("access key %q (session token %d bytes): want a new temporary key", v.AccessKeyID, len(v.SessionToken))
	}
	o := ObjectStore{Endpoint: srv.Endpoint, AccessKeyID: v.AccessKeyID, SecretAccessKey: v.SecretAccessKey, SessionToken: v.SessionToken}
	cli, err := o.Client()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.PutObject(ctx, "lab-bucket", "k", bytes.NewReader([]byte("x")), 1, minio.PutObjectOptions{}); err != nil {
		t.Fatalf("put with the new key: %v", err)
	}
	if _, err := cli.PutObject(ctx, s3test.Bucket, "k", bytes.NewReader([]byte("x")), 1, minio.PutObjectOptions{}); err == nil {
		t.Error("the bucket-scoped key could write to another bucket")
	}
	// hactl's own store accepts the key (its bucket check is what every backup command does first).
	st, err := backup.NewS3(backup.S3Config{Endpoint: srv.Endpoint, Bucket: "lab-bucket", Region: ObjectStoreRegion, Lookup: "path",
		PlainHTTP: true, Credentials: specload.BackupCredentials{AccessKeyID: v.AccessKeyID, SecretAccessKey: v.SecretAccessKey, SessionToken: v.SessionToken}})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CheckBucket(ctx); err != nil {
		t.Errorf("hactl's bucket check with the lab's key: %v", err)
	}
	if _, err := ProvisionBucket(ctx, srv.Endpoint, s3test.AccessKey, s3test.SecretKey, "lab-bucket", ObjectStoreRegion, time.Hour); err != nil {
		t.Errorf("second run on an existing bucket: %v", err)
	}
	if _, err := ProvisionBucket(ctx, srv.Endpoint, s3test.AccessKey, "wrong", "lab-bucket", ObjectStoreRegion, time.Hour); err == nil {
		t.Error("wrong root password accepted")
	}
}

// TestProvisionBucketRetriesServerNotInitialized puts a proxy in front of a real MinIO whose first
// two STS answers are "not initialized" (what MinIO says after health/ready while its IAM is still
// loading), once as XMinioServerNotInitialized and once as an InternalError carrying that message:
// ProvisionBucket retries them and returns a working key.
func TestProvisionBucketRetriesServerNotInitialized(t *testing.T) {
	srv := s3test.Start(t)
	target, err := url.Parse("http://" + srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	var refused atomic.Int32
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/" && refused.Load() < 2 {
			code := []string{"XMinioServerNotInitialized", "InternalError"}[refused.Add(1)-1]
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type></Type><Code>`+code+`</Code><Message>Server not initialized, please try again</Message></Error><RequestId>1</RequestId></ErrorResponse>`)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	v, err := ProvisionBucket(context.Background(), strings.TrimPrefix(front.URL, "http://"), s3test.AccessKey, s3test.SecretKey, "lab-bucket", ObjectStoreRegion, time.Hour)
	if err != nil {
		t.Fatalf("after %d refusals: %v", refused.Load(), err)
	}
	if refused.Load() != 2 || v.AccessKeyID == "" || v.SessionToken == "" {
		t.Fatalf("refused %d times, key %q: want 2 refusals, then a temporary key", refused.Load(), v.AccessKeyID)
	}
}
