package etcdphases

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hactl/hactl/bootstrap/runctx"
	"github.com/hactl/hactl/pki"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/report"
	"github.com/hactl/hactl/state"
	"github.com/hactl/hactl/ui"
)

// fakeHost stands in for a host's SSH connection in the recovery tests: its /etc/etcd/pki is a
// local directory, and commands run with the local /bin/sh with that path rewritten.
type fakeHost struct {
	name, pkiDir string
	mu           sync.Mutex
	cmds         []string
}

func (h *fakeHost) Run(ctx context.Context, step, command string, _ ...provision.RunOption) (provision.Result, error) {
	h.mu.Lock()
	h.cmds = append(h.cmds, command)
	h.mu.Unlock()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", strings.ReplaceAll(command, remotePKIDir, h.pkiDir))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return provision.Result{Stdout: out}, &provision.CommandError{Host: h.name, Step: step, Command: command, Stderr: stderr.String(), Err: err}
	}
	return provision.Result{Stdout: out}, nil
}

func (h *fakeHost) Upload(context.Context, string, []provision.File) error {
	return errors.New("fakeHost: no uploads in these tests")
}

func (h *fakeHost) Commands() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.cmds)
}

func (h *fakeHost) Close() error { return nil }

// recoveryFixture is a cluster bootstrapped earlier (orig: its state dir, the files it installed on
// every host) and a new run (b) whose state dir is empty, with the facts preflight would gather from
// those hosts and fake connections to them.
type recoveryFixture struct {
	orig  *planFixture
	next  *planFixture
	hosts map[string]*fakeHost
	log   *bytes.Buffer // the debug log of the new run
}

// newRecoveryFixture: setup runs on orig before the hosts are "installed" (e.g. to record a joined
// member); tweak runs on each host's pki dir and facts afterwards.
func newRecoveryFixture(t *testing.T, n int, dryRun bool, setup func(orig *planFixture), tweak func(name, pkiDir string, f *Facts)) *recoveryFixture {
	t.Helper()
	orig := newPlanFixture(t, n, false)
	if setup != nil {
		setup(orig)
	}
	var names []string
	for _, m := range orig.b.members {
		names = append(names, m.Name)
	}
	orig.installed(names...)
	if err := state.Save(orig.stateDir, orig.b.st); err != nil {
		t.Fatal(err)
	}

	spec := *orig.b.run.Spec
	spec.Spec.StateDir = filepath.Join(t.TempDir(), "state")
	out, log := &bytes.Buffer{}, &bytes.Buffer{}
	p := ui.New(out, false, false)
	p.SetLog(log)
	b, err := New(runctx.New(&spec, p, dryRun, provision.SpecOptions{}), Options{})
	if err != nil {
		t.Fatal(err)
	}
	rf := &recoveryFixture{orig: orig, next: &planFixture{t: t, b: b, out: out, stateDir: spec.Spec.StateDir}, hosts: map[string]*fakeHost{}, log: log}
	origPKI := filepath.Join(orig.stateDir, "pki")
	for _, m := range orig.b.members {
		dir := filepath.Join(t.TempDir(), "etc-etcd-pki")
		os.MkdirAll(dir, 0o700)
		copyFile(t, pki.CertPath(origPKI, "ca"), filepath.Join(dir, "ca.crt"))
		copyFile(t, pki.KeyPath(origPKI, "ca"), filepath.Join(dir, "ca.key"))
		for _, base := range []string{"server", "peer"} {
			copyFile(t, pki.CertPath(pki.MemberDir(origPKI, m.Name), base), filepath.Join(dir, base+".crt"))
			copyFile(t, pki.KeyPath(pki.MemberDir(origPKI, m.Name), base), filepath.Join(dir, base+".key"))
		}
		f := *orig.b.ledger.facts[m.Name]
		f.Sums = maps.Clone(f.Sums)
		f.Files = map[string][]byte{}
		files, err := orig.b.desiredFiles(m, orig.b.st.Members[m.Name])
		if err != nil {
			t.Fatal(err)
		}
		for _, df := range files {
			if df.Path == remoteUnit {
				f.Files[remoteUnit] = df.Data
			}
		}
		for _, n := range []string{"ca.crt", "server.crt", "peer.crt"} {
			f.Files[filepath.Join(remotePKIDir, n)] = readTestFile(t, filepath.Join(dir, n))
		}
		if tweak != nil {
			tweak(m.Name, dir, &f)
		}
		b.ledger.facts[m.Name] = &f
		rf.hosts[m.Name] = &fakeHost{name: m.Name, pkiDir: dir}
		b.run.SetClient(m.Name, rf.hosts[m.Name])
	}
	return rf
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	if err := os.WriteFile(to, readTestFile(t, from), 0o600); err != nil {
		t.Fatal(err)
	}
}

func readTestFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestStateRecovery: the state dir is gone but the hosts carry the cluster: the CA is read back from
// a member (never a second one), cluster.json is rebuilt from the markers and units, the members'
// certificates are read back, and the plan on the live cluster changes nothing on any host.
func TestStateRecovery(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(orig *planFixture)
		tweak func(name, pkiDir string, f *Facts)
		want  map[string]wantPlan
		check func(t *testing.T, rf *recoveryFixture)
	}{{
		name: "three founding members: everything recovered, nothing changes",
		want: map[string]wantPlan{"cp-a": unchanged, "cp-b": unchanged, "cp-c": unchanged},
	}, {
		name: "a member that joined later keeps its joining flags",
		setup: func(orig *planFixture) {
			orig.record("cp-c", "", orig.initialCluster("cp-a", "cp-b", "cp-c"), "existing")
		},
		want: map[string]wantPlan{"cp-a": unchanged, "cp-b": unchanged, "cp-c": unchanged},
		check: func(t *testing.T, rf *recoveryFixture) {
			if r := rf.next.b.st.Members["cp-c"]; r.InitialClusterState != "existing" {
				t.Errorf("cp-c record %+v", r)
			}
		},
	}, {
		name: "the first member lost its CA key: the key is read from the next one",
		tweak: func(name, dir string, f *Facts) {
			if name == "cp-a" {
				os.Remove(filepath.Join(dir, "ca.key"))
				delete(f.Sums, filepath.Join(remotePKIDir, "ca.key"))
			}
		},
		want: map[string]wantPlan{
			"cp-a": {Action: report.ActionUnchanged, upload: []string{filepath.Join(remotePKIDir, "ca.key")}},
			"cp-b": unchanged, "cp-c": unchanged,
		},
		check: func(t *testing.T, rf *recoveryFixture) {
			if !strings.Contains(rf.next.out.String(), "recovered state dir from cp-b") {
				t.Errorf("output does not name cp-b as the source:\n%s", rf.next.out)
			}
		},
	}, {
		name: "a member's server key is gone: its certificate is re-issued and rolled out",
		tweak: func(name, dir string, f *Facts) {
			if name == "cp-b" {
				os.Remove(filepath.Join(dir, "server.key"))
				delete(f.Sums, filepath.Join(remotePKIDir, "server.key"))
			}
		},
		want: map[string]wantPlan{
			"cp-a": unchanged,
			"cp-b": {Action: report.ActionUpdate, Restart: true, upload: []string{filepath.Join(remotePKIDir, "server.crt"), filepath.Join(remotePKIDir, "server.key")}},
			"cp-c": unchanged,
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			rf := newRecoveryFixture(t, 3, false, tc.setup, tc.tweak)
			b := rf.next.b
			if err := (&PKI{b}).Run(context.Background()); err != nil {
				t.Fatalf("pki: %v", err)
			}
			origCA := readTestFile(t, pki.CertPath(filepath.Join(rf.orig.stateDir, "pki"), "ca"))
			newCA := readTestFile(t, pki.CertPath(filepath.Join(rf.next.stateDir, "pki"), "ca"))
			if !bytes.Equal(origCA, newCA) {
				t.Fatal("the state dir holds another CA than the members'")
			}
			cert, _ := pki.ParseCertPEM(newCA)
			fp := pki.Fingerprint(cert)
			if out := rf.next.out.String(); !strings.Contains(out, "recovered state dir from cp-") || !strings.Contains(out, "(CA fingerprint "+fp+")") {
				t.Errorf("output lacks the recovery line with %s:\n%s", fp, out)
			}
			st, err := state.Load(rf.next.stateDir)
			if err != nil || st == nil {
				t.Fatalf("cluster.json: %v %v", st, err)
			}
			if st.Token != rf.orig.b.st.Token {
				t.Errorf("token %s, want the markers' %s", st.Token, rf.orig.b.st.Token)
			}
			for name, want := range rf.orig.b.st.Members {
				got := st.Members[name]
				if got == nil || got.InitialCluster != want.InitialCluster || got.InitialClusterState != want.InitialClusterState ||
					got.PeerURL != want.PeerURL || got.ClientURL != want.ClientURL {
					t.Errorf("%s: recovered record %+v, want %+v", name, got, want)
				}
			}
			for _, f := range []string{"ca.key", "hactl-etcd-client.key", "cp-a/server.key"} {
				if fi, err := os.Stat(filepath.Join(rf.next.stateDir, "pki", f)); err != nil || fi.Mode().Perm() != 0o600 {
					t.Errorf("%s: %v, want mode 0600", f, err)
				}
			}
			if !b.creds.Ready() {
				t.Error("no client certificate for hactl status")
			}
			// No key material in the output or the debug log.
			keyPEM := readTestFile(t, pki.KeyPath(filepath.Join(rf.orig.stateDir, "pki"), "ca"))
			for _, w := range []string{rf.next.out.String(), rf.log.String()} {
				if strings.Contains(w, "PRIVATE KEY") || strings.Contains(w, string(keyPEM[40:80])) {
					t.Errorf("key material printed:\n%s", w)
				}
			}
			// detect would find the running cluster; the plan must change nothing but what was lost.
			rf.next.live(rf.next.started("cp-a"), rf.next.started("cp-b"), rf.next.started("cp-c"))
			if err := (&Plan{b}).Run(context.Background()); err != nil {
				t.Fatalf("plan: %v", err)
			}
			for name, w := range tc.want {
				rf.next.check(name, w)
			}
			if tc.check != nil {
				tc.check(t, rf)
			}
		})
	}
}

