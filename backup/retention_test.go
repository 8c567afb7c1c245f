package backup_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/backup/memstore"
	"github.com/hactl/hactl/backup/s3test"
	"github.com/hactl/hactl/specload"
)

const (
	retPrefix  = "ret"
	retCluster = "lab"
)

// seedChain stores three snapshots (revisions 10, 50 and 90, an hour apart from 01:00 UTC) and
// four deltas chaining them forward: (10,30] (30,50] (50,70] (70,95].
func seedChain(t *testing.T, store backup.Store) {
	t.Helper()
	ctx := context.Background()
	for i, rev := range []int64{10, 50, 90} {
		if _, err := memstore.PutSnapshot(ctx, store, retPrefix, retCluster, time.Date(2026, 12, 1, 1+i, 0, 0, 0, time.UTC), rev); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range [][2]int64{{10, 30}, {30, 50}, {50, 70}, {70, 95}} {
		if _, err := backup.PutDelta(ctx, store, d[0], d[1], nil, 0, backup.PutDeltaOptions{Prefix: retPrefix, Cluster: retCluster}); err != nil {
			t.Fatal(err)
		}
	}
}

// revisions lists the store's snapshots' revisions and deltas' (from, to] as "10 50 90 | 10-30 ...".
func revisions(t *testing.T, store backup.Store) string {
	t.Helper()
	ctx := context.Background()
	l, err := backup.List(ctx, store, retPrefix, retCluster)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := backup.ListDeltas(ctx, store, retPrefix, retCluster)
	if err != nil {
		t.Fatal(err)
	}
	return snapshotRevs(l.Snapshots) + " | " + deltaRevs(ds)
}

func snapshotRevs(ss []backup.Snapshot) string {
	var out []string
	for _, s := range ss {
		out = append(out, fmt.Sprint(s.Metadata.Revision))
	}
	return strings.Join(out, " ")
}

func deltaRevs(ds []backup.Delta) string {
	var out []string
	for _, d := range ds {
		out = append(out, fmt.Sprintf("%d-%d", d.Metadata.FromRevision, d.Metadata.ToRevision))
	}
	return strings.Join(out, " ")
}

// TestPrune: the one retention pass removes the snapshots outside the policy AND the deltas that
// end at or before every kept snapshot (metadata and events objects both), keeps the deltas that
// carry a kept snapshot forward, and reports both (Deletions, Deltas, Kept); a second pass has
// nothing to do; a policy that keeps nothing removes nothing. Against an in-memory store and, when
// bin/minio is there, a real MinIO.
func TestPrune(t *testing.T) {
	stores := map[string]func(t *testing.T) backup.Store{
		"memstore": func(*testing.T) backup.Store { return memstore.New() },
		"minio": func(t *testing.T) backup.Store {
			srv := s3test.Start(t) // skips without bin/minio
			st, err := backup.NewS3(backup.S3Config{Endpoint: srv.Endpoint, Bucket: s3test.Bucket, Region: s3test.Region, Lookup: v1alpha1.BucketLookupPath,
				PlainHTTP: true, Credentials: specload.BackupCredentials{AccessKeyID: s3test.AccessKey, SecretAccessKey: s3test.SecretKey}})
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
	}
	for _, name := range []string{"memstore", "minio"} {
		t.Run(name, func(t *testing.T) {
			store := stores[name](t)
			ctx := context.Background()
			seedChain(t, store)
			now := time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC)

			_, err := backup.Prune(ctx, store, backup.RetentionOptions{Prefix: retPrefix, Cluster: retCluster, Now: now, Grace: time.Hour}, nil)
			if !errors.Is(err, backup.ErrKeepsNothing) {
				t.Errorf("an empty policy: %v, want ErrKeepsNothing", err)
			}
			if got, want := revisions(t, store), "10 50 90 | 10-30 30-50 50-70 70-95"; got != want {
				t.Fatalf("seeded %q, want %q", got, want)
			}

			var lines []string
			o := backup.RetentionOptions{Prefix: retPrefix, Cluster: retCluster, Policy: backup.Policy{KeepLast: 2}, Now: now, Grace: time.Hour}
			plan, err := backup.Prune(ctx, store, o, func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) })
			if err != nil {
				t.Fatal(err)
			}
			if got, want := revisions(t, store), "50 90 | 50-70 70-95"; got != want {
				t.Errorf("after keep-last 2 the store holds %q, want %q (the deltas ending at or before revision 50, the oldest kept, go)", got, want)
			}
			var deleted []backup.Snapshot
			for _, d := range plan.Deletions() {
				deleted = append(deleted, *d.Snapshot)
			}
			if got := snapshotRevs(deleted) + " | " + deltaRevs(plan.Deltas) + " | " + snapshotRevs(plan.Kept().Snapshots); got != "10 | 10-30 30-50 | 50 90" {
				t.Errorf("the plan reports deleted | deltas deleted | kept = %q", got)
			}
			if n := len(lines); n != 3 || !strings.Contains(lines[1], "deleted delta") || !strings.Contains(lines[2], "revisions 31-50") {
				t.Errorf("progress %q", lines)
			}
			// Nothing but the kept objects' keys remain: the deleted deltas' events objects went too.
			for _, k := range keys(t, store, backup.DeltasPrefix(retPrefix, retCluster)) {
				if strings.Contains(k, "rev000000000000010-") || strings.Contains(k, "rev000000000000030-") {
					t.Errorf("%s left behind", k)
				}
			}

			plan, err = backup.Prune(ctx, store, o, nil)
			if err != nil || !plan.Empty() {
				t.Errorf("a second pass: %v, plan %+v", err, plan)
			}
		})
	}
}

