package lab

import (
	"fmt"
	"slices"

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

// The bastion's networks (Options.Bastion).
const (
	// InternalNetworkName is the internal network (docker network create --internal) of the hosts
	// behind the bastion: no route out, and the in-* hosts refuse anything from this machine (see
	// Host.Jump), so they are reachable only through the bastion.
	InternalNetworkName = Prefix + "-internal"
	// InternalSubnet is the internal network's subnet; hosts have pinned addresses below InternalIPRange.
	InternalSubnet = "172.29.0.0/24"
	// InternalIPRange is where docker would place unpinned containers on the internal network.
	InternalIPRange = "172.29.0.128/25"
	// InternalGateway is the internal network's gateway: this machine's address on it (docker
	// gives the bridge one). The in-* hosts reject packets from it.
	InternalGateway = "172.29.0.1"
	// BastionAddress is the bastion's address on the lab network (how this machine reaches it).
	BastionAddress = "172.28.0.40"
	// BastionInternalAddress is the bastion's address on the internal network.
	BastionInternalAddress = "172.29.0.40"
)

// The IPv6 network (Options.IPv6).
const (
	// IPv6NetworkName is the IPv6 network of the v6-* hosts (docker network create --ipv6).
	IPv6NetworkName = Prefix + "-v6"
	// IPv6Subnet is its IPv6 subnet (a unique local prefix); hosts have pinned addresses in it.
	IPv6Subnet = "fd00:db8:28::/64"
	// IPv6Gateway is this machine's address on the IPv6 network.
	IPv6Gateway = "fd00:db8:28::1"
	// IPv6NetworkV4Subnet is the IPv4 subnet docker requires on every network; the v6-* hosts drop
	// their IPv4 address at boot, so they are IPv6-only.
	IPv6NetworkV4Subnet = "172.30.0.0/24"
	// IPv6NetworkV4IPRange is where docker would place unpinned containers (IPv4) on it.
	IPv6NetworkV4IPRange = "172.30.0.128/25"
	// IPv6NetworkV4Gateway is the IPv4 gateway of the IPv6 network.
	IPv6NetworkV4Gateway = "172.30.0.1"
)

// The mirror (Options.Mirror).
const (
	// MirrorAddress is the mirror host's address on the lab network.
	MirrorAddress = "172.28.0.32"
	// MirrorInternalAddress is the mirror's address on the internal network (with Options.Bastion).
	MirrorInternalAddress = "172.29.0.32"
	// MirrorIPv6Address is the mirror's address on the IPv6 network (with Options.IPv6).
	MirrorIPv6Address = "fd00:db8:28::32"
	// MirrorPort is the mirror's HTTP port.
	MirrorPort = 8080
)

// Names of the hosts that are not etcd members.
const (
	BastionHost = "bastion"
	MirrorHost  = "mirror"
)

// Host is one lab machine: a systemd container on a lab network reachable over SSH.
type Host struct {
	// Name is the hostname, the etcd member name and the spec's host name (e.g. "cp-a").
	Name string
	// Address is the pinned address hactl reaches the host at and the spec lists: IPv4 on the lab
	// network (e.g. "172.28.0.11"), IPv4 on the internal network for in-* (reachable only through
	// the bastion), IPv6 for v6-* (e.g. "fd00:db8:28::11").
	Address string
	// Zone is the availability zone label (az-a, az-b, az-c).
	Zone string
	// Roles are the spec roles of the host (none for the bastion and the mirror).
	Roles []v1alpha1.Role
	// Container is the docker container name, Prefix + "-" + Name.
	Container string
	// Networks are the host's docker networks with its pinned addresses; the first is the one the
	// container is created on, the others are connected before it boots.
	Networks []Attachment
	// Jump names the lab host SSH goes through (BastionHost for in-*), "" when this machine
	// reaches Address directly.
	Jump string
	// IPv6Only: the host removes its IPv4 address (which docker insists on) at every boot.
	IPv6Only bool
	// Kube: the host is a Kubernetes node of the lab (Options.Kubernetes: cp-a/b/c; Options.Workers
	// also w-a/b/c). A Kubernetes node runs in its own cgroup namespace (kubeNodeInit), gets
	// containerd's data on a named volume (ContainerdVolume), the machine's /lib/modules read-only
	// and, at every boot, what kubelet needs inside a container (kubeNodePrepUnit); everything else
	// (containerd, kubelet, the CNI, kubeadm) is hactl's.
	Kube bool
	// Volumes are further named docker volumes as "NAME:PATH" (docker run -v), every NAME starting
	// with Prefix+"-" so Down removes them; Recreate replaces them with empty ones.
	Volumes []string
}

// KubeNode reports whether h is a Kubernetes node of the lab.
func (h Host) KubeNode() bool { return h.Kube }

// ContainerdVolume is the named docker volume holding a Kubernetes node's /var/lib/containerd
// (containerd's overlay snapshotter cannot run on docker's own overlay filesystem), "" for other
// hosts. Down removes it with the other hactl-lab-* volumes; Recreate replaces it.
func (h Host) ContainerdVolume() string {
	if !h.KubeNode() {
		return ""
	}
	return Prefix + "-" + h.Name + "-containerd"
}

// Attachment is a host's pinned addresses on one docker network.
type Attachment struct {
	// Network is the docker network name.
	Network string
	// IPv4 and IPv6 are the pinned addresses ("" = none).
	IPv4, IPv6 string
}

// memberHost is a host with roles on the lab network only.
func memberHost(name, addr, zone string, roles ...v1alpha1.Role) Host {
	return Host{Name: name, Address: addr, Zone: zone, Roles: slices.Clone(roles),
		Networks: []Attachment{{Network: NetworkName, IPv4: addr}}}
}

var cpRoles = []v1alpha1.Role{v1alpha1.RoleEtcd, v1alpha1.RoleControlPlane}

// WorkerHosts are the names of the lab's worker nodes (Options.Workers), in spec order.
var WorkerHosts = [...]string{"w-a", "w-b", "w-c"}

// workerHosts returns w-a, w-b, w-c (zones az-a, az-b, az-c): Kubernetes workers.
func workerHosts() []Host {
	var out []Host
	for i, name := range WorkerHosts {
		h := memberHost(name, fmt.Sprintf("172.28.0.%d", 51+i), fmt.Sprintf("az-%c", 'a'+i), v1alpha1.RoleWorker)
		h.Kube = true
		out = append(out, h)
	}
	return named(out)
}

// SpareHosts are the names of the lab's spare hosts (Options.Spares).
var SpareHosts = [...]string{"spare-c"}

// spareHosts returns spare-c (172.28.0.16, zone az-c): a plain host, no roles, for an etcd member
// the operator moves onto it (cp-c's zone, so the members stay one per zone).
func spareHosts() []Host {
	return named([]Host{memberHost(SpareHosts[0], "172.28.0.16", "az-c")})
}

// labHosts returns the hosts of a lab with members etcd members (3 or 5), in spec order:
// cp-a/b/c (etcd + control-plane + Kubernetes node, one per zone), then etcd-d (az-a) and etcd-e
// (az-b) in the 5-member lab, then the dedicated load balancers lb-a (az-a) and lb-b (az-b).
// Losing any one zone leaves a quorum in both variants (3: 2 of 3; 5: 3 of 5) and a load balancer.
func labHosts(members int) ([]Host, error) {
	all := []Host{
		memberHost("cp-a", "172.28.0.11", "az-a", cpRoles...),
		memberHost("cp-b", "172.28.0.12", "az-b", cpRoles...),
		memberHost("cp-c", "172.28.0.13", "az-c", cpRoles...),
		memberHost("etcd-d", "172.28.0.14", "az-a", v1alpha1.RoleEtcd),
		memberHost("etcd-e", "172.28.0.15", "az-b", v1alpha1.RoleEtcd),
	}
	if members != 3 && members != 5 {
		return nil, fmt.Errorf("lab members must be 3 or 5, got %d", members)
	}
	hosts := append(all[:members:members], lbHosts()...)
	return named(hosts), nil
}

// LBHosts are the names of the lab's dedicated load balancer hosts (role lb), in spec order.
var LBHosts = [...]string{"lb-a", "lb-b"}

// lbHosts returns lb-a (az-a) and lb-b (az-b): HAProxy + Keepalived hosts holding the VIP.
func lbHosts() []Host {
	return []Host{
		memberHost(LBHosts[0], "172.28.0.21", "az-a", v1alpha1.RoleLB),
		memberHost(LBHosts[1], "172.28.0.22", "az-b", v1alpha1.RoleLB),
	}
}

// bastionHosts returns the bastion (lab network + internal network) and in-a/b/c (internal
// network only, one per zone, reached through the bastion).
func bastionHosts() []Host {
	in := func(name, addr, zone string) Host {
		return Host{Name: name, Address: addr, Zone: zone, Roles: slices.Clone(cpRoles), Jump: BastionHost,
			Networks: []Attachment{{Network: InternalNetworkName, IPv4: addr}}}
	}
	return named([]Host{
		{Name: BastionHost, Address: BastionAddress, Zone: "az-a", Networks: []Attachment{
			{Network: NetworkName, IPv4: BastionAddress},
			{Network: InternalNetworkName, IPv4: BastionInternalAddress},
		}},
		in("in-a", "172.29.0.11", "az-a"),
		in("in-b", "172.29.0.12", "az-b"),
		in("in-c", "172.29.0.13", "az-c"),
	})
}

// ipv6Hosts returns v6-a/b/c: IPv6-only hosts on the IPv6 network, one per zone.
func ipv6Hosts() []Host {
	v6 := func(name, v4, v6, zone string) Host {
		return Host{Name: name, Address: v6, Zone: zone, Roles: slices.Clone(cpRoles), IPv6Only: true,
			Networks: []Attachment{{Network: IPv6NetworkName, IPv4: v4, IPv6: v6}}}
	}
	return named([]Host{
		v6("v6-a", "172.30.0.11", "fd00:db8:28::11", "az-a"),
		v6("v6-b", "172.30.0.12", "fd00:db8:28::12", "az-b"),
		v6("v6-c", "172.30.0.13", "fd00:db8:28::13", "az-c"),
	})
}

// mirrorHost returns the HTTP mirror (zone az-c) on the lab network, and on the internal and IPv6
// networks when those exist.
func mirrorHost(internal, ipv6 bool) Host {
	h := Host{Name: MirrorHost, Address: MirrorAddress, Zone: "az-c",
		Networks: []Attachment{{Network: NetworkName, IPv4: MirrorAddress}}}
	if internal {
		h.Networks = append(h.Networks, Attachment{Network: InternalNetworkName, IPv4: MirrorInternalAddress})
	}
	if ipv6 {
		h.Networks = append(h.Networks, Attachment{Network: IPv6NetworkName, IPv4: "172.30.0.32", IPv6: MirrorIPv6Address})
	}
	return named([]Host{h})[0]
}

// hostsFor returns every host of a lab with options o (o.Members already defaulted), in order:
// members (Kubernetes nodes with o.Kubernetes), w-* (o.Workers), spare-c (o.Spares), then bastion
// and in-*, v6-*, mirror, objstore.
func hostsFor(o Options) ([]Host, error) {
	hosts, err := labHosts(o.Members)
	if err != nil {
		return nil, err
	}
	if o.Kubernetes || o.Workers {
		for i := range hosts {
			hosts[i].Kube = hosts[i].HasRole(v1alpha1.RoleControlPlane)
		}
	}
	if o.Workers {
		hosts = append(hosts, workerHosts()...)
	}
	if o.Spares {
		hosts = append(hosts, spareHosts()...)
	}
	if o.Bastion {
		hosts = append(hosts, bastionHosts()...)
	}
	if o.IPv6 {
		hosts = append(hosts, ipv6Hosts()...)
	}
	if o.Mirror {
		hosts = append(hosts, mirrorHost(o.Bastion, o.IPv6))
	}
	if o.ObjectStore {
		hosts = append(hosts, objectStoreHost())
	}
	return hosts, nil
}

func named(hosts []Host) []Host {
	for i := range hosts {
		hosts[i].Container = Prefix + "-" + hosts[i].Name
	}
	return hosts
}

// isLabName reports whether a docker object name belongs to the lab: exactly Prefix, or Prefix
// followed by "-".
func isLabName(name string) bool {
	return name == Prefix || len(name) > len(Prefix) && name[:len(Prefix)+1] == Prefix+"-"
}

// HasRole reports whether h carries spec role r.
func (h Host) HasRole(r v1alpha1.Role) bool { return slices.Contains(h.Roles, r) }
