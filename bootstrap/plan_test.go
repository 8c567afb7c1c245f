package bootstrap

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/report"
	"github.com/hactl/hactl/state"
	"github.com/hactl/hactl/ui"
)

// The plan tests drive Bootstrapper.plan without SSH or etcd: they set what preflight (facts), pki
// (state, credentials, the local PKI) and detect (the live member list) would have set, then check
// each member's action, restart flag and upload list, and the refusals.

const planTestCluster = "plantest"

var planTestHosts = []struct{ name, addr, zone string }{
	{"cp-a", "10.0.0.1", "az-a"},
	{"cp-b", "10.0.0.2", "az-b"},
	{"cp-c", "10.0.0.3", "az-c"},
	{"cp-d", "10.0.0.4", "az-a"},
	{"cp-e", "10.0.0.5", "az-b"},
}

// planTestSpec is a defaulted spec with the first n of planTestHosts, small local files as the etcd
// binaries and stateDir as the state dir.
func planTestSpec(t *testing.T, n int, stateDir string) *v1alpha1.Cluster {
	t.Helper()
	binDir := t.TempDir()
	bin := func(name string) string {
		p := filepath.Join(binDir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\necho "+name+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	c := &v1alpha1.Cluster{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind}
	c.Metadata.Name = planTestCluster
	c.Spec.StateDir = stateDir
	for _, h := range planTestHosts[:n] {
		c.Spec.Hosts = append(c.Spec.Hosts, v1alpha1.Host{Name: h.name, Address: h.addr, Zone: h.zone,
			Roles: []v1alpha1.Role{v1alpha1.RoleEtcd, v1alpha1.RoleControlPlane}})
	}
	c.Spec.Etcd.Version = "v3.6.16"
	c.Spec.Etcd.Binaries = v1alpha1.EtcdBinaries{Etcd: bin("etcd"), Etcdctl: bin("etcdctl"), Etcdutl: bin("etcdutl")}
	v1alpha1.SetDefaults(c, v1alpha1.Dirs{})
	return c
}

// planFixture is a Bootstrapper after preflight and pki: every host reports an absent data dir, no
// etcd and no files until a case says otherwise; no cluster is live.
type planFixture struct {
	t        *testing.T
	b        *Bootstrapper
	out      *bytes.Buffer
	stateDir string
}

func newPlanFixture(t *testing.T, n int, dryRun bool) *planFixture {
	t.Helper()
	stateDir := filepath.Join(t.TempDir(), "state")
	out := &bytes.Buffer{}
	b, err := New(Options{Cluster: planTestSpec(t, n, stateDir), DryRun: dryRun, Printer: ui.New(out, false, false)})
	if err != nil {
		t.Fatal(err)
	}
	// pki loads or creates cluster.json (b.st with a fresh token), sets b.creds and, unless this is a
	// dry run, creates the CA and every certificate so desiredFiles can read them.
	if err := b.pki(context.Background()); err != nil {
		t.Fatal(err)
	}
	if b.st == nil || b.creds == nil || !strings.HasPrefix(b.st.Token, planTestCluster+"-") {
		t.Fatalf("pki left state %+v, credentials %+v", b.st, b.creds)
	}
	for _, m := range b.members {
		b.facts[m.Name] = &Facts{Data: DataAbsent, Sums: map[string]string{}}
	}
	return &planFixture{t: t, b: b, out: out, stateDir: stateDir}
}

func (f *planFixture) member(name string) member {
	f.t.Helper()
	for _, m := range f.b.members {
		if m.Name == name {
			return m
		}
	}
	f.t.Fatalf("no member %s", name)
	return member{}
}

func (f *planFixture) peerURL(name string) string { return f.member(name).peerURL }

// ourMarker is the marker hactl installs on name.
func (f *planFixture) ourMarker(name string) *Marker {
	return &Marker{Cluster: planTestCluster, Token: f.b.st.Token, Member: name}
}

// installed makes name a host where an earlier run installed every file as the member's current
// state record renders it (the sums preflight would report), with etcd data and etcd active.
func (f *planFixture) installed(names ...string) {
	f.t.Helper()
	for _, name := range names {
		m := f.member(name)
		files, err := f.b.desiredFiles(m, f.b.memberRecord(m))
		if err != nil {
			f.t.Fatal(err)
		}
		sums := map[string]string{}
		for _, df := range files {
			if df.Sum == "" {
				f.t.Fatalf("%s: %s has no checksum", name, df.Path)
			}
			sums[df.Path] = df.Sum
		}
		f.b.facts[name] = &Facts{Data: DataMember, EtcdActive: "active", Marker: f.ourMarker(name), Sums: sums}
	}
}

// record sets name's state record (as an earlier run would have saved it).
func (f *planFixture) record(name, id, initialCluster, clusterState string) {
	f.b.st.Members[name] = &state.Member{ID: id, InitialCluster: initialCluster, InitialClusterState: clusterState}
}

// initialCluster is "name=peerURL,..." of names, in the order given.
func (f *planFixture) initialCluster(names ...string) string {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + "=" + f.peerURL(n)
	}
	return strings.Join(parts, ",")
}

// Live member IDs: distinct, large enough that their hex form is unmistakable in messages.
func planTestID(name string) uint64 {
	for i, h := range planTestHosts {
		if h.name == name {
			return 0x8e9e05c52164694d + uint64(i)
		}
	}
	panic("unknown host " + name)
}

func planTestHexID(name string) string { return fmt.Sprintf("%x", planTestID(name)) }

// started is a live member that has started (it published its name).
func (f *planFixture) started(name string) liveMember {
	return liveMember{id: planTestID(name), name: name, peerURLs: []string{f.peerURL(name)}}
}

// unstarted is a live member that was added (as a learner or as a founding member) but never started.
func (f *planFixture) unstarted(name string, learner bool) liveMember {
	return liveMember{id: planTestID(name), peerURLs: []string{f.peerURL(name)}, learner: learner}
}

func (f *planFixture) live(members ...liveMember) {
	f.b.live = &liveCluster{clusterID: 0xc1a55, members: members}
	f.b.st.ClusterID = "c1a55"
}

// unit returns the etcd unit planned for upload to name ("" when it is not uploaded).
func (f *planFixture) unit(name string) string {
	for _, df := range f.b.plans[name].upload {
		if df.Path == remoteUnit {
			return string(df.Data)
		}
	}
	return ""
}

// wantPlan is one member's expected plan.
type wantPlan struct {
	action  report.Action
	restart bool
	all     bool     // every managed file is uploaded
	upload  []string // else exactly these remote paths
}

func (f *planFixture) check(name string, w wantPlan) {
	f.t.Helper()
	p := f.b.plans[name]
	if p == nil {
		f.t.Errorf("%s: no plan", name)
		return
	}
	var got []string
	for _, df := range p.upload {
		got = append(got, df.Path)
	}
	slices.Sort(got)
	want := slices.Clone(w.upload)
	if w.all {
		want = f.b.remotePaths()
	}
	slices.Sort(want)
	if p.action != w.action || p.restart != w.restart || !slices.Equal(got, want) {
		f.t.Errorf("%s: action %q restart %v upload %v; want action %q restart %v upload %v",
			name, p.action, p.restart, got, w.action, w.restart, want)
	}
}

var (
	unchanged = wantPlan{action: report.ActionUnchanged}
	created   = wantPlan{action: report.ActionCreate, restart: true, all: true}
)

// TestPlan is the decision table of plan: one case per situation an earlier phase can report.
func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		name  string
		hosts int
		setup func(f *planFixture)
		want  map[string]wantPlan
		// errs are substrings the error must contain (none: plan must succeed).
		errs []string
		// check runs extra assertions after plan (err is plan's result).
		check func(t *testing.T, f *planFixture, err error)
	}{{
		name:  "fresh cluster: every member created with every file",
		hosts: 3,
		setup: func(f *planFixture) {
			f.b.facts["cp-b"].Data = DataEmpty // an empty (or lost+found only) dir is as good as none
		},
		want: map[string]wantPlan{"cp-a": created, "cp-b": created, "cp-c": created},
		check: func(t *testing.T, f *planFixture, _ error) {
			founding := f.initialCluster("cp-a", "cp-b", "cp-c")
			for _, n := range []string{"cp-a", "cp-b", "cp-c"} {
				u := f.unit(n)
				for _, flag := range []string{"--name=" + n, "--initial-cluster=" + founding + " ", "--initial-cluster-state=new", "--initial-cluster-token=" + f.b.st.Token} {
					if !strings.Contains(u, flag) {
						t.Errorf("%s: unit lacks %q:\n%s", n, flag, u)
					}
				}
				if rec := f.b.st.Members[n]; rec == nil || rec.InitialClusterState != "new" || rec.InitialCluster != founding || rec.ID != "" {
					t.Errorf("%s: state record %+v", n, rec)
				}
				for _, df := range f.b.plans[n].upload {
					if df.Note != "new" || df.Sum == "" {
						t.Errorf("%s: %s note %q sum %q, want note new and a checksum", n, df.Path, df.Note, df.Sum)
					}
				}
			}
			if !f.b.anyUploads() || !f.b.anyStarts() {
				t.Errorf("anyUploads %v anyStarts %v, want both", f.b.anyUploads(), f.b.anyStarts())
			}
			if !strings.Contains(f.out.String(), "create") {
				t.Errorf("printed plan lacks the action:\n%s", f.out)
			}
		},
	}, {
		name:  "healthy cluster, everything installed: nothing to do",
		hosts: 3,
		setup: func(f *planFixture) {
			f.installed("cp-a", "cp-b", "cp-c")
			f.live(f.started("cp-a"), f.started("cp-b"), f.started("cp-c"))
		},
		want: map[string]wantPlan{"cp-a": unchanged, "cp-b": unchanged, "cp-c": unchanged},
		check: func(t *testing.T, f *planFixture, _ error) {
			for _, n := range []string{"cp-a", "cp-b", "cp-c"} {
				if f.b.plans[n].id != planTestID(n) || f.b.st.Members[n].ID != planTestHexID(n) {
					t.Errorf("%s: plan id %x, record ID %s; want %x", n, f.b.plans[n].id, f.b.st.Members[n].ID, planTestID(n))
				}
			}
			if f.b.anyUploads() || f.b.anyStarts() {
				t.Errorf("anyUploads %v anyStarts %v, want neither", f.b.anyUploads(), f.b.anyStarts())
			}
			if strings.Contains(f.out.String(), "WARNING") {
				t.Errorf("unexpected warning:\n%s", f.out)
			}
		},
	}, {
		name:  "one member's unit changed on a live cluster: only that one is updated and restarted",
		hosts: 3,
		setup: func(f *planFixture) {
			f.installed("cp-a", "cp-b", "cp-c")
			f.b.facts["cp-b"].Sums[remoteUnit] = strings.Repeat("0", 64)
			f.live(f.started("cp-a"), f.started("cp-b"), f.started("cp-c"))
		},
		want: map[string]wantPlan{
			"cp-a": unchanged,
			"cp-b": {action: report.ActionUpdate, restart: true, upload: []string{remoteUnit}},
			"cp-c": unchanged,
		},
		check: func(t *testing.T, f *planFixture, _ error) {
			if n := f.b.plans["cp-b"].upload[0].Note; n != "changed" {
				t.Errorf("note %q, want changed", n)
			}
			if !f.b.anyUploads() || !f.b.anyStarts() {
				t.Errorf("anyUploads %v anyStarts %v, want both", f.b.anyUploads(), f.b.anyStarts())
			}
			if !strings.Contains(f.out.String(), "changed: etcd.service") {
				t.Errorf("printed plan does not name the changed unit:\n%s", f.out)
			}
		},
	}, {
		name:  "a missing certificate on a live member: update with the file marked new",
		hosts: 3,
		setup: func(f *planFixture) {
			f.installed("cp-a", "cp-b", "cp-c")
			delete(f.b.facts["cp-c"].Sums, filepath.Join(remotePKIDir, "peer.key"))
			f.live(f.started("cp-a"), f.started("cp-b"), f.started("cp-c"))
		},
		want: map[string]wantPlan{
			"cp-a": unchanged,
			"cp-b": unchanged,
			"cp-c": {action: report.ActionUpdate, restart: true, upload: []string{filepath.Join(remotePKIDir, "peer.key")}},
		},
		check: func(t *testing.T, f *planFixture, _ error) {
			df := f.b.plans["cp-c"].upload[0]
			if df.Note != "new" || df.Mode != 0o600 {
				t.Errorf("peer.key note %q mode %v, want new 0600", df.Note, df.Mode)
			}
		},
	}, {
		name:  "only the marker differs: uploaded without a restart",
		hosts: 3,
		setup: func(f *planFixture) {
			f.installed("cp-a", "cp-b", "cp-c")
			f.b.facts["cp-a"].Sums[remoteMarker] = strings.Repeat("1", 64)
			f.live(f.started("cp-a"), f.started("cp-b"), f.started("cp-c"))
		},
		want: map[string]wantPlan{
			"cp-a": {action: report.ActionUnchanged, upload: []string{remoteMarker}},
			"cp-b": unchanged,
			"cp-c": unchanged,
		},
		check: func(t *testing.T, f *planFixture, _ error) {
			if !f.b.anyUploads() || f.b.anyStarts() {
				t.Errorf("anyUploads %v anyStarts %v, want uploads only", f.b.anyUploads(), f.b.anyStarts())
			}
		},
	}, {
		name:  "live cluster, a member with data whose etcd is stopped: start it",
		hosts: 3,
		setup: func(f *planFixture) {
			f.installed("cp-a", "cp-b", "cp-c")
			f.b.facts["cp-c"].EtcdActive = "inactive"
			f.live(f.started("cp-a"), f.started("cp-b"), f.started("cp-c"))
		},
		want: map[string]wantPlan{
			"cp-a": unchanged,
			"cp-b": unchanged,
			"cp-c": {action: report.ActionStart, restart: true},
		},
		check: func(t *testing.T, f *planFixture, _ error) {
			if f.b.anyUploads() || !f.b.anyStarts() {
				t.Errorf("anyUploads %v anyStarts %v, want starts only", f.b.anyUploads(), f.b.anyStarts())
			}
		},
	}, {
		name:  "no quorum, every member has data: start the stopped ones, leave the running one",
		hosts: 3,
		setup: func(f *planFixture) {
			f.installed("cp-a", "cp-b", "cp-c")
			f.b.st.ClusterID = "c1a55"
			f.b.facts["cp-a"].EtcdActive = "failed"
			f.b.facts["cp-b"].EtcdActive = "inactive"
		},
		want: map[string]wantPlan{
			"cp-a": {action: report.ActionStart, restart: true},
			"cp-b": {action: report.ActionStart, restart: true},
			"cp-c": unchanged,
		},
	}, {
		name:  "no quorum, a member with data and a changed unit: update (restart)",
		hosts: 3,
		setup: func(f *planFixture) {
			f.installed("cp-a", "cp-b", "cp-c")
			f.b.st.ClusterID = "c1a55"
			f.b.facts["cp-a"].Sums[remoteUnit] = "old"
		},
		want: map[string]wantPlan{
			"cp-a": {action: report.ActionUpdate, restart: true, upload: []string{remoteUnit}},
			"cp-b": unchanged,
			"cp-c": unchanged,
		},
	}, {
		name:  "scale out 3 -> 5: both new hosts join, the second's initial cluster includes the first",
		hosts: 5,
		setup: func(f *planFixture) {
			f.installed("cp-a", "cp-b", "cp-c")
			f.b.facts["cp-e"].Data = DataEmpty
			f.live(f.started("cp-a"), f.started("cp-b"), f.started("cp-c"))
		},
		want: map[string]wantPlan{
			"cp-a": unchanged, "cp-b": unchanged, "cp-c": unchanged,
			"cp-d": {action: report.ActionJoin, restart: true, all: true},
			"cp-e": {action: report.ActionJoin, restart: true, all: true},
		},
		check: func(t *testing.T, f *planFixture, _ error) {
			for n, ic := range map[string]string{
				"cp-d": f.initialCluster("cp-a", "cp-b", "cp-c", "cp-d"),
				"cp-e": f.initialCluster("cp-a", "cp-b", "cp-c", "cp-d", "cp-e"),
			} {
				rec := f.b.st.Members[n]
				if rec == nil || rec.InitialCluster != ic || rec.InitialClusterState != "existing" || rec.ID != "" {
					t.Errorf("%s: state record %+v, want initial cluster %s, state existing, no ID", n, rec, ic)
				}
				if f.b.plans[n].id != 0 {
					t.Errorf("%s: plan id %x before it was added", n, f.b.plans[n].id)
				}
				u := f.unit(n)
				if !strings.Contains(u, "--initial-cluster="+ic+" ") || !strings.Contains(u, "--initial-cluster-state=existing") {
					t.Errorf("%s: unit does not join with %s:\n%s", n, ic, u)
				}
			}
			// The founders' records keep their founding flags: they are not restarted.
			for _, n := range []string{"cp-a", "cp-b", "cp-c"} {
				if rec := f.b.st.Members[n]; rec.InitialClusterState != "new" {
					t.Errorf("%s: record %+v", n, rec)
				}
			}
		},
	}, {
		name:  "after scale out, a re-run changes nothing (joined members keep their recorded flags)",
		hosts: 5,
		setup: func(f *planFixture) {
			f.record("cp-d", planTestHexID("cp-d"), f.initialCluster("cp-a", "cp-b", "cp-c", "cp-d"), "existing")
			f.record("cp-e", planTestHexID("cp-e"), f.initialCluster("cp-a", "cp-b", "cp-c", "cp-d", "cp-e"), "existing")
			f.installed("cp-a", "cp-b", "cp-c", "cp-d", "cp-e")
			f.live(f.started("cp-a"), f.started("cp-b"), f.started("cp-c"), f.started("cp-d"), f.started("cp-e"))
		},
		want: map[string]wantPlan{"cp-a": unchanged, "cp-b": unchanged, "cp-c": unchanged, "cp-d": unchanged, "cp-e": unchanged},
	}, {
		name:  "live member whose data dir is empty: refused as a lost member",
		hosts: 3,
		setup: func(f *planFixture) {
			f.installed("cp-a", "cp-b", "cp-c")
			f.b.facts["cp-b"].Data = DataEmpty
			f.live(f.started("cp-a"), f.started("cp-b"), f.started("cp-c"))
		},
		want: map[string]wantPlan{"cp-a": unchanged, "cp-c": unchanged},
		errs: []string{"cp-b", "member remove " + planTestHexID("cp-b"), "still in the running cluster"},
		check: func(t *testing.T, f *planFixture, err error) {
			var lost *MemberDataLostError
			if !errors.As(err, &lost) {
				t.Fatalf("error %v is not a *MemberDataLostError", err)
			}
			want := MemberDataLostError{Host: "cp-b", ID: planTestHexID("cp-b"), DataDir: v1alpha1.DefaultDataDir, Running: true}
			if *lost != want {
				t.Errorf("error %+v, want %+v", *lost, want)
			}
			if p := f.b.plans["cp-b"]; p.action != "" || len(p.upload) != 0 || p.restart {
				t.Errorf("cp-b planned %+v", p)
			}
		},
	}, {
		name:  "no quorum, the cluster formed before, a member's data dir is gone: refused",
		hosts: 3,
		setup: func(f *planFixture) {
			f.installed("cp-a", "cp-b", "cp-c")
			f.b.st.ClusterID = "c1a55"
			f.b.st.Members["cp-c"].ID = planTestHexID("cp-c")
			f.b.facts["cp-c"].Data = DataAbsent
			f.b.facts["cp-c"].EtcdActive = "failed"
		},
		want: map[string]wantPlan{"cp-a": unchanged, "cp-b": unchanged},
		errs: []string{"cp-c", planTestHexID("cp-c"), "no quorum", "will not re-bootstrap"},
		check: func(t *testing.T, f *planFixture, err error) {
			var lost *MemberDataLostError
			if !errors.As(err, &lost) {
				t.Fatalf("error %v is not a *MemberDataLostError", err)
			}
			want := MemberDataLostError{Host: "cp-c", ID: planTestHexID("cp-c"), DataDir: v1alpha1.DefaultDataDir, Running: false}
			if *lost != want {
				t.Errorf("error %+v, want %+v", *lost, want)
			}
		},
	}, {
		name:  "another cluster's data (other token) and data without a marker: refused, never overwritten",
		hosts: 3,
		setup: func(f *planFixture) {
			f.b.facts["cp-a"] = &Facts{Data: DataMember, EtcdActive: "active", Sums: map[string]string{},
				Marker: &Marker{Cluster: "other", Token: "other-0123456789abcdef", Member: "cp-a"}}
			f.b.facts["cp-b"] = &Facts{Data: DataMember, Sums: map[string]string{}}
		},
		want: map[string]wantPlan{"cp-c": created},
		errs: []string{
			"cp-a: data dir /var/lib/etcd holds etcd data that is not this cluster's",
			`cluster "other", token other-0123456789abcdef`,
			"cp-b: data dir /var/lib/etcd holds etcd data that is not this cluster's (no hactl marker",
			"never overwrites",
		},
		check: func(t *testing.T, f *planFixture, err error) {
			var lost *MemberDataLostError
			if errors.As(err, &lost) {
				t.Errorf("foreign data reported as a lost member: %v", lost)
			}
			for _, n := range []string{"cp-a", "cp-b"} {
				if p := f.b.plans[n]; p.action != "" || len(p.upload) != 0 || p.restart {
					t.Errorf("%s: foreign data dir planned %+v", n, p)
				}
			}
			if !strings.Contains(err.Error(), f.b.st.Token) {
				t.Errorf("error does not name this cluster's token: %v", err)
			}
		},
	}, {
		name:  "same cluster name but another token (re-created state dir): refused",
		hosts: 3,
		setup: func(f *planFixture) {
			f.installed("cp-a", "cp-b", "cp-c")
			for _, n := range []string{"cp-a", "cp-b", "cp-c"} {
				f.b.facts[n].Marker.Token = planTestCluster + "-ffffffffffffffff"
			}
		},
		errs: []string{"not this cluster's", planTestCluster + "-ffffffffffffffff"},
		check: func(t *testing.T, f *planFixture, err error) {
			for _, n := range []string{"cp-a", "cp-b", "cp-c"} {
				if !strings.Contains(err.Error(), n+": data dir") {
					t.Errorf("error does not name %s: %v", n, err)
				}
			}
		},
	}, {
		name:  "founding member listed but never started, live cluster: resume as founding member",
		hosts: 3,
		setup: func(f *planFixture) {
			f.installed("cp-a", "cp-b")
			f.b.facts["cp-c"].Marker = f.ourMarker("cp-c")
			f.b.facts["cp-c"].EtcdActive = "failed"
			f.live(f.started("cp-a"), f.started("cp-b"), f.unstarted("cp-c", false))
		},
		want: map[string]wantPlan{
			"cp-a": unchanged, "cp-b": unchanged,
			"cp-c": {action: report.ActionResume, restart: true, all: true},
		},
		check: func(t *testing.T, f *planFixture, _ error) {
			if f.b.plans["cp-c"].id != planTestID("cp-c") || f.b.st.Members["cp-c"].ID != planTestHexID("cp-c") {
				t.Errorf("cp-c: plan id %x record %+v", f.b.plans["cp-c"].id, f.b.st.Members["cp-c"])
			}
			if u := f.unit("cp-c"); !strings.Contains(u, "--initial-cluster-state=new") ||
				!strings.Contains(u, "--initial-cluster="+f.initialCluster("cp-a", "cp-b", "cp-c")+" ") {
				t.Errorf("cp-c: unit is not the founding one:\n%s", u)
			}
		},
	}, {
		name:  "founding member never started, files installed and etcd already starting: resume without a restart",
		hosts: 3,
		setup: func(f *planFixture) {
			f.installed("cp-a", "cp-b", "cp-c")
			f.b.facts["cp-c"].Data = DataEmpty
			f.live(f.started("cp-a"), f.started("cp-b"), f.unstarted("cp-c", false))
		},
		want: map[string]wantPlan{
			"cp-a": unchanged, "cp-b": unchanged,
			"cp-c": {action: report.ActionResume},
		},
	}, {
		name:  "learner added by an interrupted run, never started: join with its ID, no second add",
		hosts: 5,
		setup: func(f *planFixture) {
			// cp-e joined earlier; cp-d was added as a learner after it, then the run stopped.
			f.record("cp-e", planTestHexID("cp-e"), f.initialCluster("cp-a", "cp-b", "cp-c", "cp-e"), "existing")
			f.record("cp-d", planTestHexID("cp-d"), f.initialCluster("cp-a", "cp-b", "cp-c", "cp-e", "cp-d"), "existing")
			f.installed("cp-a", "cp-b", "cp-c", "cp-e")
			f.live(f.started("cp-a"), f.started("cp-b"), f.started("cp-c"), f.started("cp-e"), f.unstarted("cp-d", true))
		},
		want: map[string]wantPlan{
			"cp-a": unchanged, "cp-b": unchanged, "cp-c": unchanged,
			"cp-d": {action: report.ActionJoin, restart: true, all: true},
			"cp-e": unchanged,
		},
		check: func(t *testing.T, f *planFixture, _ error) {
			if f.b.plans["cp-d"].id != planTestID("cp-d") {
				t.Errorf("cp-d: plan id %x, want the learner's %x (join must not add it again)", f.b.plans["cp-d"].id, planTestID("cp-d"))
			}
			ic := f.initialCluster("cp-a", "cp-b", "cp-c", "cp-e", "cp-d")
			if rec := f.b.st.Members["cp-d"]; rec.InitialCluster != ic || rec.InitialClusterState != "existing" {
				t.Errorf("cp-d: recorded flags changed: %+v", rec)
			}
			if u := f.unit("cp-d"); !strings.Contains(u, "--initial-cluster-state=existing") {
				t.Errorf("cp-d: unit does not join:\n%s", u)
			}
		},
	}, {
		name:  "member recorded as joining, added as a voter (not a learner) and never started: join, not resume",
		hosts: 5,
		setup: func(f *planFixture) {
			f.record("cp-e", planTestHexID("cp-e"), f.initialCluster("cp-a", "cp-b", "cp-c", "cp-d", "cp-e"), "existing")
			f.record("cp-d", planTestHexID("cp-d"), f.initialCluster("cp-a", "cp-b", "cp-c", "cp-d"), "existing")
			f.installed("cp-a", "cp-b", "cp-c", "cp-d")
			f.live(f.started("cp-a"), f.started("cp-b"), f.started("cp-c"), f.started("cp-d"), f.unstarted("cp-e", false))
		},
		want: map[string]wantPlan{
			"cp-a": unchanged, "cp-b": unchanged, "cp-c": unchanged, "cp-d": unchanged,
			"cp-e": {action: report.ActionJoin, restart: true, all: true},
		},
		check: func(t *testing.T, f *planFixture, _ error) {
			if f.b.plans["cp-e"].id != planTestID("cp-e") {
				t.Errorf("cp-e: plan id %x, want %x", f.b.plans["cp-e"].id, planTestID("cp-e"))
			}
		},
	}, {
		name:  "learner that started but was not promoted yet: join (promote) without a restart",
		hosts: 5,
		setup: func(f *planFixture) {
			f.record("cp-d", planTestHexID("cp-d"), f.initialCluster("cp-a", "cp-b", "cp-c", "cp-d"), "existing")
			f.record("cp-e", planTestHexID("cp-e"), f.initialCluster("cp-a", "cp-b", "cp-c", "cp-d", "cp-e"), "existing")
			f.installed("cp-a", "cp-b", "cp-c", "cp-d", "cp-e")
			learner := f.started("cp-e")
			learner.learner = true
			f.live(f.started("cp-a"), f.started("cp-b"), f.started("cp-c"), f.started("cp-d"), learner)
		},
		want: map[string]wantPlan{
			"cp-a": unchanged, "cp-b": unchanged, "cp-c": unchanged, "cp-d": unchanged,
			"cp-e": {action: report.ActionJoin},
		},
		check: func(t *testing.T, f *planFixture, _ error) {
			if !f.b.anyStarts() {
				t.Error("anyStarts is false: the pending promotion would be skipped")
			}
		},
	}, {
		name:  "host with this cluster's data but not in the live member list: refused (removed member)",
		hosts: 3,
		setup: func(f *planFixture) {
			f.installed("cp-a", "cp-b", "cp-c")
			f.live(f.started("cp-a"), f.started("cp-b"))
		},
		want: map[string]wantPlan{"cp-a": unchanged, "cp-b": unchanged},
		errs: []string{"cp-c: holds data of this cluster but is not a member of the running cluster", "move /var/lib/etcd aside"},
		check: func(t *testing.T, f *planFixture, err error) {
			var lost *MemberDataLostError
			if errors.As(err, &lost) {
				t.Errorf("removed member reported as a lost one: %v", lost)
			}
			if p := f.b.plans["cp-c"]; len(p.upload) != 0 || p.restart {
				t.Errorf("cp-c planned %+v", p)
			}
		},
	}, {
		name:  "removed member whose data was moved aside: joins again as a new member",
		hosts: 3,
		setup: func(f *planFixture) {
			f.installed("cp-a", "cp-b", "cp-c")
			f.b.st.Members["cp-c"].ID = planTestHexID("cp-c")
			f.b.facts["cp-c"].Data = DataEmpty
			f.b.facts["cp-c"].EtcdActive = "failed"
			f.live(f.started("cp-a"), f.started("cp-b"))
		},
		want: map[string]wantPlan{
			"cp-a": unchanged, "cp-b": unchanged,
			// Only the unit changes (joining flags); the certificates, binaries and marker are in place.
			"cp-c": {action: report.ActionJoin, restart: true, upload: []string{remoteUnit}},
		},
		check: func(t *testing.T, f *planFixture, _ error) {
			ic := f.initialCluster("cp-a", "cp-b", "cp-c")
			if rec := f.b.st.Members["cp-c"]; rec.InitialCluster != ic || rec.InitialClusterState != "existing" {
				t.Errorf("cp-c: record %+v, want %s existing", rec, ic)
			}
			if f.b.plans["cp-c"].id != 0 {
				t.Errorf("cp-c: plan id %x: the removed ID must not be reused", f.b.plans["cp-c"].id)
			}
		},
	}, {
		name:  "interrupted first run: founding members with our marker (or a starting etcd) resume",
		hosts: 3,
		setup: func(f *planFixture) {
			f.b.facts["cp-a"].Marker = f.ourMarker("cp-a")
			f.b.facts["cp-b"].EtcdActive = "activating"
		},
		want: map[string]wantPlan{
			"cp-a": {action: report.ActionResume, restart: true, all: true},
			"cp-b": {action: report.ActionResume, restart: true, all: true},
			"cp-c": created,
		},
	}, {
		name:  "a learner added but not started and a new host: the new host's initial cluster lists the learner too",
		hosts: 5,
		setup: func(f *planFixture) {
			f.record("cp-d", planTestHexID("cp-d"), f.initialCluster("cp-a", "cp-b", "cp-c", "cp-d"), "existing")
			f.installed("cp-a", "cp-b", "cp-c")
			f.b.facts["cp-e"].Data = DataEmpty
			f.live(f.started("cp-a"), f.started("cp-b"), f.started("cp-c"), f.unstarted("cp-d", true))
		},
		want: map[string]wantPlan{
			"cp-a": unchanged, "cp-b": unchanged, "cp-c": unchanged,
			"cp-d": {action: report.ActionJoin, restart: true, all: true},
			"cp-e": {action: report.ActionJoin, restart: true, all: true},
		},
		check: func(t *testing.T, f *planFixture, _ error) {
			ic := f.initialCluster("cp-a", "cp-b", "cp-c", "cp-d", "cp-e")
			if rec := f.b.st.Members["cp-e"]; rec.InitialCluster != ic || rec.InitialClusterState != "existing" {
				t.Errorf("cp-e: record %+v, want initial cluster %s (etcd compares the member count)", rec, ic)
			}
		},
	}, {
		name:  "a learner added but not started, with no state record: joins as existing, never as a founder",
		hosts: 4,
		setup: func(f *planFixture) {
			f.installed("cp-a", "cp-b", "cp-c")
			f.live(f.started("cp-a"), f.started("cp-b"), f.started("cp-c"), f.unstarted("cp-d", true))
		},
		want: map[string]wantPlan{
			"cp-a": unchanged, "cp-b": unchanged, "cp-c": unchanged,
			"cp-d": {action: report.ActionJoin, restart: true, all: true},
		},
		check: func(t *testing.T, f *planFixture, _ error) {
			ic := f.initialCluster("cp-a", "cp-b", "cp-c", "cp-d")
			if rec := f.b.st.Members["cp-d"]; rec.InitialCluster != ic || rec.InitialClusterState != "existing" {
				t.Errorf("cp-d: record %+v, want existing with %s", rec, ic)
			}
			if u := f.unit("cp-d"); !strings.Contains(u, "--initial-cluster-state=existing") {
				t.Errorf("cp-d: unit does not join:\n%s", u)
			}
		},
	}, {
		name:  "no quorum, the cluster formed before, new hosts: refused as new members that cannot join, not as lost members",
		hosts: 5,
		setup: func(f *planFixture) {
			f.installed("cp-a", "cp-b", "cp-c")
			for _, n := range []string{"cp-a", "cp-b", "cp-c"} {
				f.b.st.Members[n].ID = planTestHexID(n)
			}
			f.b.st.ClusterID = "c1a55"
		},
		want: map[string]wantPlan{"cp-a": unchanged, "cp-b": unchanged, "cp-c": unchanged},
		errs: []string{"cp-d: is a new member", "cp-e: is a new member", "can only join a running cluster"},
		check: func(t *testing.T, f *planFixture, err error) {
			var lost *MemberDataLostError
			if errors.As(err, &lost) {
				t.Errorf("new hosts reported as lost members: %v", lost)
			}
		},
	}, {
		name:  "live member not in the spec: warned about and left alone",
		hosts: 3,
		setup: func(f *planFixture) {
			f.installed("cp-a", "cp-b", "cp-c")
			f.live(f.started("cp-a"), f.started("cp-b"), f.started("cp-c"),
				liveMember{id: 0xdead, name: "old-x", peerURLs: []string{"https://10.9.9.9:2380"}})
		},
		want: map[string]wantPlan{"cp-a": unchanged, "cp-b": unchanged, "cp-c": unchanged},
		check: func(t *testing.T, f *planFixture, _ error) {
			if !strings.Contains(f.out.String(), "WARNING: etcd member old-x (ID dead, https://10.9.9.9:2380) is in the cluster but not in the spec") {
				t.Errorf("no warning about the unknown member:\n%s", f.out)
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newPlanFixture(t, tc.hosts, false)
			tc.setup(f)
			err := f.b.plan(context.Background())
			switch {
			case len(tc.errs) == 0 && err != nil:
				t.Fatalf("plan: %v", err)
			case len(tc.errs) > 0 && err == nil:
				t.Fatalf("plan succeeded, want an error containing %q", tc.errs)
			}
			for _, s := range tc.errs {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error does not contain %q:\n%v", s, err)
				}
			}
			for name, w := range tc.want {
				f.check(name, w)
			}
			if tc.check != nil {
				tc.check(t, f, err)
			}
		})
	}
}

