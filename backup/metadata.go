package backup

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// MetadataFormat is the version of the Metadata document.
const MetadataFormat = 1

// maxMetadataBytes bounds how much of a metadata or marker object is read.
const maxMetadataBytes = 1 << 20

// Metadata describes one complete snapshot; its object (<stem>.json) is written after the data
// object, so its presence marks the snapshot complete. IDs are lowercase hex as etcdctl prints them.
type Metadata struct {
	Format  int    `json:"format"`
	Cluster string `json:"cluster"` // metadata.name of the spec
	// Key is the data object's key; MetadataKey this document's.
	Key         string `json:"key"`
	MetadataKey string `json:"metadataKey"`
	ClusterID   string `json:"clusterID"`
	MemberID    string `json:"memberID"`
	MemberName  string `json:"memberName"`
	// Revision and RaftIndex are the member's at snapshot start; the snapshot holds this revision
	// or a later one (verify reports the exact one).
	Revision    int64  `json:"revision"`
	RaftTerm    uint64 `json:"raftTerm"`
	RaftIndex   uint64 `json:"raftIndex"`
	EtcdVersion string `json:"etcdVersion"`
	// StorageVersion is the snapshot's storage version as etcd reports it ("" before etcd 3.6).
	StorageVersion string `json:"storageVersion,omitempty"`
	// DBSizeBytes is the member's DB size at snapshot start (Status).
	DBSizeBytes int64 `json:"dbSizeBytes"`
	// RawSizeBytes and RawSHA256 cover etcd's snapshot stream (the DB followed by etcd's own
	// 32-byte sha256 of it), before compression and encryption.
	RawSizeBytes int64  `json:"rawSizeBytes"`
	RawSHA256    string `json:"rawSHA256"`
	// StoredSizeBytes and StoredSHA256 cover the data object as stored.
	StoredSizeBytes int64  `json:"storedSizeBytes"`
	StoredSHA256    string `json:"storedSHA256"`
	// Compression is "zstd" or "none".
	Compression string `json:"compression"`
	// Recipients are the age recipients the data object is encrypted to (empty: not encrypted).
	Recipients []string `json:"recipients,omitempty"`
	// PartSizeBytes is the multipart part size used for the upload.
	PartSizeBytes int64     `json:"partSizeBytes"`
	StartedAt     time.Time `json:"startedAt"`
	CompletedAt   time.Time `json:"completedAt"`
	HactlVersion  string    `json:"hactlVersion"`
	// Slot is the scheduled slot (TimeFormat) of a scheduled run, "" otherwise.
	Slot string `json:"slot,omitempty"`
	// TakenBy names the scheduler that took it: TakenByOperator for hactl-operator's snapshots,
	// "" for hactl's own (`backup now`, run by hand or by the members' timers).
	TakenBy string `json:"takenBy,omitempty"`
	// ClusterMembers is the number of voting members of the cluster when the snapshot was taken
	// (restore onto a different member count needs --force); 0 when unknown.
	ClusterMembers int `json:"clusterMembers,omitempty"`
}

// TakenByOperator is Metadata.TakenBy of hactl-operator's scheduled snapshots.
const TakenByOperator = "hactl-operator"

// Encrypted reports whether the data object is age-encrypted.
func (m *Metadata) Encrypted() bool { return len(m.Recipients) > 0 }

// VerifiedMarker records a successful verify of a snapshot (<stem>.verified.json). Prune never
// deletes the newest snapshot that has one.
type VerifiedMarker struct {
	Key        string    `json:"key"`
	VerifiedAt time.Time `json:"verifiedAt"`
	// Revision, TotalKeys, Hash and StorageVersion are what etcdutl's snapshot status reported.
	Revision       int64  `json:"revision"`
	TotalKeys      int    `json:"totalKeys"`
	Hash           uint32 `json:"hash"`
	StorageVersion string `json:"storageVersion,omitempty"`
	HactlVersion   string `json:"hactlVersion"`
}

// putJSON stores v as indented JSON under key.
func putJSON(ctx context.Context, s Store, key string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	_, err = s.Put(ctx, key, bytes.NewReader(b), PutOptions{Size: int64(len(b)), ContentType: "application/json"})
	return err
}

// getJSON reads key (at most maxMetadataBytes) into v.
func getJSON(ctx context.Context, s Store, key string, v any) error {
	rc, _, err := s.Get(ctx, key)
	if err != nil {
		return err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxMetadataBytes+1))
	if err != nil {
		return fmt.Errorf("read %s: %w", key, err)
	}
	if len(b) > maxMetadataBytes {
		return fmt.Errorf("%s is larger than %d bytes: not a hactl metadata object", key, maxMetadataBytes)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	return nil
}
