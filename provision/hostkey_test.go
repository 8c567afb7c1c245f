package provision

import (
	"crypto/ed25519"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

func TestKnownHostKeys(t *testing.T) {
	newKey := func() ssh.PublicKey {
		pub, _, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		k, err := ssh.NewPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	a1, a2, b := newKey(), newKey(), newKey()
	file := filepath.Join(t.TempDir(), "known_hosts")
	lines := []string{
		knownhosts.Line([]string{"10.0.0.1"}, a1),
		knownhosts.Line([]string{"[10.0.0.2]:2222"}, b),
		knownhosts.Line([]string{"10.0.0.1"}, a2),
	}
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	same := func(got []ssh.PublicKey, want ...ssh.PublicKey) bool {
		if len(got) != len(want) {
			return false
		}
		for i := range got {
			if string(got[i].Marshal()) != string(want[i].Marshal()) {
				return false
			}
		}
		return true
	}
	for _, tc := range []struct {
		addr string
		port int
		want []ssh.PublicKey
	}{
		{"10.0.0.1", 22, []ssh.PublicKey{a1, a2}},
		{"10.0.0.2", 2222, []ssh.PublicKey{b}},
		{"10.0.0.2", 22, nil}, // recorded for another port only
		{"10.0.0.9", 22, nil},
	} {
		got, err := KnownHostKeys(file, tc.addr, tc.port)
		if err != nil || !same(got, tc.want...) {
			t.Errorf("%s:%d: %d keys, %v; want %d", tc.addr, tc.port, len(got), err, len(tc.want))
		}
	}
	if got, err := KnownHostKeys(filepath.Join(t.TempDir(), "absent"), "10.0.0.1", 22); err != nil || len(got) != 0 {
		t.Errorf("no file: %v, %v", got, err)
	}
	if err := os.WriteFile(file, []byte("10.0.0.1 ssh-ed25519 !!!\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := KnownHostKeys(file, "10.0.0.1", 22); err == nil {
		t.Error("a broken file: no error")
	}
}