// TestPlanDryRunWithoutPKI: a dry run before the first bootstrap plans every file, marks the
// certificates that do not exist yet "to be created", and writes nothing to the state dir.
func TestPlanDryRunWithoutPKI(t *testing.T) {
	f := newPlanFixture(t, 3, true)
	if err := f.b.plan(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"cp-a", "cp-b", "cp-c"} {
		f.check(n, created)
		for _, df := range f.b.plans[n].upload {
			isCert := filepath.Dir(df.Path) == remotePKIDir
			switch {
			case isCert && (df.Note != "to be created" || df.Sum != "" || df.Data != nil):
				t.Errorf("%s: %s note %q sum %q, want to be created without content", n, df.Path, df.Note, df.Sum)
			case !isCert && (df.Note != "new" || df.Sum == ""):
				t.Errorf("%s: %s note %q sum %q, want new with a checksum", n, df.Path, df.Note, df.Sum)
			}
		}
	}
	if _, err := os.Stat(f.stateDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("dry run touched the state dir %s: %v", f.stateDir, err)
	}
	out := f.out.String()
	for _, s := range []string{"a new etcd CA and certificates will be created", "to be created: ca.crt ca.key server.crt"} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
}

// TestPlanDryRunWithPKI: once the PKI exists a dry run plans with real checksums, so a healthy
// cluster shows nothing to do.
func TestPlanDryRunWithPKI(t *testing.T) {
	real := newPlanFixture(t, 3, false)
	dry, err := New(Options{Cluster: real.b.spec, DryRun: true, Printer: ui.New(&bytes.Buffer{}, false, false)})
	if err != nil {
		t.Fatal(err)
	}
	if err := dry.pki(context.Background()); err != nil {
		t.Fatal(err)
	}
	if dry.st.Token != real.b.st.Token {
		t.Fatalf("dry run made a new token %s, the state dir holds %s", dry.st.Token, real.b.st.Token)
	}
	f := &planFixture{t: t, b: dry, out: &bytes.Buffer{}, stateDir: real.stateDir}
	f.installed("cp-a", "cp-b", "cp-c")
	f.live(f.started("cp-a"), f.started("cp-b"), f.started("cp-c"))
	if err := dry.plan(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"cp-a", "cp-b", "cp-c"} {
		f.check(n, unchanged)
	}
}

