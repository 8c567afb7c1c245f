package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EtcdSnapshot is one snapshot of an EtcdCluster in its object store. The operator keeps one per
// snapshot in the bucket (listed from the store, like k3s' ETCDSnapshotFile); one created without
// spec.key asks for a snapshot now. Finalizer hactl.io/snapshot-protection: deleting the object
// deletes the snapshot from the bucket only when deletionPolicy is Delete, and never the newest
// verified one.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=etcdsnap,categories=hactl
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterName`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Revision",type=integer,JSONPath=`.status.revision`
// +kubebuilder:printcolumn:name="Size",type=integer,JSONPath=`.status.sizeBytes`
// +kubebuilder:printcolumn:name="Taken",type=date,JSONPath=`.status.time`
type EtcdSnapshot struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   EtcdSnapshotSpec   `json:"spec"`
	Status EtcdSnapshotStatus `json:"status,omitempty"`
}

// EtcdSnapshotSpec names the cluster and, for a snapshot that exists, its key.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.key) || (has(self.key) && self.key == oldSelf.key)",message="key is immutable once set: an EtcdSnapshot stands for one object in the bucket"
type EtcdSnapshotSpec struct {
	// ClusterName is the EtcdCluster (same namespace) the snapshot belongs to. Immutable.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="clusterName is immutable"
	ClusterName string `json:"clusterName"`
	// Key is the snapshot's name stem in the bucket (as hactl backup list prints it): set for a
	// snapshot that exists; empty asks the operator to take one now.
	// +kubebuilder:validation:Pattern=`^\d{8}T\d{6}Z-(rev\d{15}-[a-z0-9]([-a-z0-9]*[a-z0-9])?|slot)$`
	// +optional
	Key string `json:"key,omitempty"`
	// DeletionPolicy is what deleting this object does to the snapshot in the bucket: Retain
	// (default) leaves it, Delete deletes it (never the newest verified snapshot).
	// +kubebuilder:default=Retain
	// +kubebuilder:validation:Enum=Retain;Delete
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`
}

// DeletionPolicy is an EtcdSnapshot's spec.deletionPolicy.
type DeletionPolicy string

// Deletion policies.
const (
	DeletionRetain DeletionPolicy = "Retain"
	DeletionDelete DeletionPolicy = "Delete"
)

// SnapshotProtectionFinalizer guards the bucket's snapshot while its EtcdSnapshot is deleted.
const SnapshotProtectionFinalizer = "hactl.io/snapshot-protection"

// EtcdSnapshotStatus is the snapshot as stored.
type EtcdSnapshotStatus struct {
	// Phase is Pending (asked for, not taken yet), Ready (stored, metadata complete) or Failed.
	// +kubebuilder:validation:Enum=Pending;Ready;Failed
	// +optional
	Phase string `json:"phase,omitempty"`
	// Key is the snapshot's name stem in the bucket (spec.key, or the one taken on demand).
	// +optional
	Key string `json:"key,omitempty"`
	// Time is when it was taken; Revision the etcd revision it holds; SizeBytes the stored size.
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
	// +optional
	Revision int64 `json:"revision,omitempty"`
	// +optional
	SizeBytes int64 `json:"sizeBytes,omitempty"`
	// SHA256 is the stored object's sha256 (hex).
	// +optional
	SHA256 string `json:"sha256,omitempty"`
	// Verified: a verify (restore into a scratch dir, hash check) succeeded.
	// +optional
	Verified bool `json:"verified,omitempty"`
	// Encrypted: the object is age-encrypted.
	// +optional
	Encrypted bool `json:"encrypted,omitempty"`
	// Conditions: Ready, and DeletionBlocked when a Delete policy could not be carried out.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// EtcdSnapshotList is a list of EtcdSnapshot.
//
// +kubebuilder:object:root=true
type EtcdSnapshotList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdSnapshot `json:"items"`
}
