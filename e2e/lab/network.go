package lab

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
)

// netDef is one docker network of the lab.
type netDef struct {
	Name     string
	Subnets  []subnetDef
	Internal bool // docker network create --internal: no route out of the network
	IPv6     bool // docker network create --ipv6
}

// subnetDef is one subnet of a network: the subnet, where docker may place unpinned containers
// ("" = anywhere) and the gateway ("" = docker's choice).
type subnetDef struct {
	Subnet, IPRange, Gateway string
}

// networksFor returns the docker networks of a lab with options o, the lab network first.
func networksFor(o Options) []netDef {
	nets := []netDef{{Name: NetworkName, Subnets: []subnetDef{{Subnet: Subnet, IPRange: IPRange}}}}
	if o.Bastion || o.InternalNetwork {
		nets = append(nets, netDef{Name: InternalNetworkName, Internal: true,
			Subnets: []subnetDef{{Subnet: InternalSubnet, IPRange: InternalIPRange, Gateway: InternalGateway}}})
	}
	if o.IPv6 {
		nets = append(nets, netDef{Name: IPv6NetworkName, IPv6: true, Subnets: []subnetDef{
			{Subnet: IPv6NetworkV4Subnet, IPRange: IPv6NetworkV4IPRange, Gateway: IPv6NetworkV4Gateway},
			{Subnet: IPv6Subnet, Gateway: IPv6Gateway},
		}})
	}
	return nets
}

// createArgs returns the arguments of `docker network create` for n.
func (n netDef) createArgs() []string {
	args := []string{"network", "create", "--driver", "bridge"}
	if n.Internal {
		args = append(args, "--internal")
	}
	if n.IPv6 {
		args = append(args, "--ipv6")
	}
	for _, s := range n.Subnets {
		args = append(args, "--subnet", s.Subnet)
		if s.IPRange != "" {
			args = append(args, "--ip-range", s.IPRange)
		}
		if s.Gateway != "" {
			args = append(args, "--gateway", s.Gateway)
		}
	}
	return append(args, n.Name)
}

// ensureNetworks creates the lab's networks, refusing when another docker network overlaps one of
// their subnets (a network of the same name is taken as already created).
func ensureNetworks(ctx context.Context, d docker, nets []netDef) error {
	existing, err := listSubnets(ctx, d)
	if err != nil {
		return err
	}
	for _, n := range nets {
		if err := checkOverlap(n, existing); err != nil {
			return err
		}
		if _, ok := existing[n.Name]; ok {
			continue
		}
		if _, err := d.run(ctx, nil, n.createArgs()...); err != nil {
			return fmt.Errorf("create network %s: %w", n.Name, err)
		}
	}
	return nil
}

// checkOverlap fails when a network other than n.Name uses a subnet overlapping one of n's.
func checkOverlap(n netDef, existing map[string][]string) error {
	for _, want := range n.Subnets {
		w := netip.MustParsePrefix(want.Subnet)
		for name, subnets := range existing {
			if name == n.Name {
				continue
			}
			for _, s := range subnets {
				if p, err := netip.ParsePrefix(s); err == nil && p.Overlaps(w) {
					return fmt.Errorf("lab subnet %s is taken: docker network %q uses %s; remove that network or free the subnet", want.Subnet, name, s)
				}
			}
		}
	}
	return nil
}

// listSubnets returns every docker network's subnets by network name.
func listSubnets(ctx context.Context, d docker) (map[string][]string, error) {
	out, err := d.run(ctx, nil, "network", "ls", "--format", "{{.Name}}")
	if err != nil {
		return nil, fmt.Errorf("list networks: %w", err)
	}
	res := map[string][]string{}
	names := strings.Fields(out)
	if len(names) == 0 {
		return res, nil
	}
	out, err = d.run(ctx, nil, append([]string{"network", "inspect", "--format",
		"{{.Name}}{{range .IPAM.Config}} {{.Subnet}}{{end}}"}, names...)...)
	if err != nil {
		return nil, fmt.Errorf("inspect networks: %w", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			res[f[0]] = f[1:]
		}
	}
	return res, nil
}
