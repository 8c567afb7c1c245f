package kubesched

import (
	"context"
	"fmt"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/kubeapi"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/ui"
)

// BackupDir is where Remove moves a host's scheduler files aside (never deleted).
const BackupDir = "/var/lib/hactl/backup"

// RemoveStatic takes the static pods off every control plane of c — the manifest and Dir moved to
// BackupDir/hactl-scheduler-<UTC time>/ (kubelet stops the pod when its manifest goes) — then
// deletes the RBAC through the API. Hosts without the files are left alone. Errors: per host
// (aggregated), then the API's.
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
	return RemoveThroughAPI(ctx, api, c.Spec.Scheduler)
}
