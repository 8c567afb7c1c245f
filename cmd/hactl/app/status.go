package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/lb"
	"github.com/hactl/hactl/pki"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/ui"
)

// certWarnDays: certificates expiring sooner are flagged (kubeadm warns at 30 days too).
const certWarnDays = 30

type statusOptions struct {
	output  string
	timeout time.Duration
}

// StatusReport is `hactl status -o json`.
type StatusReport struct {
	Cluster string `json:"cluster"`
	// Healthy: quorum reachable, every spec member reachable and healthy, no alarm.
	Healthy           bool                `json:"healthy"`
	Problems          []string            `json:"problems,omitempty"`
	Zones             map[string]string   `json:"zones"` // member name → zone
	QuotaBackendBytes int64               `json:"quotaBackendBytes"`
	Etcd              *etcd.ClusterStatus `json:"etcd"`
	// LocalCertificates are the certificates in the state dir (CA, member and client certificates).
	LocalCertificates []pki.CertInfo `json:"localCertificates"`
	// LoadBalancer is HAProxy and Keepalived on the LB hosts, read over SSH; absent when the spec has
	// no spec.loadBalancer. Its problems are in Problems too (prefixed "load balancer: ").
	LoadBalancer *lb.Status `json:"loadBalancer,omitempty"`

	// hostByURL maps each spec member's client URL to its host name, to name endpoints that did
	// not answer (etcd reports no member name for them).
	hostByURL map[string]string
}

// hostOf names the spec host behind an endpoint: etcd's member name when it answered, else the
// spec's host for that client URL.
func (r *StatusReport) hostOf(ep etcd.EndpointStatus) string {
	if ep.MemberName != "" {
		return ep.MemberName
	}
	return r.hostByURL[ep.Endpoint]
}

