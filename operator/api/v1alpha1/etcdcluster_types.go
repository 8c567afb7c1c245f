package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EtcdCluster is one external etcd cluster (members on hosts hactl bootstrapped, outside
// Kubernetes) that hactl-operator watches: its members' health, quorum and alarms as conditions,
// scheduled snapshots into an object store, and maintenance in the safe order. One EtcdCluster per
// etcd cluster ID: a second one for the same cluster is Degraded (condition Available false, reason
// DuplicateCluster) and never acts.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=etcdc,categories=hactl
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Leader",type=string,JSONPath=`.status.leader`
// +kubebuilder:printcolumn:name="Last snapshot",type=date,JSONPath=`.status.lastSnapshot.time`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EtcdCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   EtcdClusterSpec   `json:"spec"`
	Status EtcdClusterStatus `json:"status,omitempty"`
}

// EtcdClusterSpec is what the operator watches and how it keeps it.
// +kubebuilder:validation:XValidation:rule="!has(self.healing) || !has(self.healing.spares) || self.healing.spares.all(s, !self.members.exists(m, m.name == s.name || url(m.clientURL).getHostname() == s.address))",message="a spare must not be a member: spec.healing.spares lists hosts that run no member (by name and by address)"
// +kubebuilder:validation:XValidation:rule="!has(self.healing) || duration(self.healing.gracePeriod).getMilliseconds() >= 3 * duration(self.electionTimeout).getMilliseconds()",message="spec.healing.gracePeriod must be at least 3 × spec.electionTimeout: a member is only declared lost after several elections could have brought it back"
type EtcdClusterSpec struct {
	// ClusterID is the etcd cluster ID in hex, as etcdctl prints it (hactl's state dir records it):
	// the cluster's identity. The operator refuses to act on members that answer with another ID.
	// Immutable: a new cluster is a new EtcdCluster.
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{1,16}$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="clusterID is immutable: an EtcdCluster watches one etcd cluster; create another EtcdCluster for a new cluster"
	ClusterID string `json:"clusterID"`

	// Members are the etcd members by name and client URL (https only: the members require client
	// certificates).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=7
	// +listType=map
	// +listMapKey=name
	Members []MemberEndpoint `json:"members"`

	// ElectionTimeout is the members' --election-timeout (default 1s): rules and drills compare
	// recovery against it. Between 100ms and 50s, as etcd accepts.
	// +kubebuilder:default="1s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('100ms') && duration(self) <= duration('50s')",message="electionTimeout must be between 100ms and 50s (etcd's range)"
	ElectionTimeout *metav1.Duration `json:"electionTimeout,omitempty"`

	// ClientCertificateSecret names a Secret in the EtcdCluster's namespace holding the client
	// certificate the operator talks to etcd with: ca.crt (the etcd CA), tls.crt and tls.key.
	ClientCertificateSecret SecretRef `json:"clientCertificateSecret"`

	// Backup takes scheduled snapshots into an object store; nil takes none.
	// +optional
	Backup *BackupSpec `json:"backup,omitempty"`

	// Maintenance is when and how the operator compacts, defragments and recovers from NOSPACE;
	// nil leaves maintenance to the user.
	// +optional
	Maintenance *MaintenanceSpec `json:"maintenance,omitempty"`

	// Healing is how the operator replaces a member whose host is lost (onto a spare, learner
	// first); nil: the operator only reports a lost member.
	// +optional
	Healing *HealingSpec `json:"healing,omitempty"`
}

