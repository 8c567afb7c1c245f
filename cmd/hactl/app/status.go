package app

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/status"
	"github.com/hactl/hactl/ui"
)

type statusOptions struct {
	output  string
	timeout time.Duration
	kube    kubeFlags
}

func newStatusCommand(s Streams, g *globalOptions) *cobra.Command {
	o := &statusOptions{}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show members, leader, raft term/index, DB size, alarms, health, latency, certificate expiry, the load balancer and the Kubernetes nodes",
		Long: `Asks every member over TLS (with hactl's client certificate from the state dir) for its status.

With spec.loadBalancer, also reads every LB host over SSH (one command each, as root): which host
holds the VIP, keepalived's VRRP state, whether the haproxy and keepalived units are active, and every
kube-apiserver backend as that host's HAProxy sees it (UP/DOWN, last check, time since the last
change). With spec.loadBalancer.external (your own load balancer), asks GET /readyz through it from
this machine instead (through the bastion when there is one; verified with healthCheck.caFile).

With spec.kubernetes, also asks the API through the VIP from the first control-plane host that
answers (kubectl over SSH): every node (Ready, kubelet version, zone label, pod range), every
control plane's static pods (kube-apiserver, kube-controller-manager, kube-scheduler) and its
/readyz, kube-proxy and CoreDNS, and /readyz through the VIP. Without spec.loadBalancer and
spec.kubernetes no SSH is used.

Exit code 0 when the cluster is healthy (quorum, every member healthy, no alarm; with a load balancer:
exactly one VIP holder, haproxy and keepalived active everywhere, no backend DOWN, every LB host
readable, or /readyz ok through an external one; with Kubernetes: every node Ready, every static pod, kube-proxy and CoreDNS pod Ready, every
/readyz ok), 3 when it is degraded, 1 when no member could be reached. A host that is down shows as
unreachable at once; its Node turns NotReady after kube-controller-manager's grace period (about 40-60 s).

hactl-operator's section (replicas, Lease, the EtcdCluster's conditions, a heal in progress and the
drift of cluster.yaml after one) is read where 'hactl operator deploy' recorded it in the state dir
(through the kubeconfig it was deployed with, or over SSH), or through --kubeconfig/--context.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(o.output); err != nil {
				return err
			}
			p := ui.New(s.Err, g.verbose, false)
			c, err := loadSpec(g.file, p, false)
			if err != nil {
				return err
			}
			if o.timeout <= 0 {
				return &UsageError{Err: fmt.Errorf("--timeout %s: must be a positive duration, e.g. 3s", o.timeout)}
			}
			if err := o.kube.check(); err != nil {
				return err
			}
			rep, err := status.Collect(cmd.Context(), status.Options{Cluster: c, Timeout: o.timeout, Prompt: terminalPrompter(s.In, s.Err), Printer: p,
				OperatorKubeconfig: o.kube.given()})
			if rep != nil {
				if err := writeReport(s.Out, o.output, rep, rep.Print); err != nil {
					return err
				}
			}
			if err != nil {
				return err
			}
			if !rep.Healthy {
				return &VerdictError{Err: fmt.Errorf("cluster %s is degraded: %s", c.Metadata.Name, strings.Join(rep.Problems, "; "))}
			}
			return nil
		},
	}
	outputFlag(cmd, &o.output, "output", "")
	o.kube.addKube(cmd.Flags(), "read hactl-operator's EtcdCluster through this kubeconfig (default: where operator deploy recorded it)")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 3*time.Second, "per-member bound on connecting and on each request (an unreachable member costs at most about twice this); "+
		"per LB host, connecting over SSH and reading it take at most twice this")
	return cmd
}