func newStatusCommand(s Streams, g *globalOptions) *cobra.Command {
	o := &statusOptions{}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show members, leader, raft term/index, DB size, alarms, health, latency, certificate expiry and the load balancer",
		Long: `Asks every member over TLS (with hactl's client certificate from the state dir) for its status.

With spec.loadBalancer, also reads every LB host over SSH (one command each, as root): which host
holds the VIP, keepalived's VRRP state, whether the haproxy and keepalived units are active, and every
kube-apiserver backend as that host's HAProxy sees it (UP/DOWN, last check, time since the last
change). Without spec.loadBalancer no SSH is used.

Exit code 0 when the cluster is healthy (quorum, every member healthy, no alarm; with a load balancer:
exactly one VIP holder, haproxy and keepalived active everywhere, no backend DOWN, every LB host
readable), 3 when it is degraded, 1 when no member could be reached.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(o.output); err != nil {
				return err
			}
			p := ui.New(s.Err, g.verbose, false)
			c, err := loadSpec(g.file, p, false)
			if err != nil {
				return err
			}
			if o.timeout <= 0 {
				return &UsageError{Err: fmt.Errorf("--timeout %s: must be a positive duration, e.g. 3s", o.timeout)}
			}
			tunnel, err := provision.TunnelFromSpec(c, provision.SpecOptions{Prompt: terminalPrompter(s.In, s.Err)})
			if err != nil {
				return err
			}
			var dial etcd.Option
			if tunnel != nil {
				defer tunnel.Close()
				dial = etcd.WithDialer(tunnel.DialTCP)
			}
			lbDialer := tunnel
			if c.Spec.LoadBalancer != nil && lbDialer == nil {
				if lbDialer, err = provision.FromSpec(c, provision.SpecOptions{Prompt: terminalPrompter(s.In, s.Err)}); err != nil {
					return err
				}
				defer lbDialer.Close()
			}
			var lbStatus *lb.Status
			lbDone := make(chan struct{})
			go func() {
				defer close(lbDone)
				if c.Spec.LoadBalancer != nil {
					lbStatus = collectLBStatus(cmd.Context(), c, o.timeout, sshLBProbe(c, lbDialer, p))
				}
			}()
			rep, err := collectStatus(cmd, c, o.timeout, dial)
			<-lbDone
			if rep != nil {
				addLBStatus(rep, lbStatus)
				if err := writeReport(s.Out, o.output, rep, func(w io.Writer) { printStatus(w, rep) }); err != nil {
					return err
				}
			}
			if err != nil {
				return err
			}
			if !rep.Healthy {
				return &VerdictError{Err: fmt.Errorf("cluster %s is degraded: %s", c.Metadata.Name, strings.Join(rep.Problems, "; "))}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "table", "output format: table or json")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 3*time.Second, "per-member bound on connecting and on each request (an unreachable member costs at most about twice this); "+
		"per LB host, connecting over SSH and reading it take at most twice this")
	return cmd
}

func collectStatus(cmd *cobra.Command, c *v1alpha1.Cluster, timeout time.Duration, dial etcd.Option) (*StatusReport, error) {
	members, err := etcd.MembersFromSpec(c)
	if err != nil {
		return nil, err
	}
	pkiDir := filepath.Join(c.Spec.StateDir, "pki")
	files := etcd.TLSFiles{
		CA:   pki.CertPath(pkiDir, "ca"),
		Cert: pki.CertPath(pkiDir, pki.HactlClient),
		Key:  pki.KeyPath(pkiDir, pki.HactlClient),
	}
	rep := &StatusReport{Cluster: c.Metadata.Name, Zones: map[string]string{}, QuotaBackendBytes: c.Spec.Etcd.QuotaBackendBytes,
		hostByURL: map[string]string{}}
	for _, h := range c.EtcdHosts() {
		rep.Zones[h.Name] = h.Zone
	}
	for _, m := range members {
		rep.hostByURL[m.ClientURL()] = m.Name
	}
	certs, err := pki.ListCerts(pkiDir)
	if err != nil {
		return nil, fmt.Errorf("reading the state dir's certificates (has 'hactl bootstrap' run with spec.stateDir %s? On a running "+
			"cluster whose state dir was lost, 'hactl bootstrap' recovers it from the members): %w", c.Spec.StateDir, err)
	}
	rep.LocalCertificates = certs
	st, err := etcd.StatusWithTimeout(cmd.Context(), etcd.ClientURLs(members), files, timeout, timeout, dial)
	rep.Etcd = st
	if st == nil {
		return nil, err
	}
	rep.Problems = problems(rep, members)
	rep.Healthy = len(rep.Problems) == 0
	if err != nil && errors.Is(err, etcd.ErrNoEndpointReachable) {
		var hosts []string
		for _, m := range members {
			hosts = append(hosts, m.Name)
		}
		return rep, fmt.Errorf("status: no member of cluster %s answered (hosts %s): %w", c.Metadata.Name, strings.Join(hosts, ", "), err)
	}
	return rep, nil
}

func problems(rep *StatusReport, members []etcd.Member) []string {
	var out []string
	st := rep.Etcd
	if !st.QuorumReachable {
		out = append(out, "no quorum reachable")
	}
	for _, ep := range st.Endpoints {
		switch {
		case !ep.Reachable:
			out = append(out, fmt.Sprintf("%s (%s) unreachable", dash(rep.hostOf(ep)), ep.Endpoint))
		case !ep.Healthy:
			out = append(out, fmt.Sprintf("%s (%s) unhealthy", dash(rep.hostOf(ep)), ep.Endpoint))
		}
	}
	for _, a := range st.Alarms {
		out = append(out, fmt.Sprintf("alarm %s on member %s", a.Alarm, a.MemberID))
	}
	for _, m := range members {
		found := false
		for _, lm := range st.Members {
			found = found || lm.Name == m.Name
		}
		if !found && st.QuorumReachable {
			out = append(out, fmt.Sprintf("%s is in the spec but not in the member list", m.Name))
		}
	}
	return out
}

func printStatus(w io.Writer, rep *StatusReport) {
	st := rep.Etcd
	quorum := "yes"
	if !st.QuorumReachable {
		quorum = "NO"
	}
	leader := dash(st.LeaderName)
	for _, ep := range st.Endpoints {
		if st.LeaderID != "" && ep.MemberID == st.LeaderID && !ep.Reachable {
			leader += " (UNREACHABLE: election pending)"
		}
	}
	if st.LeaderID != "" {
		reported := false
		for _, ep := range st.Endpoints {
			reported = reported || (ep.Reachable && ep.MemberID == st.LeaderID)
		}
		if !reported && !strings.Contains(leader, "UNREACHABLE") {
			leader += " (as last seen by the others; not answering)"
		}
	}
	fmt.Fprintf(w, "cluster %s  etcd cluster ID %s  leader %s  quorum %s\n\n", rep.Cluster, dash(st.ClusterID), leader, quorum)
	var rows [][]string
	now := time.Now()
	for _, ep := range st.Endpoints {
		name := rep.hostOf(ep)
		health := "healthy"
		switch {
		case !ep.Reachable:
			health = "UNREACHABLE"
		case !ep.Healthy:
			health = "UNHEALTHY"
		}
		role := "follower"
		switch {
		case !ep.Reachable:
			role = "-"
		case ep.IsLeader:
			role = "leader"
		case ep.IsLearner:
			role = "learner"
		}
		expiry := "-"
		if !ep.CertNotAfter.IsZero() {
			days := int(ep.CertNotAfter.Sub(now).Hours() / 24)
			expiry = fmt.Sprintf("%s (%dd)", ep.CertNotAfter.Format("2006-01-02"), days)
			if days < certWarnDays {
				expiry += " RENEW"
			}
		}
		db := "-"
		if ep.Reachable {
			db = fmt.Sprintf("%s/%s of %s", mib(ep.DBSizeInUseBytes), mib(ep.DBSizeBytes), mib(rep.QuotaBackendBytes))
		}
		rows = append(rows, []string{
			dash(name), dash(ep.MemberID), dash(rep.Zones[name]), ep.Endpoint, role, health,
			latency(ep), num(ep.RaftTerm, ep.Reachable), num(ep.RaftIndex, ep.Reachable), num(ep.RaftAppliedIndex, ep.Reachable),
			db, dash(ep.Version), expiry,
		})
	}
	ui.Table(w, []string{"MEMBER", "ID", "ZONE", "CLIENT-URL", "ROLE", "HEALTH", "LATENCY", "TERM", "INDEX", "APPLIED", "DB IN-USE/SIZE OF QUOTA", "VERSION", "SERVER-CERT-EXPIRY"}, rows)
	if len(st.Members) > 0 {
		fmt.Fprintln(w, "\nmember list:")
		var mrows [][]string
		for _, m := range st.Members {
			kind := "voter"
			if m.IsLearner {
				kind = "learner"
			}
			mrows = append(mrows, []string{dash(m.Name), m.ID, kind, strings.Join(m.PeerURLs, ","), strings.Join(m.ClientURLs, ",")})
		}
		ui.Table(w, []string{"  NAME", "ID", "TYPE", "PEER-URLS", "CLIENT-URLS"}, indent(mrows))
	}
	alarms := "none"
	if len(st.Alarms) > 0 {
		var as []string
		for _, a := range st.Alarms {
			as = append(as, a.Alarm+" on "+a.MemberID)
		}
		alarms = strings.Join(as, ", ")
	}
	fmt.Fprintf(w, "\nalarms: %s\n", alarms)
	var crows [][]string
	for _, c := range rep.LocalCertificates {
		days := int(c.NotAfter.Sub(now).Hours() / 24)
		note := ""
		if days < certWarnDays {
			note = "RENEW"
		}
		crows = append(crows, []string{c.Path, c.Subject, c.NotAfter.Format("2006-01-02"), fmt.Sprintf("%dd", days), note})
	}
	if len(crows) > 0 {
		fmt.Fprintln(w, "\nlocal certificates (state dir):")
		ui.Table(w, []string{"  FILE", "SUBJECT", "NOT-AFTER", "LEFT", ""}, indent(crows))
	}
	if rep.LoadBalancer != nil {
		printLBStatus(w, rep.LoadBalancer)
	}
	if len(rep.Problems) > 0 {
		fmt.Fprintf(w, "\nDEGRADED: %s\n", strings.Join(rep.Problems, "; "))
	} else {
		fmt.Fprintln(w, "\nhealthy")
	}
}

func indent(rows [][]string) [][]string {
	for _, r := range rows {
		r[0] = "  " + r[0]
	}
	return rows
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// latency formats an endpoint's status round trip; "-" when it did not answer.
func latency(ep etcd.EndpointStatus) string {
	if !ep.Reachable {
		return "-"
	}
	return fmt.Sprintf("%.1fms", ep.LatencyMs)
}

func num(n uint64, ok bool) string {
	if !ok {
		return "-"
	}
	return fmt.Sprint(n)
}

// mib formats a byte count with a binary unit (KiB, MiB, GiB).
func mib(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1fGiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1fMiB", float64(b)/(1<<20))
	default:
		return fmt.Sprintf("%.0fKiB", float64(b)/(1<<10))
	}
}

// lbProbe reads one LB host (lb.StatusScript over SSH outside tests). It must return when ctx is
// done; a host it could not read has Error set.
type lbProbe func(ctx context.Context, h v1alpha1.Host) lb.HostStatus

// collectLBStatus reads every LB host with probe, concurrently (at most spec.ssh.maxParallel at a
// time), each within twice timeout (connecting, then the command), and judges them together
// (lb.Summarize). A host that could not be read, in time or at all, has its Error set; the others
// are unaffected. Backends whose address HAProxy's stats page hides get it from the spec.
func collectLBStatus(ctx context.Context, c *v1alpha1.Cluster, timeout time.Duration, probe lbProbe) *lb.Status {
	spec := c.Spec.LoadBalancer
	vip, err := netip.ParsePrefix(spec.VIP)
	hosts := c.LBHosts()
	out := make([]lb.HostStatus, len(hosts))
	for i, h := range hosts {
		out[i] = lb.HostStatus{Host: h.Name, Address: h.Address, Error: "not read: interrupted"}
	}
	if err != nil { // validated at load: not reached with a loaded spec
		for i := range out {
			out[i].Error = fmt.Sprintf("spec.loadBalancer.vip: %v", err)
		}
		return &lb.Status{VIP: spec.VIP, Holders: []string{}, Hosts: out, Problems: []string{fmt.Sprintf("spec.loadBalancer.vip: %v", err)}}
	}
	backendAddr := map[string]string{}
	for _, h := range c.ControlPlaneHosts() {
		if a, err := netip.ParseAddr(h.Address); err == nil {
			backendAddr[h.Name] = lb.Backend{Address: a, Port: spec.APIServerPort}.AddrPort()
		}
	}
	idx := map[string]int{}
	for i, h := range hosts {
		idx[h.Name] = i
	}
	var mu sync.Mutex
	_ = provision.ForEach(ctx, hosts, c.Spec.SSH.MaxParallel, func(h v1alpha1.Host) string { return h.Name },
		func(ctx context.Context, h v1alpha1.Host) error {
			bound := 2 * timeout
			hctx, cancel := context.WithTimeout(ctx, bound)
			defer cancel()
			res := make(chan lb.HostStatus, 1)
			go func() { res <- probe(hctx, h) }()
			var st lb.HostStatus
			select {
			case st = <-res:
			case <-hctx.Done(): // a probe that does not return in time is left behind
				st = lb.HostStatus{Error: fmt.Sprintf("not read within %v: %v", bound, context.Cause(hctx))}
			}
			st.Host, st.Address = h.Name, h.Address
			for i, b := range st.Backends {
				if b.Address == "" {
					st.Backends[i].Address = backendAddr[b.Name]
				}
			}
			mu.Lock()
			out[idx[h.Name]] = st
			mu.Unlock()
			return nil
		})
	return lb.Summarize(vip, out)
}

// sshLBProbe reads an LB host with one command over SSH through d (lb.StatusScript, run as root).
// Output that arrived before a failure (a timeout) is still parsed; the failure is the host's Error.
func sshLBProbe(c *v1alpha1.Cluster, d *provision.Dialer, p *ui.Printer) lbProbe {
	vip, _ := netip.ParsePrefix(c.Spec.LoadBalancer.VIP)
	return func(ctx context.Context, h v1alpha1.Host) lb.HostStatus {
		addr := h.Address
		if a, err := netip.ParseAddr(h.Address); err == nil {
			addr = a.Unmap().String()
		}
		cli, err := d.Dial(ctx, provision.Target{Name: h.Name, Address: addr, Port: h.Port})
		if err != nil {
			return lb.HostStatus{Error: err.Error()}
		}
		defer cli.Close()
		start := time.Now()
		res, err := cli.Run(ctx, "status/lb", lb.StatusScript)
		p.Debugf("%s: [status/lb] read HAProxy, keepalived and the VIP (%s, err=%v)", h.Name, time.Since(start).Round(time.Millisecond), err)
		st := lb.ParseHostStatus(h.Name, h.Address, vip.Addr(), res.Stdout)
		if err != nil {
			st.Error = err.Error()
		}
		return st
	}
}

// addLBStatus puts the load balancer's status and problems into the report.
func addLBStatus(rep *StatusReport, s *lb.Status) {
	if s == nil {
		return
	}
	rep.LoadBalancer = s
	for _, p := range s.Problems {
		rep.Problems = append(rep.Problems, "load balancer: "+p)
	}
	rep.Healthy = len(rep.Problems) == 0
}

// printLBStatus prints the load-balancer section: the VIP and its holder, one row per LB host
// (keepalived's VRRP state and unit, the priority it advertises, haproxy's unit, the VIP), the
// notes about what could not be read, and the backends as each LB host's HAProxy sees them.
func printLBStatus(w io.Writer, s *lb.Status) {
	holder := "NONE"
	switch {
	case len(s.Holders) == 1:
		holder = s.Holders[0]
	case len(s.Holders) > 1:
		holder = strings.Join(s.Holders, ", ") + " (SPLIT BRAIN)"
	}
	fmt.Fprintf(w, "\nload balancer: VIP %s  holder %s\n", s.VIP, holder)
	var rows, brows [][]string
	var notes []string
	for _, h := range s.Hosts {
		if h.Error != "" {
			notes = append(notes, fmt.Sprintf("%s: UNREACHABLE: %s", h.Host, h.Error))
		}
		if h.Error != "" && h.HAProxy == "" {
			rows = append(rows, []string{h.Host, h.Address, "UNREACHABLE", "-", "-", "-"})
			continue
		}
		vrrp := h.VRRPState
		if vrrp == "" {
			vrrp = "?"
		}
		prio := "-"
		if h.Priority > 0 {
			prio = fmt.Sprintf("%d/%d", h.Priority, h.EffectivePriority)
		}
		vip := "-"
		if h.HoldsVIP {
			vip = "holds (" + h.Interface + ")"
		}
		rows = append(rows, []string{h.Host, h.Address, fmt.Sprintf("%s (%s)", vrrp, dash(h.Keepalived)), prio, dash(h.HAProxy), vip})
		if h.VRRPNote != "" {
			notes = append(notes, h.Host+": "+h.VRRPNote)
		}
		if h.StatsError != "" {
			notes = append(notes, fmt.Sprintf("%s: HAProxy's backend states not read: %s", h.Host, h.StatsError))
		}
		for _, b := range h.Backends {
			check := dash(b.CheckStatus)
			if b.CheckCode > 0 {
				check += fmt.Sprintf(" %d", b.CheckCode)
			}
			if b.CheckDurationMs >= 0 && b.CheckStatus != "" {
				check += fmt.Sprintf(" %dms", b.CheckDurationMs)
			}
			if b.Down() && b.CheckDetail != "" {
				check += " (" + b.CheckDetail + ")"
			}
			since := "-"
			if b.LastChangeSeconds >= 0 {
				since = (time.Duration(b.LastChangeSeconds) * time.Second).String()
			}
			brows = append(brows, []string{h.Host, b.Name, dash(b.Address), b.Status, check, since})
		}
	}
	ui.Table(w, []string{"  LB-HOST", "ADDRESS", "KEEPALIVED (UNIT)", "PRIORITY/EFFECTIVE", "HAPROXY", "VIP"}, indent(rows))
	for _, n := range notes {
		fmt.Fprintf(w, "  %s\n", n)
	}
	if len(brows) > 0 {
		fmt.Fprintln(w, "\nbackends as each LB host's HAProxy sees them:")
		ui.Table(w, []string{"  LB-HOST", "BACKEND", "ADDRESS", "STATUS", "LAST CHECK", "SINCE CHANGE"}, indent(brows))
	}
}
