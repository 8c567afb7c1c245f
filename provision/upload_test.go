package provision_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hactl/hactl/provision"
)

func randomBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// assertNoTemps fails if dir holds upload temporaries.
func assertNoTemps(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), ".hactl-tmp-") {
			t.Errorf("temporary file left behind: %s", filepath.Join(dir, e.Name()))
		}
	}
}

func assertFile(t *testing.T, p string, content []byte, mode os.FileMode, uid, gid int) {
	t.Helper()
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if sha(got) != sha(content) {
		t.Errorf("%s: content sha %s, want %s", p, sha(got), sha(content))
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != mode {
		t.Errorf("%s: mode %v, want %v", p, fi.Mode().Perm(), mode)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if int(st.Uid) != uid || int(st.Gid) != gid {
		t.Errorf("%s: owner %d:%d, want %d:%d", p, st.Uid, st.Gid, uid, gid)
	}
}

// nobody returns a non-root user and group to chown to (root if none).
func nobody(t *testing.T) (string, string, int, int) {
	u, err := user.Lookup("nobody")
	if err != nil {
		return "root", "root", 0, 0
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	g, err := user.LookupGroupId(u.Gid)
	if err != nil {
		return "root", "root", 0, 0
	}
	return u.Username, g.Name, uid, gid
}

func TestUpload(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown")
	}
	e := newEnv(t)
	c := e.dial()
	root := filepath.Join(e.dir, "remote")
	bin := randomBytes(t, 3<<20+17) // several SFTP packets, odd tail
	key := []byte("-----BEGIN PRIVATE KEY-----\nsecret\n")
	owner, group, uid, gid := nobody(t)
	files := []provision.File{
		{Path: root + "/usr/local/bin/etcd", Mode: 0o755, Reader: bytes.NewReader(bin), Size: int64(len(bin))},
		{Path: root + "/etc/etcd/pki/ca.key", Mode: 0o600, Content: key, SHA256: sha(key)},
		{Path: root + "/etc/etcd/pki/ca.crt", Content: []byte("cert"), Owner: owner, Group: group},
		{Path: root + "/etc/etcd/empty", Content: []byte{}},
	}
	before := c.Commands()
	if err := c.Upload(ctxTimeout(t, 10*time.Second), "etcd/install", files); err != nil {
		t.Fatal(err)
	}
	if n := c.Commands() - before; n != 1 {
		t.Errorf("upload ran %d remote commands, want 1", n)
	}
	assertFile(t, files[0].Path, bin, 0o755, 0, 0)
	assertFile(t, files[1].Path, key, 0o600, 0, 0)
	assertFile(t, files[2].Path, []byte("cert"), 0o644, uid, gid)
	assertFile(t, files[3].Path, nil, 0o644, 0, 0)
	for _, d := range []string{root + "/usr/local/bin", root + "/etc/etcd/pki", root + "/etc/etcd"} {
		assertNoTemps(t, d)
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("dir %s: %v %v, want mode 0755", d, fi.Mode(), err)
		}
	}
	if e.srv.Conns() != 1 {
		t.Errorf("%d connections, want 1", e.srv.Conns())
	}
}

func TestUploadReplacesAtomically(t *testing.T) {
	e := newEnv(t)
	c := e.dial()
	target := filepath.Join(e.dir, "etcd")
	oldContent := randomBytes(t, 2<<20)
	newContent := randomBytes(t, 4<<20)
	if err := os.WriteFile(target, oldContent, 0o755); err != nil {
		t.Fatal(err)
	}
	oldSum, newSum := sha(oldContent), sha(newContent)

	// A reader polls the target during the upload: it must only ever see the
	// old or the new file, complete.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads atomic.Int64
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			b, err := os.ReadFile(target)
			if err != nil {
				t.Errorf("target missing during upload: %v", err)
				return
			}
			if s := sha(b); s != oldSum && s != newSum {
				t.Errorf("target half-written: %d bytes", len(b))
				return
			}
			reads.Add(1)
		}
	})
	err := c.Upload(ctxTimeout(t, 10*time.Second), "etcd/install",
		[]provision.File{{Path: target, Mode: 0o755, Reader: bytes.NewReader(newContent), Size: int64(len(newContent)), SHA256: newSum}})
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	assertFile(t, target, newContent, 0o755, 0, 0)
	assertNoTemps(t, e.dir)
	if reads.Load() == 0 {
		t.Error("reader never ran")
	}
}

