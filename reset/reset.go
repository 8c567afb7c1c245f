// Package reset implements `hactl reset`: Kubernetes nodes without an etcd member (workers, and
// control planes whose etcd role is on other hosts) taken out of the cluster and cleaned of what
// hactl installed. Per host: the Node is drained and deleted through a control plane that stays;
// /etc/kubernetes is saved aside; `kubeadm reset`; kubelet stopped and disabled; hactl's units,
// binaries, CNI network, routes and kernel settings removed, kube-proxy's and kubelet's iptables
// chains removed (a member's host: its backup schedule too), containerd's configuration put back
// as it was before hactl (when hactl kept it). Packages and imported images stay. A host that keeps
// its place in the spec joins again on the next `hactl bootstrap`.
package reset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-multierror"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/backup/schedule"
	"github.com/hactl/hactl/etcd/membership"
	"github.com/hactl/hactl/internal/shell"
	"github.com/hactl/hactl/kubenode"
	"github.com/hactl/hactl/kubesched"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/state"
	"github.com/hactl/hactl/ui"
)

// Options are one `hactl reset` call.
type Options struct {
	Cluster *v1alpha1.Cluster
	// Hosts are the spec hosts to reset.
	Hosts []string
	// DrainTimeout bounds `kubectl drain` of each Node (default 2m).
	DrainTimeout time.Duration
	Prompt       provision.Prompter
	Printer      *ui.Printer
	// Etcd reaches the etcd members (membership.ClusterFromSpec); used when a host runs a member,
	// which is removed from the cluster first.
	Etcd membership.Cluster
	// Force is membership's --force: remove a member even when the rest would lose their quorum.
	Force bool
}

// InputError is a host list that cannot be reset, found before any host is contacted (exit 2).
type InputError struct{ Msg string }

func (e *InputError) Error() string { return e.Msg }

// ExitCode is 2.
func (e *InputError) ExitCode() int { return 2 }

// Plan is what Run does, per host, in order.
type Plan struct {
	Hosts []HostPlan
	// Via is the control plane the Nodes are drained and deleted through ("" when none stays).
	Via string
}

// HostPlan is one host's steps.
type HostPlan struct {
	Name, Role string
	// Member: the host runs an etcd member, removed first.
	Member bool
	Steps  []string
}

// String renders the plan for the confirmation.
func (p Plan) String() string {
	var b strings.Builder
	for _, h := range p.Hosts {
		fmt.Fprintf(&b, "%s (%s):\n", h.Name, h.Role)
		for _, s := range h.Steps {
			fmt.Fprintf(&b, "  - %s\n", s)
		}
	}
	return b.String()
}

// backupDir keeps /etc/kubernetes as it was before the reset.
const backupDir = "/var/lib/hactl/backup"

