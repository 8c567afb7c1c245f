package images

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hactl/hactl/internal/exitcode"
	"github.com/hactl/hactl/kubeapi"
	"github.com/hactl/hactl/ui"
)

// KindLoad loads archive into the kind cluster's nodes with `kind load image-archive`, after two
// checks that refuse (*exitcode.UsageError, exit 2) before anything is loaded: the kind cluster's nodes
// (`kind get nodes`) are the nodes of the cluster api reaches (a kubeconfig of another cluster
// would otherwise deploy an image nobody loaded), and every node's architecture is one platforms
// (the archive's, ArchivePlatforms) holds — kind load imports a foreign image without a
// word, and its pods then fail with "exec format error". Errors: the API's (wrapped with api.Via),
// kind's with its output.
func KindLoad(ctx context.Context, api *kubeapi.Client, kind, cluster, archive string, platforms []Platform, p *ui.Printer) error {
	var stderr bytes.Buffer
	get := exec.CommandContext(ctx, kind, "get", "nodes", "--name", cluster)
	get.Stderr = &stderr
	out, err := get.Output()
	if err != nil {
		return fmt.Errorf("kind get nodes --name %s: %w: %s", cluster, err, strings.TrimSpace(stderr.String()))
	}
	kindNodes := strings.Fields(string(out))
	if len(kindNodes) == 0 {
		return &exitcode.UsageError{Err: fmt.Errorf("--kind-cluster %s: kind has no cluster of that name (kind get clusters lists them)", cluster)}
	}
	nodes, err := api.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return api.Wrap(fmt.Errorf("listing the nodes: %w", err))
	}
	var apiNodes []string
	for _, n := range nodes.Items {
		apiNodes = append(apiNodes, n.Name)
	}
	// One node listing serves both checks.
	slices.Sort(kindNodes)
	slices.Sort(apiNodes)
	if !slices.Equal(kindNodes, apiNodes) {
		return &exitcode.UsageError{Err: fmt.Errorf("--kind-cluster %s: its nodes (%s) are not the nodes of the cluster %s reaches (%s): give the kind cluster that kubeconfig belongs to",
			cluster, strings.Join(kindNodes, ", "), api.Via, strings.Join(apiNodes, ", "))}
	}
	if err := platformError(archive, platforms, nodes.Items); err != nil {
		return err
	}
	p.Infof("image: kind load image-archive %s --name %s (%d nodes)", archive, cluster, len(kindNodes))
	load := exec.CommandContext(ctx, kind, "load", "image-archive", archive, "--name", cluster)
	if out, err := load.CombinedOutput(); err != nil {
		return fmt.Errorf("kind load image-archive %s --name %s: %w: %s", archive, cluster, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// CheckNodePlatforms returns an *exitcode.UsageError naming every node of the cluster whose architecture none
// of platforms (archive's, ArchivePlatforms) runs on; errors listing the nodes are wrapped
// with api.Via.
func CheckNodePlatforms(ctx context.Context, api *kubeapi.Client, archive string, platforms []Platform) error {
	nodes, err := api.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return api.Wrap(fmt.Errorf("listing the nodes: %w", err))
	}
	return platformError(archive, platforms, nodes.Items)
}

// platformError is CheckNodePlatforms' verdict on a node listing.
func platformError(archive string, platforms []Platform, nodes []corev1.Node) error {
	var foreign []string
	for _, n := range nodes {
		if info := n.Status.NodeInfo; !Runs(platforms, info.Architecture) {
			foreign = append(foreign, n.Name+" ("+info.OperatingSystem+"/"+info.Architecture+")")
		}
	}
	if len(foreign) == 0 {
		return nil
	}
	return &exitcode.UsageError{Err: fmt.Errorf("--image-archive %s: the image is for %s only; these nodes cannot run it: %s (nothing was loaded or applied)",
		archive, JoinPlatforms(platforms), strings.Join(foreign, ", "))}
}

// CheckKindFlags checks --kind-cluster locally (*exitcode.UsageError, exit 2): it needs --kubeconfig and --image-archive
// (the spec's scheduler.imageArchive counts), and kind on PATH. It returns kind's path.
func CheckKindFlags(cluster, kubeconfig, archive string) (string, error) {
	if cluster == "" {
		return "", nil
	}
	if kubeconfig == "" || archive == "" {
		return "", &exitcode.UsageError{Err: errors.New("--kind-cluster loads --image-archive into a kind cluster reached through --kubeconfig: give both")}
	}
	kind, err := exec.LookPath("kind")
	if err != nil {
		return "", &exitcode.UsageError{Err: fmt.Errorf("--kind-cluster: kind is not on PATH (go install sigs.k8s.io/kind@v0.33.0): %w", err)}
	}
	return kind, nil
}
