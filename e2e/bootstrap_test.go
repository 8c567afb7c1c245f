//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/e2e/harness"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/report"
)

var threeHosts = []string{"cp-a", "cp-b", "cp-c"}

// statusReport is the part of `hactl status -o json` the tests read.
type statusReport struct {
	Healthy  bool               `json:"healthy"`
	Problems []string           `json:"problems"`
	Zones    map[string]string  `json:"zones"`
	Etcd     etcd.ClusterStatus `json:"etcd"`
}

func status(t *testing.T, spec string) (statusReport, harness.Result) {
	t.Helper()
	r := suite.Hactl(t, "status", "-f", spec, "-o", "json")
	var rep statusReport
	harness.DecodeJSON(t, r, &rep)
	return rep, r
}

// waitHealthy polls hactl status until the cluster is healthy and returns that status.
func waitHealthy(t *testing.T, spec string, within time.Duration) statusReport {
	t.Helper()
	var rep statusReport
	harness.WaitFor(t, "cluster healthy", within, 2*time.Second, func() string {
		var r harness.Result
		if rep, r = status(t, spec); r.Code == 0 && rep.Healthy {
			return ""
		}
		return fmt.Sprintf("exit %d, problems %v", r.Code, rep.Problems)
	})
	return rep
}

// ensureThree brings the lab's 3-member cluster to a converged state (bootstrap is idempotent, so
// every test can start with it).
func ensureThree(t *testing.T) string {
	t.Helper()
	spec := specPath(t, 3)
	suite.MustHactl(t, "bootstrap", "-f", spec)
	return spec
}

func TestBadSpecsExitTwoBeforeContactingHosts(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(c *v1alpha1.Cluster)
		want   []string
	}{
		{"even member count", func(c *v1alpha1.Cluster) { c.Spec.Hosts[2].Roles = []v1alpha1.Role{v1alpha1.RoleControlPlane} }, []string{"spec.hosts", "even"}},
		{"zone spread", func(c *v1alpha1.Cluster) { c.Spec.Hosts[2].Zone = "az-a" }, []string{"spec.hosts[2].zone", "quorum"}},
		{"election timeout too short", func(c *v1alpha1.Cluster) {
			c.Spec.Etcd.ElectionTimeout = v1alpha1.Duration{Duration: 300 * time.Millisecond}
		}, []string{"spec.etcd.electionTimeout"}},
		{"relative data dir", func(c *v1alpha1.Cluster) { c.Spec.Etcd.DataDir = "var/lib/etcd" }, []string{"spec.etcd.dataDir"}},
		{"duplicate address", func(c *v1alpha1.Cluster) { c.Spec.Hosts[1].Address = c.Spec.Hosts[0].Address }, []string{"spec.hosts[1].address"}},
	}
	check := func(t *testing.T, spec string, want []string) {
		t.Helper()
		r := suite.Hactl(t, "bootstrap", "-f", spec)
		if r.Code != 2 {
			t.Fatalf("exit %d, want 2", r.Code)
		}
		for _, w := range want {
			if !strings.Contains(r.Stderr, w) {
				t.Errorf("stderr does not mention %q", w)
			}
		}
		if strings.Contains(r.Stdout, "[preflight]") {
			t.Errorf("hosts were contacted for an invalid spec")
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := labSpec(t, 3)
			tc.mutate(c)
			check(t, harness.WriteSpec(t, c, "cluster.yaml"), tc.want)
		})
	}
	t.Run("unknown field", func(t *testing.T) {
		raw, err := os.ReadFile(specPath(t, 3))
		if err != nil {
			t.Fatal(err)
		}
		mutated := strings.Replace(string(raw), "zone: az-b", "zone: az-b\n    zonee: az-x", 1)
		if mutated == string(raw) {
			t.Fatalf("mutation did not apply; spec is:\n%s", raw)
		}
		p := filepath.Join(t.TempDir(), "cluster.yaml")
		os.WriteFile(p, []byte(mutated), 0o644)
		check(t, p, []string{"spec.hosts[1].zonee", "unknown field", "cluster.yaml:"})
	})
	t.Run("private key readable by others", func(t *testing.T) {
		c := labSpec(t, 3)
		key, _ := os.ReadFile(c.Spec.SSH.IdentityFile)
		loose := filepath.Join(t.TempDir(), "id")
		os.WriteFile(loose, key, 0o644)
		c.Spec.SSH.IdentityFile = loose
		r := suite.Hactl(t, "plan", "-f", harness.WriteSpec(t, c, "cluster.yaml"))
		if r.Code != 2 || !strings.Contains(r.Stderr, "spec.ssh.identityFile") || !strings.Contains(r.Stderr, "chmod 600") {
			t.Fatalf("want exit 2 naming spec.ssh.identityFile and chmod 600")
		}
	})
}

