package bastion

import (
	"testing"

	"github.com/hactl/hactl/api/v1alpha1"
)

// TestNoBastion: a spec without spec.ssh.bastion opens nothing, dials etcd directly, and closing
// the zero Tunnel is a no-op.
func TestNoBastion(t *testing.T) {
	tun, err := Open(&v1alpha1.Cluster{}, nil)
	if err != nil || tun.Dialer != nil || tun.Etcd() != nil {
		t.Fatalf("Open without a bastion: %+v, %v", tun, err)
	}
	tun.Close()
}
