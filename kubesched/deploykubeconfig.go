package kubesched

import (
	"context"
	"errors"
	"fmt"

	"github.com/hactl/hactl/internal/exitcode"
	"github.com/hactl/hactl/kubeadm/images"
	"github.com/hactl/hactl/kubeapi"
)

// KubeconfigDeployOptions are one `hactl scheduler deploy --kubeconfig`: DeployThroughAPI's options
// (Image and Platforms are filled in here) and where the image comes from.
type KubeconfigDeployOptions struct {
	APIDeployOptions
	// ImageArchive is --image-archive; with neither Image nor ImageArchive given, the Scheduler's
	// image and imageArchive are used.
	ImageArchive string
	// KindCluster, when set, loads the archive into that kind cluster's nodes first (kind from
	// PATH; Kubeconfig, the --kubeconfig file, must be set).
	KindCluster, Kubeconfig string
	// Connect opens the API of the kubeconfig (not called with DryRun).
	Connect func(ctx context.Context) (*kubeapi.Client, error)
	// FlagPaths, when set, rewrites a *UsageError's field paths as flags (a deploy without a spec).
	FlagPaths func(string) string
}

// DeployThroughKubeconfig deploys the scheduler through a kubeconfig: the image named by the
// archive when only the archive is given (it must hold one image), the archive's platforms, the
// --kind-cluster checks (images.CheckKindFlags), then DeployThroughAPI (on DryRun without
// contacting anything), after images.KindLoad with KindCluster. The nodes must have the image
// already: an archive only names it.
//
// Errors: an archive that does not hold one image, or whose platforms cannot be read →
// *exitcode.UsageError naming the flag (or spec.scheduler.imageArchive); CheckKindFlags',
// Connect's and KindLoad's; DeployThroughAPI's, wrapped with the API's Via (a *UsageError rewritten
// by FlagPaths as an *exitcode.UsageError).
func DeployThroughKubeconfig(ctx context.Context, o KubeconfigDeployOptions) error {
	sch := o.Scheduler
	image, archive, flag := o.Image, o.ImageArchive, "--image-archive"
	if image == "" && archive == "" {
		image, archive, flag = sch.Image, sch.ImageArchive, "spec.scheduler.imageArchive"
	}
	if image == "" && archive != "" {
		refs, err := images.ArchiveImages(archive)
		if err != nil || len(refs) != 1 {
			return &exitcode.UsageError{Err: fmt.Errorf("%s %s: want an archive of one image (%v, %v)", flag, archive, refs, err)}
		}
		image = refs[0]
	}
	var platforms []images.Platform
	if archive != "" {
		var err error
		if platforms, err = images.ArchivePlatforms(archive); err != nil {
			return &exitcode.UsageError{Err: fmt.Errorf("%s %s: %w", flag, archive, err)}
		}
	}
	kind, err := images.CheckKindFlags(o.KindCluster, o.Kubeconfig, archive)
	if err != nil {
		return err
	}
	opts := o.APIDeployOptions
	opts.Image, opts.Platforms = image, platforms
	if opts.DryRun {
		return DeployThroughAPI(ctx, nil, opts)
	}
	api, err := o.Connect(ctx)
	if err != nil {
		return err
	}
	defer api.Close()
	if o.KindCluster != "" {
		if err := images.KindLoad(ctx, api, kind, o.KindCluster, archive, platforms, o.Printer); err != nil {
			return err
		}
	}
	err = DeployThroughAPI(ctx, api, opts)
	var ue *UsageError
	if o.FlagPaths != nil && errors.As(err, &ue) {
		return &exitcode.UsageError{Err: errors.New(o.FlagPaths(ue.Msg))}
	}
	return api.Wrap(err)
}
