package backup

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/specload"
)

// S3PartLimit is S3's multipart part limit (parts are numbered 1..10,000).
const S3PartLimit = 10000

// S3Config says how to reach an S3-compatible bucket.
type S3Config struct {
	// Endpoint is "host:port" (no scheme).
	Endpoint string
	Bucket   string
	Region   string
	// Lookup is v1alpha1.BucketLookupPath, BucketLookupDNS or BucketLookupAuto.
	Lookup string
	// PlainHTTP talks HTTP instead of HTTPS.
	PlainHTTP bool
	// CAFile is a PEM bundle the endpoint's certificate is verified against ("" = system roots);
	// CAPEM the bundle itself (hactl-operator has it from a Secret), used when CAFile is "".
	CAFile string
	CAPEM  []byte
	// Credentials is the access key (never logged).
	Credentials specload.BackupCredentials
}

// S3ConfigFromSpec builds the S3Config of spec.backup.objectStore, reading the credentials from
// the environment (getenv is os.Getenv in production) or the credentials file. Errors name the
// spec field, never a key.
func S3ConfigFromSpec(c *v1alpha1.Cluster, getenv func(string) string) (S3Config, error) {
	creds, err := specload.ReadBackupCredentials(c, getenv)
	if err != nil {
		return S3Config{}, err
	}
	o := c.Spec.Backup.ObjectStore
	cfg := S3Config{Endpoint: o.Endpoint, Bucket: o.Bucket, Region: o.Region, Lookup: o.BucketLookup,
		PlainHTTP: o.PlainHTTP, Credentials: creds}
	if o.TLS != nil {
		cfg.CAFile = o.TLS.CAFile
	}
	return cfg, nil
}

// S3 is a Store on an S3-compatible bucket (minio-go).
type S3 struct {
	cfg    S3Config
	client *minio.Client
}

var _ Store = (*S3)(nil)

// NewS3 returns a Store for cfg. It contacts nothing; call CheckBucket to find out whether the
// bucket is reachable. Errors: an unknown lookup style, an unreadable CA file, missing credentials.
func NewS3(cfg S3Config) (*S3, error) {
	var lookup minio.BucketLookupType
	switch cfg.Lookup {
	case v1alpha1.BucketLookupPath, "":
		lookup = minio.BucketLookupPath
	case v1alpha1.BucketLookupDNS:
		lookup = minio.BucketLookupDNS
	case v1alpha1.BucketLookupAuto:
		lookup = minio.BucketLookupAuto
	default:
		return nil, fmt.Errorf("object store: unknown bucket lookup style %q (path, dns or auto)", cfg.Lookup)
	}
	if cfg.Credentials.AccessKeyID == "" || cfg.Credentials.SecretAccessKey == "" {
		return nil, errors.New("object store: no credentials: set spec.backup.objectStore.credentials (environment variables or a file)")
	}
	tr, err := minio.DefaultTransport(!cfg.PlainHTTP)
	if err != nil {
		return nil, fmt.Errorf("object store %s: transport: %w", cfg.Endpoint, err)
	}
	if !cfg.PlainHTTP {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		pem, source := cfg.CAPEM, "CA bundle"
		if cfg.CAFile != "" {
			b, err := os.ReadFile(cfg.CAFile)
			if err != nil {
				return nil, fmt.Errorf("object store %s: CA file: %w", cfg.Endpoint, err)
			}
			pem, source = b, "CA file "+cfg.CAFile
		}
		if len(pem) > 0 {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("object store %s: %s holds no PEM certificate", cfg.Endpoint, source)
			}
			tc.RootCAs = pool
		}
		tr.TLSClientConfig = tc
	}
	cl, err := minio.New(cfg.Endpoint, &minio.Options{
		Creds:        credentials.NewStaticV4(cfg.Credentials.AccessKeyID, cfg.Credentials.SecretAccessKey, cfg.Credentials.SessionToken),
		Secure:       !cfg.PlainHTTP,
		Transport:    tr,
		Region:       cfg.Region,
		BucketLookup: lookup,
	})
	if err != nil {
		return nil, fmt.Errorf("object store %s: %w", cfg.Endpoint, err)
	}
	return &S3{cfg: cfg, client: cl}, nil
}

