package backup

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"filippo.io/age"
	"github.com/klauspost/compress/zstd"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Delta snapshots (etcd-backup-restore's idea): between full snapshots, `hactl backup agent` watches
// the cluster from a revision and stores every change as a delta object, so a restore reaches a
// revision seconds old instead of the last full snapshot's.
//
// Object layout under <prefix>/<cluster>/deltas/:
//
//	rev<from, 15 digits>-rev<to, 15 digits>.events[.zst][.age]   the events of revisions from+1..to
//	rev<from>-rev<to>.json                                        its DeltaMetadata, written LAST
//
// so keys sort by revision. The events object is a sequence of records in revision order, each an
// unsigned varint length followed by the event: its type (1 byte: 0 put, 1 delete), then as
// unsigned varints the create revision, mod revision, version and lease ID, then the key and the
// value, each as a varint length and its bytes (hactl's own encoding of mvccpb.Event's fields, so it
// does not depend on the protobuf library of the etcd API version it is built with); then
// compressed and encrypted as snapshots are.
const (
	deltaExt = ".events"
	// DeltaFormat is the version of the DeltaMetadata document and of the events encoding.
	DeltaFormat = 1
	// maxEventBytes bounds one encoded event (etcd's request limit is 1.5 MiB by default; a value
	// may be up to the configured max-request-bytes): a larger length prefix is corruption.
	maxEventBytes = 64 << 20
)

var deltaStemRE = regexp.MustCompile(`^rev(\d{15})-rev(\d{15})$`)

// DeltasPrefix is the key prefix of a cluster's deltas: "<prefix>/<cluster>/deltas/".
func DeltasPrefix(prefix, cluster string) string {
	return path.Join(prefix, cluster, "deltas") + "/"
}

// DeltaStem names the delta of revisions from+1..to. Errors: from < 0, to <= from, or to past 15
// digits.
func DeltaStem(from, to int64) (string, error) {
	if from < 0 || to <= from || to > 999_999_999_999_999 {
		return "", fmt.Errorf("delta revisions (%d, %d]: want 0 <= from < to < 1e15", from, to)
	}
	return fmt.Sprintf("rev%015d-rev%015d", from, to), nil
}

func parseDeltaStem(s string) (from, to int64, ok bool) {
	m := deltaStemRE.FindStringSubmatch(s)
	if m == nil {
		return 0, 0, false
	}
	from, _ = strconv.ParseInt(m[1], 10, 64)
	to, _ = strconv.ParseInt(m[2], 10, 64)
	return from, to, to > from
}

// DeltaMetadata describes one complete delta; its object is written after the events object.
type DeltaMetadata struct {
	Format  int    `json:"format"`
	Cluster string `json:"cluster"`
	// Key is the events object's key; MetadataKey this document's.
	Key         string `json:"key"`
	MetadataKey string `json:"metadataKey"`
	ClusterID   string `json:"clusterID"`
	// FromRevision (exclusive) and ToRevision (inclusive) bound the revisions whose events the
	// delta holds: every event of FromRevision+1..ToRevision, none other.
	FromRevision int64 `json:"fromRevision"`
	ToRevision   int64 `json:"toRevision"`
	// Events counts the events.
	Events int `json:"events"`
	// RawSizeBytes/RawSHA256 cover the encoded events, StoredSizeBytes/StoredSHA256 the object.
	RawSizeBytes    int64    `json:"rawSizeBytes"`
	RawSHA256       string   `json:"rawSHA256"`
	StoredSizeBytes int64    `json:"storedSizeBytes"`
	StoredSHA256    string   `json:"storedSHA256"`
	Compression     string   `json:"compression"`
	Recipients      []string `json:"recipients,omitempty"`
	// StartedAt is when the first event was received (the delta's oldest change is at most this
	// old); CompletedAt when the metadata was written.
	StartedAt   time.Time `json:"startedAt"`
	CompletedAt time.Time `json:"completedAt"`
	// Writer is the agent that wrote it (its election identity).
	Writer       string `json:"writer"`
	HactlVersion string `json:"hactlVersion"`
}

// Encrypted reports whether the events object is age-encrypted.
func (m *DeltaMetadata) Encrypted() bool { return len(m.Recipients) > 0 }

// DeltaKeys returns the events object's and the metadata's keys of the delta (from, to].
func DeltaKeys(prefix, cluster string, from, to int64, compression string, encrypted bool) (data, meta string, err error) {
	stem, err := DeltaStem(from, to)
	if err != nil {
		return "", "", err
	}
	ext := deltaExt
	if compression == "zstd" {
		ext += zstdExt
	}
	if encrypted {
		ext += ageExt
	}
	dir := DeltasPrefix(prefix, cluster)
	return dir + stem + ext, dir + stem + metaExt, nil
}

// EventWriter encodes events as a delta's records.
type EventWriter struct {
	w   io.Writer
	buf []byte
	n   int
}

// NewEventWriter returns an EventWriter on w.
func NewEventWriter(w io.Writer) *EventWriter { return &EventWriter{w: w} }

// Write appends one event. Errors: an event without a key-value, or w's.
func (e *EventWriter) Write(ev *mvccpb.Event) error {
	kv := ev.Kv
	if kv == nil {
		return errors.New("encode event: no key-value")
	}
	var p []byte
	p = append(p, byte(ev.Type))
	p = binary.AppendUvarint(p, uint64(kv.CreateRevision))
	p = binary.AppendUvarint(p, uint64(kv.ModRevision))
	p = binary.AppendUvarint(p, uint64(kv.Version))
	p = binary.AppendUvarint(p, uint64(kv.Lease))
	p = binary.AppendUvarint(p, uint64(len(kv.Key)))
	p = append(p, kv.Key...)
	p = binary.AppendUvarint(p, uint64(len(kv.Value)))
	p = append(p, kv.Value...)
	e.buf = binary.AppendUvarint(e.buf[:0], uint64(len(p)))
	e.buf = append(e.buf, p...)
	if _, err := e.w.Write(e.buf); err != nil {
		return err
	}
	e.n++
	return nil
}

// Count is how many events were written.
func (e *EventWriter) Count() int { return e.n }

// ErrBadEvents is wrapped by EventReader's errors about the encoding itself.
var ErrBadEvents = errors.New("delta events are corrupt")

// EventReader decodes a delta's records.
type EventReader struct {
	r   *bufio.Reader
	buf []byte
}

// NewEventReader returns an EventReader on r.
func NewEventReader(r io.Reader) *EventReader {
	return &EventReader{r: bufio.NewReaderSize(r, 256<<10)}
}

// Next returns the next event, or io.EOF after the last one. Errors: ErrBadEvents (wrapped) for a
// truncated record, an implausible length or an event that does not decode; r's errors.
func (e *EventReader) Next() (*mvccpb.Event, error) {
	n, err := binary.ReadUvarint(e.r)
	if err == io.EOF {
		return nil, io.EOF
	}
	if err != nil {
		return nil, fmt.Errorf("%w: record length: %w", ErrBadEvents, err)
	}
	if n == 0 || n > maxEventBytes {
		return nil, fmt.Errorf("%w: record of %d bytes", ErrBadEvents, n)
	}
	if cap(e.buf) < int(n) {
		e.buf = make([]byte, n)
	}
	b := e.buf[:n]
	if _, err := io.ReadFull(e.r, b); err != nil {
		return nil, fmt.Errorf("%w: record of %d bytes cut short: %w", ErrBadEvents, n, err)
	}
	return decodeEvent(b)
}

// decodeEvent decodes one record's payload (see the layout above).
func decodeEvent(b []byte) (*mvccpb.Event, error) {
	bad := func(what string) (*mvccpb.Event, error) {
		return nil, fmt.Errorf("%w: %s", ErrBadEvents, what)
	}
	if len(b) < 1 || b[0] > 1 {
		return bad("an event of unknown type")
	}
	ev := &mvccpb.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{}}
	if b[0] == 1 {
		ev.Type = mvccpb.DELETE
	}
	b = b[1:]
	var nums [4]uint64
	for i := range nums {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return bad("a revision, version or lease that does not decode")
		}
		nums[i], b = v, b[n:]
	}
	ev.Kv.CreateRevision, ev.Kv.ModRevision, ev.Kv.Version, ev.Kv.Lease = int64(nums[0]), int64(nums[1]), int64(nums[2]), int64(nums[3])
	for _, dst := range []*[]byte{&ev.Kv.Key, &ev.Kv.Value} {
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			return bad("a key or value longer than its record")
		}
		*dst = append([]byte(nil), b[n:n+int(l)]...)
		b = b[n+int(l):]
	}
	if len(b) != 0 {
		return bad("bytes after the value")
	}
	if len(ev.Kv.Key) == 0 {
		return bad("an event without a key")
	}
	return ev, nil
}

