package membership

import (
	"context"
	"fmt"
	"net/url"
	"slices"
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
	// AlsoOnHost, when set, runs on the member's host right after RetireScript, on the same
	// connection, for what only a member uses: the CLI passes the backup schedule's removal (a timer
	// left on a retired host fails every slot, its delta agent watches a member that is gone). Its
	// error fails the retirement as the script's does.
	AlsoOnHost func(ctx context.Context, member string, cli *provision.Client) error
}

// RetireScript stops and disables etcd's unit (when it exists) and moves dataDir to
// dataDir.removed-STAMP when it exists; it prints the new path (nothing when there was no data dir).
// It never deletes anything, refuses to move onto an existing path, and, when dataDir is a mount
// point (a dedicated disk), moves its member directory aside within it instead.
func RetireScript(dataDir, stamp string) string {
	d, aside := shell.Quote(dataDir), shell.Quote(dataDir+".removed-"+stamp)
	member, memberAside := shell.Quote(dataDir+"/member"), shell.Quote(dataDir+"/member.removed-"+stamp)
	return strings.Join([]string{
		"set -e",
		"if systemctl cat " + etcd.UnitName + " >/dev/null 2>&1; then systemctl disable --now " + etcd.UnitName + "; fi",
		fmt.Sprintf("if [ ! -e %s ]; then exit 0; fi", d),
		fmt.Sprintf("if mountpoint -q %s 2>/dev/null; then", d),
		fmt.Sprintf("  if [ -e %s ]; then if [ -e %s ]; then echo %s exists >&2; exit 1; fi; mv -T %s %s; echo %s; fi", member, memberAside, memberAside, member, memberAside, memberAside),
		"  exit 0",
		"fi",
		fmt.Sprintf("if [ -e %s ]; then echo %s exists >&2; exit 1; fi", aside, aside),
		fmt.Sprintf("mv -T %s %s", d, aside),
		"echo " + aside,
	}, "\n")
}

// Retire runs RetireScript (then AlsoOnHost) on the spec's host named member, after checking that
// the member's peer URLs point at that host's address; it returns where the data dir was moved.
// Errors: not a host of the spec, another host's member, the dial, the command or AlsoOnHost's
// (provision's typed errors, wrapped in a *provision.HostError).
func (r SSHRetirer) Retire(ctx context.Context, member string, peerURLs []string, stamp string) (string, error) {
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
	// The member's peer URLs name its host: never stop etcd on another machine of that name.
	if len(peerURLs) > 0 && !slices.ContainsFunc(peerURLs, func(u string) bool {
		pu, err := url.Parse(u)
		return err == nil && (pu.Hostname() == h.Address || pu.Hostname() == h.PrivateAddress)
	}) {
		return "", fmt.Errorf("member %s's peer URLs %v are not host %s's address %s: stop etcd on the member's host by hand", member, peerURLs, h.Name, h.PeerAddress())
	}
	cli, err := r.Dialer.Dial(ctx, provision.TargetOf(h))
	if err != nil {
		return "", &provision.HostError{Host: h.Name, Err: err}
	}
	defer cli.Close()
	res, err := cli.Run(ctx, "etcd/retire", RetireScript(r.Spec.Spec.Etcd.DataDir, stamp))
	if err != nil {
		return "", &provision.HostError{Host: h.Name, Err: err}
	}
	aside := strings.TrimSpace(string(res.Stdout))
	if r.AlsoOnHost != nil {
		if err := r.AlsoOnHost(ctx, member, cli); err != nil {
			return aside, &provision.HostError{Host: h.Name, Err: err}
		}
	}
	return aside, nil
}
