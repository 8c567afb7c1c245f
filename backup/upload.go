package backup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"
	"time"

	"filippo.io/age"
	"github.com/klauspost/compress/zstd"
)

// Part sizing (see PartSize).
const (
	// MinPartSize is the smallest part size hactl uses for a DB that does not fit in one (8 MiB):
	// large enough that an etcd DB of any supported size (8 GiB at most is recommended) needs about
	// a thousand parts, small enough that DefaultThreads parts in flight stay within the memory
	// goal (measured: 16 MiB parts were no faster against MinIO, and cost 17 MiB more peak RSS).
	MinPartSize = 8 << 20
	// minS3PartSize is S3's smallest part but the last (5 MiB): the part size of the smallest DBs.
	minS3PartSize = 5 << 20
	// zstdWindow is the zstd window (1 MiB; SpeedFastest's default is 8 MiB): the encoder keeps
	// twice the window as history. Measured (stop 34): Kubernetes-shaped objects compress as well
	// with 1 MiB (ratio 7.24 either way), and under the 64 MiB memory limit of `backup now` the
	// 8 MiB window's history made the GC run so often that a 336 MiB snapshot took 3.3-3.8 s
	// instead of 2.0 s.
	zstdWindow = 1 << 20
	// MaxPartSize is S3's largest part (5 GiB).
	MaxPartSize = 5 << 30
	// DefaultThreads is how many parts are buffered and uploaded at once, so the next part is
	// read while the previous ones upload. Memory ≈ part size × threads.
	DefaultThreads = 4
	// growthFactor: the DB may grow between Status and the end of the snapshot; the part size
	// leaves room for 10% growth (compression only shrinks the stream; age adds 0.03%).
	growthNum, growthDen = 11, 10
)

// ErrPartLimit is returned (wrapped) when a streamed upload would need more parts than the store
// allows; the upload is aborted and nothing is stored under the key.
var ErrPartLimit = errors.New("upload would exceed the object store's part limit")

// PartSize returns the multipart part size in bytes for a snapshot of a DB of dbSize bytes on a
// store with maxParts parts, rounded up to whole MiB: a DB whose stream (dbSize×1.1, for growth)
// fits in less than MinPartSize gets one part just that large (at least S3's 5 MiB minimum), so
// the upload buffers no more than the DB; any other gets at least MinPartSize, large enough that
// dbSize×1.1 fills at most half the part limit. It fails when even MaxPartSize is not enough.
func PartSize(dbSize int64, maxParts int) (int64, error) {
	if maxParts < 2 {
		return 0, fmt.Errorf("part limit %d: need at least 2 parts", maxParts)
	}
	if whole := roundMiB(dbSize / growthDen * growthNum); whole < MinPartSize {
		return max(minS3PartSize, whole), nil
	}
	target := int64(maxParts / 2)
	need := (dbSize/growthDen*growthNum + target - 1) / target
	ps := max(int64(MinPartSize), roundMiB(need))
	if ps > MaxPartSize {
		return 0, fmt.Errorf("a DB of %d bytes needs parts of %d bytes, more than the largest part (%d bytes)", dbSize, ps, int64(MaxPartSize))
	}
	return ps, nil
}

// roundMiB rounds n bytes up to whole MiB.
func roundMiB(n int64) int64 { return (n + (1 << 20) - 1) >> 20 << 20 }

// UploadOptions say how Upload transforms and stores a stream.
type UploadOptions struct {
	// PartSize is the multipart part size in bytes (see PartSize).
	PartSize int64
	// Threads is how many parts are in flight (0: DefaultThreads).
	Threads uint
	// Compression is "zstd" or "none" ("" = none).
	Compression string
	// Recipients encrypt the stream with age (after compression); none: not encrypted.
	Recipients []age.Recipient
	// EtcdTrailer: the stream is etcd's snapshot stream (the DB followed by etcd's sha256 of it);
	// the trailer is checked on the fly and a mismatch fails the upload.
	EtcdTrailer bool
	// Progress, when set, is called about every ProgressEvery with the raw bytes read so far.
	Progress      func(rawBytes int64)
	ProgressEvery time.Duration

	// maxParts overrides the store's part limit (tests).
	maxParts int
}

// UploadResult is what Upload measured.
type UploadResult struct {
	RawSizeBytes    int64
	RawSHA256       string
	StoredSizeBytes int64
	StoredSHA256    string
}

