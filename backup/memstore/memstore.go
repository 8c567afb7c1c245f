// Package memstore is an in-memory backup.Store for unit tests that need a store but not S3's
// wire protocol (backup/s3test runs a real MinIO from bin/ for those): objects are byte slices in
// a map, there are never incomplete uploads, and every call honours ctx. PutSnapshot seeds any
// store with a complete snapshot.
package memstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hactl/hactl/backup"
)

// Store is an in-memory backup.Store; the zero value is not usable, New is. Safe for concurrent
// use.
type Store struct {
	mu      sync.Mutex
	objects map[string]object
}

type object struct {
	data []byte
	info backup.ObjectInfo
}

var _ backup.Store = (*Store)(nil)

// New returns an empty store.
func New() *Store { return &Store{objects: map[string]object{}} }

// Put stores all of r under key, LastModified now (opts are ignored: no parts, no size limit).
func (s *Store) Put(ctx context.Context, key string, r io.Reader, _ backup.PutOptions) (backup.ObjectInfo, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return backup.ObjectInfo{}, err
	}
	if err := ctx.Err(); err != nil {
		return backup.ObjectInfo{}, err
	}
	info := backup.ObjectInfo{Key: key, Size: int64(len(b)), LastModified: time.Now()}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objects[key] = object{data: b, info: info}
	return info, nil
}

// Get opens key; backup.ErrNotFound (wrapped) when it does not exist.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, backup.ObjectInfo, error) {
	o, err := s.find(ctx, key)
	if err != nil {
		return nil, backup.ObjectInfo{}, err
	}
	return io.NopCloser(bytes.NewReader(o.data)), o.info, nil
}

// Stat describes key; backup.ErrNotFound (wrapped) when it does not exist.
func (s *Store) Stat(ctx context.Context, key string) (backup.ObjectInfo, error) {
	o, err := s.find(ctx, key)
	return o.info, err
}

func (s *Store) find(ctx context.Context, key string) (object, error) {
	if err := ctx.Err(); err != nil {
		return object{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objects[key]
	if !ok {
		return object{}, fmt.Errorf("%s: %w", key, backup.ErrNotFound)
	}
	return o, nil
}

// List returns the objects whose key starts with prefix, sorted by key.
func (s *Store) List(ctx context.Context, prefix string) ([]backup.ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []backup.ObjectInfo
	for _, k := range slices.Sorted(maps.Keys(s.objects)) {
		if strings.HasPrefix(k, prefix) {
			out = append(out, s.objects[k].info)
		}
	}
	return out, nil
}

// Keys returns every key starting with prefix, sorted (for tests' assertions).
func (s *Store) Keys(prefix string) []string {
	infos, _ := s.List(context.Background(), prefix)
	var out []string
	for _, o := range infos {
		out = append(out, o.Key)
	}
	return out
}

// Remove deletes key; a key that does not exist is not an error.
func (s *Store) Remove(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.objects, key)
	return nil
}

// ListIncompleteUploads returns none: a Put is whole or absent.
func (s *Store) ListIncompleteUploads(ctx context.Context, _ string) ([]backup.IncompleteUpload, error) {
	return nil, ctx.Err()
}

// AbortIncomplete does nothing (there are no incomplete uploads).
func (s *Store) AbortIncomplete(ctx context.Context, _ string) error { return ctx.Err() }

// MaxParts is S3's part limit.
func (s *Store) MaxParts() int { return backup.S3PartLimit }

// String names the store for messages.
func (s *Store) String() string { return "in-memory store" }

// PutSnapshot stores in s (any backup.Store) a complete snapshot of cluster under prefix as
// backup.List lists it: a 2-byte data object "<stem>.db" (stem: t, rev, member "m0"; no slot),
// then its metadata, and returns the metadata. Errors: the stem's (a revision out of range), the
// store's.
func PutSnapshot(ctx context.Context, s backup.Store, prefix, cluster string, t time.Time, rev int64) (*backup.Metadata, error) {
	stem, err := backup.Stem(t, rev, "m0", "")
	if err != nil {
		return nil, err
	}
	dir := backup.SnapshotsPrefix(prefix, cluster)
	m := &backup.Metadata{Format: backup.MetadataFormat, Cluster: cluster, Key: dir + stem + ".db", MetadataKey: dir + stem + ".json",
		MemberName: "m0", Revision: rev, Compression: "none", StartedAt: t.UTC(), CompletedAt: t.UTC()}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if _, err := s.Put(ctx, m.Key, strings.NewReader("db"), backup.PutOptions{Size: 2}); err != nil {
		return nil, err
	}
	if _, err := s.Put(ctx, m.MetadataKey, bytes.NewReader(b), backup.PutOptions{Size: int64(len(b))}); err != nil { // last, as backup.Take
		return nil, err
	}
	return m, nil
}
