//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/e2e/harness"
	"github.com/hactl/hactl/etcd"
)

// TestRollingUpgrade: a 3-member cluster bootstrapped at the newest v3.5 (bin/etcd-v3.5, built
// from tools/etcd35) is upgraded to the v3.6 of the lab's spec by changing spec.etcd.version and the
// binaries, under the drills' writer. With cp-c hung (SIGSTOP), the roll is refused before any
// restart: no other member can go down while only one of three serves. Then the roll is made to fail at cp-b (a unit drop-in whose
// ExecStartPre fails, as a new binary that cannot start would): hactl stops there, exit 1 naming
// cp-b, and the members after it keep their process and their v3.5 binary. With the fault gone, a
// re-run finishes the roll (leader last, each caught up), every member's /version answers v3.6 and
// the cluster version is 3.6.0; a spec back at v3.5 is then refused as a downgrade (exit 2) without
// restarting anything. No acknowledged write is lost. The test recreates cp-a, cp-b and cp-c first
// (a cluster of its own, state dir state-upgrade), so it depends on no other test's cluster.
func TestRollingUpgrade(t *testing.T) {
	ctx := context.Background()
	hosts := []string{"cp-a", "cp-b", "cp-c"}
	oldBin := filepath.Join(suite.RepoRoot, "bin", "etcd-v3.5")
	from := binaryEtcdVersion(t, filepath.Join(oldBin, "etcd"))

	c35 := labSpec(t, 3)
	c35.Spec.StateDir = filepath.Join(suite.Lab.Dir(), "state-upgrade")
	c35.Spec.Etcd.Version = "v" + from
	c35.Spec.Etcd.Binaries = v1alpha1.EtcdBinaries{Etcd: filepath.Join(oldBin, "etcd"), Etcdctl: filepath.Join(oldBin, "etcdctl"), Etcdutl: filepath.Join(oldBin, "etcdutl")}
	c36 := labSpec(t, 3)
	c36.Spec.StateDir = c35.Spec.StateDir
	to := strings.TrimPrefix(c36.Spec.Etcd.Version, "v")
	if etcd.MinorOf(to) == etcd.MinorOf(from) {
		t.Fatalf("bin/etcd-v3.5 is etcd %s, the lab's spec %s: not a minor upgrade", from, to)
	}
	// The state dir of an earlier run of this test names a cluster the recreated hosts no longer have.
	if err := os.RemoveAll(c35.Spec.StateDir); err != nil {
		t.Fatal(err)
	}
	if err := suite.Lab.Recreate(ctx, hosts...); err != nil {
		t.Fatal(err)
	}
	spec35 := harness.WriteSpecIn(t, suite.Lab.Dir(), c35, "etcd-upgrade-from.yaml")
	spec36 := harness.WriteSpecIn(t, suite.Lab.Dir(), c36, "etcd-upgrade-to.yaml")

	suite.BootstrapJSON(t, spec35)
	waitHealthy(t, spec35, time.Minute)
	checkVersions(t, c35.Spec.StateDir, hosts, from, etcd.MinorOf(from))
	oldSum := strings.Fields(suite.ExecOn(t, "cp-a", "sha256sum", filepath.Join(etcd.RemoteBinDir, "etcd")))[0]
	w := startWriterOn(t, "upgrade", c35)

	// cp-c hangs (SIGSTOP: its unit still active): restarting any other member would leave one of
	// three voters serving, so the roll is refused before anything is touched.
	suite.ExecOn(t, "cp-c", "systemctl", "kill", "--signal=SIGSTOP", "etcd.service")
	before := suite.UnitStarts(t, hosts)
	r := suite.Hactl(t, "bootstrap", "-f", spec36)
	suite.ExecOn(t, "cp-c", "systemctl", "kill", "--signal=SIGCONT", "etcd.service")
	if r.Code != 1 || !strings.Contains(r.Stderr, "could not commit") || !strings.Contains(r.Stderr, "cp-c") {
		t.Errorf("a roll while cp-c hangs: exit %d, want 1 refusing for want of a quorum, naming cp-c", r.Code)
	}
	if after := suite.UnitStarts(t, hosts); !maps.Equal(before, after) {
		t.Errorf("the refused roll restarted etcd: %v → %v", before, after)
	}
	waitHealthy(t, spec35, time.Minute)

	// The roll fails at cp-b. cp-b must not be the leader: hactl restarts the leader last, so some
	// member comes after cp-b and must be left untouched.
	moveLeaderOff(t, c35.Spec.StateDir, "cp-b", "cp-a")
	dropIn := "/etc/systemd/system/etcd.service.d/e2e-fail.conf"
	suite.ExecOn(t, "cp-b", "sh", "-c", "mkdir -p "+filepath.Dir(dropIn)+" && printf '[Service]\\nExecStartPre=/bin/false\\n' > "+dropIn)
	before = suite.UnitStarts(t, hosts)
	// The drop-in is hactl's fault injection, not a foreign setting: kept with the flag (without it
	// preflight refuses cp-b before the roll starts, and nothing here would be tested).
	if r := suite.Hactl(t, "bootstrap", "-f", spec36, "--allow-foreign-overrides"); r.Code != 1 || !strings.Contains(r.Stderr, "cp-b") {
		t.Errorf("the roll failing at cp-b: exit %d, want 1 naming cp-b", r.Code)
	}
	after := suite.UnitStarts(t, hosts)
	untouched := 0
	for _, h := range []string{"cp-a", "cp-c"} {
		v := memberVersions(t, c35.Spec.StateDir, h)
		sum := strings.Fields(suite.ExecOn(t, h, "sha256sum", filepath.Join(etcd.RemoteBinDir, "etcd")))[0]
		switch {
		case after[h] == before[h]:
			untouched++
			if v.Server != from || sum != oldSum {
				t.Errorf("%s was not restarted but runs %s with binary sha256 %s; want %s with %s (the roll should have stopped before it)", h, v.Server, sum, from, oldSum)
			}
		case v.Server != to:
			t.Errorf("%s was restarted by the roll but runs %s, want %s", h, v.Server, to)
		}
	}
	if untouched == 0 {
		t.Errorf("every member was restarted (%v → %v): the roll did not stop at cp-b", before, after)
	}

	// The fault gone, a re-run finishes the roll.
	suite.ExecOn(t, "cp-b", "sh", "-c", "rm -f "+dropIn+" && systemctl daemon-reload")
	r = suite.MustHactl(t, "bootstrap", "-f", spec36, "-o", "json")
	var res struct {
		EtcdClusterVersion string `json:"etcdClusterVersion"`
		Members            []struct {
			Name, UpgradedFrom string
		} `json:"members"`
	}
	harness.DecodeJSON(t, r, &res)
	upgraded := 0
	for _, m := range res.Members {
		if m.UpgradedFrom == "v"+from {
			upgraded++
		}
	}
	if res.EtcdClusterVersion != etcd.MinorOf(to) || upgraded < untouched {
		t.Errorf("resumed roll: cluster version %q, %d member(s) upgraded from v%s; want %s and at least %d", res.EtcdClusterVersion, upgraded, from, etcd.MinorOf(to), untouched)
	}
	for _, want := range []string{"caught up with the leader", "cluster version " + etcd.MinorOf(to)} {
		if !strings.Contains(r.Stderr, want) {
			t.Errorf("the resumed roll's progress lacks %q", want)
		}
	}
	checkVersions(t, c35.Spec.StateDir, hosts, to, etcd.MinorOf(to))

	// Back to v3.5 is a downgrade: refused before anything is restarted.
	before = suite.UnitStarts(t, hosts)
	if r := suite.Hactl(t, "bootstrap", "-f", spec35); r.Code != 2 || !strings.Contains(r.Stderr, "downgrade") {
		t.Errorf("spec back at v%s: exit %d, want 2 refusing a downgrade", from, r.Code)
	}
	if after := suite.UnitStarts(t, hosts); !maps.Equal(before, after) {
		t.Errorf("the refused downgrade restarted etcd: %v → %v", before, after)
	}
	w.Verify("during the rolling upgrade, its failure at cp-b and the resumed roll")
}