// NewPlan checks o.Hosts against the spec and returns the plan. A host running an etcd member has
// the member removed first (etcd/membership: quorum guard, leadership moved off it, unit stopped,
// data dir kept aside). Errors (*InputError, exit 2): no spec.kubernetes, a host not in the spec or
// not a Kubernetes node (an etcd-only host: `hactl etcd member remove`), every control plane at once
// (the cluster itself: nothing would remain to drain through).
func NewPlan(o Options) (Plan, error) {
	c := o.Cluster
	if c.Spec.Kubernetes == nil {
		return Plan{}, &InputError{"the spec has no spec.kubernetes: there is no Kubernetes node to reset; an etcd member goes with `hactl etcd member remove`, and docs/real-hosts.md (\"Removing what hactl installed\") says how to remove the rest"}
	}
	byName := map[string]v1alpha1.Host{}
	for _, h := range c.Spec.Hosts {
		byName[h.Name] = h
	}
	var p Plan
	var errs []string
	var names []string
	for _, n := range o.Hosts {
		if n = strings.TrimSpace(n); n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	o.Hosts = names
	if len(o.Hosts) == 0 {
		return Plan{}, &InputError{"--hosts: name the hosts to reset, e.g. --hosts w-c"}
	}
	for _, name := range o.Hosts {
		h, ok := byName[name]
		switch {
		case !ok:
			var nodes []string
			for _, kh := range c.KubeNodes() {
				if !kh.HasRole(v1alpha1.RoleEtcd) {
					nodes = append(nodes, kh.Name)
				}
			}
			errs = append(errs, fmt.Sprintf("--hosts: %s is not a host of the spec (nodes without an etcd member: %s)", name, orNone(nodes)))
			continue
		case !h.HasRole(v1alpha1.RoleControlPlane) && !h.HasRole(v1alpha1.RoleWorker):
			msg := fmt.Sprintf("--hosts: %s is no Kubernetes node (roles %v)", name, h.Roles)
			if h.HasRole(v1alpha1.RoleEtcd) {
				msg += fmt.Sprintf(": to take its etcd member out, hactl etcd member remove %s", name)
			}
			errs = append(errs, msg)
			continue
		}
		role := "worker"
		if h.HasRole(v1alpha1.RoleControlPlane) {
			role = "control-plane"
		}
		p.Hosts = append(p.Hosts, HostPlan{Name: name, Role: role, Member: h.HasRole(v1alpha1.RoleEtcd)})
	}
	if len(errs) > 0 {
		return Plan{}, &InputError{strings.Join(errs, "\n")}
	}
	for _, h := range c.ControlPlaneHosts() {
		if !slices.Contains(o.Hosts, h.Name) {
			p.Via = h.Name
			break
		}
	}
	if p.Via == "" {
		return Plan{}, &InputError{"--hosts names every control-plane host: that is the whole cluster, not a node of it; hactl reset takes nodes out of a cluster that stays"}
	}
	for i := range p.Hosts {
		h := &p.Hosts[i]
		if h.Member {
			h.Steps = append(h.Steps, fmt.Sprintf("remove its etcd member (refused when the rest would lose their quorum; leadership moved off it first), stop and disable etcd, move %s aside", c.Spec.Etcd.DataDir),
				"remove hactl's backup schedule from it, if any, as `hactl backup schedule --disable` does (without a member its timer fails every slot; run hactl backup schedule again once the host is a member again)")
		}
		h.Steps = append(h.Steps, []string{
			fmt.Sprintf("drain Node %s and delete it (kubectl on %s)", h.Name, p.Via),
			"save /etc/kubernetes to " + backupDir + "/etc-kubernetes-<time>.tgz",
			"kubeadm reset (kubelet stopped, kubeadm's files and the node's containers removed)",
			"remove hactl's kubelet unit and drop-in, kubelet/kubeadm/kubectl, the CNI network, the pod routes, kernel settings and the marker",
			"remove kube-proxy's and kubelet's iptables chains (KUBE-*) and hactl-bridge's CNI-* chains, IPv4 and IPv6 (only they would clear them), every other rule kept",
			"put back containerd's configuration from before hactl (when kept) and restart containerd",
		}...)
		if h.Role == "control-plane" {
			h.Steps = append(h.Steps, "remove hactl-scheduler's static pod configuration ("+kubesched.Dir+"; kubeadm reset leaves it, and its kubeconfig's client key stays valid for the cluster; the saved /etc/kubernetes keeps a copy)")
		}
	}
	return p, nil
}

// Run carries out p, host by host. Errors are aggregated per host (*provision.HostError).
func Run(ctx context.Context, o Options, p Plan) error {
	if o.DrainTimeout == 0 {
		o.DrainTimeout = 2 * time.Minute
	}
	c := o.Cluster
	d, err := provision.FromSpec(c, provision.SpecOptions{Prompt: o.Prompt})
	if err != nil {
		return fmt.Errorf("ssh: %w", err)
	}
	defer d.Close()
	hosts := map[string]v1alpha1.Host{}
	for _, h := range c.Spec.Hosts {
		hosts[h.Name] = h
	}
	via, err := d.Dial(ctx, provision.TargetOf(hosts[p.Via]))
	if err != nil {
		return err
	}
	defer via.Close()
	var errs *multierror.Error
	for _, hp := range p.Hosts {
		if hp.Member {
			retirer := membership.SSHRetirer{Spec: c, Dialer: d}
			res, err := membership.Remove(ctx, membership.RemoveOptions{Cluster: o.Etcd, Name: hp.Name, Force: o.Force, Host: retirer, Printer: o.Printer})
			var notMember *membership.NotMemberError
			switch {
			case errors.As(err, &notMember):
				// Already out of the cluster (e.g. an earlier run's retire failed): the host's unit is
				// still stopped and its data dir moved aside; the script does nothing when done.
				o.Printer.Hostf(hp.Name, "no etcd member of that name in the cluster; retiring the host's etcd")
				if _, err := retirer.Retire(ctx, hp.Name, nil, time.Now().UTC().Format("20060102T150405Z")); err != nil {
					errs = multierror.Append(errs, &provision.HostError{Host: hp.Name, Err: fmt.Errorf("etcd/retire: %w (the host was not reset)", err)})
					continue
				}
			case err != nil && res != nil && res.Removed:
				errs = multierror.Append(errs, &provision.HostError{Host: hp.Name, Err: fmt.Errorf("etcd member removed from the cluster, but: %w; the host was not reset: run hactl reset again", err)})
				continue
			case err != nil:
				errs = multierror.Append(errs, &provision.HostError{Host: hp.Name, Err: fmt.Errorf("etcd member not removed: %w (the host was not reset)", err)})
				continue
			}
			if res != nil && res.Removed {
				// The host joins later as a new member: hactl's record of the old one goes.
				if err := state.ForgetRemoved(c.Spec.StateDir, map[string]string{hp.Name: res.ID}); err != nil {
					errs = multierror.Append(errs, fmt.Errorf("state dir: %s's member record stays: %w", hp.Name, err))
				}
			}
		}
		if err := resetHost(ctx, d, via, hosts[hp.Name], hp.Member, o); err != nil {
			errs = multierror.Append(errs, &provision.HostError{Host: hp.Name, Err: err})
			continue
		}
		o.Printer.Hostf(hp.Name, "reset: out of the cluster, hactl's files removed (/etc/kubernetes saved under %s)", backupDir)
	}
	return errs.ErrorOrNil()
}

// resetHost drains and deletes h's Node through via, then on h: with member (its etcd member
// retired already) the backup schedule is disabled (schedule.Disable), /etc/kubernetes saved,
// kubeadm reset, hactl's files removed, the KUBE-* iptables chains removed (KubeChainsScript),
// containerd's configuration put back. Errors: the drain's, the dial's, the schedule's, the
// script's.
func resetHost(ctx context.Context, d *provision.Dialer, via *provision.Client, h v1alpha1.Host, member bool, o Options) error {
	const step = "reset"
	k := "kubectl --kubeconfig /etc/kubernetes/admin.conf --request-timeout 20s"
	// Only a Node that does not exist is skipped: any other failure (API down, no admin.conf) stops
	// the reset before kubeadm reset, with the Node left as it was.
	drain := fmt.Sprintf(`set -e
if ! out=$(%[1]s get node %[2]s -o name 2>&1); then
  case "$out" in *NotFound*|*"not found"*) exit 0 ;; esac
  echo "$out" >&2; exit 1
fi
%[1]s drain %[2]s --ignore-daemonsets --delete-emptydir-data --force --timeout %[3]s >/dev/null
%[1]s delete node %[2]s >/dev/null`, k, shell.Quote(h.Name), o.DrainTimeout)
	dctx, cancel := context.WithTimeout(ctx, o.DrainTimeout+time.Minute)
	_, err := via.Run(dctx, step+"/drain", drain)
	cancel()
	if err != nil {
		return fmt.Errorf("drain and delete Node %s: %w", h.Name, err)
	}
	o.Printer.Hostf(h.Name, "Node drained and deleted")
	cli, err := d.Dial(ctx, provision.TargetOf(h))
	if err != nil {
		return err
	}
	defer cli.Close()
	if member {
		removed, err := schedule.Disable(ctx, cli)
		if err != nil {
			return fmt.Errorf("backup schedule: %w (the host was not reset)", err)
		}
		if len(removed) > 0 {
			o.Printer.Hostf(h.Name, "backup schedule removed (its timer would fail every slot without a member)")
		}
	}
	var rm []string
	for _, b := range kubenode.Binaries {
		rm = append(rm, kubenode.BinDir+"/"+b.Name)
	}
	rm = append(rm, kubenode.KubeletUnitPath, kubenode.KubeadmDropInPath, kubenode.CNIConfPath, kubenode.RoutesUnitPath,
		kubenode.SysctlPath, kubenode.ModulesPath, kubenode.MarkerPath)
	script := fmt.Sprintf(`set -e
mkdir -p %[1]s && chmod 0700 %[1]s
if [ -d /etc/kubernetes ]; then tar -czf %[1]s/etc-kubernetes-$(date +%%Y%%m%%dT%%H%%M%%S).tgz -C / etc/kubernetes; fi
if command -v kubeadm >/dev/null 2>&1; then kubeadm reset -f --cri-socket %[2]s >/dev/null 2>&1 || kubeadm reset -f --cri-socket %[2]s; fi
systemctl disable --now kubelet >/dev/null 2>&1 || true
systemctl disable --now %[3]s >/dev/null 2>&1 || true
rm -f %[4]s
rm -rf %[7]s
ip link delete cni0 2>/dev/null || true
%[5]s
%[6]s
systemctl daemon-reload
if systemctl is-active containerd >/dev/null 2>&1; then systemctl restart containerd; fi
`, backupDir, kubenode.CRISocket, kubenode.RoutesUnit, shell.Join(rm...), containerdPutBackScript(kubenode.ContainerdConfigPath), KubeChainsScript, shell.Quote(kubesched.Dir))
	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if _, err := cli.Run(rctx, step, script); err != nil {
		var ce *provision.CommandError
		if errors.As(err, &ce) {
			return fmt.Errorf("kubeadm reset and clean-up: %w", err)
		}
		return err
	}
	return nil
}

// containerdPutBackScript puts containerd's configuration at path back as it was before hactl:
// the copy hactl kept (path + kubenode.PrevSuffix) moved back; without one, the file removed only
// when hactl wrote it (its first line "# Written by hactl"). Run again, it changes nothing: the
// configuration put back the first time stays (an unconditional removal deleted it).
func containerdPutBackScript(path string) string {
	p, prev := shell.Quote(path), shell.Quote(path+kubenode.PrevSuffix)
	return fmt.Sprintf("if [ -e %[2]s ]; then mv -f %[2]s %[1]s; elif [ -f %[1]s ] && head -n 1 %[1]s | grep -q '^# Written by hactl'; then rm -f %[1]s; fi", p, prev)
}

// KubeChainsScript removes the iptables chains kube-proxy and kubelet made (KUBE-*) and hactl's pod
// network's (the CNI bridge and portmap plugins' chains for network "hactl-bridge",
// kubenode.BridgeConfig), and every rule jumping to them, in each backend the host has (iptables,
// ip6tables and their -legacy and -nft variants): after kubeadm reset nothing else would (kubeadm
// leaves them, and a pod whose CNI DEL never ran leaves its masquerade and hostPort chains), and
// stale KUBE-SERVICES rules keep rewriting Service addresses to pods that are gone.
//
// hactl's CNI rules are those whose comment names the network (`name: "hactl-bridge" id: ...`, the
// plugins' own marking) and the CNI-<hash> chains they jump to; portmap's shared chains
// (CNI-HOSTPORT-*) go only when no other network's hostPort is left in CNI-HOSTPORT-DNAT (another
// CNI user on the host keeps them). Each table is rewritten whole by iptables-restore from
// iptables-save's dump without those lines, so every other rule (the host's firewall, a drill's
// chain) stays; a backend with nothing to remove is not touched. It prints one line per backend
// cleaned; run again, it prints nothing.
const KubeChainsScript = `filter='
{ l[NR] = $0 }
END {
  for (i = 1; i <= NR; i++)
    if (index(l[i], "name: \\\"hactl-bridge\\\"") && match(l[i], / -[jg] CNI-[^ ]+/)) {
      c = substr(l[i], RSTART + 4, RLENGTH - 4)
      if (c !~ /^CNI-HOSTPORT-/) ours[c] = 1
    }
  for (i = 1; i <= NR; i++) {
    d = drop(l[i]); gone[i] = d; n += d
    if (!d && l[i] ~ /^-A CNI-HOSTPORT-DNAT /) others = 1
  }
  if (!others) for (i = 1; i <= NR; i++)
    if (!gone[i] && (l[i] ~ /^:CNI-HOSTPORT-/ || l[i] ~ /^-A CNI-HOSTPORT-/ || l[i] ~ / -[jg] CNI-HOSTPORT-/)) { gone[i] = 1; n++ }
  if (!n) exit 1
  for (i = 1; i <= NR; i++) if (!gone[i]) print l[i]
}
function drop(s,   f, c) {
  if (s ~ /^:KUBE-/ || s ~ /^-A KUBE-/ || s ~ / -[jg] KUBE-/) return 1
  if (index(s, "name: \\\"hactl-bridge\\\"")) return 1
  split(s, f, " ")
  c = f[1] == "-A" ? f[2] : substr(f[1], 2)
  if ((f[1] == "-A" || substr(f[1], 1, 1) == ":") && (c in ours)) return 1
  return 0
}'
for ipt in iptables ip6tables iptables-legacy ip6tables-legacy iptables-nft ip6tables-nft; do
  command -v "$ipt-save" >/dev/null 2>&1 && command -v "$ipt-restore" >/dev/null 2>&1 || continue
  dump=$("$ipt-save" 2>/dev/null) || continue
  kept=$(printf '%s\n' "$dump" | awk "$filter") || continue
  printf '%s\n' "$kept" | "$ipt-restore"
  echo "$ipt: KUBE-* and hactl-bridge's CNI-* chains removed"
done`

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
