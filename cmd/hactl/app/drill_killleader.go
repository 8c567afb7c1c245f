package app

import (
	"github.com/spf13/cobra"

	"github.com/hactl/hactl/drill"
	"github.com/hactl/hactl/drill/lease"
)

// newDrillKillLeaderCommand is `hactl drill kill-leader`: the etcd leader taken down by --method,
// or with --target lease/NS/NAME the holder of a Lease (drill/lease).
func newDrillKillLeaderCommand(s Streams, g *globalOptions) *cobra.Command {
	o := &drillOptions{kind: drill.KillLeader, kindFlags: parseMethod}
	cmd := &cobra.Command{Use: string(drill.KillLeader), Args: usageArgs(cobra.NoArgs)}
	cmd.Short = "Take down the etcd leader; measure the election, the RTO and the catch-up; prove no acknowledged write was lost"
	cmd.Long = `Finds the etcd leader and takes it down while writers put keys at --rate (each with a
--request-timeout deadline) and readers check linearizable reads, through hactl's TLS client.

  --method process   SIGKILL of etcd over SSH, the unit then held stopped for --hold (so systemd's
                     Restart= does not hide the failure), then started
  --method network   iptables on the leader drops its peer and client ports in and out for --hold:
                     a partitioned leader must step down, and no write may be acknowledged by both sides
  --method host      --down-command runs here to take the whole host down (a Go template: .Host,
                     .Address, .Zone; e.g. 'virsh destroy {{.Host}}'), --up-command brings it back

Measured every 20 ms: time until a new leader is elected, time until the first acknowledged write
(the RTO), the longest gap between acknowledged writes, write latency p50/p99, and after the put-back
the time until the member's applied index reaches the leader's commit index. Then every acknowledged
key is read back (any missing: data lost, exit 3), revisions must follow acknowledgement order and
no two acknowledged writes may share a revision.

With --target lease/NAMESPACE/NAME the drill takes down the holder of that Lease instead
(hactl-scheduler's, kube-scheduler's, kube-controller-manager's: any client-go leader election),
found from its holderIdentity, while --pod-rate pods per second are created for the scheduler
(--scheduler-name; none for kube-controller-manager) in namespace hactl-drill and deleted once bound.

  --method process   over SSH (-f cluster.yaml): SIGKILL of the holder's container on its host; the
                     others wait out the lease duration
  --method graceful  over SSH: SIGTERM; client-go's ReleaseOnCancel hands the Lease over at once
  --kubeconfig FILE  the holder's pod is deleted (a Deployment's replica): with no grace for
                     process, its grace period for graceful; kubelet sends SIGTERM first either way,
                     so both hand over at once - only the SSH mode crashes a replica. Static pods
                     cannot be stopped through the API: use the SSH mode for them.

Measured from watch events on this machine's clock (never the Lease's renewTime): time until another
identity holds the Lease, until the first pod is bound by another replica, the longest gap between
bindings, the pods pending at the peak. With hactl-scheduler every pod names the replica that bound
it (scheduler.hactl.io/bound-by): ordered by revision, the bindings of two identities must never
interleave. Exit 3 over --max-rto (default 30s for a Lease), with a pod never bound, or interleaved
bindings. Kubernetes puts the replica back (kubelet, the Deployment); the drill waits until it is
Ready again.

On hactl-operator's Lease (lease/hactl-system/hactl-operator, through --kubeconfig) no pods are
made: for every EtcdCluster with spec.backup the drill counts the operator's SnapshotTaken Events
per slot of spec.backup.every, from the fault's slot to the takeover's, and waits until each slot
has one (10s past the takeover at least): a slot taken twice (by the old and the new leader) or
not at all is exit 3.

  hactl drill kill-leader -f cluster.yaml --target lease/kube-system/hactl-scheduler --yes
  hactl drill kill-leader -f cluster.yaml --target lease/kube-system/hactl-scheduler --method graceful --count 10 --report takeover.json --yes
  hactl drill kill-leader --kubeconfig kind.conf --target lease/kube-system/hactl-scheduler --yes
  hactl drill kill-leader --kubeconfig admin.conf --target lease/hactl-system/hactl-operator --method graceful --yes`
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return runDrill(cmd, s, g, o) }
	f := cmd.Flags()
	addMethodFlags(cmd, o, drill.MethodProcess, "process, network or host; with --target: process or graceful", "graceful") // graceful: with --target (drill/lease)
	f.StringVar(&o.target, "target", "", "lease/NAMESPACE/NAME: take down the holder of that Lease instead of the etcd leader (e.g. lease/kube-system/hactl-scheduler; --method process or graceful)")
	o.addKube(f, "--target: reach the cluster through this kubeconfig (the holder's pod is deleted) instead of over SSH")
	f.StringVar(&o.schedulerName, "scheduler-name", "", "--target: the workload pods' schedulerName (default: default-scheduler for kube-scheduler's Lease, none for kube-controller-manager's, else the Lease's name)")
	f.StringVar(&o.podImage, "pod-image", "", "--target: the workload pods' image (default spec.kubernetes' pause image, else "+defaultPodImage+")")
	f.IntVar(&o.podRate, "pod-rate", lease.DefaultRate, "--target: workload pods created per second")
	addDrillFlags(cmd, o)
	return cmd
}