// TestPlanRetentionListing: a listing the caller already has is planned from as given (not listed
// again), while the deltas are always listed; PlanRetention deletes nothing.
func TestPlanRetentionListing(t *testing.T) {
	store := memstore.New()
	seedChain(t, store)
	ctx := context.Background()
	l, err := backup.List(ctx, store, retPrefix, retCluster)
	if err != nil {
		t.Fatal(err)
	}
	given := *l
	given.Snapshots = slices.Clone(l.Snapshots[2:]) // the newest only: revision 90
	plan, err := backup.PlanRetention(ctx, store, backup.RetentionOptions{Prefix: retPrefix, Cluster: retCluster, Policy: backup.Policy{KeepLast: 1}, Listing: &given})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Deletions()) != 0 || deltaRevs(plan.Deltas) != "10-30 30-50 50-70" {
		t.Errorf("planned %d deletions and deltas %q, want none and the three ending by revision 90", len(plan.Deletions()), deltaRevs(plan.Deltas))
	}
	if got := revisions(t, store); got != "10 50 90 | 10-30 30-50 50-70 70-95" {
		t.Errorf("planning changed the store: %q", got)
	}
}

func keys(t *testing.T, store backup.Store, prefix string) []string {
	t.Helper()
	objs, err := store.List(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		out = append(out, o.Key)
	}
	return out
}

// TestPlanRetentionReadsOnlyStaleDeltas: a pass reads the metadata of the deltas it could delete
// only: a corrupt metadata object of a delta that carries a kept snapshot forward does not stop it,
// one of a delta it deletes does (named).
func TestPlanRetentionReadsOnlyStaleDeltas(t *testing.T) {
	ctx := context.Background()
	corrupt := func(store backup.Store, from, to int64) {
		t.Helper()
		_, meta, err := backup.DeltaKeys(retPrefix, retCluster, from, to, "", false)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Put(ctx, meta, strings.NewReader("{"), backup.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	o := backup.RetentionOptions{Prefix: retPrefix, Cluster: retCluster, Policy: backup.Policy{KeepLast: 1}} // keeps revision 90
	store := memstore.New()
	seedChain(t, store)
	corrupt(store, 70, 95) // carries 90 forward: not read
	plan, err := backup.PlanRetention(ctx, store, o)
	if err != nil {
		t.Fatalf("a live delta's corrupt metadata stopped the pass: %v", err)
	}
	if got := deltaRevs(plan.Deltas); got != "10-30 30-50 50-70" {
		t.Errorf("deltas %q, want the three ending by revision 90", got)
	}
	store = memstore.New()
	seedChain(t, store)
	corrupt(store, 30, 50) // would be deleted: read, refused
	if _, err := backup.PlanRetention(ctx, store, o); err == nil || !strings.Contains(err.Error(), "rev000000000000030-rev000000000000050") {
		t.Errorf("a stale delta's corrupt metadata: %v, want its key named", err)
	}
}