// HealingSpec is the operator's self-healing: a member unhealthy for longer than GracePeriod while
// a quorum holds is replaced onto a free spare over SSH (remove it and add the spare as a learner,
// or the other way round as etcd allows; promoted once caught up), one member at a time. With the
// quorum lost the operator does nothing destructive: a restore is a person's decision.
// The spares rule holds where autoReplace is turned on (created, or switched from false): heals
// that use up the pool leave autoReplace on with no spares, a state the operator reports (the
// Healing condition, the HactlEtcdSparePoolEmpty alert) rather than one the API refuses.
// +kubebuilder:validation:XValidation:rule="!has(self.autoReplace) || !self.autoReplace || (has(self.spares) && size(self.spares) > 0) || (oldSelf.hasValue() && has(oldSelf.value().autoReplace) && oldSelf.value().autoReplace)",message="autoReplace needs spares: list the hosts a member may be moved onto (spec.etcd.spares of cluster.yaml; hactl operator deploy fills them in)",optionalOldSelf=true
// +kubebuilder:validation:XValidation:rule="!has(self.autoReplace) || !self.autoReplace || has(self.sshKeySecret)",message="autoReplace needs sshKeySecret: the Secret with the SSH key the operator logs in to the spares with"
// +kubebuilder:validation:XValidation:rule="!has(self.autoReplace) || !self.autoReplace || has(self.member)",message="autoReplace needs member: the settings a new member runs with (hactl operator deploy fills them in)"
type HealingSpec struct {
	// AutoReplace lets the operator replace a lost member by itself; false: the Healing condition
	// and an event say what it would do, and nothing is changed.
	// +optional
	AutoReplace bool `json:"autoReplace,omitempty"`

	// GracePeriod is how long a member must stay unhealthy before it is replaced (default 5m); a
	// member that answers again within it cancels the heal. At least 3 × electionTimeout.
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('24h')",message="gracePeriod must be at most 24h"
	GracePeriod *metav1.Duration `json:"gracePeriod,omitempty"`

	// Spares are the hosts a member may be moved onto, each with its pinned SSH host keys and the
	// Secret of the etcd certificates issued for it ahead (the CA key never enters the cluster).
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=name
	// +optional
	Spares []SpareHost `json:"spares,omitempty"`

	// SSHKeySecret names a Secret with the private key (key ssh-privatekey, as in a
	// kubernetes.io/ssh-auth Secret) the operator logs in to the spares with.
	// +optional
	SSHKeySecret *SecretRef `json:"sshKeySecret,omitempty"`

	// SSHUser is the login user on the spares (default root).
	// +kubebuilder:default=root
	// +kubebuilder:validation:Pattern=`^[a-z_][a-z0-9_-]*[$]?$`
	// +kubebuilder:validation:MaxLength=32
	// +optional
	SSHUser string `json:"sshUser,omitempty"`

	// Member is how a new member runs: the settings of the members hactl installed (its
	// spec.etcd, filled in by hactl operator deploy), so a replacement is one of them.
	// +optional
	Member *MemberTemplate `json:"member,omitempty"`
}

// MemberTemplate is an etcd member's settings beyond its name and address (hactl's spec.etcd and
// the cluster token), from which the operator renders a new member's systemd unit exactly as
// hactl renders the others' (etcd.NewUnitConfig).
type MemberTemplate struct {
	// Version is the etcd version the members run ("v3.6.16"): the operator image's etcd binary
	// must report it, and so must the running members.
	// +kubebuilder:validation:Pattern=`^v3\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`
	Version string `json:"version"`
	// DataDir is the absolute data directory (hactl's spec.etcd.dataDir).
	// +kubebuilder:validation:Pattern=`^/[^\x00-\x1f]*$`
	// +kubebuilder:validation:MaxLength=4096
	DataDir string `json:"dataDir"`
	// ClientPort and PeerPort are the members' TLS ports.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	ClientPort int32 `json:"clientPort"`
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	PeerPort int32 `json:"peerPort"`
	// HeartbeatInterval is raft's heartbeat (whole milliseconds).
	HeartbeatInterval metav1.Duration `json:"heartbeatInterval"`
	// QuotaBackendBytes is the backend quota in bytes.
	// +kubebuilder:validation:Minimum=0
	QuotaBackendBytes int64 `json:"quotaBackendBytes"`
	// AutoCompactionMode (periodic or revision) and AutoCompactionRetention are etcd's.
	// +kubebuilder:validation:Enum=periodic;revision
	AutoCompactionMode string `json:"autoCompactionMode"`
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	AutoCompactionRetention string `json:"autoCompactionRetention"`
	// MetricsAddress is hactl's spec.etcd.metricsAddress: where the member also serves /metrics and
	// /health besides loopback ("" loopback only, "host" the member's own address, "0.0.0.0" or "::"
	// every interface).
	// +optional
	// +kubebuilder:validation:Enum="";host;"0.0.0.0";"::"
	MetricsAddress string `json:"metricsAddress,omitempty"`
	// InitialClusterToken is the cluster's --initial-cluster-token.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	InitialClusterToken string `json:"initialClusterToken"`
}