// Upload streams r (raw bytes) → sha256 → zstd → age → sha256 → store.Put(key) as a multipart
// upload of unknown size, PartSize × Threads bytes buffered at most (plus the compressor's history),
// whatever the stream's length. It fails with ErrPartLimit, before the store's part limit is
// reached, when the stream is larger than the part size allows; on any failure the multipart
// upload is aborted, so nothing (and in particular no truncated object) is left under key.
func Upload(ctx context.Context, store Store, key string, r io.Reader, o UploadOptions) (UploadResult, error) {
	if o.PartSize <= 0 {
		return UploadResult{}, errors.New("upload: part size not set")
	}
	threads := o.Threads
	if threads == 0 {
		threads = DefaultThreads
	}
	maxParts := store.MaxParts()
	if o.maxParts > 0 {
		maxParts = o.maxParts
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	pr, pw := io.Pipe()
	var res UploadResult
	produced := make(chan error, 1)
	go func() {
		err := transform(pw, r, o, &res)
		pw.CloseWithError(err) // nil: EOF for the reader
		produced <- err
	}()

	guard := &partGuard{r: pr, limit: int64(maxParts-1) * o.PartSize, partSize: o.PartSize, maxParts: maxParts}
	_, err := store.Put(ctx, key, guard, PutOptions{Size: -1, PartSize: uint64(o.PartSize), Threads: threads})
	if err != nil {
		pr.CloseWithError(err) // unblock the producer
		cancel()
		<-produced
		// minio-go aborts a failed upload itself; make sure with a fresh context (ctx may be done).
		actx, acancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer acancel()
		if aerr := store.AbortIncomplete(actx, key); aerr != nil {
			err = errors.Join(err, aerr)
		}
		if guard.err != nil {
			return UploadResult{}, guard.err
		}
		return UploadResult{}, fmt.Errorf("upload %s: %w", key, err)
	}
	if perr := <-produced; perr != nil {
		// Put completed although the producer failed: never keep that object.
		_ = store.Remove(context.WithoutCancel(ctx), key)
		return UploadResult{}, fmt.Errorf("upload %s: %w", key, perr)
	}
	return res, nil
}

// transform copies r into w through the raw hash, the compressor and the encryptor, and sets res.
// Each byte is hashed once on each side: the raw digest serves the raw sha256 and etcd's trailer
// check, and when the stream is stored as read (no compression, no encryption) the stored sha256 is
// the raw one.
func transform(w io.Writer, r io.Reader, o UploadOptions, res *UploadResult) error {
	plain := (o.Compression == "" || o.Compression == "none") && len(o.Recipients) == 0
	storedHash := sha256.New()
	stored := &countingWriter{w: io.MultiWriter(w, storedHash)}
	if plain {
		stored.w = w
	}
	var sink io.Writer = stored
	var closers []io.Closer // innermost first
	if len(o.Recipients) > 0 {
		aw, err := age.Encrypt(sink, o.Recipients...)
		if err != nil {
			return fmt.Errorf("age: %w", err)
		}
		sink = aw
		closers = append(closers, aw)
	}
	switch o.Compression {
	case "zstd":
		// Level and concurrency measured (stop 34, klauspost/compress, 200 MiB on 2 cores): on
		// Kubernetes-shaped JSON, SpeedFastest 553 MB/s at ratio 7.2 against SpeedDefault's 356 MB/s
		// at 6.9; random values pass at over 1.6 GB/s either way. One encoder goroutine was as fast as
		// two, and leaves the other core to the etcd stream, the hashing and the part uploads.
		zw, err := zstd.NewWriter(sink, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1),
			zstd.WithWindowSize(zstdWindow))
		if err != nil {
			return fmt.Errorf("zstd: %w", err)
		}
		sink = zw
		closers = append(closers, zw)
	case "", "none":
	default:
		return fmt.Errorf("unknown compression %q", o.Compression)
	}
	digest := newSnapshotDigest()
	raw := &countingWriter{w: io.MultiWriter(sink, digest)}
	var src io.Reader = r
	if o.Progress != nil {
		src = &progressReader{r: r, fn: o.Progress, every: o.ProgressEvery}
	}
	if _, err := io.Copy(raw, src); err != nil {
		return fmt.Errorf("reading the snapshot: %w", err)
	}
	whole, body := digest.sums()
	if o.EtcdTrailer {
		if err := digest.checkTrailer(body); err != nil {
			return err
		}
	}
	for i := len(closers) - 1; i >= 0; i-- { // compressor first, then the encryptor
		if err := closers[i].Close(); err != nil {
			return err
		}
	}
	res.RawSizeBytes, res.StoredSizeBytes = raw.n, stored.n
	res.RawSHA256, res.StoredSHA256 = whole, whole
	if !plain {
		res.StoredSHA256 = hex.EncodeToString(storedHash.Sum(nil))
	}
	return nil
}