// String is "s3 <scheme>://<endpoint>/<bucket> (region R, lookup L)".
func (s *S3) String() string {
	scheme := "https"
	if s.cfg.PlainHTTP {
		scheme = "http"
	}
	lookup := s.cfg.Lookup
	if lookup == "" {
		lookup = v1alpha1.BucketLookupPath
	}
	return fmt.Sprintf("%s://%s/%s (region %s, bucket lookup %s)", scheme, s.cfg.Endpoint, s.cfg.Bucket, s.cfg.Region, lookup)
}

// BucketError is a failed bucket check: it names the endpoint, bucket, region and lookup style,
// the usual suspects when a bucket can't be reached.
type BucketError struct {
	Store string // S3.String()
	Err   error
}

func (e *BucketError) Error() string {
	return fmt.Sprintf("object store %s: bucket check failed: %v (check spec.backup.objectStore: endpoint, bucket, region, bucketLookup, tls/plainHTTP and the credentials)", e.Store, e.Err)
}

func (e *BucketError) Unwrap() error { return e.Err }

// CheckBucket makes sure the bucket exists and the credentials may use it. Errors are a
// *BucketError.
func (s *S3) CheckBucket(ctx context.Context) error {
	ok, err := s.client.BucketExists(ctx, s.cfg.Bucket)
	switch {
	case err != nil:
		return &BucketError{Store: s.String(), Err: err}
	case !ok:
		return &BucketError{Store: s.String(), Err: fmt.Errorf("bucket %q does not exist (hactl never creates buckets: create it, or fix spec.backup.objectStore.bucket)", s.cfg.Bucket)}
	}
	return nil
}

// MaxParts returns S3PartLimit.
func (s *S3) MaxParts() int { return S3PartLimit }

// Put implements Store. With opts.Size -1 the object is uploaded in parts of opts.PartSize,
// opts.Threads of them in flight (minio-go's ConcurrentStreamParts).
func (s *S3) Put(ctx context.Context, key string, r io.Reader, opts PutOptions) (ObjectInfo, error) {
	po := minio.PutObjectOptions{ContentType: opts.ContentType, PartSize: opts.PartSize, NumThreads: opts.Threads}
	if po.ContentType == "" {
		po.ContentType = "application/octet-stream"
	}
	if opts.Threads > 1 {
		po.ConcurrentStreamParts = true
	}
	info, err := s.client.PutObject(ctx, s.cfg.Bucket, key, r, opts.Size, po)
	if err != nil {
		return ObjectInfo{}, fmt.Errorf("object store %s: put %s: %w", s.cfg.Endpoint, key, err)
	}
	return ObjectInfo{Key: key, Size: info.Size, LastModified: info.LastModified}, nil
}

func isNotFound(err error) bool {
	code := minio.ToErrorResponse(err).Code
	return code == minio.NoSuchKey || code == "NotFound" || minio.ToErrorResponse(err).StatusCode == http.StatusNotFound
}

// Get implements Store.
func (s *S3) Get(ctx context.Context, key string) (io.ReadCloser, ObjectInfo, error) {
	obj, err := s.client.GetObject(ctx, s.cfg.Bucket, key, minio.GetObjectOptions{})
	if err == nil {
		var st minio.ObjectInfo
		if st, err = obj.Stat(); err == nil {
			return obj, ObjectInfo{Key: key, Size: st.Size, LastModified: st.LastModified}, nil
		}
		obj.Close()
	}
	if isNotFound(err) {
		return nil, ObjectInfo{}, fmt.Errorf("object store %s: get %s: %w", s.cfg.Endpoint, key, ErrNotFound)
	}
	return nil, ObjectInfo{}, fmt.Errorf("object store %s: get %s: %w", s.cfg.Endpoint, key, err)
}

