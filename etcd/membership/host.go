package membership

import (
	"context"
	"fmt"
	"strings"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/internal/shell"
	"github.com/hactl/hactl/provision"
)

// SSHRetirer retires members on the spec's hosts over SSH.
type SSHRetirer struct {
	Spec   *v1alpha1.Cluster
	Dialer *provision.Dialer
}

// RetireScript stops and disables etcd's unit and moves dataDir to dataDir.removed-STAMP when it
// exists; it prints the new path (nothing when there was no data dir). It never deletes anything.
func RetireScript(dataDir, stamp string) string {
	aside := dataDir + ".removed-" + stamp
	return strings.Join([]string{
		"set -e",
		"systemctl disable --now " + etcd.UnitName + " 2>/dev/null || systemctl stop " + etcd.UnitName,
		fmt.Sprintf("if [ -e %s ]; then mv %s %s; echo %s; fi", shell.Quote(dataDir), shell.Quote(dataDir), shell.Quote(aside), shell.Quote(aside)),
	}, "\n")
}

// Retire runs RetireScript on the spec's host named member. Errors: not a host of the spec, the
// dial, the command (provision's typed errors), each wrapped in a *provision.HostError.
func (r SSHRetirer) Retire(ctx context.Context, member, stamp string) (string, error) {
	i := -1
	for j, h := range r.Spec.Spec.Hosts {
		if h.Name == member {
			i = j
		}
	}
	if i < 0 {
		return "", fmt.Errorf("%s is not a host of the spec: stop etcd there by hand", member)
	}
	h := r.Spec.Spec.Hosts[i]
	cli, err := r.Dialer.Dial(ctx, provision.TargetOf(h))
	if err != nil {
		return "", &provision.HostError{Host: h.Name, Err: err}
	}
	defer cli.Close()
	res, err := cli.Run(ctx, "etcd/retire", RetireScript(r.Spec.Spec.Etcd.DataDir, stamp))
	if err != nil {
		return "", &provision.HostError{Host: h.Name, Err: err}
	}
	return strings.TrimSpace(string(res.Stdout)), nil
}
