package app

import (
	"errors"
	"fmt"
	"os/exec"
)

// kindClusterUsage is --kind-cluster's help, the same on every deploy command.
const kindClusterUsage = "with --kubeconfig and --image-archive: load the archive into this kind cluster's nodes (kind load image-archive, kind from PATH) once its nodes are the kubeconfig's and each can run the image"

// checkKindFlags checks --kind-cluster locally (exit 2): it needs --kubeconfig and --image-archive
// (the spec's scheduler.imageArchive counts), and kind on PATH. It returns kind's path.
func checkKindFlags(cluster, kubeconfig, archive string) (string, error) {
	if cluster == "" {
		return "", nil
	}
	if kubeconfig == "" || archive == "" {
		return "", &UsageError{Err: errors.New("--kind-cluster loads --image-archive into a kind cluster reached through --kubeconfig: give both")}
	}
	kind, err := exec.LookPath("kind")
	if err != nil {
		return "", &UsageError{Err: fmt.Errorf("--kind-cluster: kind is not on PATH (go install sigs.k8s.io/kind@v0.33.0): %w", err)}
	}
	return kind, nil
}
