package testcert

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
)

// TestWrite: each writer leaves a file that holds a parsable certificate, a CA exactly when asked, and a key block
// after it exactly when asked.
func TestWrite(t *testing.T) {
	for _, c := range []struct {
		name          string
		write         func(testing.TB, string)
		isCA, withKey bool
	}{{"WriteCA", WriteCA, true, false}, {"WriteLeaf", WriteLeaf, false, false}, {"WriteCAWithKey", WriteCAWithKey, true, true}} {
		p := filepath.Join(t.TempDir(), "c.pem")
		c.write(t, p)
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		block, rest := pem.Decode(data)
		if block == nil || block.Type != "CERTIFICATE" {
			t.Fatalf("%s: first block %v, want a CERTIFICATE", c.name, block)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if cert.IsCA != c.isCA {
			t.Errorf("%s: IsCA %v", c.name, cert.IsCA)
		}
		key, _ := pem.Decode(rest)
		if got := key != nil && key.Type == "EC PRIVATE KEY"; got != c.withKey {
			t.Errorf("%s: key block present %v", c.name, got)
		}
	}
}