// Delta is one complete delta in a listing.
type Delta struct {
	Stem     string         `json:"stem"`
	Data     ObjectInfo     `json:"data"`
	Metadata *DeltaMetadata `json:"metadata"`
}

// GapError is a delta chain with revisions no delta holds: a restore from it would silently miss
// those changes, so it is refused.
type GapError struct {
	// From (exclusive) and To (inclusive) are the revisions missing.
	From, To int64
}

func (e *GapError) Error() string {
	return fmt.Sprintf("the delta chain has a gap: no delta holds revisions %d to %d (a delta is missing or incomplete); restore from the full snapshot alone, or take a new full snapshot",
		e.From+1, e.To)
}

// Chain returns the deltas that carry a full snapshot at revision base forward, in order: the
// first holds base+1 (FromRevision <= base < ToRevision), each next one starts at or before the end
// of the one before it and ends after it (an overlap, two writers briefly at once, is allowed:
// Replay skips events already applied). Deltas ending at or before base are not used. It returns
// nil when no delta goes past base. Errors: *GapError when a delta starts after the previous one
// ended (or the first one after base+1): the revisions between are missing.
func Chain(deltas []Delta, base int64) ([]Delta, error) {
	ds := slices.Clone(deltas)
	slices.SortFunc(ds, func(a, b Delta) int {
		if c := int(a.Metadata.FromRevision - b.Metadata.FromRevision); c != 0 {
			return c
		}
		return int(b.Metadata.ToRevision - a.Metadata.ToRevision) // the longer first
	})
	var out []Delta
	at := base
	for _, d := range ds {
		m := d.Metadata
		if m.ToRevision <= at {
			continue // before base, or covered by a longer delta already chosen
		}
		if m.FromRevision > at {
			return nil, &GapError{From: at, To: m.FromRevision}
		}
		out = append(out, d)
		at = m.ToRevision
	}
	return out, nil
}