func TestHostKeysAreVerified(t *testing.T) {
	c := labSpec(t, 3)
	dir := t.TempDir()
	c.Spec.StateDir = filepath.Join(dir, "state")
	c.Spec.SSH.KnownHostsFile = filepath.Join(dir, "known_hosts")
	spec := harness.WriteSpec(t, c, "cluster.yaml")

	r := suite.Hactl(t, "plan", "-f", spec)
	if r.Code != 1 || !strings.Contains(r.Stderr, "--accept-new-host-keys") || !strings.Contains(r.Stderr, "SHA256:") {
		t.Fatalf("unknown host keys: want exit 1 with the fingerprint and how to trust it")
	}
	if _, err := os.Stat(c.Spec.SSH.KnownHostsFile); err == nil {
		t.Fatalf("known_hosts was written without --accept-new-host-keys")
	}
	suite.MustHactl(t, "plan", "-f", spec, "--accept-new-host-keys")
	kh, _ := os.ReadFile(c.Spec.SSH.KnownHostsFile)
	if n := len(strings.Split(strings.TrimSpace(string(kh)), "\n")); n != 3 {
		t.Fatalf("known_hosts has %d lines after accepting, want 3:\n%s", n, kh)
	}
	suite.MustHactl(t, "plan", "-f", spec) // now trusted without the flag

	// A changed key (cp-a's entry replaced by cp-b's key) is refused even with the flag, and the file
	// is left alone.
	lines := strings.Split(strings.TrimSpace(string(kh)), "\n")
	var aIdx, bKey = -1, ""
	for i, l := range lines {
		f := strings.Fields(l)
		if f[0] == "172.28.0.11" {
			aIdx = i
		}
		if f[0] == "172.28.0.12" {
			bKey = strings.Join(f[1:], " ")
		}
	}
	if aIdx < 0 || bKey == "" {
		t.Fatalf("unexpected known_hosts:\n%s", kh)
	}
	lines[aIdx] = "172.28.0.11 " + bKey
	tampered := strings.Join(lines, "\n") + "\n"
	os.WriteFile(c.Spec.SSH.KnownHostsFile, []byte(tampered), 0o600)
	r = suite.Hactl(t, "plan", "-f", spec, "--accept-new-host-keys")
	if r.Code != 1 || !strings.Contains(strings.ToLower(r.Stderr), "changed") || !strings.Contains(r.Stderr, "cp-a") {
		t.Fatalf("changed host key: want exit 1 naming cp-a and the changed key")
	}
	if after, _ := os.ReadFile(c.Spec.SSH.KnownHostsFile); string(after) != tampered {
		t.Fatalf("known_hosts was modified after a changed key")
	}
}

