package kubesched

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/kubeapi"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/ui"
)

// BackupDir is where Remove moves a host's scheduler files aside (never deleted).
const BackupDir = "/var/lib/hactl/backup"

// RemoveStatic takes the static pods off every control plane of c — the manifest and Dir moved to
// BackupDir/hactl-scheduler-<UTC time>/ (kubelet stops the pod when its manifest goes) — then,
// once no mirror pod of them is left (waitStaticGone: none renews the Lease any more), deletes the
// Lease and the RBAC through the API (RemoveThroughAPI). Hosts without the files are left alone.
// Errors: per host (aggregated), then a static pod still running after removeWait (Lease and RBAC
// kept), then the API's.
func RemoveStatic(ctx context.Context, c *v1alpha1.Cluster, prompt provision.Prompter, p *ui.Printer, now time.Time) error {
	d, err := provision.FromSpec(c, provision.SpecOptions{Prompt: prompt})
	if err != nil {
		return fmt.Errorf("ssh: %w", err)
	}
	defer d.Close()
	aside := fmt.Sprintf("%s/hactl-scheduler-%s", BackupDir, now.UTC().Format("20060102T150405Z"))
	err = provision.ForEach(ctx, c.ControlPlaneHosts(), c.Spec.SSH.MaxParallel, func(h v1alpha1.Host) string { return h.Name }, func(ctx context.Context, h v1alpha1.Host) error {
		cli, err := d.Dial(ctx, provision.TargetOf(h))
		if err != nil {
			return err
		}
		defer cli.Close()
		script := fmt.Sprintf(`set -e
if [ ! -e %[1]s ] && [ ! -e %[2]s ]; then echo none; exit 0; fi
install -d -m 0700 %[3]s
if [ -e %[1]s ]; then mv %[1]s %[3]s/; fi
if [ -e %[2]s ]; then mv %[2]s %[3]s/config; fi
echo moved`, ManifestFile, Dir, aside)
		res, err := cli.Run(ctx, "scheduler/remove", script)
		if err != nil {
			return err
		}
		if string(res.Stdout) == "none\n" {
			p.Hostf(h.Name, "scheduler/remove: nothing deployed here")
		} else {
			p.Hostf(h.Name, "scheduler/remove: static pod stopped; manifest and %s moved to %s", Dir, aside)
		}
		return nil
	})
	if err != nil {
		return err
	}
	api, err := kubeapi.FromSpec(ctx, c, prompt)
	if err != nil {
		return err
	}
	defer api.Close()
	// A static pod still running renews (or creates again) the Lease deleted next: only once
	// kubelet has stopped them all is the Lease left without a holder.
	if err := waitStaticGone(ctx, api, removeWait); err != nil {
		return err
	}
	return RemoveThroughAPI(ctx, api, c.Spec.Scheduler)
}

// mirrorAnnotation is on the API's copy (mirror pod) of a static pod.
const mirrorAnnotation = "kubernetes.io/config.mirror"

// waitStaticGone polls (every second, up to within) until kube-system holds no mirror pod of
// hactl-scheduler (Selector): kubelet deletes a static pod's mirror only once the pod has
// terminated, so none of them renews the Lease any more. Errors: the API's listing, or the nodes
// whose static pod is still there after within, with the fix.
func waitStaticGone(ctx context.Context, cs kubernetes.Interface, within time.Duration) error {
	var left []string
	var lerr error
	err := wait.PollUntilContextTimeout(ctx, time.Second, within, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(controlPlaneNS).List(ctx, metav1.ListOptions{LabelSelector: Selector})
		if err != nil {
			lerr = err
			return false, nil
		}
		left, lerr = nil, nil
		for _, p := range pods.Items {
			if _, ok := p.Annotations[mirrorAnnotation]; ok {
				left = append(left, p.Spec.NodeName)
			}
		}
		return len(left) == 0, nil
	})
	switch {
	case err == nil:
		return nil
	case lerr != nil:
		return fmt.Errorf("waiting for hactl-scheduler's static pods to stop: %w", lerr)
	default:
		return fmt.Errorf("hactl-scheduler's static pod still runs on %s %s after its manifest was moved aside (kubelet has not stopped it): its Lease and RBAC stay; run hactl scheduler remove again once it has stopped: %w",
			strings.Join(left, ", "), within, err)
	}
}