// ListDeltas returns the complete deltas (those whose metadata exists and names an events object
// that exists) under the cluster's deltas prefix, in revision order. An events object without
// metadata (a delta being written, or whose writer died), metadata whose events object is gone
// (half-pruned), and metadata deleted while listing are left out. Errors: the store's, or a metadata
// object that does not decode or names another delta's revisions (wrapped).
func ListDeltas(ctx context.Context, store Store, prefix, cluster string) ([]Delta, error) {
	return listDeltas(ctx, store, prefix, cluster, nil)
}

// listDeltas is ListDeltas of the deltas whose revisions (from, to], as their keys name them, want
// accepts (nil: all); only those deltas' metadata objects are read.
func listDeltas(ctx context.Context, store Store, prefix, cluster string, want func(from, to int64) bool) ([]Delta, error) {
	dir := DeltasPrefix(prefix, cluster)
	objs, err := store.List(ctx, dir)
	if err != nil {
		return nil, err
	}
	byKey := map[string]ObjectInfo{}
	var metas []ObjectInfo
	for _, o := range objs {
		byKey[o.Key] = o
		if stem, ok := strings.CutSuffix(strings.TrimPrefix(o.Key, dir), metaExt); ok {
			if from, to, ok := parseDeltaStem(stem); ok && (want == nil || want(from, to)) {
				metas = append(metas, o)
			}
		}
	}
	var out []Delta
	for _, mo := range metas {
		stem := strings.TrimSuffix(strings.TrimPrefix(mo.Key, dir), metaExt)
		var m DeltaMetadata
		if err := getJSON(ctx, store, mo.Key, &m); err != nil {
			if errors.Is(err, ErrNotFound) {
				continue // pruned meanwhile
			}
			return nil, fmt.Errorf("delta %s: %w", mo.Key, err)
		}
		from, to, _ := parseDeltaStem(stem)
		if m.FromRevision != from || m.ToRevision != to || !strings.HasPrefix(m.Key, dir+stem+deltaExt) {
			return nil, fmt.Errorf("delta %s: its metadata names %s, revisions (%d, %d]", mo.Key, m.Key, m.FromRevision, m.ToRevision)
		}
		d, ok := byKey[m.Key]
		if !ok {
			continue // its events object is gone: half-pruned
		}
		out = append(out, Delta{Stem: stem, Data: d, Metadata: &m})
	}
	slices.SortFunc(out, func(a, b Delta) int { return strings.Compare(a.Stem, b.Stem) })
	return out, nil
}

