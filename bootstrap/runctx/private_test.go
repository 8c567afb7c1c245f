package runctx

import (
	"errors"
	"strings"
	"testing"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/provision"
)

// TestCheckPrivateAddress: a privateAddress must be one of the host's interface addresses.
func TestCheckPrivateAddress(t *testing.T) {
	f := &provision.Facts{AddrsJSON: []byte(`[{"ifname":"lo","addr_info":[{"local":"127.0.0.1","prefixlen":8}]},
{"ifname":"eth0","addr_info":[{"local":"172.28.0.11","prefixlen":24},{"local":"fe80::1","prefixlen":64}]},
{"ifname":"eth1","addr_info":[{"local":"172.29.0.11","prefixlen":24}]}]`)}
	h := v1alpha1.Host{Name: "cp-a", Address: "172.28.0.11"}
	if err := checkPrivateAddress(h, f); err != nil {
		t.Errorf("no privateAddress: %v", err)
	}
	h.PrivateAddress = "172.29.0.11"
	if err := checkPrivateAddress(h, f); err != nil {
		t.Errorf("on eth1: %v", err)
	}
	h.PrivateAddress = "172.29.0.99"
	err := checkPrivateAddress(h, f)
	var pe *PrivateAddressError
	if !errors.As(err, &pe) || pe.Host != "cp-a" || !strings.Contains(err.Error(), "it has eth0 172.28.0.11/24, eth1 172.29.0.11/24)") {
		t.Errorf("not on the host: %v", err)
	}
	if err := checkPrivateAddress(h, &provision.Facts{}); err == nil || !strings.Contains(err.Error(), "could not be read") {
		t.Errorf("no addresses read: %v", err)
	}
}