// SpareHost is a host that may receive an etcd member.
type SpareHost struct {
	// Name is the spare's name, the new member's name once it receives one.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// Address is the spare's IP address: its SSH address and the new member's peer and client URLs.
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="address must be an IPv4 or IPv6 literal (etcd URLs and certificate SANs use the IP)"
	Address string `json:"address"`
	// SSHPort is its SSH port (default 22).
	// +kubebuilder:default=22
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	SSHPort int32 `json:"sshPort,omitempty"`
	// Zone is its availability zone: a heal prefers a spare in the lost member's zone and never
	// picks one that would put a quorum of members in one zone.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Zone string `json:"zone,omitempty"`
	// HostKeys are its SSH host public keys in authorized_keys form ("ssh-ed25519 AAAA..."),
	// pinned: a host offering none of them is refused, and the heal stops with that error.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:Pattern=`^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp256|ecdsa-sha2-nistp384|ecdsa-sha2-nistp521) [A-Za-z0-9+/=]+$`
	HostKeys []string `json:"hostKeys"`
	// CertificatesSecret names the Secret with the etcd certificates issued for this spare by
	// hactl operator deploy: ca.crt, server.crt, server.key, peer.crt and peer.key.
	CertificatesSecret SecretRef `json:"certificatesSecret"`
}

// MemberEndpoint is one member's name and client URL.
type MemberEndpoint struct {
	// Name is the member's name (--name; hactl uses the host's name).
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// ClientURL is the member's client URL, e.g. https://10.0.0.11:2379.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() == 'https' && url(self).getHostname() != ''",message="clientURL must be an https URL with a host (the members require TLS client certificates)"
	ClientURL string `json:"clientURL"`
	// Zone is the member's availability zone (hactl's spec.hosts[].zone): a heal keeps the
	// members spread so that no zone holds a quorum.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Zone string `json:"zone,omitempty"`
}

// SecretRef names a Secret in the referring object's namespace.
type SecretRef struct {
	// Name is the Secret's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// BackupSpec is where scheduled snapshots go and how often.
type BackupSpec struct {
	// ObjectStore is the S3-compatible bucket (hactl's spec.backup.objectStore, without local
	// files: the credentials come from CredentialsSecret, a CA from CASecret).
	ObjectStore ObjectStore `json:"objectStore"`

	// CredentialsSecret names a Secret with keys accessKeyID and secretAccessKey (and optionally
	// sessionToken) for the object store.
	CredentialsSecret SecretRef `json:"credentialsSecret"`

	// Every is the snapshot interval (default 5m): snapshots are taken at the slots
	// 00:00 + k × every UTC, so it is whole minutes dividing an hour (1m, 2m, 3m, 4m, 5m, 6m, 10m,
	// 12m, 15m, 20m, 30m), whole hours dividing a day (1h, 2h, 3h, 4h, 6h, 8h, 12h) or 24h: the
	// rule of hactl backup schedule's timers (schedule.OnCalendar), so both name the same slots.
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m') && duration(self) <= duration('24h')",message="every must be between 1m and 24h"
	// +kubebuilder:validation:XValidation:rule="duration(self).getMilliseconds() % 60000 == 0 && (duration(self) < duration('1h') ? 60 % duration(self).getMinutes() == 0 : (duration(self).getMinutes() % 60 == 0 && 24 % duration(self).getHours() == 0))",message="every must be whole minutes dividing an hour (1m, 2m, 5m, 10m, 15m, 30m, ...) or whole hours dividing a day (1h, 2h, 3h, 4h, 6h, 8h, 12h, 24h), so every slot starts at the same wall-clock times"
	Every *metav1.Duration `json:"every,omitempty"`

	// Compression is "zstd" (default) or "none".
	// +kubebuilder:default=zstd
	// +kubebuilder:validation:Enum=zstd;none
	Compression string `json:"compression,omitempty"`

	// EncryptionRecipients are age public keys ("age1...") every snapshot is encrypted to before
	// it leaves the operator; empty stores snapshots unencrypted.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:Pattern=`^age1[02-9ac-hj-np-z]{58}$`
	// +optional
	EncryptionRecipients []string `json:"encryptionRecipients,omitempty"`

	// Retention is which snapshots the operator's prune keeps after each stored snapshot (the
	// newest verified one always); the cluster's delta snapshots that end before every kept
	// snapshot are deleted with them (as `hactl backup prune` does). nil deletes nothing
	// (snapshots are deleted only by an explicit policy).
	// +optional
	Retention *Retention `json:"retention,omitempty"`
}

// ObjectStore is an S3-compatible endpoint and bucket.
// +kubebuilder:validation:XValidation:rule="!(self.plainHTTP && has(self.caSecret))",message="plainHTTP and caSecret exclude each other"
type ObjectStore struct {
	// Endpoint is "host:port" (or "host"), without a scheme: https unless PlainHTTP is true.
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9.\-\[\]:]+$`
	// +kubebuilder:validation:MaxLength=253
	Endpoint string `json:"endpoint"`
	// Bucket is the existing bucket (hactl never creates one).
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$`
	Bucket string `json:"bucket"`
	// Prefix is an optional key prefix ("backups/etcd"), without leading or trailing "/".
	// +kubebuilder:validation:Pattern=`^[^/](.*[^/])?$`
	// +optional
	Prefix string `json:"prefix,omitempty"`
	// Region is the bucket's region (default us-east-1, which MinIO uses too).
	// +optional
	Region string `json:"region,omitempty"`
	// BucketLookup is "path", "dns" or "auto" (default: auto for *.amazonaws.com, else path).
	// +kubebuilder:validation:Enum=path;dns;auto
	// +optional
	BucketLookup string `json:"bucketLookup,omitempty"`
	// CASecret names a Secret whose ca.crt is the CA the endpoint's certificate is verified
	// against (default: the system roots).
	// +optional
	CASecret *SecretRef `json:"caSecret,omitempty"`
	// PlainHTTP talks to the endpoint without TLS; it must be set explicitly.
	// +optional
	PlainHTTP bool `json:"plainHTTP,omitempty"`
}

