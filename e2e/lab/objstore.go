package lab

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/internal/shell"
)

// The object store (Options.ObjectStore): a real MinIO server (bin/minio, hack/build-minio.sh) in
// its own host, with a bucket and a bucket-scoped access key created by the lab the way a user
// would, through the S3 APIs (minio-go).
const (
	// ObjectStoreHost is the object store host's name (container hactl-lab-objstore).
	ObjectStoreHost = "objstore"
	// ObjectStoreAddress is its address on the lab network (zone az-c).
	ObjectStoreAddress = "172.28.0.31"
	// ObjectStorePort is MinIO's S3 port (plain HTTP).
	ObjectStorePort = 9000
	// ObjectStoreBucket is the bucket the lab creates for backups.
	ObjectStoreBucket = "hactl-backups"
	// ObjectStoreRegion is the bucket's region (MinIO's default).
	ObjectStoreRegion = "us-east-1"
	// ObjectStoreVolume is the named docker volume holding MinIO's data (objectStoreDataDir): on the
	// machine's own filesystem rather than docker's overlay; Down removes it with the other volumes.
	ObjectStoreVolume = Prefix + "-objstore-data"

	// The environment variables the lab's spec.backup names for the backup access key
	// (spec.backup.objectStore.credentials.env). Tests export them from ObjectStore.Environ; by hand:
	// `. .lab/objstore.env`.
	AccessKeyIDEnv     = "HACTL_LAB_S3_ACCESS_KEY_ID"
	SecretAccessKeyEnv = "HACTL_LAB_S3_SECRET_ACCESS_KEY"
	SessionTokenEnv    = "HACTL_LAB_S3_SESSION_TOKEN"

	// ObjectStoreKeyLifetime is how long the backup access key is valid (STS AssumeRole's
	// DurationSeconds: longer than any test run or benchmark; a new lab gets a new key).
	ObjectStoreKeyLifetime = 7 * 24 * time.Hour
)

// Files of the object store in the lab directory (both 0600) and on its host.
const (
	// objectStoreRootFile holds MinIO's root user and password (MINIO_ROOT_USER=..., MINIO_ROOT_PASSWORD=...),
	// new for each lab; the same lines are MinIO's EnvironmentFile on the host.
	objectStoreRootFile = "objstore-root.env"
	// ObjectStoreEnvFile holds `export NAME=value` lines of the backup access key for a shell.
	ObjectStoreEnvFile = "objstore.env"
	// objectStoreDataDir is MinIO's data directory on the host (ObjectStoreVolume is mounted there).
	objectStoreDataDir = "/srv/minio"
	// objectStoreUnit runs MinIO on the host.
	objectStoreUnit = "hactl-lab-minio.service"
	// objectStoreEnvOnHost is the unit's EnvironmentFile (root credentials, 0600).
	objectStoreEnvOnHost = "/etc/default/hactl-lab-minio"
	// objectStoreBinary is where bin/minio is copied on the host.
	objectStoreBinary = "/usr/local/bin/minio"
	// objectStoreRootUser is MinIO's root user name (the password is random per lab).
	objectStoreRootUser = "hactl-lab-root"
)

// ObjectStoreEndpoint is the object store's S3 endpoint as spec.backup names it: "host:port".
func ObjectStoreEndpoint() string {
	return net.JoinHostPort(ObjectStoreAddress, strconv.Itoa(ObjectStorePort))
}

// objectStoreHost returns the object store host (zone az-c) on the lab network, with MinIO's data
// on ObjectStoreVolume.
func objectStoreHost() Host {
	h := Host{Name: ObjectStoreHost, Address: ObjectStoreAddress, Zone: "az-c",
		Networks: []Attachment{{Network: NetworkName, IPv4: ObjectStoreAddress}},
		Volumes:  []string{ObjectStoreVolume + ":" + objectStoreDataDir}}
	return named([]Host{h})[0]
}

