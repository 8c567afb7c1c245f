package status

import (
	"bytes"
	"context"
	"encoding/json"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/lb"
)

func lbCluster() *v1alpha1.Cluster {
	c := &v1alpha1.Cluster{}
	c.Metadata.Name = "lab"
	c.Spec.Hosts = []v1alpha1.Host{
		{Name: "cp-a", Address: "172.28.0.11", Roles: []v1alpha1.Role{v1alpha1.RoleEtcd, v1alpha1.RoleControlPlane}},
		{Name: "cp-b", Address: "172.28.0.12", Roles: []v1alpha1.Role{v1alpha1.RoleEtcd, v1alpha1.RoleControlPlane}},
		{Name: "lb-a", Address: "172.28.0.21", Roles: []v1alpha1.Role{v1alpha1.RoleLB}},
		{Name: "lb-b", Address: "172.28.0.22", Roles: []v1alpha1.Role{v1alpha1.RoleLB}},
		{Name: "lb-c", Address: "172.28.0.23", Roles: []v1alpha1.Role{v1alpha1.RoleLB}},
	}
	c.Spec.LoadBalancer = &v1alpha1.LoadBalancer{VIP: "172.28.0.100/24", Topology: v1alpha1.TopologyDedicated, APIServerPort: 6443}
	return c
}

// TestCollectLBStatus: every LB host is read at once; one that does not answer in time (even a probe
// that ignores its context) or at all gets an Error and a problem, the others are unaffected;
// backend addresses the stats page hides come from the spec.
func TestCollectLBStatus(t *testing.T) {
	never := make(chan struct{})
	defer close(never)
	probe := func(ctx context.Context, h v1alpha1.Host) lb.HostStatus {
		switch h.Name {
		case "lb-a":
			return lb.HostStatus{HoldsVIP: true, Interface: "eth0", HAProxy: "active", Keepalived: "active", VRRPState: lb.VRRPMaster,
				Backends: []lb.BackendStatus{{Name: "cp-a", Status: "UP", CheckStatus: "L7OK"}, {Name: "cp-b", Address: "172.28.0.12:6443", Status: "DOWN"}}}
		case "lb-b":
			<-never // hangs, context or not
		}
		return lb.HostStatus{Error: "dial tcp 172.28.0.23:22: connect: connection refused"}
	}
	start := time.Now()
	s := collectLB(context.Background(), lbCluster(), 100*time.Millisecond, probe)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v: the bound is 2 x timeout", d)
	}
	var names []string
	for _, h := range s.Hosts {
		names = append(names, h.Host)
	}
	if !slices.Equal(names, []string{"lb-a", "lb-b", "lb-c"}) || s.Hosts[0].Address != "172.28.0.21" {
		t.Fatalf("hosts %v (%+v), want lb-a, lb-b, lb-c in spec order with addresses", names, s.Hosts)
	}
	a, b, c := s.Hosts[0], s.Hosts[1], s.Hosts[2]
	if a.Error != "" || a.Backends[0].Address != "172.28.0.11:6443" || a.Backends[1].Address != "172.28.0.12:6443" {
		t.Errorf("lb-a: %+v", a)
	}
	if !strings.Contains(b.Error, "not read within 200ms") || !strings.Contains(c.Error, "connection refused") {
		t.Errorf("lb-b error %q, lb-c error %q", b.Error, c.Error)
	}
	want := []string{
		"LB host lb-b could not be read: not read within 200ms: context deadline exceeded",
		"LB host lb-c could not be read: dial tcp 172.28.0.23:22: connect: connection refused",
		"backend cp-b is DOWN (as seen by lb-a)",
	}
	if !slices.Equal(s.Problems, want) || !slices.Equal(s.Holders, []string{"lb-a"}) {
		t.Errorf("holders %q, problems %q\nwant [lb-a], %q", s.Holders, s.Problems, want)
	}
}

