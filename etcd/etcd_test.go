package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/hactl/hactl/pki"
)

// testCluster is a real etcd cluster (embed) on 127.0.0.1 with hactl's PKI: TLS on client and peer
// ports, client certificates required on both.
type testCluster struct {
	pkiDir  string
	members []Member
	etcds   []*embed.Etcd
	stops   []func() // stop member i once (embed's Close panics on a second call)
	files   TLSFiles // hactl's client certificate
}

// freePorts returns n distinct ports that were free a moment ago (embed cannot bind peers to :0).
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

func mustURL(t *testing.T, s string) url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return *u
}

func startCluster(t *testing.T, n int) *testCluster {
	t.Helper()
	tc := &testCluster{pkiDir: filepath.Join(t.TempDir(), "pki")}
	ca, _, err := pki.LoadOrCreateCA(tc.pkiDir)
	if err != nil {
		t.Fatal(err)
	}
	ports := freePorts(t, 2*n)
	lo := netip.MustParseAddr("127.0.0.1")
	for i := range n {
		m := Member{Name: fmt.Sprintf("m%d", i), Address: lo, ClientPort: ports[2*i], PeerPort: ports[2*i+1]}
		tc.members = append(tc.members, m)
		if _, err := ca.EnsureMember(tc.pkiDir, m.Name, []netip.Addr{m.Address}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ca.EnsureClient(tc.pkiDir, pki.HactlClient, pki.HactlClientCN); err != nil {
		t.Fatal(err)
	}
	caFile := pki.CertPath(tc.pkiDir, pki.CABase)
	tc.files = TLSFiles{CA: caFile, Cert: pki.CertPath(tc.pkiDir, pki.HactlClient), Key: pki.KeyPath(tc.pkiDir, pki.HactlClient)}

	for _, m := range tc.members {
		md := pki.MemberDir(tc.pkiDir, m.Name)
		cfg := embed.NewConfig()
		cfg.Name = m.Name
		cfg.Dir = filepath.Join(t.TempDir(), m.Name+".etcd")
		cfg.ListenClientUrls = []url.URL{mustURL(t, m.ClientURL())}
		cfg.AdvertiseClientUrls = cfg.ListenClientUrls
		cfg.ListenPeerUrls = []url.URL{mustURL(t, m.PeerURL())}
		cfg.AdvertisePeerUrls = cfg.ListenPeerUrls
		cfg.InitialCluster = InitialCluster(tc.members)
		cfg.InitialClusterToken = "hactl-test"
		cfg.ClusterState = embed.ClusterStateFlagNew
		cfg.ClientTLSInfo = transport.TLSInfo{
			CertFile: pki.CertPath(md, pki.ServerBase), KeyFile: pki.KeyPath(md, pki.ServerBase),
			TrustedCAFile: caFile, ClientCertAuth: true,
		}
		cfg.PeerTLSInfo = transport.TLSInfo{
			CertFile: pki.CertPath(md, pki.PeerBase), KeyFile: pki.KeyPath(md, pki.PeerBase),
			TrustedCAFile: caFile, ClientCertAuth: true,
		}
		cfg.TlsMinVersion = TLSMinVersion
		cfg.Logger = "zap"
		cfg.LogLevel = "error"
		cfg.LogOutputs = []string{"stderr"}
		e, err := embed.StartEtcd(cfg)
		if err != nil {
			t.Fatalf("start %s: %v", m.Name, err)
		}
		tc.etcds = append(tc.etcds, e)
		stop := sync.OnceFunc(e.Close)
		tc.stops = append(tc.stops, stop)
		t.Cleanup(stop)
	}
	for i, e := range tc.etcds {
		select {
		case <-e.Server.ReadyNotify():
		case err := <-e.Err():
			t.Fatalf("%s: %v", tc.members[i].Name, err)
		case <-time.After(60 * time.Second):
			t.Fatalf("%s not ready after 60s", tc.members[i].Name)
		}
	}
	return tc
}

func (tc *testCluster) endpoints() []string { return ClientURLs(tc.members) }

func TestRealCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-member etcd cluster")
	}
	tc := startCluster(t, 3)
	ctx := t.Context()

	t.Run("status", func(t *testing.T) {
		st, err := Status(ctx, tc.endpoints(), tc.files)
		if err != nil {
			t.Fatal(err)
		}
		if !st.QuorumReachable || st.LeaderID == "" || st.LeaderName == "" || st.ClusterID == "" {
			t.Errorf("cluster: quorum %v leader %q/%q cluster %q", st.QuorumReachable, st.LeaderID, st.LeaderName, st.ClusterID)
		}
		if st.ClusterVersion != "3.6.0" && st.ClusterVersion != "not_decided" { // decided by the leader within seconds of its election
			t.Errorf("cluster version %q, want 3.6.0", st.ClusterVersion)
		}
		if len(st.Members) != 3 || len(st.Alarms) != 0 || st.MemberListError != "" || st.AlarmListError != "" {
			t.Errorf("members %+v alarms %+v errors %q %q", st.Members, st.Alarms, st.MemberListError, st.AlarmListError)
		}
		for i, m := range st.Members {
			want := tc.members[i]
			if m.Name != want.Name || len(m.PeerURLs) != 1 || m.PeerURLs[0] != want.PeerURL() ||
				len(m.ClientURLs) != 1 || m.ClientURLs[0] != want.ClientURL() || m.IsLearner || m.ID == "" {
				t.Errorf("member %d = %+v, want %s %s %s", i, m, want.Name, want.PeerURL(), want.ClientURL())
			}
		}
		leaders := 0
		for i, es := range st.Endpoints {
			if es.Endpoint != tc.members[i].ClientURL() || es.MemberName != tc.members[i].Name {
				t.Errorf("endpoint %d = %s (%s)", i, es.Endpoint, es.MemberName)
			}
			if !es.Reachable || !es.Healthy || es.Error != "" || es.HealthError != "" || es.CertError != "" {
				t.Errorf("%s: reachable %v healthy %v errors %q %q %q", es.Endpoint, es.Reachable, es.Healthy, es.Error, es.HealthError, es.CertError)
			}
			if es.IsLeader {
				leaders++
				if es.MemberID != st.LeaderID {
					t.Errorf("%s is leader but LeaderID is %s", es.MemberID, st.LeaderID)
				}
			}
			if es.Version != "3.6.16" || es.RaftTerm < 1 || es.RaftIndex == 0 || es.RaftAppliedIndex == 0 ||
				es.DBSizeBytes <= 0 || es.DBSizeInUseBytes <= 0 || es.DBSizeInUseBytes > es.DBSizeBytes ||
				es.LatencyMs <= 0 || es.LatencyMs > 5000 || len(es.Errors) != 0 {
				t.Errorf("%s: implausible status %+v", es.Endpoint, es)
			}
			if left := time.Until(es.CertNotAfter); left < 364*24*time.Hour || left > 366*24*time.Hour {
				t.Errorf("%s: server cert NotAfter %s", es.Endpoint, es.CertNotAfter)
			}
		}
		if leaders != 1 {
			t.Errorf("%d endpoints claim leadership", leaders)
		}
		js, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{`"leaderID"`, `"quorumReachable":true`, `"raftAppliedIndex"`, `"dbSizeInUseBytes"`, `"certNotAfter"`, `"latencyMs"`, `"peerURLs"`, `"alarms":[]`} {
			if !strings.Contains(string(js), k) {
				t.Errorf("JSON lacks %s: %s", k, js)
			}
		}
	})

	t.Run("check quorum", func(t *testing.T) {
		cli, err := NewClient(ctx, tc.endpoints(), tc.files, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		for range 2 {
			if err := CheckQuorum(qctx, cli, "/hactl/quorum-check"); err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("write refused by an alarm", func(t *testing.T) {
		cli, err := NewClient(ctx, tc.endpoints(), tc.files, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		st, err := cli.Status(qctx, tc.endpoints()[0])
		if err != nil {
			t.Fatal(err)
		}
		mc := etcdserverpb.NewMaintenanceClient(cli.ActiveConnection())
		alarm := &etcdserverpb.AlarmRequest{Action: etcdserverpb.AlarmRequest_ACTIVATE, MemberID: st.Header.MemberId, Alarm: etcdserverpb.AlarmType_NOSPACE}
		if _, err := mc.Alarm(qctx, alarm); err != nil {
			t.Fatal(err)
		}
		defer func() {
			alarm.Action = etcdserverpb.AlarmRequest_DEACTIVATE
			if _, err := mc.Alarm(ctx, alarm); err != nil {
				t.Error(err)
			}
		}()
		err = CheckQuorum(qctx, cli, "/hactl/quorum-check")
		var ae *AlarmError
		if !errors.As(err, &ae) || !errors.Is(err, rpctypes.ErrNoSpace) {
			t.Fatalf("err %v, want an *AlarmError around etcd's NOSPACE", err)
		}
		want := fmt.Sprintf("NOSPACE on member %x", st.Header.MemberId)
		if !slices.Equal(ae.Alarms, []string{want}) || !strings.Contains(err.Error(), "hactl etcd alarm disarm -f cluster.yaml --yes") ||
			!strings.Contains(err.Error(), "mvcc: database space exceeded") {
			t.Errorf("alarms %v, message:\n%v", ae.Alarms, err)
		}
		if other := errors.New("boom"); ExplainAlarm(qctx, cli, other) != other {
			t.Error("another error explained as an alarm")
		}
	})

	t.Run("client without certificate refused", func(t *testing.T) {
		files := TLSFiles{CA: tc.files.CA}
		cli, err := NewClient(ctx, tc.endpoints()[:1], files, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		gctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		if _, err := cli.Get(gctx, "x"); err == nil {
			t.Error("Get without a client certificate succeeded")
		}
		st, err := status(ctx, tc.endpoints(), files, time.Second, 2*time.Second)
		if !errors.Is(err, ErrNoEndpointReachable) || st == nil || st.Endpoints[0].Reachable {
			t.Errorf("Status without a client certificate: %v", err)
		}
	})

	t.Run("server not signed by the trusted CA refused", func(t *testing.T) {
		other := t.TempDir()
		if _, _, err := pki.LoadOrCreateCA(other); err != nil {
			t.Fatal(err)
		}
		files := tc.files
		files.CA = pki.CertPath(other, pki.CABase)
		cli, err := NewClient(ctx, tc.endpoints()[:1], files, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		gctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		if _, err := cli.Get(gctx, "x"); err == nil {
			t.Error("Get trusting another CA succeeded")
		}
	})

	t.Run("plain http refused", func(t *testing.T) {
		m := tc.members[0]
		plain := URL("http", m.Address, m.ClientPort)
		if _, err := NewClient(ctx, []string{plain}, tc.files, time.Second); err == nil {
			t.Error("NewClient accepted an http endpoint")
		}
		// A client that speaks plain gRPC to the TLS port gets nothing.
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{plain}, DialTimeout: time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		gctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		if _, err := cli.Get(gctx, "x"); err == nil {
			t.Error("plain gRPC Get succeeded")
		}
		// Nor does plain HTTP.
		hc := &http.Client{Timeout: 3 * time.Second}
		resp, err := hc.Get(plain + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Errorf("plain HTTP /health answered %s", resp.Status)
			}
		}
	})

	t.Run("members down", func(t *testing.T) {
		// One member down: still a quorum, the stopped endpoint is data, not an error.
		tc.stops[2]()
		st, err := status(ctx, tc.endpoints(), tc.files, time.Second, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		down := st.Endpoints[2]
		if down.Reachable || down.Error == "" || down.Healthy || !st.QuorumReachable || !st.Endpoints[0].Healthy {
			t.Errorf("one down: quorum %v endpoints %+v", st.QuorumReachable, st.Endpoints)
		}
		if len(st.Members) != 3 {
			t.Errorf("one down: members %+v", st.Members)
		}
		if down.MemberName == "" || down.MemberID == "" {
			t.Errorf("one down: the unreachable endpoint is not named from the member list: %+v", down)
		}

		// Two down: the survivor answers Status but cannot serve a linearizable read.
		tc.stops[1]()
		st, err = status(ctx, tc.endpoints(), tc.files, time.Second, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if st.QuorumReachable || !st.Endpoints[0].Reachable || st.Endpoints[0].Healthy || st.Endpoints[0].HealthError == "" {
			t.Errorf("two down: quorum %v survivor %+v", st.QuorumReachable, st.Endpoints[0])
		}
		if len(st.Members) != 3 || st.MemberListError != "" {
			t.Errorf("two down: serializable member list %+v %q", st.Members, st.MemberListError)
		}
		cli, err := NewClient(ctx, tc.endpoints()[:1], tc.files, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		if err := CheckQuorum(qctx, cli, "/hactl/quorum-check"); err == nil {
			t.Error("CheckQuorum succeeded without a quorum")
		}

		// All down: total failure.
		tc.stops[0]()
		st, err = status(ctx, tc.endpoints(), tc.files, time.Second, 2*time.Second)
		if !errors.Is(err, ErrNoEndpointReachable) || st == nil || len(st.Endpoints) != 3 {
			t.Errorf("all down: %v", err)
		}
	})
}

func TestStatusRejectsInput(t *testing.T) {
	ctx := t.Context()
	if _, err := Status(ctx, nil, TLSFiles{}); err == nil {
		t.Error("Status with no endpoints succeeded")
	}
	if _, err := Status(ctx, []string{"https://127.0.0.1:1"}, TLSFiles{CA: "/nonexistent"}); err == nil {
		t.Error("Status with a missing CA file succeeded")
	}
	if _, err := (TLSFiles{CA: "/dev/null", Cert: "x"}).Config(); err == nil {
		t.Error("TLSFiles with cert but no key accepted")
	}
}