// BackupSpec returns the lab's spec.backup: the object store's endpoint over plain HTTP (set
// explicitly, as hactl requires), ObjectStoreBucket with path-style lookup, and the access key from
// the environment variables AccessKeyIDEnv, SecretAccessKeyEnv and SessionTokenEnv (names only, never
// the keys). Compression and encryption are left to hactl's defaults.
func BackupSpec() *v1alpha1.Backup {
	return &v1alpha1.Backup{ObjectStore: v1alpha1.ObjectStore{
		Endpoint:     ObjectStoreEndpoint(),
		Bucket:       ObjectStoreBucket,
		Region:       ObjectStoreRegion,
		BucketLookup: v1alpha1.BucketLookupPath,
		PlainHTTP:    true,
		Credentials: v1alpha1.ObjectStoreCredentials{Env: &v1alpha1.CredentialsEnv{
			AccessKeyID: AccessKeyIDEnv, SecretAccessKey: SecretAccessKeyEnv, SessionToken: SessionTokenEnv,
		}},
	}}
}

// WithBackup sets c's spec.backup to BackupSpec() (the lab's object store).
func WithBackup(c *v1alpha1.Cluster) { c.Spec.Backup = BackupSpec() }

// ObjectStore is the running lab's object store: where it is and the keys to it.
type ObjectStore struct {
	// Endpoint is "172.28.0.31:9000" (plain HTTP); Bucket and Region as in BackupSpec.
	Endpoint, Bucket, Region string
	// AccessKeyID, SecretAccessKey and SessionToken are the backup access key: temporary
	// credentials (STS AssumeRole) limited to Bucket by a session policy, valid for
	// ObjectStoreKeyLifetime. They are what the spec's environment variables must hold.
	AccessKeyID, SecretAccessKey, SessionToken string
	// RootUser and RootPassword are MinIO's root credentials (for tests that tamper with objects).
	RootUser, RootPassword string
	// EnvFile is <lab dir>/objstore.env (0600): `export` lines of the backup access key.
	EnvFile string
}

// Environ returns the backup access key as NAME=value entries of the variables BackupSpec names,
// for os.Setenv or exec.Cmd.Env. Never log them.
func (o ObjectStore) Environ() []string {
	return []string{
		AccessKeyIDEnv + "=" + o.AccessKeyID,
		SecretAccessKeyEnv + "=" + o.SecretAccessKey,
		SessionTokenEnv + "=" + o.SessionToken,
	}
}

// Setenv exports the backup access key into this process's environment (what a user does with
// `. .lab/objstore.env`), so the hactl processes it starts inherit it.
func (o ObjectStore) Setenv() error {
	for _, kv := range o.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if err := os.Setenv(k, v); err != nil {
			return err
		}
	}
	return nil
}

// RootClient returns a minio-go client with the root credentials (plain HTTP, path-style).
func (o ObjectStore) RootClient() (*minio.Client, error) {
	return newS3Client(o.Endpoint, credentials.NewStaticV4(o.RootUser, o.RootPassword, ""))
}

// Client returns a minio-go client with the backup access key (what hactl uses).
func (o ObjectStore) Client() (*minio.Client, error) {
	return newS3Client(o.Endpoint, credentials.NewStaticV4(o.AccessKeyID, o.SecretAccessKey, o.SessionToken))
}

func newS3Client(endpoint string, creds *credentials.Credentials) (*minio.Client, error) {
	return minio.New(endpoint, &minio.Options{Creds: creds, Secure: false, Region: ObjectStoreRegion, BucketLookup: minio.BucketLookupPath})
}

// ObjectStore returns the lab's object store, or an error when the lab has none (Options.ObjectStore).
func (l *Lab) ObjectStore() (ObjectStore, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.objStore == nil {
		return ObjectStore{}, errors.New("the lab has no object store (Options.ObjectStore, hactl-lab up --object-store)")
	}
	return *l.objStore, nil
}

// objectStoreUnitText is the systemd unit running MinIO on the object store host: the S3 API on
// every address at ObjectStorePort, the console on loopback only, no browser, no update checks.
func objectStoreUnitText() string {
	return fmt.Sprintf(`[Unit]
Description=hactl lab: MinIO S3 server on port %[1]d
After=network.target

[Service]
EnvironmentFile=%[2]s
Environment=MINIO_BROWSER=off MINIO_UPDATE=off
ExecStart=%[3]s server %[4]s/data --address :%[1]d --console-address 127.0.0.1:9001 --quiet
Restart=always
LimitNOFILE=65536

[Install]
WantedBy=multi-user.target
`, ObjectStorePort, objectStoreEnvOnHost, objectStoreBinary, objectStoreDataDir)
}

