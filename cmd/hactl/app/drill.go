package app

import "github.com/spf13/cobra"

func newDrillCommand(s Streams, g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "drill",
		Short: "Failover drills: kill the etcd leader, lose a zone, fail the VIP holder; measured RTO, proven zero loss",
		Long: `Each drill takes down exactly the part that holds a role, measures how long the control plane
was unavailable while a workload runs, puts everything back and proves that no acknowledged write
was lost. Every drill first refuses on an unhealthy cluster (--force overrides) or on an earlier
drill's leftovers (see 'hactl drill cleanup'), shows its plan and asks for confirmation (--yes in
scripts; --dry-run only shows the plan).

The system is always put back, also on error and on Ctrl-C; the fault is recorded first in
<stateDir>/drill/active.json and on the host, and each host puts itself back (a systemd timer) if
hactl dies. Exit codes: 0 drill done and no failure; 3 refused by preflight, an acknowledged write
lost, a stale read, an RTO over --max-rto or a prediction not met; 2 bad flags (nothing touched); 1 a
runtime failure (what is left broken is named).

  hactl drill kill-leader --yes                    SIGKILL the etcd leader, hold it down 10s, measure, put back
  hactl drill kill-leader --method network         partition the leader (iptables on its peer and client ports)
  hactl drill az-outage --zone az-b --yes          take every member and LB host of az-b down
  hactl drill lb-failover --ca-file ca.crt --yes   stop HAProxy on the VIP holder, poll readyz through the VIP
  hactl drill restore --yes                        stop every member, restore from the newest snapshot: RTO and RPO
  hactl drill cleanup --yes                        put back what an interrupted drill left`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(
		newDrillKillLeaderCommand(s, g),
		newDrillAZOutageCommand(s, g),
		newDrillLBFailoverCommand(s, g),
		newDrillRestoreCommand(s, g),
		newDrillCleanupCommand(s, g),
	)
	return cmd
}
