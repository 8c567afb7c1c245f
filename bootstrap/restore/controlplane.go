package restore

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/internal/shell"
	"github.com/hactl/hactl/provision"
)

// The Kubernetes control plane during a restore: the spec's control-plane hosts that run kubelet
// (hactl's kubeadm control planes, or the user's own behind hactl's etcd and VIP; a host without a
// kubelet unit is left alone). Kubernetes' procedure for restoring the etcd
// cluster behind it ("Operating etcd clusters for Kubernetes", Restoring an etcd cluster) is: stop
// every API server, restore every etcd member, restart every API server, and restart
// kube-scheduler, kube-controller-manager and kubelet so that none relies on state from before
// the restore. When the spec has control-plane hosts, restore/hold does the first step on each:
// kubelet stopped (so that it restarts nothing) and kubeadm's control-plane containers killed;
// restore/release, after etcd/wait, starts kubelet again, which starts them at once (a new kubelet
// has no crash back-off to wait out), and waits until every kube-apiserver answers /readyz.

// Phase titles of the control plane's hold and release.
const (
	PhaseHold    = "restore/hold"
	PhaseRelease = "restore/release"
)

// heldContainers are the containers (kubeadm's static pods) restore/hold kills on every control
// plane: the API server and the controllers whose caches come from it.
var heldContainers = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// releaseTimeout bounds restore/release's wait for one control plane's kube-apiserver to answer
// /readyz after kubelet started (its start, the etcd connection and the post-start hooks take
// seconds; minutes on a loaded host).
const releaseTimeout = 4 * time.Minute

// holdWaitTenths bounds the hold script's wait for the killed containers' tasks to end, in tenths
// of a second.
const holdWaitTenths = 300

// noKubelet is what holdScript prints on a host without a kubelet unit (Kubernetes not installed
// there yet): nothing is held.
const noKubelet = "no-kubelet"

// holdScript is the sh script restore/hold runs on a control plane: on a host without a kubelet
// unit, noKubelet and nothing else; otherwise kubelet stopped, then every
// running task of heldContainers (found through ctr by the labels containerd's CRI plugin sets;
// hosts have containerd's client, not always crictl) killed with SIGKILL — the writes they might
// still send are rolled back by the restore anyway —, and waited for. It prints the names of the
// containers it killed. Exit 1 when a task still runs after holdWaitTenths.
func holdScript() string { return holdScriptWaiting(holdWaitTenths) }

// holdScriptWaiting is holdScript waiting tenths tenths of a second for the killed tasks to end.
func holdScriptWaiting(tenths int) string {
	var names []string
	for _, c := range heldContainers {
		names = append(names, shell.Quote(c))
	}
	return fmt.Sprintf(`set -eu
if ! systemctl cat kubelet.service >/dev/null 2>&1; then echo %[3]s; exit 0; fi
systemctl stop kubelet
running() { ctr -n k8s.io tasks ls | awk -v ids=" $(echo $1) " '$3 == "RUNNING" && index(ids, " " $1 " ") { print $1 }'; }
all="" killed=""
for c in %[1]s; do
  ids=$(ctr -n k8s.io containers ls -q "labels.\"io.kubernetes.container.name\"==$c")
  all="$all $ids"
  for id in $(running "$ids"); do
    ctr -n k8s.io tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
    killed="$killed $c"
  done
done
i=0
while [ -n "$(running "$all")" ]; do
  i=$((i + 1))
  if [ "$i" -gt %[2]d ]; then echo "still running after SIGKILL: $(running "$all")" >&2; exit 1; fi
  sleep 0.1
done
echo $killed`, strings.Join(names, " "), tenths, noKubelet)
}

// releaseCommand is what restore/release runs on a control plane: kubelet started.
const releaseCommand = "systemctl start kubelet"

// noReadyzCheck is what readyzCommand prints on a host without kubectl or kubeadm's admin
// kubeconfig (a control plane hactl did not build): its apiserver cannot be asked from there.
const noReadyzCheck = "no-kubectl"

// readyzCommand asks the kube-apiserver on host (at its advertise address, which its serving
// certificate names, and the spec's apiServerPort) for /readyz with kubectl and the host's admin
// kubeconfig (kubeadm's /etc/kubernetes/admin.conf); without either it prints noReadyzCheck.
func readyzCommand(c *v1alpha1.Cluster, h v1alpha1.Host) string {
	server := "https://" + net.JoinHostPort(h.Address, strconv.Itoa(c.APIServerPort()))
	return "if ! command -v kubectl >/dev/null 2>&1 || [ ! -r /etc/kubernetes/admin.conf ]; then echo " + noReadyzCheck + "; exit 0; fi\n" +
		"kubectl --kubeconfig /etc/kubernetes/admin.conf --request-timeout 3s --server " + shell.Quote(server) + " get --raw /readyz"
}

