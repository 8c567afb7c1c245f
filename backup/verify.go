package backup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"filippo.io/age"
	"github.com/klauspost/compress/zstd"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
)

// MismatchError is a verification that failed: the stored snapshot is not what its metadata says,
// or etcd's integrity check refuses it. What names the check.
type MismatchError struct {
	Key       string
	What      string // "stored size", "stored sha256", "raw sha256", "decryption", "decompression", "etcd integrity check", ...
	Want, Got string
	Err       error
}

func (e *MismatchError) Error() string {
	msg := fmt.Sprintf("snapshot %s failed verification: %s", e.Key, e.What)
	if e.Want != "" || e.Got != "" {
		msg += fmt.Sprintf(": metadata says %s, found %s", e.Want, e.Got)
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *MismatchError) Unwrap() error { return e.Err }

// ErrNoIdentity is returned (wrapped) when an encrypted snapshot is verified without identities.
var ErrNoIdentity = errors.New("the snapshot is encrypted: give the age identity file (--identity-file, or HACTL_AGE_IDENTITY_FILE)")

// ErrWrongIdentity is returned (wrapped) when none of the identities decrypts the snapshot.
var ErrWrongIdentity = errors.New("none of the given age identities can decrypt the snapshot (it is encrypted to other recipients)")

// VerifyResult is a successful verification.
type VerifyResult struct {
	Key string `json:"key"`
	// Status is etcdutl's snapshot status of the restored DB file.
	Revision       int64  `json:"revision"`
	TotalKeys      int    `json:"totalKeys"`
	Hash           uint32 `json:"hash"`
	TotalSizeBytes int64  `json:"totalSizeBytes"`
	StorageVersion string `json:"storageVersion,omitempty"`
	// Marker is the verify marker written, "" when not recorded.
	Marker   string        `json:"marker,omitempty"`
	Duration time.Duration `json:"durationNs"`
}

// VerifyOptions tune Verify.
type VerifyOptions struct {
	// Identities decrypt encrypted snapshots.
	Identities []age.Identity
	// TempDir holds the DB file etcd's check reads (removed afterwards); "" is os.TempDir(). It
	// needs room for the uncompressed DB.
	TempDir string
	// KeepAs, when set, is where the verified raw DB is kept (mode 0600; a restore ships it to the
	// members); on any failure nothing is left there.
	KeepAs string
	// Record writes a VerifiedMarker on success (prune never deletes the newest verified snapshot).
	Record       bool
	HactlVersion string
	Now          func() time.Time
}

// Verify downloads s's data object and checks, in order: its size and sha256 against the
// metadata (as stored), decryption with opts.Identities, decompression, the raw size and sha256,
// etcd's own sha256 trailer, and etcd's integrity check (etcdutl's snapshot status: bbolt's
// consistency check, the key count, the hash and the revision, which must be at least the
// metadata's). Memory is bounded; the DB is written to a temp file for etcdutl and removed.
//
// Errors: *MismatchError when a check fails (the snapshot is bad), ErrNoIdentity and
// ErrWrongIdentity (wrapped) for missing or wrong identities, others for store or disk failures.
func Verify(ctx context.Context, store Store, s *Snapshot, opts VerifyOptions) (*VerifyResult, error) {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	t0 := now()
	m := s.Metadata
	if m.Encrypted() && len(opts.Identities) == 0 {
		return nil, fmt.Errorf("verify %s: %w", m.Key, ErrNoIdentity)
	}
	rc, info, err := store.Get(ctx, m.Key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if info.Size != m.StoredSizeBytes {
		return nil, &MismatchError{Key: m.Key, What: "stored size", Want: fmt.Sprint(m.StoredSizeBytes), Got: fmt.Sprint(info.Size)}
	}
	tmp, err := os.CreateTemp(opts.TempDir, "hactl-verify-*.db")
	if opts.KeepAs != "" {
		tmp, err = os.CreateTemp(filepath.Dir(opts.KeepAs), ".hactl-verify-*.db")
	}
	if err != nil {
		return nil, fmt.Errorf("verify %s: temp file: %w", m.Key, err)
	}
	defer os.Remove(tmp.Name()) // after a successful KeepAs rename, a no-op
	defer tmp.Close()

	storedHash := sha256.New()
	stored := &countingReader{r: io.TeeReader(rc, storedHash)}
	// drainStored finishes hashing the stored object after a decode error, so a corrupted object
	// is reported as what it is (a stored sha256 mismatch) rather than as a decoding failure.
	storedMismatch := func() error {
		if _, err := io.Copy(io.Discard, stored); err != nil {
			return fmt.Errorf("verify %s: reading: %w", m.Key, err)
		}
		if got := hex.EncodeToString(storedHash.Sum(nil)); got != m.StoredSHA256 {
			return &MismatchError{Key: m.Key, What: "stored sha256 (the object changed in the store)", Want: m.StoredSHA256, Got: got}
		}
		return nil
	}

	var src io.Reader = stored
	if m.Encrypted() {
		dr, err := age.Decrypt(src, opts.Identities...)
		if err != nil {
			if merr := storedMismatch(); merr != nil {
				return nil, merr
			}
			var nim *age.NoIdentityMatchError
			if errors.As(err, &nim) {
				return nil, fmt.Errorf("verify %s: %w", m.Key, ErrWrongIdentity)
			}
			return nil, &MismatchError{Key: m.Key, What: "decryption", Err: err}
		}
		src = dr
	}
	if m.Compression == "zstd" {
		zr, err := zstd.NewReader(src, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		defer zr.Close()
		src = zr
	}
	digest := newSnapshotDigest()
	raw := &countingWriter{w: io.MultiWriter(tmp, digest)}
	if _, err := io.Copy(raw, src); err != nil {
		if merr := storedMismatch(); merr != nil {
			return nil, merr
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		what := "decompression"
		if m.Encrypted() {
			what = "decryption/decompression"
		}
		return nil, &MismatchError{Key: m.Key, What: what, Err: err}
	}
	if err := storedMismatch(); err != nil {
		return nil, err
	}
	if stored.n != m.StoredSizeBytes {
		return nil, &MismatchError{Key: m.Key, What: "stored size", Want: fmt.Sprint(m.StoredSizeBytes), Got: fmt.Sprint(stored.n)}
	}
	if raw.n != m.RawSizeBytes {
		return nil, &MismatchError{Key: m.Key, What: "raw size", Want: fmt.Sprint(m.RawSizeBytes), Got: fmt.Sprint(raw.n)}
	}
	whole, body := digest.sums()
	if whole != m.RawSHA256 {
		return nil, &MismatchError{Key: m.Key, What: "raw sha256", Want: m.RawSHA256, Got: whole}
	}
	if err := digest.checkTrailer(body); err != nil {
		return nil, &MismatchError{Key: m.Key, What: "etcd's sha256 trailer", Err: err}
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("verify %s: temp file: %w", m.Key, err)
	}
	st, err := snapshot.NewV3(zap.NewNop()).Status(tmp.Name())
	if err != nil {
		return nil, &MismatchError{Key: m.Key, What: "etcd integrity check (etcdutl snapshot status)", Err: err}
	}
	if st.Revision < m.Revision {
		return nil, &MismatchError{Key: m.Key, What: "revision (etcdutl snapshot status)", Want: fmt.Sprintf("at least %d", m.Revision), Got: fmt.Sprint(st.Revision)}
	}
	res := &VerifyResult{Key: m.Key, Revision: st.Revision, TotalKeys: st.TotalKey, Hash: st.Hash, TotalSizeBytes: st.TotalSize,
		StorageVersion: st.Version}
	if opts.Record {
		vm := VerifiedMarker{Key: m.Key, VerifiedAt: now().UTC(), Revision: st.Revision, TotalKeys: st.TotalKey, Hash: st.Hash,
			StorageVersion: st.Version, HactlVersion: opts.HactlVersion}
		res.Marker = verifiedKeyOf(m.MetadataKey)
		if err := putJSON(ctx, store, res.Marker, vm); err != nil {
			return nil, fmt.Errorf("verify %s: verified, but recording it failed: %w", m.Key, err)
		}
		s.Verified = &vm
	}
	if opts.KeepAs != "" {
		if err := os.Rename(tmp.Name(), opts.KeepAs); err != nil {
			return nil, fmt.Errorf("verify %s: keeping the verified DB: %w", m.Key, err)
		}
	}
	res.Duration = now().Sub(t0)
	return res, nil
}

// FileCheck is a local raw snapshot that passed CheckFile.
type FileCheck struct {
	SHA256    string `json:"sha256"`
	SizeBytes int64  `json:"sizeBytes"`
	Revision  int64  `json:"revision"`
	TotalKeys int    `json:"totalKeys"`
	Hash      uint32 `json:"hash"`
}

// CheckFile verifies a local raw etcd snapshot file (etcdctl snapshot save, or a decrypted,
// decompressed backup) as Verify does the downloaded one: etcd's sha256 trailer, then etcd's
// integrity check (etcdutl's snapshot status: bbolt consistency, hash, revision). It returns the
// file's sha256 and what etcd reports. Errors: *MismatchError when a check fails, others when the
// file can't be read.
func CheckFile(path string) (*FileCheck, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	digest := newSnapshotDigest()
	n, err := io.Copy(digest, f)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	whole, body := digest.sums()
	if err := digest.checkTrailer(body); err != nil {
		return nil, &MismatchError{Key: path, What: "etcd's sha256 trailer (the file is truncated or changed)", Err: err}
	}
	st, err := snapshot.NewV3(zap.NewNop()).Status(path)
	if err != nil {
		return nil, &MismatchError{Key: path, What: "etcd integrity check (etcdutl snapshot status)", Err: err}
	}
	return &FileCheck{SHA256: whole, SizeBytes: n, Revision: st.Revision, TotalKeys: st.TotalKey, Hash: st.Hash}, nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// ReadIdentities reads age identities (AGE-SECRET-KEY-1...) from a file. Errors never quote it.
func ReadIdentities(file string) ([]age.Identity, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("age identity file: %w", err)
	}
	defer f.Close()
	ids, err := age.ParseIdentities(f)
	if err != nil {
		return nil, fmt.Errorf("age identity file %s: %w", file, err)
	}
	return ids, nil
}
