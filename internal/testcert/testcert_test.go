package testcert

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
)

// TestWrite: the file holds a parsable certificate, a CA exactly when asked, and a key block
// after it exactly when asked.
func TestWrite(t *testing.T) {
	for _, c := range []struct{ isCA, withKey bool }{{true, false}, {false, false}, {true, true}} {
		p := filepath.Join(t.TempDir(), "c.pem")
		Write(t, p, c.isCA, c.withKey)
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		block, rest := pem.Decode(data)
		if block == nil || block.Type != "CERTIFICATE" {
			t.Fatalf("%+v: first block %v, want a CERTIFICATE", c, block)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if cert.IsCA != c.isCA {
			t.Errorf("%+v: IsCA %v", c, cert.IsCA)
		}
		key, _ := pem.Decode(rest)
		if got := key != nil && key.Type == "EC PRIVATE KEY"; got != c.withKey {
			t.Errorf("%+v: key block present %v", c, got)
		}
	}
}
