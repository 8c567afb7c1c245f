package heal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/etcd/membership"
	"github.com/hactl/hactl/internal/etcdtest"
	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
	"github.com/hactl/hactl/pki"
	"github.com/hactl/hactl/provision"
)

// fakeSpare is the spare host: it keeps what is uploaded and, when the heal starts etcd, runs a real
// embedded etcd from the uploaded unit's flags (remote paths mapped into a temp dir), so the learner
// really joins, catches up and serves.
type fakeSpare struct {
	t    *testing.T
	dir  string
	mu   sync.Mutex
	file map[string][]byte
	cmds []string
	etcd *embed.Etcd
	// failStart makes the next start fail (a broken host).
	failStart bool
}

func newFakeSpare(t *testing.T) *fakeSpare {
	f := &fakeSpare{t: t, dir: t.TempDir(), file: map[string][]byte{}}
	t.Cleanup(f.stop)
	return f
}

func (f *fakeSpare) Upload(_ context.Context, _ string, files []provision.File) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, x := range files {
		b := x.Content
		if b == nil {
			var err error
			if b, err = io.ReadAll(io.LimitReader(x.Reader, x.Size)); err != nil {
				return err
			}
		}
		f.file[x.Path] = b
	}
	return nil
}

func (f *fakeSpare) Run(_ context.Context, step, command string, _ ...provision.RunOption) (provision.Result, error) {
	f.mu.Lock()
	f.cmds = append(f.cmds, step)
	fail := f.failStart
	f.failStart = false
	f.mu.Unlock()
	switch {
	case strings.Contains(command, "systemctl start "+etcd.UnitName):
		if fail {
			return provision.Result{}, &provision.CommandError{Step: step, Err: errors.New("exit status 1")}
		}
		return provision.Result{}, f.start()
	case strings.Contains(command, "disable --now "+etcd.UnitName):
		f.stop()
	}
	return provision.Result{}, nil
}

func (f *fakeSpare) stop() {
	f.mu.Lock()
	e := f.etcd
	f.etcd = nil
	f.mu.Unlock()
	if e != nil {
		e.Close()
	}
}

func (f *fakeSpare) running() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.etcd != nil
}

// start runs etcd as the uploaded unit says (idempotent, as systemctl start is).
func (f *fakeSpare) start() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.etcd != nil {
		return nil
	}
	flags, err := etcd.ParseUnitFlags(f.file[etcd.RemoteUnitPath])
	if err != nil {
		return err
	}
	local := func(remote string) string {
		p := filepath.Join(f.dir, filepath.Base(remote))
		if err := os.WriteFile(p, f.file[remote], 0o600); err != nil {
			f.t.Error(err)
		}
		return p
	}
	urls := func(s string) []url.URL {
		var out []url.URL
		for _, raw := range strings.Split(s, ",") {
			u, err := url.Parse(raw)
			if err != nil {
				f.t.Fatal(err)
			}
			if !slices.ContainsFunc(out, func(x url.URL) bool { return x.String() == u.String() }) {
				out = append(out, *u)
			}
		}
		return out
	}
	cfg := embed.NewConfig()
	cfg.Name = flags["name"]
	cfg.Dir = filepath.Join(f.dir, "data")
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = urls(flags["listen-client-urls"]), urls(flags["advertise-client-urls"])
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = urls(flags["listen-peer-urls"]), urls(flags["initial-advertise-peer-urls"])
	cfg.InitialCluster, cfg.ClusterState, cfg.InitialClusterToken = flags["initial-cluster"], flags["initial-cluster-state"], flags["initial-cluster-token"]
	cfg.ClientTLSInfo = transport.TLSInfo{CertFile: local(flags["cert-file"]), KeyFile: local(flags["key-file"]), TrustedCAFile: local(flags["trusted-ca-file"]), ClientCertAuth: true}
	cfg.PeerTLSInfo = transport.TLSInfo{CertFile: local(flags["peer-cert-file"]), KeyFile: local(flags["peer-key-file"]), TrustedCAFile: cfg.ClientTLSInfo.TrustedCAFile, ClientCertAuth: true}
	hb, _ := strconv.Atoi(flags["heartbeat-interval"])
	el, _ := strconv.Atoi(flags["election-timeout"])
	cfg.TickMs, cfg.ElectionMs = uint(hb), uint(el)
	cfg.Logger, cfg.LogLevel, cfg.LogOutputs = "zap", "error", []string{"stderr"}
	if f.file[etcd.RemoteEtcdBinary] == nil || f.file[etcd.RemoteServerKey] == nil {
		return errors.New("etcd started before the binary and certificates were installed")
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	f.etcd = e
	return nil
}

