package lab

import (
	"fmt"

	"github.com/hactl/hactl/api/v1alpha1"
)

// Names of the lab's docker objects. Every container, network and volume the lab creates is
// named Prefix or Prefix+"-..." so Down removes exactly those and nothing else.
const (
	// Prefix starts the name of every docker object the lab owns.
	Prefix = "hactl-lab"
	// NetworkName is the lab's bridge network.
	NetworkName = Prefix
	// Subnet is the lab network's subnet; hosts have pinned addresses in it.
	Subnet = "172.28.0.0/24"
	// IPRange is where docker places containers that get no pinned address; pinned host addresses
	// and VIP stay outside it.
	IPRange = "172.28.0.128/25"
	// VIP is the address reserved for the load balancers' virtual IP (outside IPRange, no host has it).
	VIP = "172.28.0.100"
)

// Host is one lab machine: a systemd container on the lab network reachable over SSH.
type Host struct {
	// Name is the hostname, the etcd member name and the spec's host name (e.g. "cp-a").
	Name string
	// Address is the pinned IPv4 address on the lab network (e.g. "172.28.0.11").
	Address string
	// Zone is the availability zone label (az-a, az-b, az-c).
	Zone string
	// Roles are the spec roles of the host.
	Roles []v1alpha1.Role
	// Container is the docker container name, Prefix + "-" + Name.
	Container string
}

// labHosts returns the hosts of a lab with members etcd members (3 or 5), in spec order:
// cp-a/b/c (etcd + control-plane, one per zone), then etcd-d (az-a) and etcd-e (az-b).
// Losing any one zone leaves a quorum in both variants (3: 2 of 3; 5: 3 of 5).
func labHosts(members int) ([]Host, error) {
	all := []Host{
		{Name: "cp-a", Address: "172.28.0.11", Zone: "az-a", Roles: []v1alpha1.Role{v1alpha1.RoleEtcd, v1alpha1.RoleControlPlane}},
		{Name: "cp-b", Address: "172.28.0.12", Zone: "az-b", Roles: []v1alpha1.Role{v1alpha1.RoleEtcd, v1alpha1.RoleControlPlane}},
		{Name: "cp-c", Address: "172.28.0.13", Zone: "az-c", Roles: []v1alpha1.Role{v1alpha1.RoleEtcd, v1alpha1.RoleControlPlane}},
		{Name: "etcd-d", Address: "172.28.0.14", Zone: "az-a", Roles: []v1alpha1.Role{v1alpha1.RoleEtcd}},
		{Name: "etcd-e", Address: "172.28.0.15", Zone: "az-b", Roles: []v1alpha1.Role{v1alpha1.RoleEtcd}},
	}
	if members != 3 && members != 5 {
		return nil, fmt.Errorf("lab members must be 3 or 5, got %d", members)
	}
	out := all[:members]
	for i := range out {
		out[i].Container = Prefix + "-" + out[i].Name
	}
	return out, nil
}

// isLabName reports whether a docker object name belongs to the lab: exactly Prefix, or Prefix
// followed by "-".
func isLabName(name string) bool {
	return name == Prefix || len(name) > len(Prefix) && name[:len(Prefix)+1] == Prefix+"-"
}
