// Package status implements `hactl status`: it asks every etcd member for its status over TLS (with
// hactl's client certificate from the state dir) and, with spec.loadBalancer, reads every LB host
// over SSH (HAProxy, Keepalived, the VIP) or, with spec.loadBalancer.external, asks GET /readyz
// through the user's load balancer, and judges them together into a Report.
package status

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/internal/bastion"
	"github.com/hactl/hactl/kubeapi"
	"github.com/hactl/hactl/lb"
	"github.com/hactl/hactl/operator/deploy"
	"github.com/hactl/hactl/pki"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/ui"
)

// certWarnDays: certificates expiring sooner are flagged (kubeadm warns at 30 days too).
const certWarnDays = 30

// Options configure Collect.
type Options struct {
	// Cluster is the loaded, defaulted and validated spec.
	Cluster *v1alpha1.Cluster
	// Timeout (> 0) bounds, per member, connecting and each request (an unreachable member costs at
	// most about twice it); per LB host, connecting over SSH and reading it take at most twice it.
	Timeout time.Duration
	// Prompt asks for a key passphrase or the sudo password (bastion, LB hosts); nil asks nothing.
	Prompt provision.Prompter
	// Printer receives the debug lines of the LB hosts' reads; required.
	Printer *ui.Printer
	// OperatorKubeconfig (--kubeconfig/--context) is where hactl-operator's EtcdCluster is read;
	// nil: where operator deploy recorded it in the state dir, else over SSH (deploy.Where).
	OperatorKubeconfig *kubeapi.Kubeconfig
}

// Report is `hactl status -o json`: what Collect found and judged. JSON field names are part of the
// command's output.
type Report struct {
	Cluster string `json:"cluster"`
	// Healthy: quorum reachable, every spec member reachable and healthy, no alarm; with a load
	// balancer, none of its problems either.
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
	// ExternalLB is GET /readyz through spec.loadBalancer.external from this machine; absent
	// without one. A readyz that failed is in Problems too ("load balancer: ").
	ExternalLB *ExternalLBStatus `json:"externalLoadBalancer,omitempty"`
	// Kubernetes is the cluster hactl built (spec.kubernetes), asked from a control-plane host over
	// SSH; absent without spec.kubernetes. Its problems are in Problems too ("kubernetes: ").
	Kubernetes *KubeStatus `json:"kubernetes,omitempty"`
	// Scheduler is hactl-scheduler's replicas and Lease (spec.scheduler), through the API over SSH;
	// absent without spec.scheduler. Its problems are in Problems too ("scheduler: ").
	Scheduler *SchedulerStatus `json:"scheduler,omitempty"`
	// Operator is hactl-operator's replicas, Lease and EtcdCluster (spec.kubernetes, when
	// deployed), through the API over SSH. Its problems are in Problems too ("operator: ").
	Operator *OperatorStatus `json:"operator,omitempty"`

	// hostByURL maps each spec member's client URL to its host name, to name endpoints that did
	// not answer (etcd reports no member name for them).
	hostByURL map[string]string
}

// hostOf names the spec host behind an endpoint: etcd's member name when it answered, else the
// spec's host for that client URL.
func (r *Report) hostOf(ep etcd.EndpointStatus) string {
	if ep.MemberName != "" {
		return ep.MemberName
	}
	return r.hostByURL[ep.Endpoint]
}

// Collect asks every member for its status (through the bastion when the spec has one) while it
// reads every LB host over SSH (with spec.loadBalancer; without it no SSH is used), and judges
// them together: Report.Healthy is quorum reachable, every spec member reachable and healthy, no
// alarm, and with a load balancer exactly one VIP holder, haproxy and keepalived active everywhere,
// no backend DOWN and every LB host read. An LB host that could not be read is in the report, not
// in the error.
//
// Errors: the SSH setup (bastion.Open, provision.FromSpec: keys, known_hosts,
// secrets) or the state dir's certificates → nil report; no member answered → the report and an
// error wrapping etcd.ErrNoEndpointReachable that names the hosts.
func Collect(ctx context.Context, o Options) (*Report, error) {
	c := o.Cluster
	tunnel, err := bastion.Open(c, o.Prompt)
	if err != nil {
		return nil, err
	}
	defer tunnel.Close()
	lbDialer := tunnel.Dialer
	if (c.ManagedLB() != nil || c.Spec.Kubernetes != nil) && lbDialer == nil {
		if lbDialer, err = provision.FromSpec(c, provision.SpecOptions{Prompt: o.Prompt}); err != nil {
			return nil, err
		}
		defer lbDialer.Close()
	}
	var lbStatus *lb.Status
	lbDone := make(chan struct{})
	go func() {
		defer close(lbDone)
		if c.ManagedLB() != nil {
			lbStatus = collectLB(ctx, c, o.Timeout, sshLBProbe(c, lbDialer, o.Printer))
		}
	}()
	var extStatus *ExternalLBStatus
	extDone := make(chan struct{})
	go func() {
		defer close(extDone)
		var dial dialFunc
		if tunnel.Dialer != nil {
			dial = tunnel.Dialer.DialTCP
		}
		extStatus = collectExternalLB(ctx, c, o.Timeout, dial)
	}()
	var kube *KubeStatus
	kubeDone := make(chan struct{})
	go func() {
		defer close(kubeDone)
		if c.Spec.Kubernetes != nil {
			kube = collectKube(ctx, c, lbDialer, o.Timeout, o.Printer)
		}
	}()
	// The scheduler and operator sections share one API client (one SSH tunnel to the API).
	var sched *SchedulerStatus
	var oper *OperatorStatus
	apiDone := make(chan struct{})
	go func() {
		defer close(apiDone)
		actx, cancel := context.WithTimeout(ctx, 2*o.Timeout+10*time.Second)
		defer cancel()
		var api *kubeapi.Client
		var apiErr error
		if c.Spec.Kubernetes != nil {
			if api, apiErr = kubeapi.FromSpec(actx, c, o.Prompt); apiErr == nil {
				defer api.Close()
			}
			if c.Spec.Scheduler != nil {
				sched = collectScheduler(actx, c, api, apiErr)
			}
		}
		// The operator may run elsewhere (deployed through a kubeconfig: kind, a management cluster).
		switch loc := deploy.Where(c, o.OperatorKubeconfig); {
		case loc.Kubeconfig != nil:
			oapi, err := kubeapi.FromKubeconfig(actx, *loc.Kubeconfig)
			if err == nil {
				defer oapi.Close()
			}
			oper = collectOperator(actx, c, loc.Namespace, oapi, err)
		case c.Spec.Kubernetes != nil:
			oper = collectOperator(actx, c, loc.Namespace, api, apiErr)
		}
	}()
	rep, err := collectEtcd(ctx, c, o.Timeout, tunnel.Etcd())
	<-lbDone
	<-extDone
	<-kubeDone
	<-apiDone
	if rep != nil {
		rep.addLB(lbStatus)
		rep.addExternalLB(extStatus)
		rep.addKube(kube)
		rep.addScheduler(sched)
		rep.addOperator(oper)
	}
	return rep, err
}