func TestBootstrapThreeMembers(t *testing.T) {
	spec := specPath(t, 3)
	plan := suite.Hactl(t, "plan", "-f", spec)
	if plan.Code != 0 {
		t.Fatalf("plan failed")
	}
	// CI's drift check: a plan with changes exits 4 and names them.
	if r := suite.Hactl(t, "plan", "-f", spec, "--detailed-exitcode"); r.Code != 4 ||
		!strings.Contains(r.Stderr, "changes pending: member cp-a: create, member cp-b: create, member cp-c: create") || strings.Contains(r.Stderr, "ERROR") {
		t.Fatalf("plan --detailed-exitcode before bootstrap: exit %d, want 4 naming the 3 creates", r.Code)
	}
	res := suite.BootstrapJSON(t, spec)
	if len(res.Members) != 3 || res.ClusterID == "" {
		t.Fatalf("result %+v", res)
	}
	for _, m := range res.Members {
		if m.ID == "" {
			t.Errorf("%s: no member ID", m.Name)
		}
		t.Logf("%s: %s, %d SSH commands", m.Name, m.Action, m.Commands)
	}
	rep, r := status(t, spec)
	if r.Code != 0 || !rep.Healthy {
		t.Fatalf("status not healthy: %v", rep.Problems)
	}
	if len(rep.Etcd.Members) != 3 || rep.Etcd.LeaderName == "" || !rep.Etcd.QuorumReachable {
		t.Fatalf("status: %+v", rep.Etcd)
	}
	zones := map[string]bool{}
	for _, ep := range rep.Etcd.Endpoints {
		if !ep.Healthy || ep.CertNotAfter.IsZero() || ep.RaftTerm == 0 || ep.DBSizeBytes == 0 {
			t.Errorf("endpoint %+v", ep)
		}
		zones[rep.Zones[ep.MemberName]] = true
	}
	if len(zones) != 3 {
		t.Errorf("members span zones %v, want 3 zones", zones)
	}
	// The table output names the leader and every member.
	table := suite.MustHactl(t, "status", "-f", spec)
	for _, h := range threeHosts {
		if !strings.Contains(table.Stdout, h) {
			t.Errorf("status table does not list %s", h)
		}
	}
	// On the hosts: the unit passes systemd's own checks, keys are 0600, the unit holds only flags.
	suite.ExecOn(t, "cp-a", "systemd-analyze", "verify", "/etc/systemd/system/etcd.service")
	for _, f := range []string{"ca.key", "server.key", "peer.key"} {
		if mode := strings.TrimSpace(suite.ExecOn(t, "cp-b", "stat", "-c", "%a %U", "/etc/etcd/pki/"+f)); mode != "600 root" {
			t.Errorf("cp-b %s: mode %q, want 600 root", f, mode)
		}
	}
	unit := suite.ExecOn(t, "cp-c", "cat", "/etc/systemd/system/etcd.service")
	if strings.Contains(unit, "ETCD_") || strings.Contains(unit, "--config-file") {
		t.Errorf("unit mixes flags with a config file or ETCD_ variables:\n%s", unit)
	}
}

func TestRerunIsNoop(t *testing.T) {
	spec := ensureThree(t)
	before := suite.UnitStarts(t, threeHosts)
	cli := harness.EtcdClient(t, filepath.Join(suite.Lab.Dir(), "state-3"), suite.Endpoint(t, "cp-a"))
	rev := func() int64 {
		resp, err := cli.Get(context.Background(), "hactl/none")
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	revBefore := rev()
	start := time.Now()
	res := suite.BootstrapJSON(t, spec)
	t.Logf("no-op re-run took %s (reported %s)", time.Since(start), res.Duration)
	for _, m := range res.Members {
		if m.Action != report.ActionUnchanged || len(m.Changes) != 0 {
			t.Errorf("%s: action %s changes %v, want unchanged", m.Name, m.Action, m.Changes)
		}
	}
	if after := suite.UnitStarts(t, threeHosts); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("etcd restarted by a no-op re-run:\nbefore %v\nafter  %v", before, after)
	}
	if r := rev(); r != revBefore {
		t.Errorf("revision moved from %d to %d: a no-op re-run wrote to etcd", revBefore, r)
	}
	if r := suite.Hactl(t, "plan", "-f", spec, "--detailed-exitcode", "-o", "yaml"); r.Code != 0 || !strings.Contains(r.Stdout, "action: unchanged") {
		t.Errorf("plan --detailed-exitcode -o yaml of a converged cluster: exit %d, want 0 with a YAML summary", r.Code)
	}
}