// controlPlane is the hold and release of a restore's control-plane hosts.
type controlPlane struct {
	r     *Group
	hosts []v1alpha1.Host
	mu    sync.Mutex
	held  map[string]bool // hosts whose kubelet restore/hold stopped and release has not started
}

// hold runs holdScript on every control plane at once. Errors, per host: the script's; the hosts
// held by then are released by Run, and the snapshot's copies restore/ship put on the members are
// removed (nothing of the restore is left behind when it stops before etcd is touched).
func (cp *controlPlane) hold(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			cp.r.unship(ctx)
		}
	}()
	run := cp.r.eg.Run()
	return provision.ForEach(ctx, cp.hosts, run.Spec.Spec.SSH.MaxParallel, hostName, func(ctx context.Context, h v1alpha1.Host) error {
		sctx, cancel := run.StepCtx(ctx)
		defer cancel()
		cp.mu.Lock()
		cp.held[h.Name] = true // kubelet may be stopped even if the script fails after that
		cp.mu.Unlock()
		res, err := run.Exec(sctx, h.Name, PhaseHold, holdScript())
		if err != nil {
			return err
		}
		killed := strings.Fields(string(res.Stdout))
		if len(killed) == 1 && killed[0] == noKubelet {
			cp.mu.Lock()
			delete(cp.held, h.Name)
			cp.mu.Unlock()
			run.Printer.Hostf(h.Name, "no kubelet unit (Kubernetes not installed here): nothing to hold")
			return nil
		}
		if len(killed) == 0 {
			run.Printer.Hostf(h.Name, "kubelet stopped; no control-plane container was running")
			return nil
		}
		run.Printer.Hostf(h.Name, "kubelet stopped; %s killed", strings.Join(killed, ", "))
		return nil
	})
}

// pending reports whether a host is still held (restore/release has not started its kubelet).
func (cp *controlPlane) pending() bool {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return len(cp.held) > 0
}

// release is restore/release: kubelet started on every held control plane, each one's
// kube-apiserver waited for (releaseAndWait).
func (cp *controlPlane) release(ctx context.Context) error { return cp.releaseAndWait(ctx, true) }

// releaseAndWait starts kubelet on every held control plane and, with ready, waits until each
// one's kube-apiserver answers /readyz (releaseTimeout each). Errors, per host: kubelet's start
// (with its journal) or the wait's timeout naming the last answer.
func (cp *controlPlane) releaseAndWait(ctx context.Context, ready bool) error {
	run := cp.r.eg.Run()
	cp.mu.Lock()
	var hosts []v1alpha1.Host
	for _, h := range cp.hosts {
		if cp.held[h.Name] {
			hosts = append(hosts, h)
		}
	}
	cp.mu.Unlock()
	return provision.ForEach(ctx, hosts, run.Spec.Spec.SSH.MaxParallel, hostName, func(ctx context.Context, h v1alpha1.Host) error {
		start := time.Now()
		sctx, cancel := run.StepCtx(ctx)
		_, err := run.Exec(sctx, h.Name, PhaseRelease, releaseCommand)
		cancel()
		if err != nil {
			return run.ExplainUnit(ctx, h.Name, PhaseRelease, err, "kubelet.service")
		}
		cp.mu.Lock()
		delete(cp.held, h.Name)
		cp.mu.Unlock()
		if !ready {
			run.Printer.Hostf(h.Name, "kubelet started: it starts the control-plane containers again")
			return nil
		}
		var last string
		unchecked := false
		err = wait.PollUntilContextTimeout(ctx, time.Second, releaseTimeout, true, func(ctx context.Context) (bool, error) {
			sctx, cancel := run.StepCtx(ctx)
			defer cancel()
			res, err := run.Exec(sctx, h.Name, PhaseRelease, readyzCommand(run.Spec, h))
			if err != nil {
				last = err.Error()
				return false, nil
			}
			out := strings.TrimSpace(string(res.Stdout))
			unchecked = out == noReadyzCheck
			return out == "ok" || unchecked, nil
		})
		if err == nil && unchecked {
			run.Printer.Warnf("%s: kubelet started; no kubectl or /etc/kubernetes/admin.conf there to ask its kube-apiserver for /readyz: check it yourself", h.Name)
			return nil
		}
		if err != nil {
			return fmt.Errorf("kubelet started, but kube-apiserver did not answer /readyz within %s (last: %s): %w", releaseTimeout, last, err)
		}
		run.Printer.Hostf(h.Name, "kubelet started; kube-apiserver ready on the restored etcd after %s", time.Since(start).Round(100*time.Millisecond))
		return nil
	})
}

func hostName(h v1alpha1.Host) string { return h.Name }