// Stat implements Store.
func (s *S3) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	st, err := s.client.StatObject(ctx, s.cfg.Bucket, key, minio.StatObjectOptions{})
	if err != nil {
		if isNotFound(err) {
			return ObjectInfo{}, fmt.Errorf("object store %s: stat %s: %w", s.cfg.Endpoint, key, ErrNotFound)
		}
		return ObjectInfo{}, fmt.Errorf("object store %s: stat %s: %w", s.cfg.Endpoint, key, err)
	}
	return ObjectInfo{Key: key, Size: st.Size, LastModified: st.LastModified}, nil
}

// List implements Store.
func (s *S3) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	var out []ObjectInfo
	for o := range s.client.ListObjectsIter(ctx, s.cfg.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			return nil, fmt.Errorf("object store %s: list %s: %w", s.cfg.Endpoint, prefix, o.Err)
		}
		out = append(out, ObjectInfo{Key: o.Key, Size: o.Size, LastModified: o.LastModified})
	}
	slices.SortFunc(out, func(a, b ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// PresignGet returns a URL that reads key with a plain GET until expiry (S3 query-string
// authentication, SigV4; at most 7 days): what lets a host fetch one object without the access
// key. The URL is a bearer credential for that object until it expires: pass it on stdin, never on
// a command line or in a log. It signs locally; the store is asked only for the bucket's region
// when spec.backup gives none (and minio-go has not cached it). Errors: minio-go's (an expiry out of
// range, the region lookup).
func (s *S3) PresignGet(ctx context.Context, key string, expiry time.Duration) (string, error) {
	u, err := s.client.PresignedGetObject(ctx, s.cfg.Bucket, key, expiry, nil)
	if err != nil {
		return "", fmt.Errorf("object store %s: presigning %s: %w", s, key, err)
	}
	return u.String(), nil
}

// Endpoint is the URL of the store's endpoint as hactl reaches it: "http://host:port" or
// "https://host:port".
func (s *S3) Endpoint() string {
	if s.cfg.PlainHTTP {
		return "http://" + s.cfg.Endpoint
	}
	return "https://" + s.cfg.Endpoint
}

// CABundle returns the PEM bundle the endpoint's certificate is verified against: the CA file's
// contents or CAPEM; nil when the system's roots are used or the store talks plain HTTP. Errors:
// an unreadable CA file.
func (s *S3) CABundle() ([]byte, error) {
	if s.cfg.PlainHTTP {
		return nil, nil
	}
	if s.cfg.CAFile != "" {
		b, err := os.ReadFile(s.cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("object store %s: CA file: %w", s.cfg.Endpoint, err)
		}
		return b, nil
	}
	return s.cfg.CAPEM, nil
}

// Remove implements Store.
func (s *S3) Remove(ctx context.Context, key string) error {
	if err := s.client.RemoveObject(ctx, s.cfg.Bucket, key, minio.RemoveObjectOptions{}); err != nil && !isNotFound(err) {
		return fmt.Errorf("object store %s: remove %s: %w", s.cfg.Endpoint, key, err)
	}
	return nil
}

// ListIncompleteUploads implements Store.
func (s *S3) ListIncompleteUploads(ctx context.Context, prefix string) ([]IncompleteUpload, error) {
	var out []IncompleteUpload
	for u := range s.client.ListIncompleteUploads(ctx, s.cfg.Bucket, prefix, true) {
		if u.Err != nil {
			return nil, fmt.Errorf("object store %s: list incomplete uploads %s: %w", s.cfg.Endpoint, prefix, u.Err)
		}
		out = append(out, IncompleteUpload{Key: u.Key, UploadID: u.UploadID, Initiated: u.Initiated})
	}
	return out, nil
}

// AbortIncomplete implements Store.
func (s *S3) AbortIncomplete(ctx context.Context, key string) error {
	if err := s.client.RemoveIncompleteUpload(ctx, s.cfg.Bucket, key); err != nil && !isNotFound(err) {
		return fmt.Errorf("object store %s: abort incomplete upload %s: %w", s.cfg.Endpoint, key, err)
	}
	return nil
}