// TestStateDirRecoveredFromMembers: the local state dir is gone; bootstrap reads the CA (and the
// cluster's flags) back from the members — the same CA, never a second one — nothing restarts, and
// status and pki check work again with the recovered state.
func TestStateDirRecoveredFromMembers(t *testing.T) {
	ensureThree(t)
	before := suite.UnitStarts(t, threeHosts)
	origCA, err := os.ReadFile(filepath.Join(suite.Lab.Dir(), "state-3", "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	c := labSpec(t, 3)
	c.Spec.StateDir = filepath.Join(t.TempDir(), "lost-state")
	spec := harness.WriteSpec(t, c, "cluster.yaml")
	res := suite.BootstrapJSON(t, spec)
	for _, m := range res.Members {
		if m.Action != report.ActionUnchanged {
			t.Errorf("%s: %s after recovery, want unchanged", m.Name, m.Action)
		}
	}
	gotCA, err := os.ReadFile(filepath.Join(c.Spec.StateDir, "pki", "ca.crt"))
	if err != nil || string(gotCA) != string(origCA) {
		t.Fatalf("recovered CA differs from the cluster's (err %v): a second CA", err)
	}
	if st, err := os.Stat(filepath.Join(c.Spec.StateDir, "pki", "ca.key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("recovered ca.key: %v %v", st, err)
	}
	if after := suite.UnitStarts(t, threeHosts); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("recovery restarted etcd:\nbefore %v\nafter  %v", before, after)
	}
	waitHealthy(t, spec, 30*time.Second)
	if r := suite.Hactl(t, "pki", "check", "-f", spec); r.Code != 0 || !strings.Contains(r.Stdout, "server.crt") {
		t.Fatalf("pki check after recovery: exit %d", r.Code)
	}
}

// TestPortChanges: a changed peer port on a formed cluster is refused (etcd keeps peer URLs in its
// membership); a changed client port is a rolling restart, one member at a time, and the cluster is
// found again through the client URLs recorded in the state dir.
func TestPortChanges(t *testing.T) {
	spec := ensureThree(t)
	before := suite.UnitStarts(t, threeHosts)
	c := labSpec(t, 3)
	c.Spec.Etcd.PeerPort = 2390
	r := suite.Hactl(t, "bootstrap", "-f", harness.WriteSpec(t, c, "cluster.yaml"))
	if r.Code != 1 || !strings.Contains(r.Stderr, "peer URL changed") || !strings.Contains(r.Stderr, "member update") {
		t.Fatalf("peer port change: want exit 1 explaining member update")
	}
	if after := suite.UnitStarts(t, threeHosts); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("a refused peer port change restarted etcd")
	}

	c = labSpec(t, 3)
	c.Spec.Etcd.ClientPort = 2479
	moved := harness.WriteSpec(t, c, "cluster.yaml")
	res := suite.BootstrapJSON(t, moved)
	for _, m := range res.Members {
		if m.Action != report.ActionUpdate {
			t.Errorf("%s: %s, want update", m.Name, m.Action)
		}
	}
	if rep := waitHealthy(t, moved, 30*time.Second); len(rep.Etcd.Members) != 3 {
		t.Fatalf("members %d", len(rep.Etcd.Members))
	}
	// And back, so later tests find the lab's spec converged.
	for _, m := range suite.BootstrapJSON(t, spec).Members {
		if m.Action != report.ActionUpdate {
			t.Errorf("%s: %s moving back, want update", m.Name, m.Action)
		}
	}
	waitHealthy(t, spec, 30*time.Second)
}

func TestClientsWithoutCertificateRefused(t *testing.T) {
	spec := ensureThree(t)
	_ = spec
	ep := suite.Endpoint(t, "cp-a")
	// Plain HTTP to the client port: refused (the port speaks TLS only).
	hc := &http.Client{Timeout: 3 * time.Second}
	if resp, err := hc.Get(strings.Replace(ep, "https://", "http://", 1) + "/health"); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatalf("plain HTTP /health answered 200: %s", body)
		}
		t.Logf("plain HTTP answered %d %q", resp.StatusCode, strings.TrimSpace(string(body)))
	} else {
		t.Logf("plain HTTP refused: %v", err)
	}
	// refused fails the test if a client with cfg reads from etcd, and returns why it could not.
	refused := func(who string, cfg clientv3.Config) error {
		t.Helper()
		cli, err := clientv3.New(cfg)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err = cli.Get(ctx, "x")
		cancel()
		cli.Close()
		if err == nil {
			t.Fatalf("%s read from etcd", who)
		}
		return err
	}
	// A plaintext gRPC client cannot read.
	refused("plaintext client", clientv3.Config{Endpoints: []string{strings.Replace(ep, "https://", "http://", 1)}, DialTimeout: 3 * time.Second})
	// TLS that trusts the CA but presents no client certificate: refused.
	caFiles := etcd.TLSFiles{CA: filepath.Join(suite.Lab.Dir(), "state-3", "pki", "ca.crt")}
	cfg, err := caFiles.Config()
	if err != nil {
		t.Fatal(err)
	}
	err = refused("client without a certificate", clientv3.Config{Endpoints: []string{ep}, TLS: cfg, DialTimeout: 3 * time.Second})
	t.Logf("client without certificate: %v", err)
	// A raw TLS handshake without a client certificate fails at the server.
	conn, err := tls.Dial("tcp", strings.TrimPrefix(ep, "https://"), cfg)
	if err == nil {
		conn.SetDeadline(time.Now().Add(3 * time.Second))
		_, err = conn.Read(make([]byte, 1))
		conn.Close()
	}
	if err == nil {
		t.Fatalf("TLS handshake without client certificate accepted")
	}
	// Control: with hactl's client certificate it works.
	cli := harness.EtcdClient(t, filepath.Join(suite.Lab.Dir(), "state-3"), ep)
	if _, err := cli.Get(context.Background(), "x"); err != nil {
		t.Fatalf("client with certificate: %v", err)
	}
}

