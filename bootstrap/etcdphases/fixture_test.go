package etcdphases

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/bootstrap/runctx"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/provision"
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
	b        *Group
	out      *bytes.Buffer
	stateDir string
}

func newPlanFixture(t *testing.T, n int, dryRun bool) *planFixture {
	t.Helper()
	stateDir := filepath.Join(t.TempDir(), "state")
	out := &bytes.Buffer{}
	b, err := New(runctx.New(planTestSpec(t, n, stateDir), ui.New(out, false, false), dryRun, provision.SpecOptions{}), Options{})
	if err != nil {
		t.Fatal(err)
	}
	// pki loads or creates cluster.json (b.st with a fresh token), sets b.creds and, unless this is a
	// dry run, creates the CA and every certificate so desiredFiles can read them.
	if err := (&PKI{b}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if b.st == nil || b.creds == nil || !strings.HasPrefix(b.st.Token, planTestCluster+"-") {
		t.Fatalf("pki left state %+v, credentials %+v", b.st, b.creds)
	}
	for _, m := range b.members {
		b.ledger.facts[m.Name] = &Facts{Data: DataAbsent, Sums: map[string]string{}}
	}
	return &planFixture{t: t, b: b, out: out, stateDir: stateDir}
}

func (f *planFixture) member(name string) Member {
	f.t.Helper()
	for _, m := range f.b.members {
		if m.Name == name {
			return m
		}
	}
	f.t.Fatalf("no member %s", name)
	return Member{}
}

func (f *planFixture) peerURL(name string) string { return f.member(name).PeerURL }

// ourMarker is the marker hactl installs on name.
func (f *planFixture) ourMarker(name string) *etcd.Marker {
	return &etcd.Marker{Cluster: planTestCluster, Token: f.b.st.Token, Member: name}
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
		f.b.ledger.facts[name] = &Facts{Data: DataMember, EtcdActive: "active", Marker: f.ourMarker(name), Sums: sums}
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
	f.b.live = &LiveCluster{clusterID: 0xc1a55, members: members}
	f.b.st.ClusterID = "c1a55"
}

// runningOldBinary makes names a live cluster running etcd version whose installed etcd binary
// differs from the spec's (as before an upgrade).
func (f *planFixture) runningOldBinary(version string, names ...string) {
	var live []liveMember
	for _, n := range names {
		f.b.ledger.facts[n].Sums[filepath.Join(etcd.RemoteBinDir, "etcd")] = strings.Repeat("0", 64)
		lm := f.started(n)
		lm.version = version
		live = append(live, lm)
	}
	f.live(live...)
}

// unit returns the etcd unit planned for upload to name ("" when it is not uploaded).
func (f *planFixture) unit(name string) string {
	for _, df := range f.b.ledger.plans[name].Upload {
		if df.Path == remoteUnit {
			return string(df.Data)
		}
	}
	return ""
}

// wantPlan is one member's expected plan.
type wantPlan struct {
	Action  report.Action
	Restart bool
	all     bool     // every managed file is uploaded
	upload  []string // else exactly these remote paths
}

func (f *planFixture) check(name string, w wantPlan) {
	f.t.Helper()
	p := f.b.ledger.plans[name]
	if p == nil {
		f.t.Errorf("%s: no plan", name)
		return
	}
	var got []string
	for _, df := range p.Upload {
		got = append(got, df.Path)
	}
	slices.Sort(got)
	want := slices.Clone(w.upload)
	if w.all {
		want = f.b.files.remotePaths()
	}
	slices.Sort(want)
	if p.Action != w.Action || p.Restart != w.Restart || !slices.Equal(got, want) {
		f.t.Errorf("%s: action %q restart %v upload %v; want action %q restart %v upload %v",
			name, p.Action, p.Restart, got, w.Action, w.Restart, want)
	}
}

var (
	unchanged = wantPlan{Action: report.ActionUnchanged}
	created   = wantPlan{Action: report.ActionCreate, Restart: true, all: true}
)