// PutDeltaOptions say how PutDelta stores a delta.
type PutDeltaOptions struct {
	Prefix, Cluster, ClusterID string
	Compression                string
	Recipients                 []string
	Writer, HactlVersion       string
	// StartedAt is when the delta's first event was received.
	StartedAt time.Time
	Now       func() time.Time
}

// PutDelta stores the encoded events of revisions from+1..to (raw: EventWriter's output, count
// events) as a delta: the events object (compressed and encrypted as o says, sha256 of both forms),
// then its metadata, which makes it complete. Errors: the upload's or the metadata's (the events
// object without metadata is not a delta: ListDeltas ignores it).
func PutDelta(ctx context.Context, store Store, from, to int64, raw []byte, count int, o PutDeltaOptions) (*DeltaMetadata, error) {
	now := o.Now
	if now == nil {
		now = time.Now
	}
	recipients, err := ParseRecipients(o.Recipients)
	if err != nil {
		return nil, err
	}
	if len(raw) > MaxDeltaBytes {
		return nil, fmt.Errorf("delta (%d, %d]: %d bytes of events, more than a delta may hold (%d): cut deltas smaller", from, to, len(raw), MaxDeltaBytes)
	}
	comp := o.Compression
	if comp == "" {
		comp = "none"
	}
	key, metaKey, err := DeltaKeys(o.Prefix, o.Cluster, from, to, comp, len(recipients) > 0)
	if err != nil {
		return nil, err
	}
	ps, err := PartSize(int64(len(raw)), store.MaxParts())
	if err != nil {
		return nil, err
	}
	res, err := Upload(ctx, store, key, bytes.NewReader(raw), UploadOptions{PartSize: ps, Threads: 1, Compression: comp, Recipients: recipients})
	if err != nil {
		return nil, fmt.Errorf("delta (%d, %d]: %w", from, to, err)
	}
	m := &DeltaMetadata{Format: DeltaFormat, Cluster: o.Cluster, Key: key, MetadataKey: metaKey, ClusterID: o.ClusterID,
		FromRevision: from, ToRevision: to, Events: count, RawSizeBytes: res.RawSizeBytes, RawSHA256: res.RawSHA256,
		StoredSizeBytes: res.StoredSizeBytes, StoredSHA256: res.StoredSHA256, Compression: comp, Recipients: o.Recipients,
		StartedAt: o.StartedAt.UTC(), CompletedAt: now().UTC(), Writer: o.Writer, HactlVersion: o.HactlVersion}
	if err := putJSON(ctx, store, metaKey, m); err != nil {
		return nil, fmt.Errorf("delta (%d, %d]: writing its metadata %s: %w", from, to, metaKey, err)
	}
	return m, nil
}

