// Package bastion opens spec.ssh.bastion for commands that talk to etcd directly (status, backup
// now): the one place that joins provision's SSH tunnel and etcd's dial option.
package bastion

import (
	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/provision"
)

// Tunnel is the spec's bastion, opened. The zero Tunnel (a spec without a bastion) dials directly.
type Tunnel struct {
	// Dialer reaches hosts and TCP addresses through the bastion; nil without one.
	Dialer *provision.Dialer
}

// Open dials spec.ssh.bastion (provision.TunnelFromSpec: unknown host keys refused, secrets asked
// through prompt) and returns the zero Tunnel when the spec has none. Errors are
// provision.TunnelFromSpec's (keys, known_hosts, secrets, the bastion unreachable). The caller
// closes the Tunnel.
func Open(c *v1alpha1.Cluster, prompt provision.Prompter) (Tunnel, error) {
	d, err := provision.TunnelFromSpec(c, provision.SpecOptions{Prompt: prompt})
	if err != nil {
		return Tunnel{}, err
	}
	return Tunnel{Dialer: d}, nil
}

// Etcd is the etcd client option routing connections through the bastion (TLS with the members
// stays end to end); nil, direct connections, without one.
func (t Tunnel) Etcd() etcd.Option {
	if t.Dialer == nil {
		return nil
	}
	return etcd.WithDialer(t.Dialer.DialTCP)
}

// Close closes the bastion connection (nothing without one).
func (t Tunnel) Close() {
	if t.Dialer != nil {
		t.Dialer.Close()
	}
}
