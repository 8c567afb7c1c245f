// Package testcert writes throwaway certificates for tests that need a PEM file on disk (a CA
// bundle a rendered config references, a serving certificate a validator must refuse). It is for
// _test.go files only: the keys are fresh P-256 keys that live for the test, and the certificates
// are valid from an hour ago to an hour from now.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"testing"
	"time"
)

// WriteCA writes a self-signed CA certificate (PEM, mode 0644; CommonName "kubernetes", IsCA,
// KeyUsageCertSign) to path: a CA bundle. Failures end the test through t.Fatal.
func WriteCA(t testing.TB, path string) { t.Helper(); write(t, path, true, false) }

// WriteLeaf writes a self-signed certificate that is not a CA (a serving certificate) to path, as
// WriteCA does.
func WriteLeaf(t testing.TB, path string) { t.Helper(); write(t, path, false, false) }

// WriteCAWithKey writes a CA certificate as WriteCA does, followed in the same file by its EC
// private key: the shape a CA bundle must not have.
func WriteCAWithKey(t testing.TB, path string) { t.Helper(); write(t, path, true, true) }

func write(t testing.TB, path string, isCA, withKey bool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubernetes"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: isCA, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	data := pemBlock("CERTIFICATE", der)
	if withKey {
		kd, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, pemBlock("EC PRIVATE KEY", kd)...)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
