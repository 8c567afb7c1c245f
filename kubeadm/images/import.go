package images

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/hactl/hactl/provision"
)

// Import streams the local image archive at path (docker save or OCI layout) into the host's
// containerd, namespace k8s.io (the kubelet's), over cli: `ctr images import --all-platforms -`,
// as kube/images does for the control-plane images. First it compares the archive's platforms
// (ArchivePlatforms) with the host's architecture (`uname -m`): an image the host cannot run is
// refused before anything is sent (*PlatformError), where ctr would import it and the pod would
// fail with "exec format error". step names the step in errors. Errors: the file cannot be opened
// or its platforms read, *PlatformError, or a command failed (a *provision.CommandError naming
// host and step).
func Import(ctx context.Context, cli *provision.Client, step, path string) error {
	platforms, err := ArchivePlatforms(path)
	if err != nil {
		return fmt.Errorf("image archive: %w", err)
	}
	res, err := cli.Run(ctx, step, "uname -m")
	if err != nil {
		return err
	}
	if arch := GOARCH(string(res.Stdout)); !Runs(platforms, arch) {
		return &PlatformError{Archive: path, Platforms: platforms, Arch: arch}
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("image archive: %w", err)
	}
	defer f.Close()
	_, err = cli.Run(ctx, step, "ctr -n k8s.io images import --all-platforms - >/dev/null", provision.WithStdin(f))
	return err
}

// PlatformError is an image archive for platforms a host cannot run.
type PlatformError struct {
	Archive   string
	Platforms []Platform
	// Arch is the host's architecture, in Go's terms (GOARCH).
	Arch string
}

func (e *PlatformError) Error() string {
	var ps []string
	for _, p := range e.Platforms {
		ps = append(ps, p.String())
	}
	return fmt.Sprintf("image archive %s holds %s only and this host is linux/%s: refused before the import (build or save the image for linux/%s)",
		e.Archive, strings.Join(ps, ", "), e.Arch, e.Arch)
}
