package backup

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/internal/exitcode"
)

// Source is a parsed --from / --restore-from: exactly one of a local snapshot file, an object in
// the store (s3://BUCKET/KEY) or the latest complete snapshot of the cluster.
type Source struct {
	local  string // a local file
	bucket string // s3://BUCKET/KEY
	key    string
	latest bool
}

// Latest reports whether the source is "latest" (the newest complete snapshot).
func (s Source) Latest() bool { return s.latest }

// ParseSource parses the value of flag (--from, --restore-from): "latest", s3://BUCKET/KEY, or a
// local path (with or without file://). An empty value, another scheme or an s3:// URL without
// bucket or key is an *exitcode.UsageError naming flag.
func ParseSource(flag, from string) (Source, error) {
	if from == "" {
		return Source{}, &exitcode.UsageError{Err: fmt.Errorf("%s is required: a local snapshot file (./snapshot.db), s3://BUCKET/KEY or latest", flag)}
	}
	if from == "latest" {
		return Source{latest: true}, nil
	}
	if u, err := url.Parse(from); err == nil && u.Scheme != "" && len(u.Scheme) > 1 { // "C:" is not a scheme here
		switch u.Scheme {
		case "file":
			return Source{local: u.Path}, nil
		case "s3":
			key := strings.TrimPrefix(u.Path, "/")
			if u.Host == "" || key == "" {
				return Source{}, &exitcode.UsageError{Err: fmt.Errorf("%s %s: want s3://BUCKET/KEY", flag, from)}
			}
			return Source{bucket: u.Host, key: key}, nil
		default:
			return Source{}, &exitcode.UsageError{Err: fmt.Errorf("%s %s: unknown scheme %q: give a local file (./snapshot.db), s3://BUCKET/KEY or latest", flag, from, u.Scheme)}
		}
	}
	return Source{local: from}, nil
}

// String is the source as the user gives it: "latest", s3://BUCKET/KEY or the local path.
func (s Source) String() string {
	switch {
	case s.latest:
		return "latest"
	case s.key != "":
		return "s3://" + s.bucket + "/" + s.key
	}
	return s.local
}

// Resolved is a verified raw etcd snapshot, ready to be shipped to the members: a file here
// (Path), or, for an unencrypted backup with ResolveOptions.HostFetch, an object the members
// fetch from the store themselves (Remote), downloaded here only when Local is called.
type Resolved struct {
	// Path is the snapshot file: the local file given, or the downloaded one in a temp dir; "" while
	// a Remote snapshot has not been downloaded (Local).
	Path string
	// SHA256 is the raw DB file's sha256 (hex); Revision its etcd revision.
	SHA256   string
	Revision int64
	// Metadata is the backup's metadata (nil for a local file).
	Metadata *Metadata
	// Remote, when not nil, is how a host fetches the stored object itself; hactl has checked the
	// listing and the metadata only (the hosts check the sha256 of what they fetch).
	Remote *Remote
	// dir is the temp dir of a downloaded snapshot ("" for a local file).
	dir string
	// mu guards the download of a Remote snapshot (Local).
	mu       sync.Mutex
	download func(ctx context.Context) error
}

// Remote is a stored, unencrypted backup a host can fetch with a presigned GET and decompress
// itself: the restore then reads the object once per member straight from the store instead of
// through hactl (issue 18: "fetched by the hosts from the object store when they can reach it and
// the snapshot is not encrypted").
type Remote struct {
	// Key is the data object's key; Endpoint the store's URL as hactl reaches it (for messages).
	Key, Endpoint string
	// Compression is the stored object's ("zstd" or "none"); StoredSizeBytes its size.
	Compression     string
	StoredSizeBytes int64
	// CAPEM is the endpoint's CA bundle for the hosts (nil: their own trust store, or plain HTTP).
	CAPEM []byte
	// Presign returns a URL reading the object until expiry (S3.PresignGet): a bearer secret.
	Presign func(ctx context.Context, expiry time.Duration) (string, error)
}

// Local returns the path of the verified snapshot on this machine, downloading and verifying a
// Remote one first (once; later calls return the same file). Errors: Resolve's for the download.
func (r *Resolved) Local(ctx context.Context) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Path != "" || r.download == nil {
		return r.Path, nil
	}
	if err := r.download(ctx); err != nil {
		return "", err
	}
	r.download = nil
	return r.Path, nil
}