// TestStatusReportLB: the load balancer's problems make the report degraded (exit 3), the table has
// a load-balancer section after the etcd one, and -o json has "loadBalancer" only when the spec has
// one.
func TestStatusReportLB(t *testing.T) {
	healthyEtcd := func() *Report {
		return &Report{Cluster: "lab", Healthy: true, Zones: map[string]string{}, hostByURL: map[string]string{},
			Etcd: &etcd.ClusterStatus{QuorumReachable: true, Endpoints: []etcd.EndpointStatus{
				{Endpoint: "https://172.28.0.11:2379", Reachable: true, Healthy: true, MemberName: "cp-a", IsLeader: true}}}}
	}
	rep := healthyEtcd()
	rep.addLB(nil)
	if js := toJSON(t, rep); strings.Contains(js, "loadBalancer") || !rep.Healthy {
		t.Errorf("without a load balancer: healthy %v, json %s", rep.Healthy, js)
	}

	rep = healthyEtcd()
	vip := netip.MustParsePrefix("172.28.0.100/24")
	rep.addLB(lb.Summarize(vip, []lb.HostStatus{
		{Host: "lb-a", Address: "172.28.0.21", HoldsVIP: true, Interface: "eth0", HAProxy: "active", Keepalived: "active",
			VRRPState: lb.VRRPMaster, Priority: 150, EffectivePriority: 150, StatsSource: "http",
			Backends: []lb.BackendStatus{
				{Name: "cp-a", Address: "172.28.0.11:6443", Status: "UP", CheckStatus: "L7OK", CheckCode: 200, CheckDurationMs: 3, LastChangeSeconds: 3725},
				{Name: "cp-b", Address: "172.28.0.12:6443", Status: "DOWN", CheckStatus: "L4TOUT", CheckDurationMs: 1001, CheckDetail: "Connection timed out", LastChangeSeconds: 12},
			}},
		{Host: "lb-b", Address: "172.28.0.22", HAProxy: "inactive", Keepalived: "active",
			VRRPNote: "keepalived's state unknown (keepalived wrote no dump); by its addresses the host does not hold the VIP", StatsError: "curl: (7) refused"},
		{Host: "lb-c", Address: "172.28.0.23", Error: "dial tcp 172.28.0.23:22: i/o timeout"},
	}))
	if rep.Healthy {
		t.Error("healthy with a backend DOWN, haproxy inactive and an unreachable LB host")
	}
	for _, want := range []string{"load balancer: backend cp-b is DOWN (as seen by lb-a)", "load balancer: haproxy on lb-b is inactive",
		"load balancer: LB host lb-c could not be read: dial tcp 172.28.0.23:22: i/o timeout"} {
		if !slices.Contains(rep.Problems, want) {
			t.Errorf("problems %q lack %q", rep.Problems, want)
		}
	}

	var b bytes.Buffer
	rep.Print(&b)
	out := b.String()
	t.Logf("table output:\n%s", out)
	etcdAt, lbAt := strings.Index(out, "MEMBER"), strings.Index(out, "load balancer: VIP 172.28.0.100/24  holder lb-a")
	if etcdAt < 0 || lbAt < etcdAt {
		t.Fatalf("no load-balancer section after the etcd one:\n%s", out)
	}
	for _, want := range [][]string{
		{"lb-a", "172.28.0.21", "MASTER", "(active)", "150/150", "active", "holds", "(eth0)"},
		{"lb-b", "172.28.0.22", "?", "(active)", "-", "inactive", "-"},
		{"lb-c", "172.28.0.23", "UNREACHABLE", "-", "-", "-"},
		{"lb-a", "cp-a", "172.28.0.11:6443", "UP", "L7OK", "200", "3ms", "1h2m5s"},
		{"lb-a", "cp-b", "172.28.0.12:6443", "DOWN", "L4TOUT", "1001ms", "(Connection", "timed", "out)", "12s"},
		{"lb-b:", "keepalived's", "state", "unknown", "(keepalived", "wrote", "no", "dump);", "by", "its", "addresses", "the", "host", "does", "not", "hold", "the", "VIP"},
		{"lb-c:", "UNREACHABLE:", "dial", "tcp", "172.28.0.23:22:", "i/o", "timeout"},
	} {
		found := false
		for _, l := range strings.Split(out[lbAt:], "\n") {
			found = found || slices.Equal(strings.Fields(l), want)
		}
		if !found {
			t.Errorf("no line %q in the load-balancer section:\n%s", want, out[lbAt:])
		}
	}
	if !strings.Contains(out, "DEGRADED: ") || !strings.Contains(out[strings.Index(out, "DEGRADED: "):], "load balancer: backend cp-b is DOWN") {
		t.Errorf("the verdict line does not name the load balancer's problems:\n%s", out)
	}

	var got struct {
		LoadBalancer struct {
			VIP     string   `json:"vip"`
			Holders []string `json:"holders"`
			Hosts   []struct {
				Host     string `json:"host"`
				HoldsVIP bool   `json:"holdsVIP"`
				VRRP     string `json:"vrrpState"`
				Backends []struct {
					Name              string `json:"name"`
					Status            string `json:"status"`
					CheckStatus       string `json:"checkStatus"`
					CheckDurationMs   int    `json:"checkDurationMs"`
					LastChangeSeconds int    `json:"lastChangeSeconds"`
				} `json:"backends"`
				Error string `json:"error"`
			} `json:"hosts"`
			Problems []string `json:"problems"`
		} `json:"loadBalancer"`
	}
	if err := json.Unmarshal([]byte(toJSON(t, rep)), &got); err != nil {
		t.Fatal(err)
	}
	l := got.LoadBalancer
	if l.VIP != "172.28.0.100/24" || !slices.Equal(l.Holders, []string{"lb-a"}) || len(l.Hosts) != 3 || !l.Hosts[0].HoldsVIP ||
		l.Hosts[0].VRRP != "MASTER" || l.Hosts[0].Backends[1].Status != "DOWN" || l.Hosts[0].Backends[1].CheckDurationMs != 1001 ||
		l.Hosts[0].Backends[0].LastChangeSeconds != 3725 || l.Hosts[2].Error == "" || len(l.Problems) != 3 {
		t.Errorf("json loadBalancer: %+v", l)
	}
}