func TestUploadFailuresLeaveOldFile(t *testing.T) {
	type tc struct {
		name  string
		file  func(path string) provision.File
		check func(t *testing.T, err error)
	}
	newContent := []byte("new content\n")
	tests := []tc{
		{
			name: "wrong sha256",
			file: func(p string) provision.File {
				return provision.File{Path: p, Content: newContent, SHA256: strings.Repeat("ab", 32)}
			},
			check: func(t *testing.T, err error) {
				var mm *provision.ChecksumMismatchError
				if !errors.As(err, &mm) || mm.Want != strings.Repeat("ab", 32) || mm.Got != sha(newContent) {
					t.Errorf("err = %v, want a *ChecksumMismatchError", err)
				}
			},
		},
		{
			name: "short reader",
			file: func(p string) provision.File {
				return provision.File{Path: p, Reader: bytes.NewReader(newContent), Size: 100}
			},
			check: func(t *testing.T, err error) {
				if !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Errorf("err = %v, want io.ErrUnexpectedEOF", err)
				}
			},
		},
		{
			name: "unknown owner",
			file: func(p string) provision.File {
				return provision.File{Path: p, Content: newContent, Owner: "no-such-user-hactl"}
			},
			check: func(t *testing.T, err error) {
				var ce *provision.CommandError
				if !errors.As(err, &ce) || ce.ExitCode == 0 || !strings.Contains(ce.Stderr, "no-such-user-hactl") {
					t.Errorf("err = %v, want a *CommandError from chown", err)
				}
			},
		},
	}
	e := newEnv(t)
	c := e.dial()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			target := filepath.Join(dir, "ca.crt")
			old := []byte("old content\n")
			if err := os.WriteFile(target, old, 0o640); err != nil {
				t.Fatal(err)
			}
			// A second, valid file in the batch must not be applied either.
			other := filepath.Join(dir, "other")
			err := c.Upload(ctxTimeout(t, 10*time.Second), "etcd/pki",
				[]provision.File{{Path: other, Content: []byte("x")}, tt.file(target)})
			var ue *provision.UploadError
			if !errors.As(err, &ue) || ue.Host != "h1" || ue.Step != "etcd/pki" || !strings.Contains(ue.Path, target) {
				t.Fatalf("err = %v (%T), want an *UploadError naming host, step and path", err, err)
			}
			for _, want := range []string{"host h1", "step etcd/pki", target} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			tt.check(t, err)
			assertFile(t, target, old, 0o640, os.Geteuid(), os.Getegid())
			if _, err := os.Stat(other); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("other file of the failed batch was applied: %v", err)
			}
			assertNoTemps(t, dir)
		})
	}
}

// slowReader yields one small chunk per tick, forever.
type slowReader struct{}

func (slowReader) Read(p []byte) (int, error) {
	time.Sleep(5 * time.Millisecond)
	n := min(len(p), 1024)
	clear(p[:n])
	return n, nil
}

func TestUploadCancelCleansUp(t *testing.T) {
	e := newEnv(t)
	c := e.dial()
	target := filepath.Join(e.dir, "big")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	err := c.Upload(ctx, "etcd/install", []provision.File{{Path: target, Reader: slowReader{}, Size: 100 << 20}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("cancel took %v", d)
	}
	assertNoTemps(t, e.dir)
	if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("target exists after a cancelled upload: %v", err)
	}
	// The client is still usable.
	if err := c.Upload(ctxTimeout(t, 5*time.Second), "again", []provision.File{{Path: target, Content: []byte("ok")}}); err != nil {
		t.Fatal(err)
	}
}

func TestUploadInvalidFiles(t *testing.T) {
	c := newEnv(t).dial()
	for name, f := range map[string]provision.File{
		"relative":    {Path: "etc/x", Content: []byte("x")},
		"unclean":     {Path: "/etc/../x", Content: []byte("x")},
		"no content":  {Path: "/tmp/x"},
		"both":        {Path: "/tmp/x", Content: []byte("x"), Reader: strings.NewReader("x"), Size: 1},
		"bad sha":     {Path: "/tmp/x", Content: []byte("x"), SHA256: "xyz"},
		"dir mode":    {Path: "/tmp/x", Content: []byte("x"), Mode: os.ModeDir | 0o755},
		"newline":     {Path: "/tmp/x\ny", Content: []byte("x")},
		"negative sz": {Path: "/tmp/x", Reader: strings.NewReader(""), Size: -1},
	} {
		var ue *provision.UploadError
		if err := c.Upload(context.Background(), "s", []provision.File{f}); !errors.As(err, &ue) {
			t.Errorf("%s: err = %v, want *UploadError", name, err)
		}
	}
	if n := c.Commands() - 1; n != 0 { // the connect-time probe
		t.Errorf("invalid uploads ran %d commands", n)
	}
}
