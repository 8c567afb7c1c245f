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
	// newest verified one always); nil deletes nothing (snapshots are deleted only by an explicit
	// policy).
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
	// Conditions: Available, QuorumAtRisk, Degraded, BackupFresh, Maintenance.
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
)

// EtcdClusterList is a list of EtcdCluster.
//
// +kubebuilder:object:root=true
type EtcdClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdCluster `json:"items"`
}