// MaxDeltaBytes bounds a delta's encoded events (the agent cuts a delta at DeltaSizeBound, far
// below): a delta is read into memory whole.
const MaxDeltaBytes = 256 << 20

// ReadDelta downloads d, checks its stored size and sha256, decrypts it (ids), decompresses it,
// checks its raw size and sha256, and calls fn with each event in order. Errors: *MismatchError
// when a check fails, ErrNoIdentity/ErrWrongIdentity (wrapped), ErrBadEvents (wrapped) for records
// that do not decode or events outside the delta's revisions, fn's error, the store's.
func ReadDelta(ctx context.Context, store Store, d Delta, ids []age.Identity, fn func(*mvccpb.Event) error) error {
	m := d.Metadata
	if m.Encrypted() && len(ids) == 0 {
		return fmt.Errorf("delta %s: %w", m.Key, ErrNoIdentity)
	}
	if m.StoredSizeBytes > MaxDeltaBytes || m.RawSizeBytes > MaxDeltaBytes {
		return &MismatchError{Key: m.Key, What: "size", Want: fmt.Sprintf("at most %d bytes", MaxDeltaBytes), Got: fmt.Sprint(max(m.StoredSizeBytes, m.RawSizeBytes))}
	}
	rc, _, err := store.Get(ctx, m.Key)
	if err != nil {
		return err
	}
	defer rc.Close()
	stored, err := io.ReadAll(io.LimitReader(rc, MaxDeltaBytes+1))
	if err != nil {
		return fmt.Errorf("delta %s: reading: %w", m.Key, err)
	}
	if int64(len(stored)) != m.StoredSizeBytes {
		return &MismatchError{Key: m.Key, What: "stored size", Want: fmt.Sprint(m.StoredSizeBytes), Got: fmt.Sprint(len(stored))}
	}
	if got := sha256Hex(stored); got != m.StoredSHA256 {
		return &MismatchError{Key: m.Key, What: "stored sha256 (the object changed in the store)", Want: m.StoredSHA256, Got: got}
	}
	var src io.Reader = bytes.NewReader(stored)
	if m.Encrypted() {
		dr, err := age.Decrypt(src, ids...)
		if err != nil {
			var nim *age.NoIdentityMatchError
			if errors.As(err, &nim) {
				return fmt.Errorf("delta %s: %w", m.Key, ErrWrongIdentity)
			}
			return &MismatchError{Key: m.Key, What: "decryption", Err: err}
		}
		src = dr
	}
	if m.Compression == "zstd" {
		zr, err := zstd.NewReader(src, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(MaxDeltaBytes))
		if err != nil {
			return fmt.Errorf("zstd: %w", err)
		}
		defer zr.Close()
		src = zr
	}
	raw, err := io.ReadAll(io.LimitReader(src, MaxDeltaBytes+1))
	if err != nil {
		return &MismatchError{Key: m.Key, What: "decryption/decompression", Err: err}
	}
	if int64(len(raw)) != m.RawSizeBytes {
		return &MismatchError{Key: m.Key, What: "raw size", Want: fmt.Sprint(m.RawSizeBytes), Got: fmt.Sprint(len(raw))}
	}
	if got := sha256Hex(raw); got != m.RawSHA256 {
		return &MismatchError{Key: m.Key, What: "raw sha256", Want: m.RawSHA256, Got: got}
	}
	er := NewEventReader(bytes.NewReader(raw))
	n := 0
	for {
		ev, err := er.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("delta %s: %w", m.Key, err)
		}
		if rev := ev.Kv.ModRevision; rev <= m.FromRevision || rev > m.ToRevision {
			return fmt.Errorf("delta %s: %w: an event at revision %d, outside (%d, %d]", m.Key, ErrBadEvents, rev, m.FromRevision, m.ToRevision)
		}
		if err := fn(ev); err != nil {
			return err
		}
		n++
	}
	if n != m.Events {
		return &MismatchError{Key: m.Key, What: "event count", Want: fmt.Sprint(m.Events), Got: fmt.Sprint(n)}
	}
	return nil
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
