package status

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/lb"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/ui"
)

// lbProbe reads one LB host (lb.StatusScript over SSH outside tests). It must return when ctx is
// done; a host it could not read has Error set.
type lbProbe func(ctx context.Context, h v1alpha1.Host) lb.HostStatus

// collectLB reads every LB host with probe, concurrently (at most spec.ssh.maxParallel at a
// time), each within twice timeout (connecting, then the command), and judges them together
// (lb.Summarize). A host that could not be read, in time or at all, has its Error set; the others
// are unaffected. Backends whose address HAProxy's stats page hides get it from the spec.
func collectLB(ctx context.Context, c *v1alpha1.Cluster, timeout time.Duration, probe lbProbe) *lb.Status {
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
		t := provision.TargetOf(h)
		t.Address = addr
		cli, err := d.Dial(ctx, t)
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

// addLB puts the load balancer's status and problems into the report (nothing for s nil: no
// spec.loadBalancer).
func (r *Report) addLB(s *lb.Status) {
	if s == nil {
		return
	}
	r.LoadBalancer = s
	for _, p := range s.Problems {
		r.Problems = append(r.Problems, "load balancer: "+p)
	}
	r.Healthy = len(r.Problems) == 0
}

// printLB prints the load-balancer section: the VIP and its holder, one row per LB host
// (keepalived's VRRP state and unit, the priority it advertises, haproxy's unit, the VIP), the
// notes about what could not be read, and the backends as each LB host's HAProxy sees them.
func printLB(w io.Writer, s *lb.Status) {
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