func TestMemberHostKilledClusterServesWrites(t *testing.T) {
	spec := ensureThree(t)
	ctx := context.Background()
	if err := suite.Lab.Kill(ctx, "cp-b"); err != nil {
		t.Fatal(err)
	}
	restarted := false
	defer func() {
		if !restarted {
			suite.Lab.Start(ctx, "cp-b")
		}
	}()
	cli := harness.EtcdClient(t, filepath.Join(suite.Lab.Dir(), "state-3"), suite.Endpoint(t, "cp-a"), suite.Endpoint(t, "cp-c"))
	// If cp-b was the leader, the survivors first elect a new one (election timeout 1s); writes in
	// that window may fail, so the first write is retried for up to 15 s, and every later one must
	// succeed first time.
	killed := time.Now()
	for i := 0; i < 50; i++ {
		for {
			wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := cli.Put(wctx, fmt.Sprintf("e2e/killed/%03d", i), "v")
			cancel()
			if err == nil {
				break
			}
			if i > 0 || time.Since(killed) > 15*time.Second {
				t.Fatalf("write %d with cp-b down (%s after the kill): %v", i, time.Since(killed), err)
			}
			t.Logf("write %d: %v (retrying)", i, err)
		}
		if i == 0 {
			t.Logf("first write acknowledged %s after the kill", time.Since(killed).Round(time.Millisecond))
		}
	}
	rep, r := status(t, spec)
	if r.Code != 3 || rep.Healthy || !rep.Etcd.QuorumReachable {
		t.Fatalf("status with one host down: exit %d healthy %v quorum %v; want exit 3, degraded, quorum held", r.Code, rep.Healthy, rep.Etcd.QuorumReachable)
	}
	if !strings.Contains(strings.Join(rep.Problems, ";"), "172.28.0.12") {
		t.Errorf("problems %v do not name cp-b's endpoint", rep.Problems)
	}
	if err := suite.Lab.Start(ctx, "cp-b"); err != nil {
		t.Fatal(err)
	}
	restarted = true
	waitHealthy(t, spec, 90*time.Second)
	// cp-b caught up: a linearizable read through it sees every write.
	b := harness.EtcdClient(t, filepath.Join(suite.Lab.Dir(), "state-3"), suite.Endpoint(t, "cp-b"))
	resp, err := b.Get(ctx, "e2e/killed/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 50 {
		t.Fatalf("cp-b sees %v keys (err %v), want 50", resp, err)
	}
	// A re-run after the reboot changes nothing.
	for _, m := range suite.BootstrapJSON(t, spec).Members {
		if m.Action != report.ActionUnchanged {
			t.Errorf("%s: %s after host restart, want unchanged", m.Name, m.Action)
		}
	}
}