// TestStateRecoveryDryRun: plan (a dry run) reports the recovery but reads no key and writes nothing,
// and its plan already shows that nothing on the hosts changes.
func TestStateRecoveryDryRun(t *testing.T) {
	rf := newRecoveryFixture(t, 3, true, nil, nil)
	b := rf.next.b
	if err := (&PKI{b}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rf.next.out.String(), "bootstrap will recover it from cp-a (CA fingerprint SHA256:") {
		t.Errorf("output:\n%s", rf.next.out)
	}
	for name, h := range rf.hosts {
		if h.Commands() != 0 {
			t.Errorf("%s: a dry run ran %v", name, h.cmds)
		}
	}
	if _, err := os.Stat(rf.next.stateDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a dry run wrote the state dir: %v", err)
	}
	if err := (&Plan{b}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"cp-a", "cp-b", "cp-c"} {
		rf.next.check(n, wantPlan{Action: report.ActionUnchanged})
	}
}

// TestStateRecoveryRefusals: when there is no one CA or token to recover, bootstrap refuses and
// writes no CA (never a second one).
func TestStateRecoveryRefusals(t *testing.T) {
	otherCA := func(t *testing.T) []byte {
		dir := t.TempDir()
		if _, _, err := pki.LoadOrCreateCA(dir); err != nil {
			t.Fatal(err)
		}
		return readTestFile(t, pki.CertPath(dir, "ca"))
	}
	for _, tc := range []struct {
		name  string
		tweak func(t *testing.T) func(name, dir string, f *Facts)
		local func(t *testing.T, pkiDir string) // prepares the new state dir
		want  []string
		check func(t *testing.T, err error)
	}{{
		name: "members hold different CAs",
		tweak: func(t *testing.T) func(string, string, *Facts) {
			other := otherCA(t)
			return func(name, dir string, f *Facts) {
				if name == "cp-c" {
					f.Files[filepath.Join(remotePKIDir, "ca.crt")] = other
				}
			}
		},
		want: []string{"the members hold different etcd CAs", "on cp-a, cp-b", "on cp-c", "will not create a second CA"},
		check: func(t *testing.T, err error) {
			var mm *CAMismatchError
			if !errors.As(err, &mm) || len(mm.ByFingerprint) != 2 {
				t.Errorf("err %v is not a *CAMismatchError with two CAs", err)
			}
		},
	}, {
		name: "markers name different tokens",
		tweak: func(t *testing.T) func(string, string, *Facts) {
			return func(name, dir string, f *Facts) {
				if name == "cp-b" {
					m := *f.Marker
					m.Token = planTestCluster + "-ffffffffffffffff"
					f.Marker = &m
				}
			}
		},
		want: []string{"different cluster tokens", planTestCluster + "-ffffffffffffffff on cp-b"},
		check: func(t *testing.T, err error) {
			var tm *TokenMismatchError
			if !errors.As(err, &tm) {
				t.Errorf("err %v is not a *TokenMismatchError", err)
			}
		},
	}, {
		name: "no member holds a CA certificate",
		tweak: func(t *testing.T) func(string, string, *Facts) {
			return func(name, dir string, f *Facts) { delete(f.Files, filepath.Join(remotePKIDir, "ca.crt")) }
		},
		want: []string{"no member holds /etc/etcd/pki/ca.crt"},
	}, {
		name: "no member holds the CA key",
		tweak: func(t *testing.T) func(string, string, *Facts) {
			return func(name, dir string, f *Facts) { os.Remove(filepath.Join(dir, "ca.key")) }
		},
		want: []string{"cp-a has no /etc/etcd/pki/ca.key", "cp-c has no"},
	}, {
		name: "the state dir holds another CA",
		local: func(t *testing.T, pkiDir string) {
			if _, _, err := pki.LoadOrCreateCA(pkiDir); err != nil {
				t.Fatal(err)
			}
		},
		want: []string{"the state dir's", "but the members hold CA"},
		check: func(t *testing.T, err error) {
			if !errors.Is(err, pki.ErrCAMismatch) {
				t.Errorf("err %v does not wrap pki.ErrCAMismatch", err)
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var tweak func(string, string, *Facts)
			if tc.tweak != nil {
				tweak = tc.tweak(t)
			}
			rf := newRecoveryFixture(t, 3, false, nil, tweak)
			pkiDir := filepath.Join(rf.next.stateDir, "pki")
			var before []byte
			if tc.local != nil {
				tc.local(t, pkiDir)
				before = readTestFile(t, pki.CertPath(pkiDir, "ca"))
			}
			err := (&PKI{rf.next.b}).Run(context.Background())
			var missing *StateMissingError
			if !errors.As(err, &missing) {
				t.Fatalf("err = %v, want *StateMissingError", err)
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error lacks %q:\n%v", s, err)
				}
			}
			if tc.check != nil {
				tc.check(t, err)
			}
			after, _ := os.ReadFile(pki.CertPath(pkiDir, "ca"))
			if !bytes.Equal(before, after) {
				t.Error("the state dir's CA was created or replaced")
			}
			if _, err := os.Stat(filepath.Join(rf.next.stateDir, state.FileName)); err == nil {
				t.Error("cluster.json written despite the refusal")
			}
		})
	}
}

// TestStateRecoveryReadsKeysOnce: the recovery reads the CA key from one member and each member's own
// keys from that member, one command per member.
func TestStateRecoveryReadsKeysOnce(t *testing.T) {
	rf := newRecoveryFixture(t, 3, false, nil, nil)
	if err := (&PKI{rf.next.b}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for name, h := range rf.hosts {
		want := 1
		if name == "cp-a" {
			want = 2 // the CA key, then its own certificates
		}
		if len(h.cmds) != want {
			t.Errorf("%s: %d commands %q, want %d", name, len(h.cmds), h.cmds, want)
		}
		for _, c := range h.cmds {
			if strings.Contains(c, "ca.key") != (name == "cp-a" && c == h.cmds[0]) {
				t.Errorf("%s: command %q", name, c)
			}
		}
	}
}
