package pki

import (
	"bytes"
	"crypto/x509"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func mustCA(t *testing.T, dir string) *CA {
	t.Helper()
	ca, _, err := LoadOrCreateCA(dir)
	if err != nil {
		t.Fatalf("LoadOrCreateCA: %v", err)
	}
	return ca
}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLoadOrCreateCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	ca, created, err := LoadOrCreateCA(dir)
	if err != nil || !created {
		t.Fatalf("first LoadOrCreateCA: created=%v err=%v", created, err)
	}
	if ca.Cert.Subject.CommonName != CACommonName || !ca.Cert.IsCA {
		t.Errorf("CA subject %q IsCA %v", ca.Cert.Subject.CommonName, ca.Cert.IsCA)
	}
	if got := ca.Cert.NotAfter.Sub(ca.Cert.NotBefore); got < CAValidity || got > CAValidity+time.Hour {
		t.Errorf("CA validity %v, want about %v", got, CAValidity)
	}
	for path, want := range map[string]os.FileMode{
		dir:                   DirMode,
		KeyPath(dir, CABase):  KeyFileMode,
		CertPath(dir, CABase): CertFileMode,
	} {
		if got := mode(t, path); got != want {
			t.Errorf("mode of %s = %o, want %o", path, got, want)
		}
	}
	ca2, created, err := LoadOrCreateCA(dir)
	if err != nil || created {
		t.Fatalf("second LoadOrCreateCA: created=%v err=%v", created, err)
	}
	if !ca2.Cert.Equal(ca.Cert) {
		t.Error("second LoadOrCreateCA returned a different CA")
	}
	assertNoTempFiles(t, dir)
}

