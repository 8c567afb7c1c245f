// Package backup takes etcd snapshots into an S3-compatible object store and lists, verifies and
// prunes them (issue 5). A snapshot is streamed from Maintenance.Snapshot through sha256, zstd and
// age straight into a multipart upload (no temp file; memory bounded by part size × threads), and
// is complete only once its metadata object, written last, exists.
package backup

import (
	"context"
	"errors"
	"io"
	"time"
)

// ErrNotFound is returned (wrapped) by Store.Get and Store.Stat when the key does not exist.
var ErrNotFound = errors.New("object not found")

// ObjectInfo describes one stored object.
type ObjectInfo struct {
	Key          string    `json:"key"`
	Size         int64     `json:"size"` // bytes
	LastModified time.Time `json:"lastModified"`
}

// IncompleteUpload is a multipart upload (started, never completed or aborted).
type IncompleteUpload struct {
	Key       string    `json:"key"`
	UploadID  string    `json:"uploadID"`
	Initiated time.Time `json:"initiated"`
}

// PutOptions tune one Put.
type PutOptions struct {
	// Size is the object's size in bytes, or -1 when unknown (a streamed multipart upload).
	Size int64
	// PartSize is the multipart part size in bytes (0: the store's default). With Size -1 it bounds
	// the object at PartSize × the store's part limit.
	PartSize uint64
	// Threads is how many parts are buffered and uploaded concurrently (0 or 1: one at a time).
	// Memory used is about PartSize × Threads.
	Threads uint
	// ContentType is the object's MIME type ("" = application/octet-stream).
	ContentType string
}

// Store is the narrow object-store interface the backup code uses. Every call honours ctx. Keys
// are full object keys within the store's bucket. Implementations must be safe for concurrent use.
type Store interface {
	// Put stores r under key. An error leaves no object under key (an aborted multipart upload
	// may leave parts behind, see ListIncompleteUploads).
	Put(ctx context.Context, key string, r io.Reader, opts PutOptions) (ObjectInfo, error)
	// Get opens key for reading; the caller closes the reader. ErrNotFound when it does not exist.
	Get(ctx context.Context, key string) (io.ReadCloser, ObjectInfo, error)
	// Stat describes key; ErrNotFound when it does not exist.
	Stat(ctx context.Context, key string) (ObjectInfo, error)
	// List returns every object whose key starts with prefix, sorted by key.
	List(ctx context.Context, prefix string) ([]ObjectInfo, error)
	// Remove deletes key; removing a key that does not exist is not an error.
	Remove(ctx context.Context, key string) error
	// ListIncompleteUploads returns the incomplete multipart uploads under prefix.
	ListIncompleteUploads(ctx context.Context, prefix string) ([]IncompleteUpload, error)
	// AbortIncomplete aborts every incomplete multipart upload of key, freeing its parts.
	AbortIncomplete(ctx context.Context, key string) error
	// MaxParts is the store's multipart part limit (10,000 for S3).
	MaxParts() int
	// String names the store for messages: endpoint, bucket, region and lookup style; never a key.
	String() string
}
