package lb

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/lb/vrrp"
	"github.com/hactl/hactl/templates"
)

// AuthSecret is the VRRP PASS secret. It is kept out of Config (which plans print and state may
// store) and handed to RenderKeepalived only; its String, GoString and Format never show it, so it
// can't leak through fmt or logs.
type AuthSecret struct{ s string }

// NewAuthSecret checks s with v1alpha1.VRRPSecretProblem (at most limits.MaxVRRPSecretLength
// characters of a safe set) and wraps it. The error never quotes s. specload.ReadAuthSecret reads
// the secret spec.loadBalancer.auth names (a file or an environment variable) into one.
func NewAuthSecret(s string) (AuthSecret, error) {
	if msg := v1alpha1.VRRPSecretProblem(s); msg != "" {
		return AuthSecret{}, fmt.Errorf("the VRRP auth secret %s", msg)
	}
	return AuthSecret{s}, nil
}

// IsZero reports whether no secret is held.
func (a AuthSecret) IsZero() bool { return a.s == "" }

// String hides the secret.
func (a AuthSecret) String() string {
	if a.s == "" {
		return "(none)"
	}
	return "(secret)"
}

// GoString hides the secret from %#v.
func (a AuthSecret) GoString() string { return "lb.AuthSecret" + a.String() }

// Format hides the secret from every verb.
func (a AuthSecret) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(a.String())) }

// haproxyData is what templates/haproxy.cfg.tmpl renders.
type haproxyData struct {
	Host, Cluster string
	Colocated     bool
	Bind          string // address:port of the frontend
	Sysctls       string // "name=value, ..." (colocated)
	LocalBind     string
	StatsSocket   string
	Frontend      string
	Backend       string
	ReadyzPath    string
	HealthPath    string
	MetricsPath   string
	Servers       []haproxyServer
	Verify        string // "verify required ca-file PATH" | "verify none"
	VerifyNote    string
	InterMs       int64
	FastInterMs   int64
	TimeoutMs     int64
	EjectMs       int64
	Fall, Rise    int
}

type haproxyServer struct {
	Name, AddrPort string
}

