package bootstrap

import (
	"os"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/provision"
)

// Prompter asks the user for a secret on a terminal (without echo) and returns it; prompt says
// what is asked ("sudo password for hactl: "). Nil when there is no terminal.
type Prompter func(prompt string) ([]byte, error)

// sshConfig is the SSH client configuration of every command that reaches the hosts (bootstrap,
// plan, pki check), from spec.ssh: key files and agent, known_hosts, bastion, and the secrets — key
// passphrases and the sudo password — from the environment variables the spec names (never from
// the spec itself), else from prompt (asked at most once per run, only when a host needs it), else
// none (provision then says what is missing). getenv is os.Getenv outside tests.
func sshConfig(c *v1alpha1.Cluster, acceptNewHostKeys bool, prompt Prompter, getenv func(string) string) provision.Config {
	s := c.Spec.SSH
	cfg := provision.Config{
		User:              s.User,
		IdentityFile:      s.IdentityFile,
		IdentityFiles:     s.IdentityFiles,
		Agent:             s.Agent,
		KnownHostsFile:    s.KnownHostsFile,
		AcceptNewHostKeys: acceptNewHostKeys,
		ConnectTimeout:    s.ConnectTimeout.Duration,
	}
	if b := s.Bastion; b != nil {
		cfg.Bastion = &provision.BastionConfig{
			Target:         provision.Target{Name: "bastion", Address: b.Address, Port: b.Port},
			User:           b.User,
			IdentityFile:   b.IdentityFile,
			KnownHostsFile: b.KnownHostsFile,
		}
	}
	switch {
	case s.PassphraseEnv != "":
		name := s.PassphraseEnv
		cfg.Passphrase = func(string) ([]byte, error) { return []byte(getenv(name)), nil }
	case prompt != nil:
		cfg.Passphrase = func(keyFile string) ([]byte, error) { return prompt("passphrase for " + keyFile + ": ") }
	}
	switch {
	case s.Sudo.PasswordEnv != "":
		name := s.Sudo.PasswordEnv
		cfg.SudoPassword = func() ([]byte, error) { return []byte(getenv(name)), nil }
	case prompt != nil:
		user := s.User
		cfg.SudoPassword = func() ([]byte, error) { return prompt("sudo password for " + user + " on the hosts: ") }
	}
	return cfg
}

// newDialer returns the one provision.Dialer of a run: keys loaded, secrets asked and the bastion
// dialled once for all hosts.
func newDialer(c *v1alpha1.Cluster, acceptNewHostKeys bool, prompt Prompter) (*provision.Dialer, error) {
	return provision.NewDialer(sshConfig(c, acceptNewHostKeys, prompt, os.Getenv))
}

// target is the SSH target of host h at address addr.
func target(h v1alpha1.Host, addr string) provision.Target {
	return provision.Target{Name: h.Name, Address: addr, Port: h.Port}
}

// Tunnel returns the SSH dialer commands that talk to etcd directly (status) use to reach the
// members through spec.ssh.bastion, or nil when the spec has no bastion. The caller closes it.
func Tunnel(c *v1alpha1.Cluster, prompt Prompter) (*provision.Dialer, error) {
	if c.Spec.SSH.Bastion == nil {
		return nil, nil
	}
	return newDialer(c, false, prompt)
}

// Dialer returns an SSH dialer for reading the spec's hosts outside a bootstrap run (hactl status
// reads the LB hosts with it): known_hosts verified, unknown host keys refused, keys, agent, sudo and
// bastion as in a run. The caller closes it.
func Dialer(c *v1alpha1.Cluster, prompt Prompter) (*provision.Dialer, error) {
	return newDialer(c, false, prompt)
}

// BinaryArch returns the `uname -m` name of the architecture the ELF binary at path is built for
// ("x86_64", "aarch64", ...; "" for a machine hactl does not know). A file that is not an ELF
// binary (a macOS build, a script) is an error. `hactl backup schedule` checks the hactl binary it
// uploads with it.
func BinaryArch(path string) (string, error) { return binaryArch(path) }
