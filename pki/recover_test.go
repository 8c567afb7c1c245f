package pki

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRestoreCA: a CA read back from a member is written with the right modes into an empty PKI
// dir, accepted again when it is the same, and never written over another CA.
func TestRestoreCA(t *testing.T) {
	src := t.TempDir()
	ca := mustCA(t, src)
	crt, key := readFile(t, CertPath(src, CABase)), readFile(t, KeyPath(src, CABase))
	od := t.TempDir()
	other := mustCA(t, od)
	otherKey := readFile(t, KeyPath(od, CABase))

	for _, tc := range []struct {
		name    string
		setup   func(t *testing.T, dir string)
		crt     []byte
		key     []byte
		wantErr string // "" = success
	}{
		{name: "empty dir", setup: func(*testing.T, string) {}, crt: crt, key: key},
		{name: "same CA already there", setup: func(t *testing.T, dir string) {
			os.MkdirAll(dir, 0o700)
			writeLeaf(t, dir, CABase, crt, key)
		}, crt: crt, key: key},
		{name: "only the same ca.crt in the state dir: the key is put back", setup: func(t *testing.T, dir string) {
			os.MkdirAll(dir, 0o700)
			os.WriteFile(CertPath(dir, CABase), crt, 0o644)
		}, crt: crt, key: key},
		{name: "another ca.crt alone in the state dir", setup: func(t *testing.T, dir string) {
			os.MkdirAll(dir, 0o700)
			os.WriteFile(CertPath(dir, CABase), other.CertPEM, 0o644)
		}, crt: crt, key: key, wantErr: "refusing to replace"},
		{name: "another CA in the state dir", setup: func(t *testing.T, dir string) {
			os.MkdirAll(dir, 0o700)
			writeLeaf(t, dir, CABase, other.CertPEM, otherKey)
		}, crt: crt, key: key, wantErr: "is not the members' CA"},
		{name: "key of another CA", setup: func(*testing.T, string) {}, crt: crt, key: otherKey, wantErr: "not the key of CA"},
		{name: "garbage key", setup: func(*testing.T, string) {}, crt: crt, key: []byte("nope"), wantErr: "CA key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "pki")
			tc.setup(t, dir)
			got, err := RestoreCA(dir, tc.crt, tc.key)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "PRIVATE KEY") {
					t.Errorf("error quotes key material: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if Fingerprint(got.Cert) != Fingerprint(ca.Cert) {
				t.Errorf("restored %s, want %s", Fingerprint(got.Cert), Fingerprint(ca.Cert))
			}
			if m := mode(t, KeyPath(dir, CABase)); m != KeyFileMode {
				t.Errorf("ca.key mode %v", m)
			}
			if m := mode(t, CertPath(dir, CABase)); m != CertFileMode {
				t.Errorf("ca.crt mode %v", m)
			}
			assertNoTempFiles(t, dir)
		})
	}
}

func TestRestoreCAMismatchIsErrCAMismatch(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	mustCA(t, a)
	mustCA(t, b)
	_, err := RestoreCA(a, readFile(t, CertPath(b, CABase)), readFile(t, KeyPath(b, CABase)))
	if !errors.Is(err, ErrCAMismatch) {
		t.Fatalf("err = %v, want ErrCAMismatch", err)
	}
}

// TestRestoreLeaf: a member's certificate and key are written when absent, kept when present, and
// refused when they do not pair up or were not issued by the CA.
func TestRestoreLeaf(t *testing.T) {
	dir := t.TempDir()
	ca := mustCA(t, dir)
	if _, err := ca.EnsureMember(dir, "cp-a", addrs("10.0.0.1")); err != nil {
		t.Fatal(err)
	}
	mdir := MemberDir(dir, "cp-a")
	crt, key := readFile(t, CertPath(mdir, ServerBase)), readFile(t, KeyPath(mdir, ServerBase))
	peerKey := readFile(t, KeyPath(mdir, PeerBase))
	otherDir := t.TempDir()
	other := mustCA(t, otherDir)
	if _, err := other.EnsureMember(otherDir, "cp-a", addrs("10.0.0.1")); err != nil {
		t.Fatal(err)
	}
	foreignCrt := readFile(t, CertPath(MemberDir(otherDir, "cp-a"), ServerBase))
	foreignKey := readFile(t, KeyPath(MemberDir(otherDir, "cp-a"), ServerBase))

	target := filepath.Join(t.TempDir(), "cp-a")
	if w, err := ca.RestoreLeaf(target, ServerBase, crt, key); err != nil || !w {
		t.Fatalf("RestoreLeaf = %v, %v; want written", w, err)
	}
	if m := mode(t, KeyPath(target, ServerBase)); m != KeyFileMode {
		t.Errorf("server.key mode %v", m)
	}
	if w, err := ca.RestoreLeaf(target, ServerBase, crt, key); err != nil || w {
		t.Fatalf("second RestoreLeaf = %v, %v; want kept", w, err)
	}
	if _, err := ca.RestoreLeaf(t.TempDir(), ServerBase, crt, peerKey); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("mismatched key: %v", err)
	}
	if _, err := ca.RestoreLeaf(t.TempDir(), ServerBase, foreignCrt, foreignKey); err == nil || !strings.Contains(err.Error(), "not signed by the CA") {
		t.Errorf("foreign certificate: %v", err)
	}
}

func TestUsableMemberCertAndSignedBy(t *testing.T) {
	dir := t.TempDir()
	ca := mustCA(t, dir)
	if _, err := ca.EnsureMember(dir, "cp-a", addrs("10.0.0.1")); err != nil {
		t.Fatal(err)
	}
	cert, err := ReadCert(CertPath(MemberDir(dir, "cp-a"), PeerBase))
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.UsableMemberCert(cert, "cp-a", addrs("10.0.0.1")); err != nil {
		t.Errorf("usable: %v", err)
	}
	if err := ca.UsableMemberCert(cert, "cp-a", addrs("10.0.0.9")); err == nil {
		t.Error("a certificate for another address was usable")
	}
	if err := SignedBy(cert, ca.Cert); err != nil {
		t.Errorf("SignedBy: %v", err)
	}
	if err := SignedBy(ca.Cert, ca.Cert); err != nil {
		t.Errorf("the CA is not signed by itself: %v", err)
	}
	other := mustCA(t, t.TempDir())
	if err := SignedBy(cert, other.Cert); err == nil {
		t.Error("signed by another CA with the same subject")
	}
	if fp := Fingerprint(ca.Cert); !strings.HasPrefix(fp, "SHA256:") || len(fp) != 7+64 {
		t.Errorf("fingerprint %q", fp)
	}
}