// binaryEtcdVersion is what path --version reports ("3.5.36"); the test fails when it cannot run.
func binaryEtcdVersion(t *testing.T, path string) string {
	t.Helper()
	out, err := exec.Command(path, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v (make etcd-bins builds it)", path, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "etcd Version: "); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("%s --version printed no version:\n%s", path, out)
	return ""
}

// memberVersions asks host's member for its /version with hactl's client certificate in stateDir.
func memberVersions(t *testing.T, stateDir, host string) etcd.Versions {
	t.Helper()
	tls := etcd.HactlClientTLS(&v1alpha1.Cluster{Spec: v1alpha1.ClusterSpec{StateDir: stateDir}})
	v, err := etcd.MemberVersions(context.Background(), suite.Endpoint(t, host), tls, 5*time.Second)
	if err != nil {
		t.Fatalf("%s/version: %v", host, err)
	}
	return v
}

// checkVersions waits up to 30 s until every host's member answers server and cluster version
// (the cluster version follows the members' with a delay). A member that does not answer /version
// yet is waited for too; the failure names the first host not there and what it answered.
func checkVersions(t *testing.T, stateDir string, hosts []string, server, cluster string) {
	t.Helper()
	tls := etcd.HactlClientTLS(&v1alpha1.Cluster{Spec: v1alpha1.ClusterSpec{StateDir: stateDir}})
	harness.WaitFor(t, fmt.Sprintf("every member (%s) at server %s, cluster %s", strings.Join(hosts, ", "), server, cluster), 30*time.Second, 500*time.Millisecond, func() string {
		for _, h := range hosts {
			v, err := etcd.MemberVersions(context.Background(), suite.Endpoint(t, h), tls, 5*time.Second)
			switch {
			case err != nil:
				return fmt.Sprintf("%s/version: %v", h, err)
			case v.Server != server || v.Cluster != cluster:
				return fmt.Sprintf("%s answers server %s, cluster %s", h, v.Server, v.Cluster)
			}
		}
		return ""
	})
}

// moveLeaderOff hands leadership from host to other when host leads (MoveLeader, sent to the leader).
func moveLeaderOff(t *testing.T, stateDir, host, other string) {
	t.Helper()
	ctx := context.Background()
	cli := harness.EtcdClient(t, stateDir, suite.Endpoint(t, host))
	st, err := cli.Status(ctx, suite.Endpoint(t, host))
	if err != nil {
		t.Fatal(err)
	}
	if st.Leader != st.Header.MemberId {
		return
	}
	ml, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ml.Members {
		if m.Name == other {
			if _, err := cli.MoveLeader(ctx, m.ID); err != nil {
				t.Fatalf("move leader %s → %s: %v", host, other, err)
			}
			return
		}
	}
	t.Fatalf("no member %s", other)
}
