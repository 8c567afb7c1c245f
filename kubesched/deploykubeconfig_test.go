package kubesched

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/internal/exitcode"
	"github.com/hactl/hactl/kubeapi"
)

// TestDeployThroughKubeconfigBadArchive: an archive that cannot be read is a usage error naming
// where it came from (the flag, or spec.scheduler.imageArchive), before the API is contacted.
func TestDeployThroughKubeconfigBadArchive(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.tar")
	connect := func(context.Context) (*kubeapi.Client, error) { t.Fatal("connected"); return nil, nil }
	for _, tc := range []struct {
		o    KubeconfigDeployOptions
		want string
	}{
		{KubeconfigDeployOptions{APIDeployOptions: APIDeployOptions{Scheduler: &v1alpha1.Scheduler{}}, ImageArchive: missing, Connect: connect}, "--image-archive " + missing},
		{KubeconfigDeployOptions{APIDeployOptions: APIDeployOptions{Scheduler: &v1alpha1.Scheduler{ImageArchive: missing}}, Connect: connect}, "spec.scheduler.imageArchive " + missing},
	} {
		err := DeployThroughKubeconfig(context.Background(), tc.o)
		var ue *exitcode.UsageError
		if !errors.As(err, &ue) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("got %v, want a usage error starting %q", err, tc.want)
		}
	}
}