// Cleanup removes a downloaded snapshot and its temp dir; a local file is left alone.
func (r *Resolved) Cleanup() {
	if r.dir != "" {
		os.RemoveAll(r.dir)
	}
}

// ResolveOptions say how Resolve finds and checks a snapshot.
type ResolveOptions struct {
	// Flag names the flag the source came from in errors (--from, --restore-from); SpecFile the
	// spec file.
	Flag, SpecFile string
	// Force accepts a backup of a cluster with another member count than the spec's.
	Force bool
	// IdentityFile decrypts an encrypted backup ("": $HACTL_AGE_IDENTITY_FILE, see IdentitiesFrom).
	IdentityFile string
	// TempDir is where a downloaded snapshot is verified and kept ("": the system's temp dir); it
	// needs room for the DB.
	TempDir string
	// Getenv reads the environment variables the spec names (nil: os.Getenv).
	Getenv func(string) string
	// Progress, when set, gets progress lines (no trailing newline).
	Progress func(format string, args ...any)
	// HostFetch leaves an unencrypted backup in the store for the hosts to fetch (Resolved.Remote)
	// instead of downloading it here; an encrypted one is always downloaded and decrypted here (the
	// identity never leaves this machine).
	HostFetch bool
}

// Resolve verifies src on this machine, before any host is contacted. A local file: etcd's sha256
// trailer and integrity check (CheckFile). A backup (s3:// or latest): listed under the cluster's
// prefix (ListCluster), its member count compared with the spec's etcd hosts (unless o.Force),
// downloaded, decrypted, decompressed and fully verified (Verify) into a file kept until Cleanup;
// with o.HostFetch an unencrypted backup is not downloaded: Resolved.Remote says how the members
// fetch it, and Resolved.Local downloads and verifies it here when asked (same errors as below).
//
// Errors: a check that fails → *exitcode.VerdictError (exit 3) wrapping the *MismatchError; a
// missing file or snapshot, another member count, no or the wrong identity → *exitcode.UsageError
// (exit 2); OpenStore's errors; others (the store, the disk) as they are (exit 1).
func Resolve(ctx context.Context, c *v1alpha1.Cluster, src Source, o ResolveOptions) (*Resolved, error) {
	progress := o.Progress
	if progress == nil {
		progress = func(string, ...any) {}
	}
	flag := o.Flag
	if src.local != "" {
		if _, err := os.Stat(src.local); err != nil {
			return nil, &exitcode.UsageError{Err: fmt.Errorf("%s %s: %w", flag, src.local, err)}
		}
		fc, err := CheckFile(src.local)
		var me *MismatchError
		if errors.As(err, &me) {
			return nil, &exitcode.VerdictError{Err: fmt.Errorf("%s %s: refused before any member was touched: %w", flag, src.local, err)}
		}
		if err != nil {
			return nil, err
		}
		progress("snapshot %s verified here: revision %d, %d keys, sha256 %s", src.local, fc.Revision, fc.TotalKeys, fc.SHA256)
		return &Resolved{Path: src.local, SHA256: fc.SHA256, Revision: fc.Revision}, nil
	}
	ids, err := IdentitiesFrom(o.IdentityFile, o.Getenv)
	if err != nil {
		return nil, err
	}
	st, err := OpenStore(ctx, c, StoreOptions{Source: o.SpecFile, Bucket: src.bucket, Getenv: o.Getenv})
	if err != nil {
		return nil, err
	}
	l, err := ListCluster(ctx, st, c)
	if err != nil {
		return nil, err
	}
	sn := l.Latest()
	if !src.latest {
		sn = l.Find(src.key)
	}
	if sn == nil {
		return nil, &exitcode.UsageError{Err: fmt.Errorf("%s %s: no complete snapshot (with its metadata) under %s in %s: see `hactl backup list`", flag, src, l.Prefix, st)}
	}
	m := sn.Metadata
	if n := len(c.EtcdHosts()); m.ClusterMembers != 0 && m.ClusterMembers != n && !o.Force {
		return nil, &exitcode.UsageError{Err: fmt.Errorf("%s %s: the snapshot is of a %d-member cluster, the spec has %d etcd hosts: add --force to restore it onto %d members", flag, src, m.ClusterMembers, n, n)}
	}
	dir, err := os.MkdirTemp(o.TempDir, "hactl-restore-")
	if err != nil {
		return nil, err
	}
	r := &Resolved{SHA256: m.RawSHA256, Revision: m.Revision, Metadata: m, dir: dir}
	r.download = func(ctx context.Context) error {
		path := filepath.Join(dir, "snapshot.db")
		progress("downloading and verifying %s (revision %d, %d bytes stored, taken %s by %s)", m.Key, m.Revision, m.StoredSizeBytes, m.StartedAt.Format(time.RFC3339), m.MemberName)
		res, err := Verify(ctx, st, sn, VerifyOptions{Identities: ids, KeepAs: path})
		var me *MismatchError
		switch {
		case errors.As(err, &me):
			return &exitcode.VerdictError{Err: fmt.Errorf("%s %s: refused before any member was touched: %w", flag, src, err)}
		case isIdentityError(err):
			return &exitcode.UsageError{Err: err}
		case err != nil:
			return err
		}
		r.Path, r.Revision = path, res.Revision
		progress("snapshot %s verified here: revision %d, %d keys, sha256 %s", m.Key, res.Revision, res.TotalKeys, m.RawSHA256)
		return nil
	}
	if o.HostFetch && !m.Encrypted() && m.RawSHA256 != "" {
		ca, err := st.CABundle()
		if err != nil {
			r.Cleanup()
			return nil, err
		}
		key := sn.Data.Key
		r.Remote = &Remote{Key: key, Endpoint: st.Endpoint(), Compression: m.Compression, StoredSizeBytes: m.StoredSizeBytes, CAPEM: ca,
			Presign: func(ctx context.Context, expiry time.Duration) (string, error) {
				return st.PresignGet(ctx, key, expiry)
			}}
		progress("snapshot %s (revision %d, %d bytes stored, taken %s by %s): listed and its metadata read here; the members fetch it from %s themselves",
			m.Key, m.Revision, m.StoredSizeBytes, m.StartedAt.Format(time.RFC3339), m.MemberName, r.Remote.Endpoint)
		return r, nil
	}
	if _, err := r.Local(ctx); err != nil {
		r.Cleanup()
		return nil, err
	}
	return r, nil
}

