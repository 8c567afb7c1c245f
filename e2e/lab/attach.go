package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Attach returns the lab a previous Up started (e.g. `hactl-lab up` in another process), without
// changing it: the hosts are derived from the running containers (5 members when etcd-d exists;
// the bastion, IPv6, mirror, object store hosts and workers when theirs exist, Kubernetes nodes when
// cp-a's containerd volume does; the corresponding fields of opts are ignored), the key pair, known_hosts and sudo password are read from the lab directory. It fails
// when a host's container is missing or not running.
func Attach(ctx context.Context, opts Options) (*Lab, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	d := docker{debugf: o.Debugf}
	out, err := d.run(ctx, nil, "ps", "-a", "--filter", "name=^"+Prefix, "--format", "{{.Names}}\t{{.State}}\t{{.Image}}")
	if err != nil {
		return nil, fmt.Errorf("attach to the lab: %w", err)
	}
	state, image := map[string]string{}, ""
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Split(line, "\t"); len(f) == 3 && isLabName(f[0]) {
			state[f[0]] = f[1]
			if image == "" || strings.HasPrefix(f[2], ImageRepo+":") {
				image = f[2]
			}
		}
	}
	has := func(name string) bool { _, ok := state[Prefix+"-"+name]; return ok }
	o.Members = 3
	if has("etcd-d") {
		o.Members = 5
	}
	o.Bastion, o.IPv6, o.Mirror, o.ObjectStore = has(BastionHost), has("v6-a"), has(MirrorHost), has(ObjectStoreHost)
	// Kubernetes nodes: the workers' containers, or cp-a's containerd volume.
	o.Workers = has(WorkerHosts[0])
	if vols, err := d.run(ctx, nil, "volume", "ls", "--format", "{{.Name}}"); err == nil {
		o.Kubernetes = o.Workers || slices.Contains(strings.Fields(vols), Prefix+"-cp-a-containerd")
	}
	hosts, err := hostsFor(o)
	if err != nil {
		return nil, err
	}
	var bad []string
	for _, h := range hosts {
		switch st := state[h.Container]; st {
		case "running":
		case "":
			bad = append(bad, h.Container+" (missing)")
		default:
			bad = append(bad, h.Container+" ("+st+")")
		}
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("attach to the lab: not running: %s (start the lab with `go run ./e2e/cmd/hactl-lab up`)", strings.Join(bad, ", "))
	}
	l := newLab(o, hosts)
	l.image = image
	if l.signer, l.pub, err = readKey(l.IdentityFile()); err != nil {
		return nil, fmt.Errorf("attach to the lab: %w", err)
	}
	pw, err := os.ReadFile(l.SudoPasswordFile())
	if err != nil {
		return nil, fmt.Errorf("attach to the lab: %w", err)
	}
	l.sudoPassword = string(pw)
	if o.ObjectStore {
		if l.objStore, err = readObjectStore(o.Dir); err != nil {
			return nil, fmt.Errorf("attach to the lab: %w", err)
		}
	}
	kh, err := os.ReadFile(l.KnownHostsFile())
	if err != nil {
		return nil, fmt.Errorf("attach to the lab: %w", err)
	}
	for _, h := range hosts {
		addr := knownhosts.Normalize(net.JoinHostPort(h.Address, "22"))
		for _, line := range strings.Split(string(kh), "\n") {
			if f := strings.Fields(line); len(f) > 0 && slices.Contains(strings.Split(f[0], ","), addr) {
				l.hostKeys[h.Name] = append(l.hostKeys[h.Name], line)
			}
		}
	}
	return l, nil
}

// readKey reads the lab's existing key pair (see loadOrCreateKey, which would create one).
func readKey(privPath string) (ssh.Signer, []byte, error) {
	priv, err := os.ReadFile(privPath)
	if err != nil {
		return nil, nil, fmt.Errorf("lab key: %w", err)
	}
	pub, err := os.ReadFile(privPath + ".pub")
	if err != nil {
		return nil, nil, fmt.Errorf("lab key: %w", err)
	}
	signer, err := ssh.ParsePrivateKey(priv)
	if err != nil {
		return nil, nil, fmt.Errorf("lab key %s: %w", privPath, err)
	}
	if parsed, _, _, _, err := ssh.ParseAuthorizedKey(pub); err != nil || string(parsed.Marshal()) != string(signer.PublicKey().Marshal()) {
		return nil, nil, errors.New("lab key: " + privPath + ".pub does not match the private key")
	}
	return signer, pub, nil
}
