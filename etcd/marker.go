package etcd

import "encoding/json"

// RemoteMarker is the member marker's path on every member's host: it is how hactl recognises its
// own data directories.
const RemoteMarker = "/etc/hactl/etcd-member.json"

// Marker is written to RemoteMarker on every member (by bootstrap and by the operator's heal): it
// is how hactl recognises its own data directories ("already ours") and never mistakes another
// cluster's data for its own. Cluster is the spec's metadata.name, Token the cluster's
// --initial-cluster-token, Member the member's name.
type Marker struct {
	Cluster string `json:"cluster"`
	Token   string `json:"token"`
	Member  string `json:"member"`
}

// File is the marker's content as written to RemoteMarker: indented JSON and a final newline.
// Errors: none in practice (json.Marshal of three strings).
func (m Marker) File() ([]byte, error) {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
