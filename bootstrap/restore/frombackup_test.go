package restore

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"testing"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/internal/exitcode"
	"github.com/hactl/hactl/ui"
)

// TestFromBackupRefusesBeforeAnyHost: a local snapshot that does not exist is a usage error naming
// the flag, with no result: nothing was restored and no host was contacted (no Into call).
func TestFromBackupRefusesBeforeAnyHost(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.db")
	src, err := backup.ParseSource("--from", missing)
	if err != nil {
		t.Fatal(err)
	}
	c := &v1alpha1.Cluster{}
	c.Metadata.Name = "c1"
	res, err := FromBackup(context.Background(), FromBackupOptions{Cluster: c, Source: src, From: missing, Flag: "--from",
		Printer: ui.New(io.Discard, false, false),
		Into:    func(context.Context, Options) (int64, error) { t.Fatal("Into called"); return 0, nil }})
	var ue *exitcode.UsageError
	if res != nil || !errors.As(err, &ue) {
		t.Fatalf("got %v, %v; want no result and a *exitcode.UsageError", res, err)
	}
}

// TestResolvedOptions: a local snapshot is shipped from here; a remote one is fetched by the hosts.
func TestResolvedOptions(t *testing.T) {
	o := ResolvedOptions(&backup.Resolved{Path: "/tmp/s.db", SHA256: "ab", Revision: 7})
	if o.Snapshot != "/tmp/s.db" || o.SHA256 != "ab" || o.Revision != 7 || o.Fetch != nil {
		t.Fatalf("local: %+v", o)
	}
	o = ResolvedOptions(&backup.Resolved{SHA256: "ab", Remote: &backup.Remote{Key: "k"}})
	if o.Fetch == nil || o.Fetch.Name != "k" {
		t.Fatalf("remote: %+v", o)
	}
}
