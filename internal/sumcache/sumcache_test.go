package sumcache

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func hexSum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// TestSum: an untouched file's cached sum is used (a planted one comes back); a write makes it
// hashed again; another process (a new Cache) reads the file; "" caches nothing.
func TestSum(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "cache", "sha256.json")
	bin := filepath.Join(dir, "etcd")
	os.WriteFile(bin, []byte("v1"), 0o755)
	c := New(file)
	if s, err := c.Sum(bin); err != nil || s != hexSum("v1") {
		t.Fatalf("first sum %s %v", s, err)
	}
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("cache file: %v %v", st, err)
	}
	// Plant a sum: a new Cache (another run) trusts it while the file is untouched.
	raw, _ := os.ReadFile(file)
	var entries map[string]entry
	json.Unmarshal(raw, &entries)
	e := entries[bin]
	e.SHA256 = strings.Repeat("ab", 32)
	entries[bin] = e
	raw, _ = json.Marshal(entries)
	os.WriteFile(file, raw, 0o600)
	if s, _ := New(file).Sum(bin); s != strings.Repeat("ab", 32) {
		t.Fatalf("untouched file: %s, want the cached sum", s)
	}
	os.WriteFile(bin, []byte("v2"), 0o755) // same size: ctime (and mtime) change
	if s, _ := New(file).Sum(bin); s != hexSum("v2") {
		t.Fatalf("after a write: %s, want the new content's sum", s)
	}
	if s, _ := New("").Sum(bin); s != hexSum("v2") {
		t.Fatalf("no cache: %s", s)
	}
	if _, err := c.Sum(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing file has a sum")
	}
}
