package app

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/internal/atomicfile"
	"github.com/hactl/hactl/kubeconfig"
)

type kubeconfigOptions struct {
	user   string
	groups []string
	expiry time.Duration
	out    string
}

func newKubeconfigCommand(s Streams, g *globalOptions) *cobra.Command {
	o := &kubeconfigOptions{}
	cmd := &cobra.Command{
		Use:   "kubeconfig",
		Short: "Print a kubeconfig for the cluster (server: the VIP or your load balancer), made on a control-plane host",
		Long: fmt.Sprintf(`Makes a kubeconfig with a fresh client certificate on the first control-plane host that
answers, with 'kubeadm kubeconfig user': the cluster CA's key never leaves the control-plane
hosts. The server is the API endpoint every node uses (spec.loadBalancer's VIP:frontendPort).

The default user is %s in group %s, which kubeadm binds to the cluster-admin
ClusterRole (not system:masters, which RBAC cannot revoke). The certificate expires after
--expiry (default %s): ask for a new kubeconfig when it does.

The kubeconfig holds a private key: it is written to --out with mode 0600 (atomically), or to
standard output.

  hactl kubeconfig -f cluster.yaml --out admin.conf
  kubectl --kubeconfig admin.conf get nodes
  hactl kubeconfig -f cluster.yaml --user alice --group developers --expiry 8h > alice.conf`,
			kubeconfig.DefaultUser, kubeconfig.DefaultGroup, kubeconfig.DefaultExpiry),
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("expiry") && o.expiry == 0 {
				return &UsageError{Err: fmt.Errorf("--expiry 0s: give the certificate's validity, e.g. 8h (default %s)", kubeconfig.DefaultExpiry)}
			}
			if o.expiry%time.Second != 0 { // a certificate's notAfter is whole seconds (X.509 time)
				return &UsageError{Err: fmt.Errorf("--expiry %s: whole seconds: the certificate's notAfter is written in seconds, so %s would be cut to %s", o.expiry, o.expiry, o.expiry.Truncate(time.Second))}
			}
			if o.out != "" {
				if fi, err := os.Stat(filepath.Dir(o.out)); err != nil || !fi.IsDir() {
					return &UsageError{Err: fmt.Errorf("--out %s: the directory %s does not exist", o.out, filepath.Dir(o.out))}
				}
			}
			p, c, _, closeLog, err := hostRun(s, g)
			if err != nil {
				return err
			}
			defer closeLog()
			kc, err := kubeconfig.Make(cmd.Context(), kubeconfig.Options{Cluster: c, User: o.user, Groups: o.groups, Expiry: o.expiry,
				Prompt: terminalPrompter(s.In, s.Err), Printer: p})
			if err != nil {
				return err
			}
			if o.out == "" {
				_, err := s.Out.Write(kc)
				return err
			}
			if err := atomicfile.WriteFile(o.out, kc, 0o600); err != nil {
				return err
			}
			if err := os.Chmod(o.out, 0o600); err != nil {
				return err
			}
			p.Infof("kubeconfig for %s written to %s (mode 0600; the certificate expires in %s)", orDefault(o.user, kubeconfig.DefaultUser), o.out, orDuration(o.expiry, kubeconfig.DefaultExpiry))
			return nil
		},
	}
	cmd.Flags().StringVar(&o.user, "user", "", "the user (client certificate common name; default "+kubeconfig.DefaultUser+")")
	cmd.Flags().StringSliceVar(&o.groups, "group", nil, "a group of the user (repeatable; default "+kubeconfig.DefaultGroup+")")
	cmd.Flags().DurationVar(&o.expiry, "expiry", 0, "the certificate's validity (default "+kubeconfig.DefaultExpiry.String()+")")
	cmd.Flags().StringVar(&o.out, "out", "", "write the kubeconfig to this file (mode 0600) instead of standard output")
	return cmd
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func orDuration(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}