func freePort(t *testing.T) int32 {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return int32(l.Addr().(*net.TCPAddr).Port)
}

// fixture is a running 3-member etcdtest cluster and a job onto a spare on 127.0.0.1 with
// certificates from the cluster's CA.
func fixture(t *testing.T) (*etcdtest.Cluster, Job, *fakeSpare) {
	c := etcdtest.Start(t, 3)
	ca, _, err := pki.LoadOrCreateCA(c.PKIDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ca.EnsureMember(c.PKIDir(), "spare-a", []netip.Addr{netip.MustParseAddr("127.0.0.1")}); err != nil {
		t.Fatal(err)
	}
	md := pki.MemberDir(c.PKIDir(), "spare-a")
	certs := map[string][]byte{"ca.crt": ca.CertPEM}
	for k, p := range map[string]string{"server.crt": pki.CertPath(md, pki.ServerBase), "server.key": pki.KeyPath(md, pki.ServerBase),
		"peer.crt": pki.CertPath(md, pki.PeerBase), "peer.key": pki.KeyPath(md, pki.PeerBase)} {
		if certs[k], err = os.ReadFile(p); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(t.TempDir(), "etcd")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n# not run: the fake spare runs embed\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	job := Job{
		Cluster: "lab",
		Spare:   hactlv1.SpareHost{Name: "spare-a", Address: "127.0.0.1", CertificatesSecret: hactlv1.SecretRef{Name: "hactl-etcd-spare-spare-a"}},
		Template: hactlv1.MemberTemplate{Version: "v3.6.16", DataDir: "/var/lib/etcd", ClientPort: freePort(t), PeerPort: freePort(t),
			HeartbeatInterval: metav1.Duration{Duration: 100 * time.Millisecond}, AutoCompactionMode: "periodic", AutoCompactionRetention: "1h",
			InitialClusterToken: "hactl-etcdtest"},
		ElectionTimeout: time.Second,
		Certificates:    certs,
		EtcdBinary:      bin,
		CatchUpTimeout:  30 * time.Second,
		Logf:            t.Logf,
	}
	return c, job, newFakeSpare(t)
}

func memberID(t *testing.T, cli *clientv3.Client, name string) uint64 {
	t.Helper()
	ml, err := cli.MemberList(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ml.Members {
		if m.Name == name {
			return m.ID
		}
	}
	t.Fatalf("no member %s", name)
	return 0
}

// run advances hs until the heal finishes, retrying a failed step up to 20 times (as the operator
// does on its requeues); steps are recorded in order.
func run(t *testing.T, job Job, cl membership.Client, host Host, hs *hactlv1.HealingStatus) []hactlv1.HealStep {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	steps := []hactlv1.HealStep{hs.Step}
	for tries := 0; tries < 20; {
		done, err := Advance(ctx, job, cl, host, hs)
		if err != nil {
			tries++
			t.Logf("step %s: %v (retrying)", hs.Step, err)
			time.Sleep(500 * time.Millisecond)
			continue
		}
		if done {
			return steps
		}
		steps = append(steps, hs.Step)
	}
	t.Fatalf("the heal did not finish: at %s", hs.Step)
	return nil
}

// step runs Advance once to completion, retrying what etcd refuses for a while (a removal or add
// right after a member was lost: etcd's strict reconfiguration counts a peer only after 5 s
// connected).
func step(t *testing.T, job Job, cl membership.Client, host Host, hs *hactlv1.HealingStatus) {
	t.Helper()
	var err error
	for range 20 {
		if _, err = Advance(context.Background(), job, cl, host, hs); err == nil {
			return
		}
		t.Logf("step %s: %v (retrying)", hs.Step, err)
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("step %s: %v", hs.Step, err)
}

// put writes key through cli, waiting out an election (the killed member may have led).
func put(t *testing.T, cli *clientv3.Client, key, value string) {
	t.Helper()
	var err error
	for range 20 {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err = cli.Put(ctx, key, value)
		cancel()
		if err == nil {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("put %s: %v", key, err)
}

func voters(t *testing.T, cli *clientv3.Client) []string {
	t.Helper()
	ml, err := cli.MemberList(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range ml.Members {
		if m.IsLearner {
			t.Errorf("member %s (%x) is still a learner", m.Name, m.ID)
		}
		out = append(out, m.Name)
	}
	slices.Sort(out)
	return out
}

// TestHealRemoveFirst: a 3-member cluster with m2 dead can only be healed remove-first; the spare
// joins as a learner, catches up, is promoted, and serves what the cluster wrote before. A replica
// that takes over after the add (its status write lost) adds no second learner.
func TestHealRemoveFirst(t *testing.T) {
	c, job, spare := fixture(t)
	c.Kill(2)
	eps := c.Endpoints()
	cli := c.ClientTo(t, eps[0], eps[1])
	ctx := context.Background()
	put(t, cli, "before", "heal")
	oldID := memberID(t, cli, "m2")
	ml, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	order, why := replaceOrder(ml, map[uint64]bool{memberID(t, cli, "m0"): true, memberID(t, cli, "m1"): true}, oldID)
	if order != membership.OrderRemoveFirst {
		t.Fatalf("order %s (%s), want remove-first", order, why)
	}
	hs := Begin("m2", fmt.Sprintf("%x", oldID), job.Spare.Name, order, job.now())

	// Up to the learner's add, then the same step again as a new leader would run it.
	for _, want := range []hactlv1.HealStep{hactlv1.HealRemovingMember, hactlv1.HealAddingLearner, hactlv1.HealStartingMember} {
		step(t, job, cli, spare, hs)
		if hs.Step != want {
			t.Fatalf("step %s, want %s", hs.Step, want)
		}
	}
	added := hs.NewMemberID
	hs.Step = hactlv1.HealAddingLearner
	if _, err := Advance(ctx, job, cli, spare, hs); err != nil || hs.NewMemberID != added {
		t.Fatalf("the add again: %v, new member %s (first %s)", err, hs.NewMemberID, added)
	}
	steps := run(t, job, cli, spare, hs)
	if !slices.Equal(steps, []hactlv1.HealStep{hactlv1.HealStartingMember, hactlv1.HealPromoting}) {
		t.Errorf("steps %v", steps)
	}
	if got := voters(t, cli); !slices.Equal(got, []string{"m0", "m1", "spare-a"}) {
		t.Errorf("voters %v, want m0 m1 spare-a", got)
	}
	if !strings.Contains(hs.InitialCluster, "spare-a=https://127.0.0.1:") || strings.Contains(hs.InitialCluster, "m2=") || !strings.Contains(string(spare.file[etcd.RemoteUnitPath]), "--initial-cluster="+hs.InitialCluster+" ") {
		t.Errorf("initial cluster recorded %q", hs.InitialCluster)
	}
	// The new member serves the data written before the heal.
	client, _ := job.clientURL()
	scli := c.ClientTo(t, client)
	// (It applies its own promotion a moment after the leader committed it.)
	var r *clientv3.GetResponse
	for range 20 {
		if r, err = scli.Get(ctx, "before"); err == nil {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "heal" {
		t.Errorf("reading through spare-a: %v %v", r, err)
	}
	for _, f := range []string{etcd.RemoteEtcdBinary, etcd.RemoteServerKey, etcd.RemoteUnitPath, "/etc/hactl/etcd-member.json"} {
		if spare.file[f] == nil {
			t.Errorf("%s not installed on the spare", f)
		}
	}
	unit := string(spare.file[etcd.RemoteUnitPath])
	if !strings.Contains(unit, "--initial-cluster-state=existing") || !strings.Contains(unit, "spare-a=https://127.0.0.1:") || strings.Contains(unit, "m2=") {
		t.Errorf("unit:\n%s", unit)
	}
}

// TestHealAddFirst: with every member healthy etcd accepts the learner first; the old member is
// removed last, after the promotion.
func TestHealAddFirst(t *testing.T) {
	c, job, spare := fixture(t)
	cli := c.ClientTo(t, c.Endpoints()[0], c.Endpoints()[1])
	ctx := context.Background()
	oldID := memberID(t, cli, "m2")
	ml, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	healthy := map[uint64]bool{}
	for _, m := range ml.Members {
		healthy[m.ID] = true
	}
	order, _ := replaceOrder(ml, healthy, oldID)
	if order != membership.OrderAddFirst {
		t.Fatalf("order %s, want add-first", order)
	}
	hs := Begin("m2", fmt.Sprintf("%x", oldID), job.Spare.Name, order, job.now())
	steps := run(t, job, cli, spare, hs)
	if !slices.Equal(steps, []hactlv1.HealStep{hactlv1.HealPlanned, hactlv1.HealAddingLearner, hactlv1.HealStartingMember, hactlv1.HealPromoting, hactlv1.HealRemovingMember}) {
		t.Errorf("steps %v", steps)
	}
	if got := voters(t, cli); !slices.Equal(got, []string{"m0", "m1", "spare-a"}) {
		t.Errorf("voters %v", got)
	}
}

// TestRollBack: a start that fails leaves a learner; RollBack removes it and retires the spare's
// etcd, and the cluster is as before.
func TestRollBack(t *testing.T) {
	c, job, spare := fixture(t)
	c.Kill(2)
	cli := c.ClientTo(t, c.Endpoints()[0], c.Endpoints()[1])
	ctx := context.Background()
	hs := Begin("m2", fmt.Sprintf("%x", memberID(t, cli, "m2")), job.Spare.Name, membership.OrderRemoveFirst, job.now())
	for range 3 { // Planned → RemovingMember → AddingLearner → StartingMember
		step(t, job, cli, spare, hs)
	}
	spare.failStart = true
	if _, err := Advance(ctx, job, cli, spare, hs); err == nil || hs.Step != hactlv1.HealStartingMember {
		t.Fatalf("a failed start: %v, step %s", err, hs.Step)
	}
	if err := RollBack(ctx, job, cli, spare, hs); err != nil {
		t.Fatal(err)
	}
	ml, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ml.Members) != 2 {
		t.Errorf("%d members after the rollback, want m0 and m1", len(ml.Members))
	}
	if spare.running() || !slices.Contains(spare.cmds, "heal/rollback") {
		t.Errorf("spare: running %v, commands %v", spare.running(), spare.cmds)
	}
	put(t, cli, "after", "rollback")
}

func TestAdvanceRefusesBadRecords(t *testing.T) {
	job := Job{}
	for _, hs := range []*hactlv1.HealingStatus{
		{MemberID: "", Step: hactlv1.HealPlanned},
		{MemberID: "zz", Step: hactlv1.HealPlanned},
		{MemberID: "a2", Step: hactlv1.HealStartingMember},
		{MemberID: "a2", Step: "Dancing"},
	} {
		if _, err := Advance(context.Background(), job, nil, nil, hs); err == nil {
			t.Errorf("%+v: no error", hs)
		}
	}
	if _, err := (Job{Spare: hactlv1.SpareHost{Name: "s", CertificatesSecret: hactlv1.SecretRef{Name: "sec"}}}).files(); err == nil || !strings.Contains(err.Error(), "sec has no ca.crt") {
		t.Errorf("files without certificates: %v", err)
	}
}

// replaceOrder is membership.ReplaceOrder over the member list ml, with which members are healthy
// (by ID): what the operator decides from its observed members.
func replaceOrder(ml *clientv3.MemberListResponse, healthy map[uint64]bool, oldID uint64) (order, why string) {
	var voters []membership.Voter
	for _, m := range ml.Members {
		voters = append(voters, membership.Voter{Name: m.Name, ID: m.ID, Learner: m.IsLearner, Healthy: healthy[m.ID]})
	}
	return membership.ReplaceOrder(voters, oldID)
}

// TestUnitConfigCarriesTheTemplate: the spare's unit gets every setting of the member template, the
// metrics address included (a heal started the member with /metrics on loopback only before), and
// --initial-cluster from the member list with the new member under the spare's name.
func TestUnitConfigCarriesTheTemplate(t *testing.T) {
	job := Job{
		Spare: hactlv1.SpareHost{Name: "spare-a", Address: "10.0.0.7"},
		Template: hactlv1.MemberTemplate{Version: "v3.6.16", DataDir: "/var/lib/etcd", ClientPort: 2379, PeerPort: 2380,
			HeartbeatInterval: metav1.Duration{Duration: 100 * time.Millisecond}, QuotaBackendBytes: 4 << 30,
			AutoCompactionMode: "periodic", AutoCompactionRetention: "1h", MetricsAddress: "host", InitialClusterToken: "tok"},
		ElectionTimeout: time.Second,
	}
	members := []*etcdserverpb.Member{
		{ID: 1, Name: "cp-a", PeerURLs: []string{"https://10.0.0.1:2380"}},
		{ID: 7, PeerURLs: []string{"https://10.0.0.7:2380"}},
	}
	u, err := job.unitConfig(members, 7)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(u.ListenMetricsURLs, "http://10.0.0.7:2381") {
		t.Errorf("listen-metrics-urls %v: want the member's own address (template metricsAddress host)", u.ListenMetricsURLs)
	}
	if u.QuotaBackendBytes != 4<<30 || u.ElectionTimeoutMs != 1000 || u.HeartbeatIntervalMs != 100 || u.InitialClusterToken != "tok" {
		t.Errorf("unit %+v: the template's settings not carried", u)
	}
	if u.InitialCluster != "cp-a=https://10.0.0.1:2380,spare-a=https://10.0.0.7:2380" {
		t.Errorf("initial cluster %q", u.InitialCluster)
	}
}