// partGuard counts the bytes handed to the store and fails with ErrPartLimit before the stream
// would need the last allowed part.
type partGuard struct {
	r                  io.Reader
	n, limit, partSize int64
	maxParts           int
	err                error
}

func (g *partGuard) Read(p []byte) (int, error) {
	n, err := g.r.Read(p)
	g.n += int64(n)
	if g.n > g.limit {
		g.err = fmt.Errorf("%w: more than %d bytes to store with parts of %d bytes would need more than %d of the %d parts allowed; "+
			"the upload was aborted and nothing was stored (the DB grew far beyond its size at snapshot start?)",
			ErrPartLimit, g.limit, g.partSize, g.maxParts-1, g.maxParts)
		return n, g.err
	}
	return n, err
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// snapshotDigest hashes a raw snapshot stream once for both of its checks: the sha256 of the whole
// stream (the metadata's rawSha256) and the sha256 of all but its last 32 bytes, which etcd appends
// to a snapshot stream as its own sha256 of the DB (etcdutl checks the same on restore). It holds
// the last 32 bytes back instead of copying the stream.
type snapshotDigest struct {
	h    hash.Hash
	tail [sha256.Size]byte
	nt   int // bytes held in tail
	n    int64
}

func newSnapshotDigest() *snapshotDigest { return &snapshotDigest{h: sha256.New()} }

func (d *snapshotDigest) Write(p []byte) (int, error) {
	d.n += int64(len(p))
	if len(p) >= sha256.Size {
		d.h.Write(d.tail[:d.nt])
		d.h.Write(p[:len(p)-sha256.Size])
		d.nt = copy(d.tail[:], p[len(p)-sha256.Size:])
		return len(p), nil
	}
	var buf [2 * sha256.Size]byte
	k := copy(buf[:], d.tail[:d.nt])
	k += copy(buf[k:], p)
	if over := k - sha256.Size; over > 0 {
		d.h.Write(buf[:over])
		d.nt = copy(d.tail[:], buf[over:k])
	} else {
		d.nt = copy(d.tail[:], buf[:k])
	}
	return len(p), nil
}

// sums returns the hex sha256 of the whole stream and of all but its last 32 bytes. Call it once,
// after the last Write.
func (d *snapshotDigest) sums() (whole, body string) {
	c, err := d.h.(hash.Cloner).Clone()
	if err != nil { // sha256 always clones
		panic(err)
	}
	body = hex.EncodeToString(c.Sum(nil))
	d.h.Write(d.tail[:d.nt])
	return hex.EncodeToString(d.h.Sum(nil)), body
}

// ErrTrailer is returned (wrapped) when a snapshot stream does not end with etcd's sha256 of it.
var ErrTrailer = errors.New("etcd's sha256 at the end of the snapshot stream does not match the data")

// checkTrailer returns an error wrapping ErrTrailer unless the stream is a DB of whole 512-byte
// sectors followed by its sha256 (body, from sums).
func (d *snapshotDigest) checkTrailer(body string) error {
	if d.n < sha256.Size || (d.n%512) != sha256.Size {
		return fmt.Errorf("%w: the stream is %d bytes, not a DB of whole 512-byte sectors followed by a 32-byte sha256 (truncated?)", ErrTrailer, d.n)
	}
	if want := hex.EncodeToString(d.tail[:d.nt]); body != want {
		return fmt.Errorf("%w: computed %s, etcd sent %s", ErrTrailer, body, want)
	}
	return nil
}

type progressReader struct {
	r     io.Reader
	fn    func(int64)
	every time.Duration
	n     int64
	last  time.Time
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.n += int64(n)
	if now := time.Now(); now.Sub(p.last) >= p.every {
		p.last = now
		p.fn(p.n)
	}
	return n, err
}

// ParseRecipients parses age recipients (age1..., one per element).
func ParseRecipients(rs []string) ([]age.Recipient, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	out, err := age.ParseRecipients(strings.NewReader(strings.Join(rs, "\n")))
	if err != nil {
		return nil, fmt.Errorf("age recipients: %w", err)
	}
	return out, nil
}