func TestAnyUploadsAnyStarts(t *testing.T) {
	file := []desiredFile{{Path: remoteMarker}}
	for _, tc := range []struct {
		name            string
		plans           []hostPlan
		uploads, starts bool
	}{
		{"no plans", nil, false, false},
		{"all unchanged", []hostPlan{{action: report.ActionUnchanged}, {action: report.ActionUnchanged}}, false, false},
		{"upload without restart", []hostPlan{{action: report.ActionUnchanged, upload: file}, {action: report.ActionUnchanged}}, true, false},
		{"update", []hostPlan{{action: report.ActionUnchanged}, {action: report.ActionUpdate, upload: file, restart: true}}, true, true},
		{"start", []hostPlan{{action: report.ActionStart, restart: true}}, false, true},
		{"create", []hostPlan{{action: report.ActionCreate, upload: file, restart: true}}, true, true},
		{"resume of a running member", []hostPlan{{action: report.ActionResume}}, false, true},
		{"join pending promotion", []hostPlan{{action: report.ActionUnchanged}, {action: report.ActionJoin}}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &Bootstrapper{plans: map[string]*hostPlan{}}
			for i := range tc.plans {
				b.plans[fmt.Sprint("h", i)] = &tc.plans[i]
			}
			if got := b.anyUploads(); got != tc.uploads {
				t.Errorf("anyUploads = %v, want %v", got, tc.uploads)
			}
			if got := b.anyStarts(); got != tc.starts {
				t.Errorf("anyStarts = %v, want %v", got, tc.starts)
			}
		})
	}
}

