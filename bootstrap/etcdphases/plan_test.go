package etcdphases

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/report"
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
			f.b.ledger.facts["cp-b"].Data = DataEmpty // an empty (or lost+found only) dir is as good as none
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
				for _, df := range f.b.ledger.plans[n].Upload {
					if df.Note != "new" || df.Sum == "" {
						t.Errorf("%s: %s note %q sum %q, want note new and a checksum", n, df.Path, df.Note, df.Sum)
					}
				}
			}
			if !(&Install{f.b}).ShouldRun() || !(&Start{G: f.b, Name: PhaseStart}).ShouldRun() {
				t.Errorf("anyUploads %v anyStarts %v, want both", (&Install{f.b}).ShouldRun(), (&Start{G: f.b, Name: PhaseStart}).ShouldRun())
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
				if f.b.ledger.plans[n].ID != planTestID(n) || f.b.st.Members[n].ID != planTestHexID(n) {
					t.Errorf("%s: plan id %x, record ID %s; want %x", n, f.b.ledger.plans[n].ID, f.b.st.Members[n].ID, planTestID(n))
				}
			}
			if (&Install{f.b}).ShouldRun() || (&Start{G: f.b, Name: PhaseStart}).ShouldRun() {
				t.Errorf("anyUploads %v anyStarts %v, want neither", (&Install{f.b}).ShouldRun(), (&Start{G: f.b, Name: PhaseStart}).ShouldRun())
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
			f.b.ledger.facts["cp-b"].Sums[remoteUnit] = strings.Repeat("0", 64)
			f.live(f.started("cp-a"), f.started("cp-b"), f.started("cp-c"))
		},
		want: map[string]wantPlan{
			"cp-a": unchanged,
			"cp-b": {Action: report.ActionUpdate, Restart: true, upload: []string{remoteUnit}},
			"cp-c": unchanged,
		},
		check: func(t *testing.T, f *planFixture, _ error) {
			if n := f.b.ledger.plans["cp-b"].Upload[0].Note; n != "changed" {
				t.Errorf("note %q, want changed", n)
			}
			// The running cluster's roll installs cp-b's unit right before cp-b restarts (etcd/start):
			// etcd/install has nothing to do.
			if (&Install{f.b}).ShouldRun() || !(&Start{G: f.b, Name: PhaseStart}).ShouldRun() || !f.b.rolls("cp-b") || f.b.rolls("cp-a") {
				t.Errorf("install runs %v, start runs %v, cp-b rolls %v, cp-a rolls %v; want false, true, true, false",
					(&Install{f.b}).ShouldRun(), (&Start{G: f.b, Name: PhaseStart}).ShouldRun(), f.b.rolls("cp-b"), f.b.rolls("cp-a"))
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
			delete(f.b.ledger.facts["cp-c"].Sums, filepath.Join(remotePKIDir, "peer.key"))
			f.live(f.started("cp-a"), f.started("cp-b"), f.started("cp-c"))
		},
		want: map[string]wantPlan{
			"cp-a": unchanged,
			"cp-b": unchanged,
			"cp-c": {Action: report.ActionUpdate, Restart: true, upload: []string{filepath.Join(remotePKIDir, "peer.key")}},
		},
		check: func(t *testing.T, f *planFixture, _ error) {
			df := f.b.ledger.plans["cp-c"].Upload[0]
			if df.Note != "new" || df.Mode != 0o600 {
				t.Errorf("peer.key note %q mode %v, want new 0600", df.Note, df.Mode)
			}
		},
	}, {
		name:  "only the marker differs: uploaded without a restart",
		hosts: 3,
		setup: func(f *planFixture) {
			f.installed("cp-a", "cp-b", "cp-c")
			f.b.ledger.facts["cp-a"].Sums[remoteMarker] = strings.Repeat("1", 64)
			f.live(f.started("cp-a"), f.started("cp-b"), f.started("cp-c"))
		},
		want: map[string]wantPlan{
			"cp-a": {Action: report.ActionUnchanged, upload: []string{remoteMarker}},
			"cp-b": unchanged,
			"cp-c": unchanged,
		},
		check: func(t *testing.T, f *planFixture, _ error) {
			if !(&Install{f.b}).ShouldRun() || (&Start{G: f.b, Name: PhaseStart}).ShouldRun() {
				t.Errorf("anyUploads %v anyStarts %v, want uploads only", (&Install{f.b}).ShouldRun(), (&Start{G: f.b, Name: PhaseStart}).ShouldRun())
			}
		},
	}, {
		name:  "live cluster, a member with data whose etcd is stopped: start it",
		hosts: 3,
		setup: func(f *planFixture) {
			f.installed("cp-a", "cp-b", "cp-c")
			f.b.ledger.facts["cp-c"].EtcdActive = "inactive"
			f.live(f.started("cp-a"), f.started("cp-b"), f.started("cp-c"))
		},
		want: map[string]wantPlan{
			"cp-a": unchanged,
			"cp-b": unchanged,
			"cp-c": {Action: report.ActionStart, Restart: true},
		},
		check: func(t *testing.T, f *planFixture, _ error) {
			if (&Install{f.b}).ShouldRun() || !(&Start{G: f.b, Name: PhaseStart}).ShouldRun() {
				t.Errorf("anyUploads %v anyStarts %v, want starts only", (&Install{f.b}).ShouldRun(), (&Start{G: f.b, Name: PhaseStart}).ShouldRun())
			}
		},
	}, {
		name:  "no quorum, every member has data: start the stopped ones, leave the running one",
		hosts: 3,
		setup: func(f *planFixture) {
			f.installed("cp-a", "cp-b", "cp-c")
			f.b.st.ClusterID = "c1a55"
			f.b.ledger.facts["cp-a"].EtcdActive = "failed"
			f.b.ledger.facts["cp-b"].EtcdActive = "inactive"
		},
		want: map[string]wantPlan{
			"cp-a": {Action: report.ActionStart, Restart: true},
			"cp-b": {Action: report.ActionStart, Restart: true},
			"cp-c": unchanged,
		},
	}, {
		name:  "no quorum, a member with data and a changed unit: update (restart)",
		hosts: 3,
		setup: func(f *planFixture) {
			f.installed("cp-a", "cp-b", "cp-c")
			f.b.st.ClusterID = "c1a55"
			f.b.ledger.facts["cp-a"].Sums[remoteUnit] = "old"
		},
		want: map[string]wantPlan{
			"cp-a": {Action: report.ActionUpdate, Restart: true, upload: []string{remoteUnit}},
			"cp-b": unchanged,
			"cp-c": unchanged,
		},
	}, {
		name:  "scale out 3 -> 5: both new hosts join, the second's initial cluster includes the first",
		hosts: 5,
		setup: func(f *planFixture) {
			f.installed("cp-a", "cp-b", "cp-c")
			f.b.ledger.facts["cp-e"].Data = DataEmpty
			f.live(f.started("cp-a"), f.started("cp-b"), f.started("cp-c"))
		},
		want: map[string]wantPlan{
			"cp-a": unchanged, "cp-b": unchanged, "cp-c": unchanged,
			"cp-d": {Action: report.ActionJoin, Restart: true, all: true},
			"cp-e": {Action: report.ActionJoin, Restart: true, all: true},
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
				if f.b.ledger.plans[n].ID != 0 {
					t.Errorf("%s: plan id %x before it was added", n, f.b.ledger.plans[n].ID)
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
			f.b.ledger.facts["cp-b"].Data = DataEmpty
			f.live(f.started("cp-a"), f.started("cp-b"), f.started("cp-c"))
		},
		want: map[string]wantPlan{"cp-a": unchanged, "cp-c": unchanged},
		errs: []string{"cp-b", "ID " + planTestHexID("cp-b"), "--replace-lost cp-b", "still in the running cluster"},
		check: func(t *testing.T, f *planFixture, err error) {
			var lost *MemberDataLostError
			if !errors.As(err, &lost) {
				t.Fatalf("error %v is not a *MemberDataLostError", err)
			}
			want := MemberDataLostError{Host: "cp-b", ID: planTestHexID("cp-b"), DataDir: v1alpha1.DefaultDataDir, Running: true}
			if *lost != want {
				t.Errorf("error %+v, want %+v", *lost, want)
			}
			if p := f.b.ledger.plans["cp-b"]; p.Action != "" || len(p.Upload) != 0 || p.Restart {
				t.Errorf("cp-b planned %+v", p)
			}
		},
	}, {
		name:  "live member whose data dir is empty, --replace-lost names it: replaced (removed, joined again)",
		hosts: 3,
		setup: func(f *planFixture) {
			f.installed("cp-a", "cp-b", "cp-c")
			f.b.ledger.facts["cp-b"].Data = DataEmpty
			f.b.opt.ReplaceLost = []string{"cp-b"}
			f.live(f.started("cp-a"), f.started("cp-b"), f.started("cp-c"))
		},
		want: map[string]wantPlan{"cp-a": unchanged, "cp-c": unchanged},
		check: func(t *testing.T, f *planFixture, err error) {
			p := f.b.ledger.plans["cp-b"]
			if p.Action != report.ActionReplace || !p.Restart || fmt.Sprintf("%x", p.ReplaceID) != planTestHexID("cp-b") || p.ID != 0 {
				t.Errorf("cp-b planned %+v, want replace of %s with a restart", p, planTestHexID("cp-b"))
			}
			rec := f.b.st.Members["cp-b"]
			if rec.InitialClusterState != "existing" || strings.Count(rec.InitialCluster, "cp-b=") != 1 || rec.ID != "" {
				t.Errorf("cp-b record %+v: want state existing, cp-b listed once, no ID", rec)
			}
		},
	}, {
		name:  "spec.etcd.version older than a running member: a downgrade, refused",
		hosts: 3,
		setup: func(f *planFixture) {
			f.installed("cp-a", "cp-b", "cp-c")
			newer := f.started("cp-b")
			newer.version = "3.7.0"
			f.live(f.started("cp-a"), newer, f.started("cp-c"))
		},
		want: map[string]wantPlan{"cp-a": unchanged, "cp-b": unchanged, "cp-c": unchanged},
		errs: []string{"cp-b", "downgrade", "v3.7.0"},
		check: func(t *testing.T, f *planFixture, err error) {
			var ue *etcd.UpgradeError
			if !errors.As(err, &ue) || !ue.Downgrade || ue.ExitCode() != 2 {
				t.Fatalf("error %v is not a downgrade *etcd.UpgradeError (exit 2)", err)
			}
		},
	}, {
		name:  "spec.etcd.version skips a minor from a running member: refused",
		hosts: 3,
		setup: func(f *planFixture) {
			f.installed("cp-a", "cp-b", "cp-c")
			old := f.started("cp-c")
			old.version = "3.4.37"
			f.live(f.started("cp-a"), f.started("cp-b"), old)
		},
		want: map[string]wantPlan{"cp-a": unchanged, "cp-b": unchanged, "cp-c": unchanged},
		errs: []string{"cp-c", "skips a minor", "one minor version at a time"},
	}, {
		name:  "a rolling upgrade from v3.5.36: every member's binary changed; each installed by the roll, the plan names the upgrade",
		hosts: 3,
		setup: func(f *planFixture) {
			f.installed("cp-a", "cp-b", "cp-c")
			f.runningOldBinary("3.5.36", "cp-a", "cp-b", "cp-c")
		},
		want: map[string]wantPlan{
			"cp-a": {Action: report.ActionUpdate, Restart: true, upload: []string{filepath.Join(etcd.RemoteBinDir, "etcd")}},
			"cp-b": {Action: report.ActionUpdate, Restart: true, upload: []string{filepath.Join(etcd.RemoteBinDir, "etcd")}},
			"cp-c": {Action: report.ActionUpdate, Restart: true, upload: []string{filepath.Join(etcd.RemoteBinDir, "etcd")}},
		},
		check: func(t *testing.T, f *planFixture, _ error) {
			for _, m := range f.b.Report() {
				if m.UpgradedFrom != "v3.5.36" || !f.b.rolls(m.Name) {
					t.Errorf("%s: upgradedFrom %q, rolls %v; want v3.5.36, true", m.Name, m.UpgradedFrom, f.b.rolls(m.Name))
				}
			}
			if (&Install{f.b}).ShouldRun() {
				t.Error("etcd/install would upload the new binary to every member before the roll")
			}
			for _, want := range []string{"upgrade etcd v3.5.36 → v3.6.16", "one at a time, the leader last", "a failure stops the roll"} {
				if !strings.Contains(f.out.String(), want) {
					t.Errorf("printed plan lacks %q:\n%s", want, f.out)
				}
			}
		},
	}, {
		name:  "a rolling upgrade to v3.6 from v3.5.25: refused, v3.5.26 first",
		hosts: 3,
		setup: func(f *planFixture) {
			f.installed("cp-a", "cp-b", "cp-c")
			f.runningOldBinary("3.5.25", "cp-a", "cp-b", "cp-c")
		},
		errs: []string{"cp-a", "v3.5.26 or later", "Zombie"},
		check: func(t *testing.T, f *planFixture, err error) {
			var ue *etcd.UpgradeError
			if !errors.As(err, &ue) || ue.MinPatch != etcd.MinPatchBeforeV36 || ue.ExitCode() != 2 {
				t.Fatalf("error %v is not an *etcd.UpgradeError naming %s (exit 2)", err, etcd.MinPatchBeforeV36)
			}
		},
	}, {
		name:  "--replace-lost names a member whose data is intact: refused",
		hosts: 3,
		setup: func(f *planFixture) {
			f.installed("cp-a", "cp-b", "cp-c")
			f.b.opt.ReplaceLost = []string{"cp-c"}
			f.live(f.started("cp-a"), f.started("cp-b"), f.started("cp-c"))
		},
		want: map[string]wantPlan{"cp-a": unchanged, "cp-b": unchanged},
		errs: []string{"cp-c", "holds its etcd data", "not lost"},
		check: func(t *testing.T, f *planFixture, err error) {
			var intact *ReplaceLostIntactError
			if !errors.As(err, &intact) || intact.ExitCode() != 2 {
				t.Fatalf("error %v is not a *ReplaceLostIntactError (exit 2)", err)
			}
		},
	}, {
		name:  "no quorum, the cluster formed before, a member's data dir is gone: refused",
		hosts: 3,
		setup: func(f *planFixture) {
			f.installed("cp-a", "cp-b", "cp-c")
			f.b.st.ClusterID = "c1a55"
			f.b.st.Members["cp-c"].ID = planTestHexID("cp-c")
			f.b.ledger.facts["cp-c"].Data = DataAbsent
			f.b.ledger.facts["cp-c"].EtcdActive = "failed"
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
			f.b.ledger.facts["cp-a"] = &Facts{Data: DataMember, EtcdActive: "active", Sums: map[string]string{},
				Marker: &etcd.Marker{Cluster: "other", Token: "other-0123456789abcdef", Member: "cp-a"}}
			f.b.ledger.facts["cp-b"] = &Facts{Data: DataMember, Sums: map[string]string{}}
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
				if p := f.b.ledger.plans[n]; p.Action != "" || len(p.Upload) != 0 || p.Restart {
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
				f.b.ledger.facts[n].Marker.Token = planTestCluster + "-ffffffffffffffff"
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
			f.b.ledger.facts["cp-c"].Marker = f.ourMarker("cp-c")
			f.b.ledger.facts["cp-c"].EtcdActive = "failed"
			f.live(f.started("cp-a"), f.started("cp-b"), f.unstarted("cp-c", false))
		},
		want: map[string]wantPlan{
			"cp-a": unchanged, "cp-b": unchanged,
			"cp-c": {Action: report.ActionResume, Restart: true, all: true},
		},
		check: func(t *testing.T, f *planFixture, _ error) {
			if f.b.ledger.plans["cp-c"].ID != planTestID("cp-c") || f.b.st.Members["cp-c"].ID != planTestHexID("cp-c") {
				t.Errorf("cp-c: plan id %x record %+v", f.b.ledger.plans["cp-c"].ID, f.b.st.Members["cp-c"])
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
			f.b.ledger.facts["cp-c"].Data = DataEmpty
			f.live(f.started("cp-a"), f.started("cp-b"), f.unstarted("cp-c", false))
		},
		want: map[string]wantPlan{
			"cp-a": unchanged, "cp-b": unchanged,
			"cp-c": {Action: report.ActionResume},
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
			"cp-d": {Action: report.ActionJoin, Restart: true, all: true},
			"cp-e": unchanged,
		},
		check: func(t *testing.T, f *planFixture, _ error) {
			if f.b.ledger.plans["cp-d"].ID != planTestID("cp-d") {
				t.Errorf("cp-d: plan id %x, want the learner's %x (join must not add it again)", f.b.ledger.plans["cp-d"].ID, planTestID("cp-d"))
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
			"cp-e": {Action: report.ActionJoin, Restart: true, all: true},
		},
		check: func(t *testing.T, f *planFixture, _ error) {
			if f.b.ledger.plans["cp-e"].ID != planTestID("cp-e") {
				t.Errorf("cp-e: plan id %x, want %x", f.b.ledger.plans["cp-e"].ID, planTestID("cp-e"))
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
			"cp-e": {Action: report.ActionJoin},
		},
		check: func(t *testing.T, f *planFixture, _ error) {
			if !(&Start{G: f.b, Name: PhaseStart}).ShouldRun() {
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
			if p := f.b.ledger.plans["cp-c"]; len(p.Upload) != 0 || p.Restart {
				t.Errorf("cp-c planned %+v", p)
			}
		},
	}, {
		name:  "removed member whose data was moved aside: joins again as a new member",
		hosts: 3,
		setup: func(f *planFixture) {
			f.installed("cp-a", "cp-b", "cp-c")
			f.b.st.Members["cp-c"].ID = planTestHexID("cp-c")
			f.b.ledger.facts["cp-c"].Data = DataEmpty
			f.b.ledger.facts["cp-c"].EtcdActive = "failed"
			f.live(f.started("cp-a"), f.started("cp-b"))
		},
		want: map[string]wantPlan{
			"cp-a": unchanged, "cp-b": unchanged,
			// Only the unit changes (joining flags); the certificates, binaries and marker are in place.
			"cp-c": {Action: report.ActionJoin, Restart: true, upload: []string{remoteUnit}},
		},
		check: func(t *testing.T, f *planFixture, _ error) {
			ic := f.initialCluster("cp-a", "cp-b", "cp-c")
			if rec := f.b.st.Members["cp-c"]; rec.InitialCluster != ic || rec.InitialClusterState != "existing" {
				t.Errorf("cp-c: record %+v, want %s existing", rec, ic)
			}
			if f.b.ledger.plans["cp-c"].ID != 0 {
				t.Errorf("cp-c: plan id %x: the removed ID must not be reused", f.b.ledger.plans["cp-c"].ID)
			}
		},
	}, {
		name:  "interrupted first run: founding members with our marker (or a starting etcd) resume",
		hosts: 3,
		setup: func(f *planFixture) {
			f.b.ledger.facts["cp-a"].Marker = f.ourMarker("cp-a")
			f.b.ledger.facts["cp-b"].EtcdActive = "activating"
		},
		want: map[string]wantPlan{
			"cp-a": {Action: report.ActionResume, Restart: true, all: true},
			"cp-b": {Action: report.ActionResume, Restart: true, all: true},
			"cp-c": created,
		},
	}, {
		name:  "a learner added but not started and a new host: the new host's initial cluster lists the learner too",
		hosts: 5,
		setup: func(f *planFixture) {
			f.record("cp-d", planTestHexID("cp-d"), f.initialCluster("cp-a", "cp-b", "cp-c", "cp-d"), "existing")
			f.installed("cp-a", "cp-b", "cp-c")
			f.b.ledger.facts["cp-e"].Data = DataEmpty
			f.live(f.started("cp-a"), f.started("cp-b"), f.started("cp-c"), f.unstarted("cp-d", true))
		},
		want: map[string]wantPlan{
			"cp-a": unchanged, "cp-b": unchanged, "cp-c": unchanged,
			"cp-d": {Action: report.ActionJoin, Restart: true, all: true},
			"cp-e": {Action: report.ActionJoin, Restart: true, all: true},
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
			"cp-d": {Action: report.ActionJoin, Restart: true, all: true},
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
	}, {
		name:  "a member on a spare (the operator healed onto it): refused until the spec says so",
		hosts: 3,
		setup: func(f *planFixture) {
			f.b.run.Spec.Spec.Etcd.Spares = []v1alpha1.Spare{{Name: "spare-c", Address: "10.0.0.16", Port: 22, Zone: "az-c"}}
			f.installed("cp-a", "cp-b")
			f.live(f.started("cp-a"), f.started("cp-b"),
				liveMember{id: 0xbeef, name: "spare-c", peerURLs: []string{"https://10.0.0.16:2380"}})
		},
		errs: []string{"spare-c (ID beef) run on spares of spec.etcd.spares", "hactl operator adopt"},
		check: func(t *testing.T, f *planFixture, err error) {
			var he *HealedOntoSpareError
			if !errors.As(err, &he) {
				t.Errorf("err %T, want *HealedOntoSpareError", err)
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newPlanFixture(t, tc.hosts, false)
			tc.setup(f)
			err := (&Plan{f.b}).Run(context.Background())
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

// TestDetectNoneRunning: with etcd stopped on every member (a restore after a disaster) detect does
// not wait for a quorum; with one member's etcd running or unknown it asks.
func TestDetectNoneRunning(t *testing.T) {
	f := newPlanFixture(t, 3, false)
	f.installed("cp-a", "cp-b", "cp-c")
	f.b.st.ClusterID = "c1a55"
	f.b.ledger.facts["cp-a"].EtcdActive = "failed"
	f.b.ledger.facts["cp-b"].EtcdActive = "inactive"
	f.b.ledger.facts["cp-c"].EtcdActive = "inactive"
	if !f.b.ledger.noneRunning(f.b.members) {
		t.Fatal("every member inactive or failed: noneRunning false")
	}
	start := time.Now()
	if err := (&Detect{f.b}).Run(context.Background()); err != nil || f.b.Live() != nil {
		t.Fatalf("detect: %v, live %v", err, f.b.Live())
	}
	if d := time.Since(start); d > 2*time.Second || !strings.Contains(f.out.String(), "etcd.service runs on no member") {
		t.Errorf("detect took %s and said %q; want no wait for a quorum", d, f.out.String())
	}
	for _, state := range []string{"active", "activating", ""} {
		f.b.ledger.facts["cp-c"].EtcdActive = state
		if f.b.ledger.noneRunning(f.b.members) {
			t.Errorf("cp-c etcd %q: noneRunning true", state)
		}
	}
	delete(f.b.ledger.facts, "cp-c")
	if f.b.ledger.noneRunning(f.b.members) {
		t.Error("cp-c without facts: noneRunning true")
	}
}
