package backup

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-multierror"
)

// Snapshot is one complete snapshot (its metadata object exists and parses).
type Snapshot struct {
	// Stem is the shared name stem; Time, Revision, Member and Slot are parsed from it.
	Stem     string    `json:"stem"`
	Time     time.Time `json:"time"`
	Revision int64     `json:"revision"`
	Member   string    `json:"member,omitempty"`
	Slot     string    `json:"slot,omitempty"`
	// Data is the data object as listed; Metadata what its metadata object says.
	Data     ObjectInfo `json:"data"`
	Metadata *Metadata  `json:"metadata"`
	// Verified is the verify marker, nil when the snapshot was never verified.
	Verified *VerifiedMarker `json:"verified,omitempty"`
	// verifiedKey is the marker's key when one was listed.
	verifiedKey string
}

// Listing is what is stored under a cluster's snapshots prefix.
type Listing struct {
	// Prefix is SnapshotsPrefix(prefix, cluster).
	Prefix string `json:"prefix"`
	// Snapshots are the complete snapshots, oldest first (by name: time, then revision).
	Snapshots []Snapshot `json:"snapshots"`
	// Orphans are data objects without metadata: a run that failed after the upload, or one
	// still writing its metadata. Never used; prune removes them after a grace period.
	Orphans []ObjectInfo `json:"orphans,omitempty"`
	// Incomplete are multipart uploads never completed (a run in progress, or one that died).
	Incomplete []IncompleteUpload `json:"incomplete,omitempty"`
	// Unknown are other objects under the prefix (left alone).
	Unknown []ObjectInfo `json:"unknown,omitempty"`
	// Problems are metadata objects that could not be read (their snapshots are not listed).
	Problems []string `json:"problems,omitempty"`
}

// Latest returns the newest complete snapshot, or nil.
func (l *Listing) Latest() *Snapshot {
	if len(l.Snapshots) == 0 {
		return nil
	}
	return &l.Snapshots[len(l.Snapshots)-1]
}

// Find returns the snapshot whose stem, data key or metadata key is ref (a key may be given
// relative to the prefix), or nil.
func (l *Listing) Find(ref string) *Snapshot {
	for i := range l.Snapshots {
		s := &l.Snapshots[i]
		if ref == s.Stem || ref == s.Data.Key || ref == s.Metadata.MetadataKey ||
			l.Prefix+ref == s.Data.Key || l.Prefix+ref == s.Metadata.MetadataKey {
			return s
		}
	}
	return nil
}

// NewestVerified returns the newest snapshot with a verify marker, or nil.
func (l *Listing) NewestVerified() *Snapshot {
	for i := len(l.Snapshots) - 1; i >= 0; i-- {
		if l.Snapshots[i].Verified != nil {
			return &l.Snapshots[i]
		}
	}
	return nil
}

// listConcurrency bounds how many metadata objects List reads at once.
const listConcurrency = 8

// List lists the snapshots of cluster under prefix: it lists the objects and incomplete uploads
// once and reads every metadata and marker object (listConcurrency at a time). A data object is a
// complete snapshot only when its metadata object exists, parses and names it. Unreadable metadata
// is reported in Problems; only a failure to list is an error.
func List(ctx context.Context, store Store, prefix, cluster string) (*Listing, error) {
	dir := SnapshotsPrefix(prefix, cluster)
	objs, err := store.List(ctx, dir)
	if err != nil {
		return nil, err
	}
	uploads, err := store.ListIncompleteUploads(ctx, dir)
	if err != nil {
		return nil, err
	}
	l := &Listing{Prefix: dir, Incomplete: uploads}
	type group struct {
		data, meta, verified *ObjectInfo
	}
	groups := map[string]*group{}
	for i := range objs {
		o := &objs[i]
		kind, stem := objectKind(strings.TrimPrefix(o.Key, dir))
		if _, ok := parseStem(stem); !ok || kind == "" {
			l.Unknown = append(l.Unknown, *o)
			continue
		}
		g := groups[stem]
		if g == nil {
			g = &group{}
			groups[stem] = g
		}
		switch kind {
		case "data":
			g.data = o
		case "meta":
			g.meta = o
		case "verified":
			g.verified = o
		}
	}
	stems := slices.Sorted(maps.Keys(groups))

	var mu sync.Mutex
	var problems *multierror.Error
	sem := make(chan struct{}, listConcurrency)
	var wg sync.WaitGroup
	snaps := make([]*Snapshot, len(stems))
	for i, stem := range stems {
		g := groups[stem]
		if g.data == nil {
			continue // metadata or marker without data: half-deleted; prune cleans it
		}
		if g.meta == nil {
			l.Orphans = append(l.Orphans, *g.data)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			si, _ := parseStem(stem)
			s := &Snapshot{Stem: stem, Time: si.Time, Revision: si.Revision, Member: si.Member, Slot: si.Slot, Data: *g.data}
			var m Metadata
			err := getJSON(ctx, store, g.meta.Key, &m)
			if err == nil && m.Key != g.data.Key {
				err = fmt.Errorf("%s names data object %s, not %s", g.meta.Key, m.Key, g.data.Key)
			}
			if err != nil {
				mu.Lock()
				problems = multierror.Append(problems, err)
				mu.Unlock()
				return
			}
			s.Metadata = &m
			if s.Revision == 0 {
				s.Revision, s.Member = m.Revision, m.MemberName
			}
			if g.verified != nil {
				s.verifiedKey = g.verified.Key
				var vm VerifiedMarker
				if err := getJSON(ctx, store, g.verified.Key, &vm); err == nil && vm.Key == m.Key {
					s.Verified = &vm
				}
			}
			snaps[i] = s
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, s := range snaps {
		if s != nil {
			l.Snapshots = append(l.Snapshots, *s)
		}
	}
	if problems != nil {
		for _, e := range problems.Errors {
			if errors.Is(e, context.Canceled) {
				return nil, e
			}
			l.Problems = append(l.Problems, e.Error())
		}
	}
	return l, nil
}

// verifiedKeyOf returns the marker key of a snapshot's metadata key.
func verifiedKeyOf(metaKey string) string {
	return path.Join(path.Dir(metaKey), strings.TrimSuffix(path.Base(metaKey), metaExt)+verifiedExt)
}
