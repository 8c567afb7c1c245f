// Package report holds the reports commands print with -o json and that callers (benchmarks, e2e
// tests, scripts) read back: what a bootstrap or restore run did to each member and host. It is a
// leaf: it imports no other hactl package, so reading a report never pulls in the code that wrote it.
package report

// Cluster summarises one bootstrap or restore run (`hactl bootstrap -o json`).
type Cluster struct {
	Cluster   string `json:"cluster"`
	ClusterID string `json:"clusterID,omitempty"`
	DryRun    bool   `json:"dryRun"`
	// Duration is the run's wall time as time.Duration.String writes it, rounded to milliseconds.
	Duration string   `json:"duration"`
	Members  []Member `json:"members"`
	// Hosts are the control-plane and LB hosts (kube/* and lb/* phases), in spec order.
	Hosts []Host `json:"hosts,omitempty"`
	// VIP is the load balancer's virtual IP and VIPHolder the LB host holding it after lb/wait.
	VIP       string `json:"vip,omitempty"`
	VIPHolder string `json:"vipHolder,omitempty"`
	// RestoredRevision is the cluster's revision after a restore (snapshot revision + bump).
	RestoredRevision int64 `json:"restoredRevision,omitempty"`
	// EtcdClusterVersion is the cluster version ("3.6.0", etcd's /version "etcdcluster") checked
	// after a rolling upgrade; "" when the run upgraded nothing.
	EtcdClusterVersion string `json:"etcdClusterVersion,omitempty"`
}

// Pending lists what the run does (or, in a dry run, would do): "member NAME: ACTION" for each member
// whose action is not unchanged and "host NAME: changed" for each control-plane or LB host that
// changes, in report order; nil when nothing changes.
func (c *Cluster) Pending() []string {
	var out []string
	for _, m := range c.Members {
		if m.Action != ActionUnchanged {
			out = append(out, "member "+m.Name+": "+string(m.Action))
		}
	}
	for _, h := range c.Hosts {
		if h.Action != "unchanged" {
			out = append(out, "host "+h.Name+": "+h.Action)
		}
	}
	return out
}

// Member is one etcd member's outcome.
type Member struct {
	Name    string `json:"name"`
	Zone    string `json:"zone"`
	Address string `json:"address"`
	// ID is the member ID in hex, as etcdctl prints it ("" before the member was added).
	ID     string `json:"id,omitempty"`
	Action Action `json:"action"`
	// Changes are the remote paths written (or to be written, during a dry run), sorted.
	Changes []string `json:"changes,omitempty"`
	// UpgradedFrom is the etcd version ("v3.5.36") the member ran before the run upgraded it to
	// spec.etcd.version in a rolling upgrade (planned, during a dry run); "" when not upgraded.
	UpgradedFrom string `json:"upgradedFrom,omitempty"`
	// Commands is the number of SSH commands the run sent to the host.
	Commands int `json:"sshCommands"`
}

// Host is one control-plane or LB host's outcome.
type Host struct {
	Name    string   `json:"name"`
	Zone    string   `json:"zone"`
	Address string   `json:"address"`
	Roles   []string `json:"roles"`
	// Action is "changed" or "unchanged" (planned, during a dry run).
	Action string `json:"action"`
	// Changes are the packages installed, files written and units reloaded or started.
	Changes []string `json:"changes,omitempty"`
	// Commands is the number of SSH commands the run sent to the host.
	Commands int `json:"sshCommands"`
}

// Action is what a run does (or did) to a member.
type Action string

// Actions, in the plan and the summary.
const (
	ActionCreate    Action = "create"    // founding member of a new cluster: install and start
	ActionResume    Action = "resume"    // founding member of a cluster that has not formed yet (interrupted run)
	ActionJoin      Action = "join"      // new member of a running cluster: added as learner, then promoted
	ActionUpdate    Action = "update"    // running member whose files changed: rolling restart
	ActionStart     Action = "start"     // member with data whose etcd is not running
	ActionRestore   Action = "restore"   // the member's data is rebuilt from a snapshot
	ActionReplace   Action = "replace"   // a member whose data dir was lost: removed, then added back as a learner (bootstrap --replace-lost)
	ActionUnchanged Action = "unchanged" // nothing to do
)