// Retention is `hactl backup prune`'s policy (backup.Policy): a snapshot is kept when any rule
// keeps it, and the newest verified snapshot always is.
// +kubebuilder:validation:XValidation:rule="has(self.keepLast) || has(self.keepHourly) || has(self.keepDaily)",message="retention needs keepLast, keepHourly or keepDaily: a policy that keeps nothing is refused"
type Retention struct {
	// KeepLast keeps the newest N snapshots (at least 1).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	// +optional
	KeepLast *int32 `json:"keepLast,omitempty"`
	// KeepHourly keeps the newest snapshot of each of the N most recent hours (UTC) that have one.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	// +optional
	KeepHourly *int32 `json:"keepHourly,omitempty"`
	// KeepDaily keeps the newest snapshot of each of the N most recent days (UTC) that have one.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	// +optional
	KeepDaily *int32 `json:"keepDaily,omitempty"`
}

// MaintenanceSpec is the operator's maintenance policy.
type MaintenanceSpec struct {
	// DefragThresholdPercent defragments a member once this share of its database file is free
	// (default 50), one member at a time, followers first, the leader last.
	// +kubebuilder:default=50
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=95
	DefragThresholdPercent int32 `json:"defragThresholdPercent,omitempty"`
	// Window limits defragmentation and compaction to a daily UTC window; nil allows any time.
	// NOSPACE recovery is never held back by the window.
	// +optional
	Window *MaintenanceWindow `json:"window,omitempty"`
	// CompactRetainRevisions compacts history older than the newest N revisions once per window
	// (0: no compaction by the operator; etcd's own auto-compaction is the usual choice).
	// +kubebuilder:validation:Minimum=0
	// +optional
	CompactRetainRevisions int64 `json:"compactRetainRevisions,omitempty"`
	// RecoverNoSpace runs etcd's NOSPACE recovery (compact, defragment every member, disarm) when
	// the alarm is raised (default true).
	// +kubebuilder:default=true
	RecoverNoSpace *bool `json:"recoverNoSpace,omitempty"`
}

// MaintenanceWindow is a daily window in UTC.
type MaintenanceWindow struct {
	// Start is "HH:MM" UTC.
	// +kubebuilder:validation:Pattern=`^([01][0-9]|2[0-3]):[0-5][0-9]$`
	Start string `json:"start"`
	// Duration is the window's length, 1m to 24h.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m') && duration(self) <= duration('24h')",message="window duration must be between 1m and 24h"
	Duration metav1.Duration `json:"duration"`
}