// RenderHAProxy renders haproxy.cfg for LB host host (the same for every LB host but for the header):
//   - global: logs to stdout (the journal under systemd), chroot, unprivileged user, the runtime API
//     at StatsSocket (mode 660, level admin) for hactl status;
//   - frontend FrontendName: TCP on Bind:FrontendPort, TLS passed through, tcplog;
//   - backend BackendName: balance roundrobin over the apiservers; each checked with
//     `option httpchk` + `http-check send meth GET uri /readyz` + `http-check expect status 200`
//     over TLS (`check check-ssl`, `verify required ca-file RemoteCAFile` or `verify none`) with
//     explicit inter, fastinter, fall and rise, and `timeout connect` + `timeout check` of
//     HealthCheck.Timeout, so a hung apiserver is DOWN within HealthCheck.EjectionBound (measured with
//     HAProxy 2.6: an apiserver stopped with SIGSTOP is DOWN after about 6.3 s with inter 2s, fall 3;
//     without the two timeouts, after 10-12 s); `option redispatch` retries a failed connection on
//     another apiserver;
//   - frontend hactl-local on 127.0.0.1:LocalPort (HTTP): /healthz (monitor-uri, Keepalived's check)
//     and /metrics (the built-in Prometheus exporter).
//
// Timeouts: connect 5s; client and server 30s of inactivity while a request is open; tunnel 1h once
// both sides are connected (watches, exec, logs -f stay open; client-go pings HTTP/2 connections every
// 30s anyway).
func RenderHAProxy(cfg *Config, host string) ([]byte, error) {
	if cfg.Node(host) == nil {
		return nil, fmt.Errorf("render haproxy.cfg: %s is not an LB host", host)
	}
	if len(cfg.Backends) == 0 {
		return nil, fmt.Errorf("render haproxy.cfg: no backends")
	}
	hc := cfg.HealthCheck
	for _, d := range []time.Duration{hc.Interval, hc.Timeout, hc.FastInterval} {
		if d <= 0 || d%time.Millisecond != 0 {
			return nil, fmt.Errorf("render haproxy.cfg: health check inter %v, timeout %v, fastinter %v: want whole milliseconds > 0", hc.Interval, hc.Timeout, hc.FastInterval)
		}
	}
	if hc.Fall < 1 || hc.Rise < 1 {
		return nil, fmt.Errorf("render haproxy.cfg: health check fall %d, rise %d: want at least 1", hc.Fall, hc.Rise)
	}
	d := haproxyData{
		Host: host, Cluster: cfg.Cluster,
		Colocated:   cfg.Topology == v1alpha1.TopologyColocated,
		Bind:        fmt.Sprintf("%s:%d", cfg.Bind, cfg.FrontendPort),
		LocalBind:   fmt.Sprintf("127.0.0.1:%d", LocalPort),
		StatsSocket: StatsSocket,
		Frontend:    FrontendName, Backend: BackendName,
		ReadyzPath: ReadyzPath, HealthPath: HealthPath, MetricsPath: MetricsPath,
		InterMs: hc.Interval.Milliseconds(), FastInterMs: hc.FastInterval.Milliseconds(), TimeoutMs: hc.Timeout.Milliseconds(),
		EjectMs: hc.EjectionBound().Milliseconds(), Fall: hc.Fall, Rise: hc.Rise,
	}
	var sc []string
	for _, s := range cfg.Sysctls {
		sc = append(sc, s.String())
	}
	d.Sysctls = strings.Join(sc, ", ")
	if hc.CAFile != "" {
		if strings.ContainsAny(hc.CAFile, " \t\n\"'#\\") {
			return nil, fmt.Errorf("render haproxy.cfg: CA file path %q needs quoting", hc.CAFile)
		}
		d.Verify = "verify required ca-file " + hc.CAFile
		d.VerifyNote = "The apiservers' certificates are verified against the cluster CA"
	} else {
		d.Verify = "verify none"
		d.VerifyNote = "The apiservers' certificates are NOT verified (no spec.loadBalancer.healthCheck.caFile)"
	}
	for _, b := range cfg.Backends {
		d.Servers = append(d.Servers, haproxyServer{Name: b.Name, AddrPort: b.AddrPort()})
	}
	return templates.Render("haproxy.cfg.tmpl", d)
}

// keepalivedData is what templates/keepalived.conf.tmpl renders.
type keepalivedData struct {
	Host, Cluster   string
	Script          string
	CheckCommand    string
	Interval        int
	Timeout         int
	Fall, Rise      int
	Weight          int
	WeightNote      string
	Election        string
	Instance        string
	Interface       string
	VirtualRouterID int
	Priority        int
	AdvertInterval  string
	VRRPv3IPv4      bool
	Nopreempt       bool
	Unicast         bool
	SourceIP        string
	Peers           []string
	AuthPass        string
	VIP             string
}

// CheckCommand is Keepalived's check of the local HAProxy: its loopback /healthz (HAProxy's
// monitor-uri, answered while HAProxy runs), within one second, bypassing any proxy.
var CheckCommand = fmt.Sprintf("/usr/bin/curl --silent --fail --output /dev/null --max-time 1 --noproxy 127.0.0.1 http://127.0.0.1:%d%s", LocalPort, HealthPath)

