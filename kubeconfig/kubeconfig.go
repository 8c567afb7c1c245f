// Package kubeconfig implements `hactl kubeconfig`: a kubeconfig for a user of the cluster hactl
// built, made on a control-plane host with `kubeadm kubeconfig user` so the cluster CA's key never
// leaves the control-plane hosts. Its server is the API endpoint (the VIP); its client certificate
// names the user and groups and expires after the requested time.
package kubeconfig

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/hashicorp/go-multierror"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/internal/shell"
	"github.com/hactl/hactl/kubeadm"
	"github.com/hactl/hactl/kubenode"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/ui"
)

// Defaults of Options.
const (
	// DefaultUser is the client certificate's common name (the Kubernetes user).
	DefaultUser = "hactl-admin"
	// DefaultGroup is kubeadm's group bound to the cluster-admin ClusterRole (ClusterRoleBinding
	// kubeadm:cluster-admins, kubeadm v1.29+), not system:masters, which no RBAC can revoke.
	DefaultGroup = "kubeadm:cluster-admins"
	// DefaultExpiry is the client certificate's validity.
	DefaultExpiry = 24 * time.Hour
	// MaxExpiry bounds the validity (kubeadm signs with the cluster CA, valid 10 years; a
	// credential outliving a year belongs in a proper identity provider).
	MaxExpiry = 365 * 24 * time.Hour
)

// Options are one `hactl kubeconfig` call.
type Options struct {
	Cluster *v1alpha1.Cluster
	// User is the certificate's common name (default DefaultUser); Groups its organisations
	// (default [DefaultGroup]).
	User   string
	Groups []string
	// Expiry is the certificate's validity (default DefaultExpiry, at most MaxExpiry).
	Expiry  time.Duration
	Prompt  provision.Prompter
	Printer *ui.Printer
}

// UsageError is a bad option (exit 2).
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// ExitCode is 2.
func (e *UsageError) ExitCode() int { return 2 }

// nameRE is what kubeadm accepts as a client name or organisation without surprises (RBAC subjects
// are compared byte for byte).
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9:._@-]{0,127}$`)

func (o Options) withDefaults() (Options, error) {
	if o.Cluster == nil || o.Cluster.Spec.Kubernetes == nil {
		return o, &UsageError{"the spec has no spec.kubernetes: hactl built no Kubernetes cluster to make a kubeconfig for"}
	}
	if o.User == "" {
		o.User = DefaultUser
	}
	if len(o.Groups) == 0 {
		o.Groups = []string{DefaultGroup}
	}
	if o.Expiry == 0 {
		o.Expiry = DefaultExpiry
	}
	if !nameRE.MatchString(o.User) {
		return o, &UsageError{fmt.Sprintf("--user %q: use letters, digits and : . _ @ - (at most 128 characters)", o.User)}
	}
	if strings.HasPrefix(o.User, "system:") {
		return o, &UsageError{fmt.Sprintf("--user %q: names under system: belong to Kubernetes' own components (a kubelet, a controller); give a person's or a tool's name", o.User)}
	}
	for _, g := range o.Groups {
		if !nameRE.MatchString(g) {
			return o, &UsageError{fmt.Sprintf("--group %q: use letters, digits and : . _ @ - (at most 128 characters)", g)}
		}
		if strings.HasPrefix(g, "system:") {
			return o, &UsageError{fmt.Sprintf("--group %q: groups under system: are Kubernetes' own (system:masters bypasses RBAC and cannot be revoked); use %s for cluster-admin, or kubeadm's break-glass /etc/kubernetes/super-admin.conf on a control plane", g, DefaultGroup)}
		}
	}
	if o.Expiry < time.Minute || o.Expiry > MaxExpiry {
		return o, &UsageError{fmt.Sprintf("--expiry %s: between 1m and %s", o.Expiry, MaxExpiry)}
	}
	return o, nil
}

// Make returns the kubeconfig (YAML, holding the client's private key: write it 0600). It tries
// the control-plane hosts in spec order until one that has joined answers. Errors: *UsageError
// for bad options; per host, why it could not make one (aggregated) when none could.
func Make(ctx context.Context, o Options) ([]byte, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	c := o.Cluster
	// kubeadm kubeconfig user reads the cluster's name and endpoint from a ClusterConfiguration.
	cfg, err := kubeadm.ClusterConfig(c)
	if err != nil {
		return nil, err
	}
	d, err := provision.FromSpec(c, provision.SpecOptions{Prompt: o.Prompt})
	if err != nil {
		return nil, fmt.Errorf("ssh: %w", err)
	}
	defer d.Close()
	var errs *multierror.Error
	for _, h := range c.ControlPlaneHosts() {
		out, err := makeOn(ctx, d, c, h, cfg, o)
		if err == nil {
			return out, nil
		}
		o.Printer.Debugf("%s: kubeconfig: %v", h.Name, err)
		errs = multierror.Append(errs, &provision.HostError{Host: h.Name, Err: err})
	}
	return nil, errs.ErrorOrNil()
}

// ErrNotJoined: the host has no control plane (kubeadm's CA is missing).
var ErrNotJoined = errors.New("no Kubernetes control plane here (/etc/kubernetes/pki/ca.key missing): run hactl bootstrap")

func makeOn(ctx context.Context, d *provision.Dialer, c *v1alpha1.Cluster, h v1alpha1.Host, cfg []byte, o Options) ([]byte, error) {
	cli, err := d.Dial(ctx, provision.TargetOf(h))
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	const step = "kubeconfig"
	remote := kubenode.ConfigDir + "/kubeconfig-user.yaml"
	if err := cli.Upload(ctx, step, []provision.File{{Path: remote, Mode: 0o600, Content: cfg}}); err != nil {
		return nil, err
	}
	args := []string{"kubeadm", "kubeconfig", "user", "--config", remote, "--client-name", o.User, "--validity-period", o.Expiry.String()}
	for _, g := range o.Groups {
		args = append(args, "--org", g)
	}
	cmd := fmt.Sprintf("trap 'rm -f %[1]s' EXIT\n[ -e /etc/kubernetes/pki/ca.key ] || exit 90\n%[2]s", shell.Quote(remote), shell.Join(args...))
	res, err := cli.Run(ctx, step, cmd)
	var ce *provision.CommandError
	if errors.As(err, &ce) && ce.ExitCode == 90 {
		return nil, ErrNotJoined
	}
	if err != nil {
		return nil, err
	}
	return res.Stdout, nil
}