// EtcdClusterStatus is what the operator last saw.
type EtcdClusterStatus struct {
	// ObservedGeneration is the metadata.generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase is Pending (not seen yet), Running (a leader, every member healthy) or Degraded.
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// Leader is the leader member's name ("" without a leader).
	// +optional
	Leader string `json:"leader,omitempty"`
	// Members is each member as last seen, in spec order.
	// +listType=map
	// +listMapKey=name
	// +optional
	Members []MemberStatus `json:"members,omitempty"`
	// LastSnapshot is the newest snapshot the operator took or found in the store.
	// +optional
	LastSnapshot *SnapshotRef `json:"lastSnapshot,omitempty"`
	// LastDefragmentation and LastCompaction are when the operator's maintenance last
	// defragmented members or compacted the history (compaction runs once per window).
	// +optional
	LastDefragmentation *metav1.Time `json:"lastDefragmentation,omitempty"`
	// +optional
	LastCompaction *metav1.Time `json:"lastCompaction,omitempty"`
	// Healing is the member replacement in progress, step by step (nil: none): a replica that
	// takes over the Lease continues it from the recorded step, or rolls it back.
	// +optional
	Healing *HealingStatus `json:"healing,omitempty"`
	// Heals are the replacements the operator finished (succeeded, failed or cancelled), oldest
	// first, the newest 10: hactl reads them to tell what changed since its own record.
	// +kubebuilder:validation:MaxItems=10
	// +listType=atomic
	// +optional
	Heals []HealRecord `json:"heals,omitempty"`
	// Conditions: Available, QuorumAtRisk, Degraded, BackupFresh, Maintenance, Healing.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Phase is an EtcdCluster's phase.
// +kubebuilder:validation:Enum=Pending;Running;Degraded
type Phase string

// Phases of an EtcdCluster: Pending → Running ⇄ Degraded.
const (
	PhasePending  Phase = "Pending"
	PhaseRunning  Phase = "Running"
	PhaseDegraded Phase = "Degraded"
)

// MemberStatus is one member as the operator last saw it.
type MemberStatus struct {
	// Name is the member's name (spec.members[].name).
	Name string `json:"name"`
	// ID is the member ID in hex ("" when it did not answer).
	// +optional
	ID string `json:"id,omitempty"`
	// Role is leader, follower or learner ("" when it did not answer).
	// +kubebuilder:validation:Enum="";leader;follower;learner
	// +optional
	Role string `json:"role,omitempty"`
	// Healthy: the member answered and served a linearizable read.
	Healthy bool `json:"healthy"`
	// Error is why it is not healthy.
	// +optional
	Error string `json:"error,omitempty"`
	// Version is the etcd version it runs.
	// +optional
	Version string `json:"version,omitempty"`
	// DBSizeBytes is its database file's size; DBSizeInUseBytes the part holding data.
	// +optional
	DBSizeBytes int64 `json:"dbSizeBytes,omitempty"`
	// +optional
	DBSizeInUseBytes int64 `json:"dbSizeInUseBytes,omitempty"`
	// RaftIndex is its raft committed index.
	// +optional
	RaftIndex uint64 `json:"raftIndex,omitempty"`
	// Alarms are the alarms raised on it (NOSPACE, CORRUPT).
	// +optional
	Alarms []string `json:"alarms,omitempty"`
	// UnhealthySince is when the operator first saw it unhealthy in the current run of looks (nil
	// while healthy): the grace period of a heal counts from here, across leader changes.
	// +optional
	UnhealthySince *metav1.Time `json:"unhealthySince,omitempty"`
}

// HealStep is a step of a member replacement.
// +kubebuilder:validation:Enum=Planned;RemovingMember;AddingLearner;StartingMember;Promoting;RollingBack
type HealStep string

// Steps of a heal, in order (the remove may come after the promotion: see HealingStatus.Order).
const (
	HealPlanned        HealStep = "Planned"
	HealRemovingMember HealStep = "RemovingMember"
	HealAddingLearner  HealStep = "AddingLearner"
	HealStartingMember HealStep = "StartingMember"
	HealPromoting      HealStep = "Promoting"
	HealRollingBack    HealStep = "RollingBack"
)

// HealingStatus is one member replacement in progress.
type HealingStatus struct {
	// Member and MemberID are the lost member being replaced.
	Member   string `json:"member"`
	MemberID string `json:"memberID"`
	// Spare is the host receiving the new member; NewMemberID its ID once etcd added it.
	Spare string `json:"spare"`
	// +optional
	NewMemberID string `json:"newMemberID,omitempty"`
	// InitialCluster is the --initial-cluster the new member was started with (hactl's state dir
	// records it: hactl operator adopt).
	// +optional
	InitialCluster string `json:"initialCluster,omitempty"`
	// Order is add-first or remove-first (etcd's strict reconfiguration decides: see
	// etcd/membership.ReplaceOrder).
	// +kubebuilder:validation:Enum=add-first;remove-first
	Order string `json:"order"`
	// Step is the step being worked on.
	Step HealStep `json:"step"`
	// StartedAt is when the heal began, StepAt when Step was entered.
	StartedAt metav1.Time `json:"startedAt"`
	StepAt    metav1.Time `json:"stepAt"`
	// Attempts counts tries of the current step; LastError is the last one's error.
	// +optional
	Attempts int32 `json:"attempts,omitempty"`
	// +optional
	LastError string `json:"lastError,omitempty"`
}

// HealResult is how a heal ended.
// +kubebuilder:validation:Enum=Succeeded;Failed;Cancelled
type HealResult string

// Results of a heal.
const (
	HealSucceeded HealResult = "Succeeded"
	HealFailed    HealResult = "Failed"
	HealCancelled HealResult = "Cancelled"
)

// HealRecord is a finished member replacement.
type HealRecord struct {
	Member   string `json:"member"`
	MemberID string `json:"memberID"`
	Spare    string `json:"spare"`
	// +optional
	NewMemberID string `json:"newMemberID,omitempty"`
	// PeerURL, ClientURL and InitialCluster are the new member's, as hactl's state dir records a
	// member (hactl operator adopt).
	// +optional
	PeerURL string `json:"peerURL,omitempty"`
	// +optional
	ClientURL string `json:"clientURL,omitempty"`
	// +optional
	InitialCluster string     `json:"initialCluster,omitempty"`
	Result         HealResult `json:"result"`
	// Message says what happened (the error of a failed heal).
	// +optional
	Message    string      `json:"message,omitempty"`
	StartedAt  metav1.Time `json:"startedAt"`
	FinishedAt metav1.Time `json:"finishedAt"`
}

// SnapshotRef is one snapshot in the object store.
type SnapshotRef struct {
	// Name is its object key stem (hactl backup list's name).
	Name string `json:"name"`
	// Time is when it was taken.
	Time metav1.Time `json:"time"`
	// Revision is the etcd revision it holds.
	Revision int64 `json:"revision"`
	// SizeBytes is the stored object's size.
	SizeBytes int64 `json:"sizeBytes"`
	// Slot is the scheduled slot it was taken for (backup.TimeFormat), "" for an unscheduled one.
	// +optional
	Slot string `json:"slot,omitempty"`
	// TakenBy is "hactl-operator" for the operator's snapshots, "" for hactl's (CLI or timers).
	// +optional
	TakenBy string `json:"takenBy,omitempty"`
}

// Condition types of an EtcdCluster.
const (
	// ConditionAvailable: a leader and a quorum of healthy members (etcd serves writes).
	ConditionAvailable = "Available"
	// ConditionQuorumAtRisk: one more member lost would lose the quorum.
	ConditionQuorumAtRisk = "QuorumAtRisk"
	// ConditionDegraded: some member is unhealthy, an alarm is raised, or the operator cannot
	// reach or trust the cluster.
	ConditionDegraded = "Degraded"
	// ConditionBackupFresh: the newest snapshot is younger than 2 × spec.backup.every.
	ConditionBackupFresh = "BackupFresh"
	// ConditionMaintenance: the operator is compacting, defragmenting or recovering from NOSPACE.
	ConditionMaintenance = "Maintenance"
	// ConditionHealing: a member is being replaced (True), or why none is (False: waiting out the
	// grace period, no free spare, quorum lost, autoReplace off, the last heal failed).
	ConditionHealing = "Healing"
)

// EtcdClusterList is a list of EtcdCluster.
//
// +kubebuilder:object:root=true
type EtcdClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdCluster `json:"items"`
}