// isIdentityError reports whether err is Verify's "no identity" or "wrong identity" (exit 2: the
// user gives the identity file).
func isIdentityError(err error) bool {
	return errors.Is(err, ErrNoIdentity) || errors.Is(err, ErrWrongIdentity)
}

// VerifyRef verifies the complete snapshot of l that ref names ("latest", or a stem, data key or
// metadata key as Listing.Find takes it) with Verify; progress (nil: none) gets the line naming
// it. Errors: no such snapshot → an error naming ref and the prefix (exit 1: found remotely); a
// failed check → *exitcode.VerdictError (exit 3) wrapping the *MismatchError; no or the wrong
// identity → *exitcode.UsageError (exit 2); others (store, disk) wrapped "backup verify: ".
func VerifyRef(ctx context.Context, store Store, l *Listing, ref string, o VerifyOptions, progress func(format string, args ...any)) (*VerifyResult, error) {
	sn := l.Latest()
	if ref != "latest" {
		sn = l.Find(ref)
	}
	if sn == nil {
		return nil, fmt.Errorf("backup verify: no complete snapshot %q under %s (see `hactl backup list`)", ref, l.Prefix)
	}
	if progress != nil {
		progress("verifying %s (revision %d, %d bytes stored)", sn.Data.Key, sn.Metadata.Revision, sn.Metadata.StoredSizeBytes)
	}
	res, err := Verify(ctx, store, sn, o)
	var me *MismatchError
	switch {
	case errors.As(err, &me):
		return nil, &exitcode.VerdictError{Err: err}
	case isIdentityError(err):
		return nil, &exitcode.UsageError{Err: err}
	case err != nil:
		return nil, fmt.Errorf("backup verify: %w", err)
	}
	return res, nil
}
