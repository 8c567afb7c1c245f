// Package state is hactl's local state directory: the PKI (see package pki) and cluster.json, the record
// of what hactl decided once and must decide the same way on every re-run (the cluster token, each
// member's initial-cluster flags, the etcd cluster ID once the cluster formed).
package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hactl/hactl/internal/atomicfile"
)

// Member is what hactl recorded about one etcd member.
type Member struct {
	// ID is the etcd member ID in hex, once known.
	ID string `json:"id,omitempty"`
	// InitialCluster is the --initial-cluster value the member was (or will be) started with.
	InitialCluster string `json:"initialCluster"`
	// InitialClusterState is "new" for founding members and "existing" for members added later.
	InitialClusterState string `json:"initialClusterState"`
	// PeerURL and ClientURL are the URLs the member was installed with. etcd keeps peer URLs in its
	// membership, so a change must go through `member update`, never through a restart.
	PeerURL   string `json:"peerURL,omitempty"`
	ClientURL string `json:"clientURL,omitempty"`
}

// Cluster is the content of cluster.json.
type Cluster struct {
	// Name is metadata.name of the spec.
	Name string `json:"name"`
	// Token is the etcd --initial-cluster-token, fixed at the first bootstrap.
	Token string `json:"token"`
	// ClusterID is the etcd cluster ID in hex; empty until the cluster has formed.
	ClusterID string `json:"clusterID,omitempty"`
	// Members maps member name to its record.
	Members map[string]*Member `json:"members"`
	// Operator is where hactl-operator was deployed for this cluster (recorded by hactl operator
	// deploy, dropped by operator remove), so that status, plan and bootstrap read its EtcdCluster
	// there; nil when it was not deployed by this state dir's hactl.
	Operator *Operator `json:"operator,omitempty"`
}

// Operator is where hactl-operator runs: its namespace, and the kubeconfig and context it was
// deployed through ("" Kubeconfig: over SSH to a control plane of the spec's cluster).
type Operator struct {
	Namespace  string `json:"namespace"`
	Kubeconfig string `json:"kubeconfig,omitempty"`
	Context    string `json:"context,omitempty"`
}

// FileName is the cluster record's name inside the state directory.
const FileName = "cluster.json"

// Load reads dir/cluster.json. It returns (nil, nil) when the file does not exist.
func Load(dir string) (*Cluster, error) {
	raw, err := os.ReadFile(filepath.Join(dir, FileName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading cluster state: %w", err)
	}
	var c Cluster
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("parsing %s: %w", filepath.Join(dir, FileName), err)
	}
	if c.Members == nil {
		c.Members = map[string]*Member{}
	}
	return &c, nil
}

// Save writes dir/cluster.json atomically (temp file in dir, fsync, rename), creating dir with 0700.
func Save(dir string, c *Cluster) error {
	raw, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding cluster state: %w", err)
	}
	return WriteFileAtomic(filepath.Join(dir, FileName), append(raw, '\n'), 0o600)
}

// WriteFileAtomic writes data to path through a temp file in the same directory, fsyncs it and renames
// it into place (see atomicfile.WriteFile), so readers see the old or the new content, never a mix.
// The parent directory is created with mode 0700 when missing.
func WriteFileAtomic(path string, data []byte, mode fs.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	return atomicfile.WriteFile(path, data, mode)
}

// Forget drops the record of member name when it is the member with ID id (hex, as etcd prints
// it): the member was removed from the cluster, so a host of that name joins later as a new member.
// A record of another ID (the host re-joined since) is kept. It reports whether a record was
// dropped.
func (c *Cluster) Forget(name, id string) bool {
	rec := c.Members[name]
	if rec == nil || (rec.ID != "" && !strings.EqualFold(rec.ID, id)) {
		return false
	}
	delete(c.Members, name)
	return true
}

// ForgetRemoved loads dir's record, forgets each removed member (name → ID, see Forget) and saves
// the record when anything changed. A missing record is no error.
func ForgetRemoved(dir string, removed map[string]string) error {
	c, err := Load(dir)
	if err != nil || c == nil {
		return err
	}
	changed := false
	for name, id := range removed {
		changed = c.Forget(name, id) || changed
	}
	if !changed {
		return nil
	}
	return Save(dir, c)
}