// objectStoreScript installs the unit and its EnvironmentFile (read from standard input, so the
// root password is never on a command line), starts MinIO and waits until it reports ready.
func objectStoreScript() string {
	return fmt.Sprintf(`set -e
umask 077
cat > %[1]s
umask 022
mkdir -p %[2]s/data
cat > /etc/systemd/system/%[3]s <<'EOF'
%[4]sEOF
systemctl daemon-reload
systemctl enable --now %[3]s >/dev/null
for i in $(seq 150); do
	curl -fsS -o /dev/null http://127.0.0.1:%[5]d/minio/health/ready && exit 0
	sleep 0.2
done
systemctl status --no-pager %[3]s >&2 || true
exit 1
`, objectStoreEnvOnHost, objectStoreDataDir, objectStoreUnit, objectStoreUnitText(), ObjectStorePort)
}

// rootEnv renders MinIO's root credentials as EnvironmentFile lines.
func rootEnv(user, password string) string {
	return "MINIO_ROOT_USER=" + user + "\nMINIO_ROOT_PASSWORD=" + password + "\n"
}

// parseEnvFile reads NAME=value lines (an optional "export " prefix, values optionally
// single-quoted as shell.Quote writes them); blank lines and # comments are skipped.
func parseEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		if !ok {
			return nil, fmt.Errorf("%s: not NAME=value: %q", path, line)
		}
		if len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'' {
			v = strings.ReplaceAll(v[1:len(v)-1], `'\''`, "'")
		}
		out[k] = v
	}
	return out, sc.Err()
}

// envFileText renders the backup access key as `export` lines for a shell (ObjectStoreEnvFile).
func envFileText(o ObjectStore) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# hactl lab object store %s, bucket %s: the backup access key (temporary, bucket-scoped).\n# Use: . %s\n",
		o.Endpoint, o.Bucket, o.EnvFile)
	for _, kv := range o.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		fmt.Fprintf(&b, "export %s=%s\n", k, shell.Quote(v))
	}
	return b.String()
}