// The refusal to create a second CA when the hosts carry the cluster and the state dir is gone is
// now a recovery: see TestStateRecovery and TestStateRecoveryRefusals (recover_test.go).

func TestIsAuthError(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		want bool
	}{
		{`rpc error: code = Unavailable desc = connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority"`, true},
		{"remote error: tls: bad certificate", true},
		{"context deadline exceeded", false},
		{"dial tcp 10.0.0.1:2379: connect: connection refused", false},
	} {
		if got := isAuthError(errors.New(tc.msg)); got != tc.want {
			t.Errorf("isAuthError(%q) = %v, want %v", tc.msg, got, tc.want)
		}
	}
	// Typed errors, wrapped, whatever their text.
	for _, err := range []error{
		fmt.Errorf("dial: %w", x509.UnknownAuthorityError{}),
		fmt.Errorf("handshake: %w", tls.AlertError(42)), // bad_certificate
		fmt.Errorf("verify: %w", &tls.CertificateVerificationError{Err: errors.New("expired")}),
	} {
		if !isAuthError(err) {
			t.Errorf("isAuthError(%T) = false", errors.Unwrap(err))
		}
	}
}

const testDownloadURL = "http://mirror.internal/etcd/etcd-v3.6.16-linux-amd64.tar.gz"