// TestLostDataDirReplaced: a member whose data dir is lost (cp-c's, moved away by the test) is
// never started empty: bootstrap refuses (exit 1) and names `--replace-lost cp-c`; --replace-lost
// naming an intact member is refused (exit 2); `bootstrap --replace-lost cp-c` removes the old
// member and adds cp-c back as a new learner, promoted once caught up, under the drills' writer
// with no acknowledged write lost.
func TestLostDataDirReplaced(t *testing.T) {
	spec := ensureThree(t)
	rep := waitHealthy(t, spec, time.Minute)
	var id string
	for _, m := range rep.Etcd.Members {
		if m.Name == "cp-c" {
			id = m.ID
		}
	}
	if id == "" {
		t.Fatalf("cp-c not in member list")
	}
	w := startWriter(t, "replace-lost", 3)
	// A lost disk on cp-c.
	suite.ExecOn(t, "cp-c", "sh", "-c", "systemctl stop etcd && mv /var/lib/etcd /var/lib/etcd.e2e-lost")
	t.Cleanup(func() { suite.ExecOn(t, "cp-c", "rm", "-rf", "/var/lib/etcd.e2e-lost") })
	r := suite.Hactl(t, "bootstrap", "-f", spec)
	if r.Code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", r.Code, r.Stderr)
	}
	for _, want := range []string{"cp-c", id, "--replace-lost cp-c"} {
		if !strings.Contains(r.Stderr, want) {
			t.Errorf("error does not mention %q:\n%s", want, r.Stderr)
		}
	}
	// Stopped above: anything but stopped (active, or activating: restarting after a crash) means
	// hactl started it.
	if out := suite.ExecOn(t, "cp-c", "sh", "-c", "systemctl is-active etcd || true"); strings.TrimSpace(out) != "inactive" && strings.TrimSpace(out) != "failed" {
		t.Fatalf("etcd was started on cp-c with an empty data dir: %q", strings.TrimSpace(out))
	}
	if r := suite.Hactl(t, "bootstrap", "-f", spec, "--replace-lost", "cp-b"); r.Code != 2 || !strings.Contains(r.Stderr, "cp-b") {
		t.Errorf("--replace-lost cp-b (intact): exit %d, want 2:\n%s", r.Code, r.Stderr)
	}
	if r := suite.Hactl(t, "bootstrap", "-f", spec, "--replace-lost", "etcd-z"); r.Code != 2 {
		t.Errorf("--replace-lost etcd-z (no etcd host): exit %d, want 2:\n%s", r.Code, r.Stderr)
	}

	res := suite.BootstrapJSON(t, spec, "--replace-lost", "cp-c")
	for _, m := range res.Members {
		if want := map[bool]report.Action{true: report.ActionReplace, false: report.ActionUnchanged}[m.Name == "cp-c"]; m.Action != want {
			t.Errorf("%s: %s, want %s", m.Name, m.Action, want)
		}
	}
	after := waitHealthy(t, spec, time.Minute)
	for _, m := range after.Etcd.Members {
		if m.Name == "cp-c" && (m.ID == id || m.IsLearner) {
			t.Errorf("cp-c after the replacement: ID %s (was %s), learner %v", m.ID, id, m.IsLearner)
		}
	}
	if len(after.Etcd.Members) != 3 {
		t.Errorf("%d members after the replacement, want 3", len(after.Etcd.Members))
	}
	w.Verify("while cp-c was lost and replaced")
	for _, m := range suite.BootstrapJSON(t, spec).Members {
		if m.Action != report.ActionUnchanged {
			t.Errorf("%s: %s on the re-run after the replacement", m.Name, m.Action)
		}
	}
}

// TestScaleOutThreeToFive adds two hosts to the running 3-member cluster through the spec: they join
// one at a time as learners and are promoted; the founding members are not restarted.
func TestScaleOutThreeToFive(t *testing.T) {
	ensureThree(t)
	ctx := context.Background()
	if err := suite.Lab.Recreate(ctx, "etcd-d", "etcd-e"); err != nil {
		t.Fatal(err)
	}
	before := suite.UnitStarts(t, threeHosts)
	c := labSpec(t, 5)
	three := labSpec(t, 3)
	c.Metadata.Name, c.Spec.StateDir = three.Metadata.Name, three.Spec.StateDir
	spec := harness.WriteSpec(t, c, "cluster.yaml")
	res := suite.BootstrapJSON(t, spec)
	actions := map[string]report.Action{}
	for _, m := range res.Members {
		actions[m.Name] = m.Action
	}
	for _, h := range threeHosts {
		if actions[h] != report.ActionUnchanged {
			t.Errorf("%s: %s, want unchanged", h, actions[h])
		}
	}
	for _, h := range []string{"etcd-d", "etcd-e"} {
		if actions[h] != report.ActionJoin {
			t.Errorf("%s: %s, want join", h, actions[h])
		}
	}
	if after := suite.UnitStarts(t, threeHosts); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("founding members restarted by a scale-out:\nbefore %v\nafter  %v", before, after)
	}
	rep := waitHealthy(t, spec, 30*time.Second)
	if len(rep.Etcd.Members) != 5 {
		t.Fatalf("%d members after scale-out", len(rep.Etcd.Members))
	}
	for _, m := range rep.Etcd.Members {
		if m.IsLearner {
			t.Errorf("%s is still a learner", m.Name)
		}
	}
	for _, m := range suite.BootstrapJSON(t, spec).Members {
		if m.Action != report.ActionUnchanged {
			t.Errorf("%s: %s on re-run after scale-out", m.Name, m.Action)
		}
	}
}

