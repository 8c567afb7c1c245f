package images

import (
	"context"
	"fmt"
	"os"

	"github.com/hactl/hactl/provision"
)

// Import streams the local image archive at path (docker save or OCI layout) into the host's
// containerd, namespace k8s.io (the kubelet's), over cli: `ctr images import --all-platforms -`,
// as kube/images does for the control-plane images. step names the step in errors. Errors: the
// file cannot be opened, or the command failed (a *provision.CommandError naming host and step).
func Import(ctx context.Context, cli *provision.Client, step, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("image archive: %w", err)
	}
	defer f.Close()
	_, err = cli.Run(ctx, step, "ctr -n k8s.io images import --all-platforms - >/dev/null", provision.WithStdin(f))
	return err
}