// toJSON is rep as `hactl status -o json` writes it.
func toJSON(t *testing.T, rep *Report) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestStatusNamesUnreachableHosts: an endpoint that did not answer is shown with its spec host and
// zone, not as "-", and its latency is "-" rather than 0.0ms.
func TestStatusNamesUnreachableHosts(t *testing.T) {
	rep := &Report{
		Cluster:   "prod",
		Zones:     map[string]string{"cp-a": "az-a", "cp-b": "az-b"},
		hostByURL: map[string]string{"https://10.0.0.1:2379": "cp-a", "https://10.0.0.2:2379": "cp-b"},
		Etcd: &etcd.ClusterStatus{Endpoints: []etcd.EndpointStatus{
			{Endpoint: "https://10.0.0.1:2379"},
			{Endpoint: "https://10.0.0.2:2379", Reachable: true, MemberName: "cp-b", LatencyMs: 1.5},
		}},
	}
	probs := problems(rep, nil)
	if !slices.Contains(probs, "cp-a (https://10.0.0.1:2379) unreachable") {
		t.Errorf("problems %q do not name cp-a", probs)
	}
	var b bytes.Buffer
	rep.Print(&b)
	var row string
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.Contains(l, "https://10.0.0.1:2379") {
			row = l
		}
	}
	f := strings.Fields(row)
	if len(f) < 7 || f[0] != "cp-a" || f[2] != "az-a" || f[5] != "UNREACHABLE" || f[6] != "-" {
		t.Errorf("row for the unreachable member = %q; want cp-a, zone az-a, UNREACHABLE, latency -", row)
	}
}