// downloadFixture is newPlanFixture for a spec installing etcd from spec.etcd.download.
func downloadFixture(t *testing.T, n int, dryRun bool) *planFixture {
	t.Helper()
	stateDir := filepath.Join(t.TempDir(), "state")
	spec := planTestSpec(t, n, stateDir)
	spec.Spec.Etcd.Binaries = v1alpha1.EtcdBinaries{}
	spec.Spec.Etcd.Download = &v1alpha1.EtcdDownload{URL: testDownloadURL, SHA256: strings.Repeat("AB", 32)}
	out := &bytes.Buffer{}
	b, err := New(Options{Cluster: spec, DryRun: dryRun, Printer: ui.New(out, false, false)})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.pki(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, m := range b.members {
		b.facts[m.Name] = &Facts{Data: DataAbsent, Sums: map[string]string{}}
	}
	return &planFixture{t: t, b: b, out: out, stateDir: stateDir}
}

// released makes name a host where the release with tarball sum tarball was installed (binaries
// recorded and present).
func (f *planFixture) released(name, tarball string) {
	r := &Release{Tarball: tarball, Binaries: map[string]string{}}
	for i, bin := range f.b.remoteBinaries() {
		s := fmt.Sprintf("%064x", i+1)
		r.Binaries[bin] = s
		f.b.facts[name].Sums[bin] = s
	}
	f.b.facts[name].Release = r
}

// TestPlanDownload: with spec.etcd.download the binaries are never uploaded; a host without the
// spec's release (another tarball, a binary missing or changed) downloads it, and on a live
// cluster that is a rolling update.
func TestPlanDownload(t *testing.T) {
	sha := strings.Repeat("ab", 32)
	bin := func(n string) string { return filepath.Join("/usr/local/bin", n) }
	for _, tc := range []struct {
		name     string
		setup    func(f *planFixture)
		want     map[string]wantPlan
		download map[string]bool
	}{{
		name:  "fresh cluster: every host downloads, the other files are uploaded",
		setup: func(f *planFixture) {},
		want: map[string]wantPlan{
			"cp-a": {action: report.ActionCreate, restart: true, upload: nonBinaryPaths()},
			"cp-b": {action: report.ActionCreate, restart: true, upload: nonBinaryPaths()},
			"cp-c": {action: report.ActionCreate, restart: true, upload: nonBinaryPaths()},
		},
		download: map[string]bool{"cp-a": true, "cp-b": true, "cp-c": true},
	}, {
		name: "same release installed everywhere: unchanged, no download",
		setup: func(f *planFixture) {
			f.installed("cp-a", "cp-b", "cp-c")
			for _, n := range []string{"cp-a", "cp-b", "cp-c"} {
				f.released(n, sha)
			}
			f.live(f.started("cp-a"), f.started("cp-b"), f.started("cp-c"))
		},
		want:     map[string]wantPlan{"cp-a": unchanged, "cp-b": unchanged, "cp-c": unchanged},
		download: map[string]bool{},
	}, {
		name: "another release recorded on one host, a binary missing on another, one changed on the third: rolling update",
		setup: func(f *planFixture) {
			f.installed("cp-a", "cp-b", "cp-c")
			f.released("cp-a", strings.Repeat("cd", 32))
			f.released("cp-b", sha)
			delete(f.b.facts["cp-b"].Sums, bin("etcdutl"))
			f.released("cp-c", sha)
			f.b.facts["cp-c"].Sums[bin("etcd")] = strings.Repeat("0", 64)
			f.live(f.started("cp-a"), f.started("cp-b"), f.started("cp-c"))
		},
		want: map[string]wantPlan{
			"cp-a": {action: report.ActionUpdate, restart: true},
			"cp-b": {action: report.ActionUpdate, restart: true},
			"cp-c": {action: report.ActionUpdate, restart: true},
		},
		download: map[string]bool{"cp-a": true, "cp-b": true, "cp-c": true},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := downloadFixture(t, 3, false)
			tc.setup(f)
			if err := f.b.plan(context.Background()); err != nil {
				t.Fatal(err)
			}
			for name, w := range tc.want {
				f.check(name, w)
				if got := f.b.plans[name].download; got != tc.download[name] {
					t.Errorf("%s: download %v, want %v", name, got, tc.download[name])
				}
				for _, df := range f.b.plans[name].upload {
					if df.Local != "" || filepath.Dir(df.Path) == "/usr/local/bin" {
						t.Errorf("%s: a binary is uploaded: %s", name, df.Path)
					}
				}
			}
			want := "download " + testDownloadURL + " (sha256 abababababab…)"
			if got := strings.Contains(f.out.String(), want); got != (len(tc.download) > 0) {
				t.Errorf("printed plan (want %q: %v):\n%s", want, len(tc.download) > 0, f.out)
			}
			if len(tc.download) > 0 && !f.b.anyUploads() {
				t.Error("anyUploads is false: etcd/install would be skipped")
			}
			res := f.b.result()
			for _, m := range res.Members {
				if tc.download[m.Name] && !slices.Contains(m.Changes, bin("etcd")) {
					t.Errorf("%s: result changes %v lack the binaries", m.Name, m.Changes)
				}
			}
		})
	}
}

// nonBinaryPaths are the files uploaded to a new member of a download install.
func nonBinaryPaths() []string {
	out := []string{remoteUnit, remoteMarker}
	for _, n := range []string{"ca.crt", "ca.key", "server.crt", "server.key", "peer.crt", "peer.key"} {
		out = append(out, filepath.Join(remotePKIDir, n))
	}
	return out
}