// RenderKeepalived renders keepalived.conf for LB host host:
//   - global_defs: router_id host; scripts run as root with enable_script_security (keepalived
//     refuses scripts non-root users could change);
//   - vrrp_script ScriptName: CheckCommand every ScriptInterval s (ScriptTimeout, cfg.ScriptFall,
//     ScriptRise) with cfg.Weight;
//   - vrrp_instance InstanceName: state BACKUP, interface, virtual_router_id, priority, advert_int,
//     nopreempt (if set), unicast_src_ip + unicast_peer (unicast mode), authentication PASS with
//     secret (when cfg.Auth), virtual_ipaddress VIP/prefix dev interface, track_script.
//
// secret must be set exactly when cfg.Auth is; it goes into the file (install it mode 0600) and
// nowhere else. The node's interface must be known (spec.loadBalancer.interface or
// Config.SetInterface). No vrrp_strict is ever written.
func RenderKeepalived(cfg *Config, host string, secret AuthSecret) ([]byte, error) {
	n := cfg.Node(host)
	switch {
	case n == nil:
		return nil, fmt.Errorf("render keepalived.conf: %s is not an LB host", host)
	case n.Interface == "":
		return nil, fmt.Errorf("render keepalived.conf for %s: the VIP's interface is not known: set spec.loadBalancer.interface or detect it on the host (lb.InterfaceFor, Config.SetInterface)", host)
	case !validInterface(n.Interface):
		return nil, fmt.Errorf("render keepalived.conf for %s: interface %q is not a valid interface name", host, n.Interface)
	case cfg.Auth && secret.IsZero():
		return nil, fmt.Errorf("render keepalived.conf for %s: spec.loadBalancer.auth is set but no secret was given", host)
	case !cfg.Auth && !secret.IsZero():
		return nil, fmt.Errorf("render keepalived.conf for %s: a secret was given but spec.loadBalancer.auth is not set", host)
	case cfg.Auth && cfg.VIP.Addr().Is6():
		return nil, fmt.Errorf("render keepalived.conf for %s: an IPv6 VIP runs VRRPv3, which has no authentication", host)
	case cfg.ScriptFall < 1:
		return nil, fmt.Errorf("render keepalived.conf for %s: check fall %d: want at least 1 (spec.loadBalancer.checkFall)", host, cfg.ScriptFall)
	case cfg.Mode == v1alpha1.LBModeUnicast && len(n.Peers) == 0:
		return nil, fmt.Errorf("render keepalived.conf for %s: unicast mode without peers", host)
	}
	if !secret.IsZero() {
		if _, err := NewAuthSecret(secret.s); err != nil {
			return nil, fmt.Errorf("render keepalived.conf for %s: %w", host, err)
		}
	}
	if err := ProveFailover(cfg); err != nil {
		return nil, fmt.Errorf("render keepalived.conf for %s: %w", host, err)
	}
	d := keepalivedData{
		Host: host, Cluster: cfg.Cluster,
		Script: ScriptName, CheckCommand: CheckCommand,
		Interval: ScriptInterval, Timeout: ScriptTimeout, Fall: cfg.ScriptFall, Rise: ScriptRise,
		Weight:          cfg.Weight,
		Instance:        InstanceName,
		Interface:       n.Interface,
		VirtualRouterID: cfg.VirtualRouterID,
		Priority:        n.Priority,
		AdvertInterval:  strconv.FormatFloat(cfg.AdvertInterval.Seconds(), 'f', -1, 64),
		VRRPv3IPv4:      cfg.VRRPVersion == 3 && cfg.VIP.Addr().Is4(),
		Nopreempt:       cfg.Nopreempt,
		Unicast:         cfg.Mode == v1alpha1.LBModeUnicast,
		SourceIP:        n.Address.String(),
		AuthPass:        secret.s,
		VIP:             cfg.VIP.String(),
	}
	for _, p := range n.Peers {
		d.Peers = append(d.Peers, p.String())
	}
	var parts []string
	for _, o := range cfg.Nodes {
		parts = append(parts, fmt.Sprintf("%s %d", o.Name, o.Priority))
	}
	d.Election = strings.Join(parts, ", ")
	switch {
	case cfg.Weight < 0:
		failed, _ := vrrp.Effective(n.Priority, cfg.Weight, false)
		d.WeightNote = fmt.Sprintf("A failed check takes %d off this host's priority (%d -> %d), below every host whose check passes", -cfg.Weight, n.Priority, failed)
	case cfg.Weight > 0:
		passed, _ := vrrp.Effective(n.Priority, cfg.Weight, true)
		d.WeightNote = fmt.Sprintf("A passing check adds %d to this host's priority (%d -> %d), so a failed one leaves it below every host whose check passes", cfg.Weight, n.Priority, passed)
	default:
		d.WeightNote = "Weight 0: a failed check puts this host into FAULT state, which releases the VIP"
	}
	return templates.Render("keepalived.conf.tmpl", d)
}
