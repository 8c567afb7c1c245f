// Package sumcache keeps the sha256 of large local files (the etcd binaries hactl uploads: tens of
// MiB each) between runs, so a re-run does not hash them again. An entry is trusted only while the
// file's identity — device, inode, size, mtime and ctime — is what it was when the file was hashed:
// any write changes ctime (POSIX stat(2): st_ctime is updated on every change of content or status
// and no call can set it), so a stale entry is never used; git's index trusts file stats the same way.
package sumcache

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/hactl/hactl/internal/atomicfile"
)

// Cache is a checksum cache backed by one JSON file. It is safe for concurrent use; two processes
// sharing the file at once only lose each other's new entries (each write is atomic).
type Cache struct {
	file string

	mu      sync.Mutex
	loaded  bool
	entries map[string]entry
}

type entry struct {
	ID     string `json:"id"`
	SHA256 string `json:"sha256"`
}

// New returns the cache kept in file ("" keeps nothing: every Sum hashes).
func New(file string) *Cache { return &Cache{file: file} }

// Default returns the cache in the user's cache directory (os.UserCacheDir()/hactl/sha256.json),
// or one that keeps nothing when there is none.
func Default() *Cache {
	dir, err := os.UserCacheDir()
	if err != nil {
		return New("")
	}
	return New(filepath.Join(dir, "hactl", "sha256.json"))
}

// Sum returns the sha256 (hex) of the file at path: the cached one when the file's identity is
// unchanged, else the file is read and hashed and the cache file rewritten (failures to write it
// are ignored: the cache is an optimisation). Errors: the file cannot be read.
func (c *Cache) Sum(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	f, err := os.Open(abs)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	id := identity(fi)
	c.mu.Lock()
	c.load()
	e, ok := c.entries[abs]
	c.mu.Unlock()
	if ok && id != "" && e.ID == id {
		return e.SHA256, nil
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	// The identity after reading: a file written while it was hashed is not cached.
	if fi2, err := f.Stat(); err == nil && id != "" && identity(fi2) == id {
		c.put(abs, entry{ID: id, SHA256: sum})
	}
	return sum, nil
}

// load reads the cache file once (c.mu held); a missing or unreadable one is an empty cache.
func (c *Cache) load() {
	if c.loaded {
		return
	}
	c.loaded = true
	c.entries = map[string]entry{}
	if c.file == "" {
		return
	}
	raw, err := os.ReadFile(c.file)
	if err != nil {
		return
	}
	_ = json.Unmarshal(raw, &c.entries)
	if c.entries == nil {
		c.entries = map[string]entry{}
	}
}

func (c *Cache) put(path string, e entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.load()
	c.entries[path] = e
	if c.file == "" {
		return
	}
	// Entries of files that are gone are dropped.
	for p := range c.entries {
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			delete(c.entries, p)
		}
	}
	raw, err := json.MarshalIndent(c.entries, "", "  ")
	if err != nil {
		return
	}
	if err := os.MkdirAll(filepath.Dir(c.file), 0o700); err != nil {
		return
	}
	_ = atomicfile.WriteFile(c.file, raw, 0o600)
}
