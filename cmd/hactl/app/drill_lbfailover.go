package app

import (
	"github.com/spf13/cobra"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/drill"
)

// newDrillLBFailoverCommand is `hactl drill lb-failover`: --component stopped on the VIP holder,
// or with spec.loadBalancer.external a backend cut off the user's load balancer.
func newDrillLBFailoverCommand(s Streams, g *globalOptions) *cobra.Command {
	o := &drillOptions{kind: drill.LBFailover, kindFlags: parseComponent}
	cmd := &cobra.Command{Use: string(drill.LBFailover), Args: usageArgs(cobra.NoArgs)}
	cmd.Short = "Stop HAProxy (or Keepalived) on the VIP holder, or cut a backend off your own load balancer; measure until readyz answers again"
	cmd.Long = `Finds the LB host holding the VIP, stops --component there (haproxy or keepalived) and polls
GET https://VIP:PORT/readyz every 20 ms on fresh connections (a pooled connection to the old holder
would hide the failover), while every LB host reports the VIP every 20 ms over SSH. Measured: time
until the VIP sits on another host, time until readyz answers 200 again (the RTO), failed requests.
After --hold the component is started again and the VIP must settle where the configuration puts it
(the highest priority, or where it is with nopreempt); the failback's own outage is reported.

With spec.loadBalancer.external (your own load balancer) there is no VIP holder: the drill cuts one
backend off instead (--backend, default the first control-plane host): iptables there drops TCP to
and from kube-apiserver's port, as a dead host looks to a load balancer, while GET /readyz is asked
through your load balancer every 20 ms. Measured: failed requests and the time until readyz answers
200 again, i.e. how long your load balancer's health check kept sending clients to the dead backend.

The kube-apiserver's certificate is verified: --ca-file (the cluster CA) or
spec.loadBalancer.healthCheck.caFile.`
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return runDrill(cmd, s, g, o) }
	f := cmd.Flags()
	f.StringVar(&o.component, "component", "", "what to stop on the VIP holder: haproxy (default) or keepalived; kube-apiserver (the only one) with spec.loadBalancer.external")
	_ = cmd.RegisterFlagCompletionFunc("component", cobra.FixedCompletions([]string{string(drill.ComponentHAProxy), string(drill.ComponentKeepalived), string(drill.ComponentAPIServer)}, cobra.ShellCompDirectiveNoFileComp))
	f.StringVar(&o.backend, "backend", "", "spec.loadBalancer.external: the control-plane host cut off your load balancer (default: the first)")
	_ = cmd.RegisterFlagCompletionFunc("backend", completeHosts(v1alpha1.RoleControlPlane, false))
	addCAFileFlag(cmd, o)
	addDrillFlags(cmd, o)
	return cmd
}
