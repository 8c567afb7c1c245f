package deploy

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/hactl/hactl/internal/exitcode"
	"github.com/hactl/hactl/kubeadm/images"
	"github.com/hactl/hactl/kubeapi"
	"github.com/hactl/hactl/ui"
)

// ImageFlags is what `hactl operator deploy` was told about the operator's image: --image,
// --image-archive, --kind-cluster and --kubeconfig (the file; "" when the spec's hosts are used).
type ImageFlags struct {
	Image, Archive, KindCluster, Kubeconfig string
}

// ImageSource is the operator's image as ResolveImage found it: its reference and, with an
// archive, the platforms the archive holds.
type ImageSource struct {
	// Image is --image, else the archive's first image ("" with neither: the default image).
	Image string
	// Platforms are the archive's (nil without one).
	Platforms []images.Platform
	flags     ImageFlags
	kind      string // the kind binary, with --kind-cluster
}

// ResolveImage reads f.Archive (its images and platforms) and checks the flags together: --image
// must be one of the archive's images; --kind-cluster goes with --kubeconfig and --image-archive and
// needs kind on PATH (images.CheckKindFlags). Nothing is contacted.
//
// Errors: an unreadable archive, or --image not in it → *exitcode.UsageError naming the flag;
// images.CheckKindFlags'.
func ResolveImage(f ImageFlags) (*ImageSource, error) {
	s := &ImageSource{Image: f.Image, flags: f}
	if f.Archive != "" {
		refs, err := images.ArchiveImages(f.Archive)
		if err != nil {
			return nil, &exitcode.UsageError{Err: fmt.Errorf("--image-archive: %w", err)}
		}
		if s.Image == "" {
			s.Image = refs[0]
		} else if !slices.Contains(refs, s.Image) {
			return nil, &exitcode.UsageError{Err: fmt.Errorf("--image %s is not in --image-archive %s (it holds %s)", s.Image, f.Archive, strings.Join(refs, ", "))}
		}
		if s.Platforms, err = images.ArchivePlatforms(f.Archive); err != nil {
			return nil, &exitcode.UsageError{Err: fmt.Errorf("--image-archive: %w", err)}
		}
	}
	kind, err := images.CheckKindFlags(f.KindCluster, f.Kubeconfig, f.Archive)
	if err != nil {
		return nil, err
	}
	s.kind = kind
	return s, nil
}

// Nodes is RunOptions.Nodes for this image: with --kind-cluster, the archive loaded into that kind
// cluster's nodes (images.KindLoad, progress on p); with an archive and --kubeconfig, a check that
// every node can run one of its platforms (the nodes must have the image already); nil otherwise
// (the archive is imported over SSH, or there is none).
func (s *ImageSource) Nodes(p *ui.Printer) func(context.Context, *kubeapi.Client) error {
	f := s.flags
	switch {
	case f.KindCluster != "":
		return func(ctx context.Context, api *kubeapi.Client) error {
			return images.KindLoad(ctx, api, s.kind, f.KindCluster, f.Archive, s.Platforms, p)
		}
	case f.Archive != "" && f.Kubeconfig != "":
		return func(ctx context.Context, api *kubeapi.Client) error {
			return images.CheckNodePlatforms(ctx, api, f.Archive, s.Platforms)
		}
	}
	return nil
}