func TestLoadOrCreateCARefuses(t *testing.T) {
	tests := []struct {
		name     string
		mutate   func(t *testing.T, dir string)
		mismatch bool
	}{
		{"key missing", func(t *testing.T, dir string) { os.Remove(KeyPath(dir, CABase)) }, true},
		{"cert missing", func(t *testing.T, dir string) { os.Remove(CertPath(dir, CABase)) }, true},
		{"key of another CA", func(t *testing.T, dir string) {
			other := t.TempDir()
			mustCA(t, other)
			if err := os.WriteFile(KeyPath(dir, CABase), readFile(t, KeyPath(other, CABase)), 0o600); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"cert not a CA", func(t *testing.T, dir string) {
			ca := mustCA(t, dir)
			if _, err := ca.EnsureClient(dir, "x", "x"); err != nil {
				t.Fatal(err)
			}
			os.Rename(CertPath(dir, "x"), CertPath(dir, CABase))
			os.Rename(KeyPath(dir, "x"), KeyPath(dir, CABase))
		}, false},
		{"garbage key", func(t *testing.T, dir string) {
			os.WriteFile(KeyPath(dir, CABase), []byte("not a key"), 0o600)
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			mustCA(t, dir)
			tt.mutate(t, dir)
			before := snapshot(t, dir)
			_, created, err := LoadOrCreateCA(dir)
			if err == nil || created {
				t.Fatalf("LoadOrCreateCA: created=%v err=%v, want refusal", created, err)
			}
			if got := errors.Is(err, ErrCAMismatch); got != tt.mismatch {
				t.Errorf("errors.Is(err, ErrCAMismatch) = %v, want %v (err: %v)", got, tt.mismatch, err)
			}
			if after := snapshot(t, dir); !mapsEqual(before, after) {
				t.Errorf("state dir changed on refusal: before %v after %v", keys(before), keys(after))
			}
		})
	}
}

func TestMemberSANs(t *testing.T) {
	tests := []struct {
		name    string
		member  string
		addrs   []netip.Addr
		wantDNS []string
		wantIPs []string
		wantErr bool
	}{
		{"ipv4", "cp-a", addrs("172.28.0.11"), []string{"cp-a", "localhost"}, []string{"172.28.0.11", "127.0.0.1", "::1"}, false},
		{"ipv6", "cp-b", addrs("fd00:28::12"), []string{"cp-b", "localhost"}, []string{"fd00:28::12", "127.0.0.1", "::1"}, false},
		{"dual stack", "cp-c", addrs("10.0.0.3", "2001:db8::3"), []string{"cp-c", "localhost"}, []string{"10.0.0.3", "2001:db8::3", "127.0.0.1", "::1"}, false},
		{"v4-mapped unmapped, loopback deduped", "cp-d", addrs("::ffff:10.0.0.4", "127.0.0.1"), []string{"cp-d", "localhost"}, []string{"10.0.0.4", "127.0.0.1", "::1"}, false},
		{"no address", "cp-e", nil, nil, nil, true},
		{"zoned", "cp-f", addrs("fe80::1%eth0"), nil, nil, true},
		{"invalid", "cp-g", []netip.Addr{{}}, nil, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			ca := mustCA(t, dir)
			_, err := ca.EnsureMember(dir, tt.member, tt.addrs)
			if tt.wantErr {
				if err == nil {
					t.Fatal("EnsureMember succeeded, want error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, base := range []string{ServerBase, PeerBase} {
				cert, err := ReadCert(CertPath(MemberDir(dir, tt.member), base))
				if err != nil {
					t.Fatal(err)
				}
				var ips []string
				for _, ip := range cert.IPAddresses {
					ips = append(ips, ip.String())
				}
				if !slices.Equal(cert.DNSNames, tt.wantDNS) || !slices.Equal(ips, tt.wantIPs) {
					t.Errorf("%s SANs DNS %v IP %v, want %v %v", base, cert.DNSNames, ips, tt.wantDNS, tt.wantIPs)
				}
				if cert.Subject.CommonName != tt.member {
					t.Errorf("%s CN %q", base, cert.Subject.CommonName)
				}
				if err := CheckSANs(cert, tt.member, tt.addrs); err != nil {
					t.Errorf("CheckSANs: %v", err)
				}
				var se *SANError
				err = CheckSANs(cert, tt.member, addrs("192.0.2.99"))
				if !errors.As(err, &se) || !slices.Contains(se.Missing, "IP:192.0.2.99") || len(se.Unexpected) == 0 {
					t.Errorf("CheckSANs with another address: %v", err)
				}
				if err := CheckSANs(cert, "other", tt.addrs); !errors.As(err, &se) || !slices.Equal(se.Missing, []string{"DNS:other"}) {
					t.Errorf("CheckSANs with another name: %v", err)
				}
			}
		})
	}
}

func TestEnsureMemberReuseAndReissue(t *testing.T) {
	member := "cp-a"
	a := addrs("172.28.0.11")
	tests := []struct {
		name    string
		mutate  func(t *testing.T, dir string, ca *CA)
		addrs   []netip.Addr
		reissue bool
	}{
		{"unchanged is reused", func(*testing.T, string, *CA) {}, a, false},
		{"other address", func(*testing.T, string, *CA) {}, addrs("172.28.0.12"), true},
		{"extra address", func(*testing.T, string, *CA) {}, addrs("172.28.0.11", "fd00::11"), true},
		{"key missing", func(t *testing.T, dir string, _ *CA) {
			os.Remove(KeyPath(MemberDir(dir, member), ServerBase))
		}, a, true},
		{"key of another cert", func(t *testing.T, dir string, _ *CA) {
			m := MemberDir(dir, member)
			os.WriteFile(KeyPath(m, ServerBase), readFile(t, KeyPath(m, PeerBase)), 0o600)
		}, a, true},
		{"expires within 30 days", func(t *testing.T, dir string, ca *CA) {
			dns, ips, _ := MemberSANs(member, a)
			crt, key, err := ca.issue(leafProfile{cn: member, usages: serverClientUsages, dns: dns, ips: ips}, time.Now().Add(-LeafValidity+20*24*time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			writeLeaf(t, MemberDir(dir, member), ServerBase, crt, key)
		}, a, true},
		{"signed by another CA", func(t *testing.T, dir string, _ *CA) {
			other := mustCA(t, t.TempDir())
			dns, ips, _ := MemberSANs(member, a)
			crt, key, err := other.issue(leafProfile{cn: member, usages: serverClientUsages, dns: dns, ips: ips}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			writeLeaf(t, MemberDir(dir, member), ServerBase, crt, key)
		}, a, true},
		{"client-only usage", func(t *testing.T, dir string, ca *CA) {
			dns, ips, _ := MemberSANs(member, a)
			crt, key, err := ca.issue(leafProfile{cn: member, usages: clientUsages, dns: dns, ips: ips}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			writeLeaf(t, MemberDir(dir, member), ServerBase, crt, key)
		}, a, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			ca := mustCA(t, dir)
			if changed, err := ca.EnsureMember(dir, member, a); err != nil || !changed {
				t.Fatalf("first EnsureMember: changed=%v err=%v", changed, err)
			}
			tt.mutate(t, dir, ca)
			before := snapshot(t, dir)
			changed, err := ca.EnsureMember(dir, member, tt.addrs)
			if err != nil {
				t.Fatal(err)
			}
			if changed != tt.reissue {
				t.Errorf("changed = %v, want %v", changed, tt.reissue)
			}
			after := snapshot(t, dir)
			if !tt.reissue {
				if !mapsEqual(before, after) {
					t.Error("files changed although certificates were reused")
				}
				return
			}
			// Every file that was replaced is kept aside under a new name, never deleted.
			for name, content := range before {
				if bytes.Equal(after[name], content) {
					continue
				}
				found := false
				for an, ac := range after {
					if strings.HasPrefix(an, name+".") && strings.HasSuffix(an, ".old") && bytes.Equal(ac, content) {
						found = true
					}
				}
				if !found {
					t.Errorf("old %s was not kept aside; files now %v", name, keys(after))
				}
			}
			m := MemberDir(dir, member)
			for _, base := range []string{ServerBase, PeerBase} {
				if err := ca.usable(CertPath(m, base), KeyPath(m, base), memberProfile(t, member, tt.addrs), time.Now()); err != nil {
					t.Errorf("%s not usable after EnsureMember: %v", base, err)
				}
			}
			if changed, err := ca.EnsureMember(dir, member, tt.addrs); err != nil || changed {
				t.Errorf("EnsureMember after reissue: changed=%v err=%v, want reuse", changed, err)
			}
		})
	}
}

func memberProfile(t *testing.T, name string, a []netip.Addr) leafProfile {
	dns, ips, err := MemberSANs(name, a)
	if err != nil {
		t.Fatal(err)
	}
	return leafProfile{cn: name, usages: serverClientUsages, dns: dns, ips: ips}
}

func writeLeaf(t *testing.T, dir, base string, crt, key []byte) {
	t.Helper()
	if err := os.WriteFile(CertPath(dir, base), crt, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(KeyPath(dir, base), key, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestEnsureClient(t *testing.T) {
	dir := t.TempDir()
	ca := mustCA(t, dir)
	for _, c := range []struct{ name, cn string }{{HactlClient, HactlClientCN}, {APIServerClient, APIServerClientCN}} {
		if changed, err := ca.EnsureClient(dir, c.name, c.cn); err != nil || !changed {
			t.Fatalf("EnsureClient(%s): changed=%v err=%v", c.name, changed, err)
		}
		cert, err := ReadCert(CertPath(dir, c.name))
		if err != nil {
			t.Fatal(err)
		}
		if cert.Subject.CommonName != c.cn || len(cert.DNSNames)+len(cert.IPAddresses) != 0 || len(cert.Subject.Organization) != 0 {
			t.Errorf("%s: subject %v SANs %v %v", c.name, cert.Subject, cert.DNSNames, cert.IPAddresses)
		}
		if changed, err := ca.EnsureClient(dir, c.name, c.cn); err != nil || changed {
			t.Errorf("EnsureClient(%s) again: changed=%v err=%v", c.name, changed, err)
		}
	}
	if changed, err := ca.EnsureClient(dir, HactlClient, "someone-else"); err != nil || !changed {
		t.Errorf("EnsureClient with a new CN: changed=%v err=%v, want reissue", changed, err)
	}
	if _, err := ca.EnsureClient(dir, "../escape", "x"); err == nil {
		t.Error("EnsureClient accepted a path as name")
	}
	if _, err := ca.EnsureMember(dir, "a/b", addrs("10.0.0.1")); err == nil {
		t.Error("EnsureMember accepted a path as name")
	}
}

func TestChainVerifies(t *testing.T) {
	dir := t.TempDir()
	ca := mustCA(t, dir)
	if _, err := ca.EnsureMember(dir, "cp-a", addrs("172.28.0.11", "fd00::11")); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.EnsureClient(dir, HactlClient, HactlClientCN); err != nil {
		t.Fatal(err)
	}
	server := filepath.Join("cp-a", ServerBase)
	peer := filepath.Join("cp-a", PeerBase)
	tests := []struct {
		file    string
		usage   x509.ExtKeyUsage
		dnsName string
		ok      bool
	}{
		{server, x509.ExtKeyUsageServerAuth, "cp-a", true},
		{server, x509.ExtKeyUsageServerAuth, "172.28.0.11", true},
		{server, x509.ExtKeyUsageServerAuth, "fd00::11", true},
		{server, x509.ExtKeyUsageServerAuth, "::1", true},
		{server, x509.ExtKeyUsageServerAuth, "10.9.9.9", false},
		{server, x509.ExtKeyUsageClientAuth, "", true},
		{peer, x509.ExtKeyUsageServerAuth, "172.28.0.11", true},
		{peer, x509.ExtKeyUsageClientAuth, "", true},
		{HactlClient, x509.ExtKeyUsageClientAuth, "", true},
		{HactlClient, x509.ExtKeyUsageServerAuth, "", false},
	}
	for _, tt := range tests {
		cert, err := ReadCert(filepath.Join(dir, tt.file+".crt"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: tt.dnsName, KeyUsages: []x509.ExtKeyUsage{tt.usage}})
		if (err == nil) != tt.ok {
			t.Errorf("Verify(%s, usage %v, name %q) err = %v, want ok=%v", tt.file, tt.usage, tt.dnsName, err, tt.ok)
		}
		if got := cert.NotAfter.Sub(cert.NotBefore); got < LeafValidity || got > LeafValidity+time.Hour {
			t.Errorf("%s validity %v", tt.file, got)
		}
	}
}

func TestFileModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	ca := mustCA(t, dir)
	if _, err := ca.EnsureMember(dir, "cp-a", addrs("10.0.0.1")); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.EnsureClient(dir, APIServerClient, APIServerClientCN); err != nil {
		t.Fatal(err)
	}
	err := filepath.Walk(dir, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		var want os.FileMode
		switch {
		case fi.IsDir():
			want = DirMode
		case strings.HasSuffix(path, ".key"):
			want = KeyFileMode
		case strings.HasSuffix(path, ".crt"):
			want = CertFileMode
		default:
			t.Errorf("unexpected file %s", path)
			return nil
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s mode %o, want %o", path, fi.Mode().Perm(), want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestListCerts(t *testing.T) {
	dir := t.TempDir()
	ca := mustCA(t, dir)
	if _, err := ca.EnsureMember(dir, "cp-a", addrs("10.0.0.1")); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.EnsureMember(dir, "cp-a", addrs("10.0.0.2")); err != nil { // leaves *.old files
		t.Fatal(err)
	}
	if _, err := ca.EnsureClient(dir, HactlClient, HactlClientCN); err != nil {
		t.Fatal(err)
	}
	infos, err := ListCerts(dir)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, i := range infos {
		paths = append(paths, i.Path)
	}
	want := []string{"ca.crt", "cp-a/peer.crt", "cp-a/server.crt", "hactl-etcd-client.crt"}
	if !slices.Equal(paths, want) {
		t.Fatalf("paths %v, want %v", paths, want)
	}
	srv := infos[2]
	if srv.Subject != "CN=cp-a" || srv.Issuer != "CN=etcd-ca" || !slices.Equal(srv.IPAddresses, []string{"10.0.0.2", "127.0.0.1", "::1"}) ||
		!slices.Equal(srv.DNSNames, []string{"cp-a", "localhost"}) || !slices.Equal(srv.ExtKeyUsage, []string{"serverAuth", "clientAuth"}) {
		t.Errorf("server info %+v", srv)
	}
	if !infos[0].IsCA || infos[0].NotAfter.Before(time.Now().Add(9*365*24*time.Hour)) {
		t.Errorf("ca info %+v", infos[0])
	}
}

// snapshot returns every regular file under dir (relative path -> content).
func snapshot(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.Walk(dir, func(path string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		out[rel] = readFile(t, path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func mapsEqual(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func assertNoTempFiles(t *testing.T, dir string) {
	t.Helper()
	for name := range snapshot(t, dir) {
		if strings.Contains(filepath.Base(name), ".tmp-") {
			t.Errorf("temp file left behind: %s", name)
		}
	}
}
