package app

import (
	"github.com/spf13/cobra"

	"github.com/hactl/hactl/drill"
)

// newDrillAZOutageCommand is `hactl drill az-outage`: every etcd member and LB host of --zone
// taken down, prediction vs observation.
func newDrillAZOutageCommand(s Streams, g *globalOptions) *cobra.Command {
	o := &drillOptions{kind: drill.AZOutage, kindFlags: parseMethod}
	cmd := &cobra.Command{Use: string(drill.AZOutage), Args: usageArgs(cobra.NoArgs)}
	cmd.Short = "Take down every etcd member and LB host of one availability zone; prediction vs observation"
	cmd.Long = `Predicts from the spec what losing --zone must do ("losing az-b leaves 2 of 3 members: quorum
holds"; whether the leader and the VIP holder are in it), takes down every etcd member and LB host of
the zone by --method (default network: everything but SSH dropped; process: etcd, haproxy and
keepalived killed; host: --down-command/--up-command), measures as kill-leader does (and the VIP's
move; readyz through the VIP with --ca-file or spec.loadBalancer.healthCheck.caFile), puts the zone
back and reports prediction vs observation (exit 3 when they differ).

A zone whose loss breaks quorum is refused unless --expect-outage; the drill then measures the time
to recovery after the zone returns.`
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return runDrill(cmd, s, g, o) }
	f := cmd.Flags()
	addMethodFlags(cmd, o, drill.MethodNetwork, "process, network or host")
	f.StringVar(&o.zone, "zone", "", "the availability zone to take down (spec.hosts[*].zone)")
	_ = cmd.RegisterFlagCompletionFunc("zone", completeZones)
	f.BoolVar(&o.expectOutage, "expect-outage", false, "run even though losing the zone loses quorum; measure the recovery after it returns")
	addCAFileFlag(cmd, o)
	addDrillFlags(cmd, o)
	return cmd
}