// bucketPolicy is the session policy of the backup access key: everything on the bucket and its
// objects, nothing else.
func bucketPolicy(bucket string) string {
	return fmt.Sprintf(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["s3:*"],"Resource":["arn:aws:s3:::%[1]s","arn:aws:s3:::%[1]s/*"]}]}`, bucket)
}

// ProvisionBucket creates bucket in region on the S3 endpoint (plain HTTP) with the root
// credentials, unless it exists, and returns a new access key for it, the way a user with only an
// S3 client would: STS AssumeRole with a session policy limited to the bucket (MinIO's user and
// service-account APIs are its admin API, outside minio-go), valid for lifetime.
func ProvisionBucket(ctx context.Context, endpoint, rootUser, rootPassword, bucket, region string, lifetime time.Duration) (credentials.Value, error) {
	root, err := newS3Client(endpoint, credentials.NewStaticV4(rootUser, rootPassword, ""))
	if err != nil {
		return credentials.Value{}, err
	}
	ok, err := root.BucketExists(ctx, bucket)
	if err != nil {
		return credentials.Value{}, fmt.Errorf("object store %s: bucket %s: %w", endpoint, bucket, err)
	}
	if !ok {
		if err := root.MakeBucket(ctx, bucket, minio.MakeBucketOptions{Region: region}); err != nil {
			return credentials.Value{}, fmt.Errorf("object store %s: create bucket %s: %w", endpoint, bucket, err)
		}
	}
	sts, err := credentials.NewSTSAssumeRole("http://"+endpoint, credentials.STSAssumeRoleOptions{
		AccessKey: rootUser, SecretKey: rootPassword, Policy: bucketPolicy(bucket), Location: region,
		DurationSeconds: int(lifetime / time.Second),
	})
	if err != nil {
		return credentials.Value{}, err
	}
	// MinIO answers health/ready before its IAM subsystem has loaded; until then STS says
	// XMinioServerNotInitialized ("please try again"): retry that, and only that, for a minute.
	var v credentials.Value
	var getErr error
	pollErr := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(context.Context) (bool, error) {
		v, getErr = sts.GetWithContext(&credentials.CredContext{Client: http.DefaultClient})
		return !serverNotInitialized(getErr), nil
	})
	if err := cmp.Or(getErr, pollErr); err != nil {
		return credentials.Value{}, fmt.Errorf("object store %s: access key for bucket %s (STS AssumeRole): %w", endpoint, bucket, err)
	}
	return v, nil
}

// serverNotInitialized reports whether err is MinIO's "not initialized, please try again" as STS
// returns it. Its code varies with where MinIO noticed (XMinioServerNotInitialized,
// STSIAMNotInitialized, or InternalError/AccessDenied carrying errServerNotInitialized's message, as
// seen in CI), so the code's suffix or the message decides.
func serverNotInitialized(err error) bool {
	var e credentials.ErrorResponse
	if !errors.As(err, &e) {
		return false
	}
	return strings.HasSuffix(e.STSError.Code, "NotInitialized") ||
		strings.Contains(strings.ToLower(e.STSError.Message), "not initialized, please try again")
}

// setupObjectStore copies bin/minio into the object store host, starts it with new root
// credentials (stored 0600 in the lab directory), creates the bucket and the backup access key
// (ProvisionBucket, from this machine over the lab network) and writes ObjectStoreEnvFile.
func (l starter) setupObjectStore(ctx context.Context, h Host) error {
	bin := filepath.Join(l.opts.BinDir, "minio")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("object store: %w (build it with `make minio-bin`, hack/build-minio.sh)", err)
	}
	password, err := newPassword()
	if err != nil {
		return err
	}
	env := rootEnv(objectStoreRootUser, password)
	if err := writeFileAtomic(filepath.Join(l.opts.Dir, objectStoreRootFile), []byte(env), 0o600); err != nil {
		return fmt.Errorf("object store: %w", err)
	}
	if _, err := l.d.run(ctx, nil, "cp", bin, h.Container+":"+objectStoreBinary); err != nil {
		return fmt.Errorf("object store: copy minio: %w", err)
	}
	l.opts.Debugf.printf("# standard input of the next command: %s (MinIO's root credentials)", filepath.Join(l.opts.Dir, objectStoreRootFile))
	if _, err := l.d.run(ctx, strings.NewReader(env), "exec", "-i", h.Container, "sh", "-c", objectStoreScript()); err != nil {
		return fmt.Errorf("object store: start %s: %w", objectStoreUnit, err)
	}
	start := time.Now()
	v, err := ProvisionBucket(ctx, ObjectStoreEndpoint(), objectStoreRootUser, password, ObjectStoreBucket, ObjectStoreRegion, ObjectStoreKeyLifetime)
	if err != nil {
		return err
	}
	o := ObjectStore{Endpoint: ObjectStoreEndpoint(), Bucket: ObjectStoreBucket, Region: ObjectStoreRegion,
		AccessKeyID: v.AccessKeyID, SecretAccessKey: v.SecretAccessKey, SessionToken: v.SessionToken,
		RootUser: objectStoreRootUser, RootPassword: password, EnvFile: filepath.Join(l.opts.Dir, ObjectStoreEnvFile)}
	if err := writeFileAtomic(o.EnvFile, []byte(envFileText(o)), 0o600); err != nil {
		return fmt.Errorf("object store: %w", err)
	}
	l.mu.Lock()
	l.objStore = &o
	l.mu.Unlock()
	l.opts.Logf.printf("lab: MinIO serves http://%s, bucket %s; backup access key in %s (%s)", o.Endpoint, o.Bucket, o.EnvFile,
		time.Since(start).Round(10*time.Millisecond))
	return nil
}

// readObjectStore reads the object store's credentials from the lab directory (Attach).
func readObjectStore(dir string) (*ObjectStore, error) {
	root, err := parseEnvFile(filepath.Join(dir, objectStoreRootFile))
	if err != nil {
		return nil, fmt.Errorf("object store: %w", err)
	}
	envFile := filepath.Join(dir, ObjectStoreEnvFile)
	keys, err := parseEnvFile(envFile)
	if err != nil {
		return nil, fmt.Errorf("object store: %w", err)
	}
	o := &ObjectStore{Endpoint: ObjectStoreEndpoint(), Bucket: ObjectStoreBucket, Region: ObjectStoreRegion,
		AccessKeyID: keys[AccessKeyIDEnv], SecretAccessKey: keys[SecretAccessKeyEnv], SessionToken: keys[SessionTokenEnv],
		RootUser: root["MINIO_ROOT_USER"], RootPassword: root["MINIO_ROOT_PASSWORD"], EnvFile: envFile}
	if o.AccessKeyID == "" || o.SecretAccessKey == "" || o.RootUser == "" || o.RootPassword == "" {
		return nil, fmt.Errorf("object store: incomplete credentials in %s and %s", envFile, filepath.Join(dir, objectStoreRootFile))
	}
	return o, nil
}