// TestInterruptedBootstrapConverges interrupts hactl in the middle of a bootstrap on fresh hosts —
// SIGKILL at two points, and a Ctrl-C (SIGINT), which must stop cleanly and promptly — and checks
// that a re-run finishes the job.
func TestInterruptedBootstrapConverges(t *testing.T) {
	for _, tc := range []struct {
		killAt string
		sig    syscall.Signal
	}{
		{"installed", syscall.SIGKILL},
		{"etcd started", syscall.SIGKILL},
		{"[etcd/install]", syscall.SIGINT},
	} {
		t.Run(fmt.Sprintf("%s after first %s", tc.sig, strings.Trim(strings.ReplaceAll(tc.killAt, " ", "-"), "[]")), func(t *testing.T) {
			ctx := context.Background()
			if err := suite.Lab.Recreate(ctx, threeHosts...); err != nil {
				t.Fatal(err)
			}
			c := labSpec(t, 3)
			c.Metadata.Name = "interrupted"
			c.Spec.StateDir = filepath.Join(t.TempDir(), "state")
			spec := harness.WriteSpec(t, c, "cluster.yaml")

			cmd := suite.Command(t, "bootstrap", "-f", spec)
			t.Logf("(%s after the first %q line)", tc.sig, tc.killAt)
			stdout, _ := cmd.StdoutPipe()
			cmd.Stderr = cmd.Stdout
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var once sync.Once
			var signalled time.Time
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				line := sc.Text()
				t.Logf("| %s", line)
				if strings.Contains(line, tc.killAt) {
					once.Do(func() {
						cmd.Process.Signal(tc.sig)
						signalled = time.Now()
					})
				}
			}
			// A watchdog, not a timing check: a hactl that ignores the signal would hang the suite.
			watchdog := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() })
			err := cmd.Wait()
			watchdog.Stop()
			if signalled.IsZero() {
				t.Fatalf("hactl finished before the kill point %q", tc.killAt)
			}
			if tc.sig == syscall.SIGINT {
				took := time.Since(signalled)
				t.Logf("hactl stopped %s after SIGINT: %v", took.Round(time.Millisecond), err)
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != 1 {
					t.Fatalf("after SIGINT: %v, want a clean stop with exit 1 (not killed by the watchdog)", err)
				}
			}
			res := suite.BootstrapJSON(t, spec)
			t.Logf("re-run after the kill: %+v", res.Members)
			rep := waitHealthy(t, spec, 60*time.Second)
			if len(rep.Etcd.Members) != 3 {
				t.Fatalf("%d members after convergence", len(rep.Etcd.Members))
			}
			for _, h := range threeHosts {
				if left := suite.ExecOn(t, h, "sh", "-c", "ls -a /usr/local/bin /etc/etcd/pki /etc/systemd/system /etc/hactl | grep -c hactl-tmp || true"); strings.TrimSpace(left) != "0" {
					t.Errorf("%s: %s upload temp files left after convergence", h, strings.TrimSpace(left))
				}
			}
			for _, m := range suite.BootstrapJSON(t, spec).Members {
				if m.Action != report.ActionUnchanged {
					t.Errorf("%s: %s on the third run, want unchanged", m.Name, m.Action)
				}
			}
		})
	}
}

func TestBootstrapFiveMembers(t *testing.T) {
	ctx := context.Background()
	hosts := []string{"cp-a", "cp-b", "cp-c", "etcd-d", "etcd-e"}
	if err := suite.Lab.Recreate(ctx, hosts...); err != nil {
		t.Fatal(err)
	}
	spec := specPath(t, 5)
	res := suite.BootstrapJSON(t, spec)
	if len(res.Members) != 5 {
		t.Fatalf("%d members", len(res.Members))
	}
	rep := waitHealthy(t, spec, 30*time.Second)
	perZone := map[string]int{}
	for _, m := range rep.Etcd.Members {
		perZone[rep.Zones[m.Name]]++
	}
	if len(rep.Etcd.Members) != 5 || perZone["az-a"] != 2 || perZone["az-b"] != 2 || perZone["az-c"] != 1 {
		t.Fatalf("members %d per zone %v", len(rep.Etcd.Members), perZone)
	}
	for _, m := range suite.BootstrapJSON(t, spec).Members {
		if m.Action != report.ActionUnchanged {
			t.Errorf("%s: %s on re-run", m.Name, m.Action)
		}
	}
}