// collectEtcd asks every member for its status (etcd.StatusWithTimeout, each bounded by timeout)
// and reads the state dir's certificates. It returns nil and the error when the spec's members or
// the certificates can't be read or no status at all came back; a report and an error wrapping
// etcd.ErrNoEndpointReachable (naming the hosts) when no member answered.
func collectEtcd(ctx context.Context, c *v1alpha1.Cluster, timeout time.Duration, dial etcd.Option) (*Report, error) {
	members, err := etcd.MembersFromSpec(c)
	if err != nil {
		return nil, err
	}
	pkiDir := filepath.Join(c.Spec.StateDir, "pki")
	files := etcd.HactlClientTLS(c)
	rep := &Report{Cluster: c.Metadata.Name, Zones: map[string]string{}, QuotaBackendBytes: c.Spec.Etcd.QuotaBackendBytes,
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
	st, err := etcd.StatusWithTimeout(ctx, etcd.ClientURLs(members), files, timeout, timeout, dial)
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

// problems are what makes the etcd part of rep unhealthy: no quorum, a member unreachable or
// unhealthy, an alarm, a spec member missing from the member list.
func problems(rep *Report, members []etcd.Member) []string {
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

// Print writes the human report: the cluster line (ID, leader, quorum), one row per member, the
// member list, alarms, the state dir's certificates, the load balancer (when read) and the verdict
// ("healthy" or "DEGRADED: ...").
func (r *Report) Print(w io.Writer) {
	st := r.Etcd
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
	fmt.Fprintf(w, "cluster %s  etcd cluster ID %s  cluster version %s  leader %s  quorum %s\n\n", r.Cluster, dash(st.ClusterID), dash(st.ClusterVersion), leader, quorum)
	var rows [][]string
	now := time.Now()
	for _, ep := range st.Endpoints {
		name := r.hostOf(ep)
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
			db = fmt.Sprintf("%s/%s of %s, %.0f%% fragmented", mib(ep.DBSizeInUseBytes), mib(ep.DBSizeBytes), mib(r.QuotaBackendBytes), ep.FragmentationPercent)
		}
		rows = append(rows, []string{
			dash(name), dash(ep.MemberID), dash(r.Zones[name]), ep.Endpoint, role, health,
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
	for _, c := range r.LocalCertificates {
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
	if r.LoadBalancer != nil {
		printLB(w, r.LoadBalancer)
	}
	if r.ExternalLB != nil {
		printExternalLB(w, r.ExternalLB)
	}
	if r.Kubernetes != nil {
		printKube(w, r.Kubernetes)
	}
	if r.Scheduler != nil {
		printScheduler(w, r.Scheduler)
	}
	if r.Operator != nil {
		printOperator(w, r.Operator)
	}
	if len(r.Problems) > 0 {
		fmt.Fprintf(w, "\nDEGRADED: %s\n", strings.Join(r.Problems, "; "))
	} else {
		fmt.Fprintln(w, "\nhealthy")
	}
}

// indent indents the first column of rows (a sub-table).
func indent(rows [][]string) [][]string {
	for _, r := range rows {
		r[0] = "  " + r[0]
	}
	return rows
}

// dash is s, or "-" for "".
func dash(s string) string { return cmp.Or(s, "-") }

// latency formats an endpoint's status round trip; "-" when it did not answer.
func latency(ep etcd.EndpointStatus) string {
	if !ep.Reachable {
		return "-"
	}
	return fmt.Sprintf("%.1fms", ep.LatencyMs)
}

// num formats n, or "-" when !ok (the member did not answer).
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
