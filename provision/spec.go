package provision

import (
	"os"
	"slices"

	"github.com/hactl/hactl/api/v1alpha1"
)

// Prompter asks the user for a secret on a terminal (without echo) and returns it; prompt says
// what is asked ("sudo password for hactl: "). Nil when there is no terminal: then nothing is ever
// asked, and a missing secret is an error naming the environment variable to set.
type Prompter func(prompt string) ([]byte, error)

// SpecOptions say how a command reaches the hosts of a spec.
type SpecOptions struct {
	// AcceptNewHostKeys appends unknown SSH host keys to the known_hosts file (changed keys are
	// always refused; never for the bastion).
	AcceptNewHostKeys bool
	// OnNewHostKey is told of every key AcceptNewHostKeys added (Config.OnNewHostKey).
	OnNewHostKey func(host, hostPort, fingerprint string)
	// Prompt asks for a key passphrase or the sudo password when the spec names no environment
	// variable for it (nil: nothing is asked).
	Prompt Prompter
	// Getenv reads the environment variables the spec names for secrets (spec.ssh.passphraseEnv,
	// spec.ssh.sudo.passwordEnv); nil means os.Getenv.
	Getenv func(string) string
}

// ConfigFromSpec is the SSH client configuration of every command that reaches the spec's hosts,
// from spec.ssh: key files and agent, known_hosts, bastion, and the secrets — key passphrases and
// the sudo password — from the environment variables the spec names (never from the spec itself),
// else from o.Prompt (asked at most once per Dialer, only when a host needs it), else none (the
// Dialer then says what is missing).
func ConfigFromSpec(c *v1alpha1.Cluster, o SpecOptions) Config {
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	s := c.Spec.SSH
	var hostKeys []string
	var bastionFor map[string]*BastionConfig
	for _, h := range c.Spec.Hosts {
		if h.SSH == nil {
			continue
		}
		for _, f := range []string{h.SSH.IdentityFile, bastionKeyFile(h.SSH.Bastion)} {
			if f != "" && !slices.Contains(hostKeys, f) {
				hostKeys = append(hostKeys, f)
			}
		}
		if b := bastionConfig(h.SSH.Bastion, "bastion of "+h.Name); b != nil {
			if bastionFor == nil {
				bastionFor = map[string]*BastionConfig{}
			}
			bastionFor[h.Address] = b
		}
	}
	cfg := Config{
		User:              s.User,
		IdentityFile:      s.IdentityFile,
		IdentityFiles:     s.IdentityFiles,
		HostIdentityFiles: hostKeys,
		BastionFor:        bastionFor,
		Agent:             s.Agent,
		KnownHostsFile:    s.KnownHostsFile,
		AcceptNewHostKeys: o.AcceptNewHostKeys,
		OnNewHostKey:      o.OnNewHostKey,
		ConnectTimeout:    s.ConnectTimeout.Duration,
	}
	cfg.Bastion = bastionConfig(s.Bastion, "bastion")
	prompt := o.Prompt
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

// FromSpec returns the one Dialer of a command that reaches the spec's hosts: keys loaded, secrets
// asked and the bastion dialled once for all hosts (see ConfigFromSpec; errors as NewDialer's). The
// caller closes it.
func FromSpec(c *v1alpha1.Cluster, o SpecOptions) (*Dialer, error) {
	return NewDialer(ConfigFromSpec(c, o))
}

// TunnelFromSpec returns the Dialer that commands talking to etcd directly (status, backup) use to
// reach the members' client URLs through spec.ssh.bastion ([Dialer.DialTCP]), or nil and no error
// when the spec has no bastion. Unknown host keys are refused. The caller closes it.
func TunnelFromSpec(c *v1alpha1.Cluster, o SpecOptions) (*Dialer, error) {
	if !c.HasBastion() {
		return nil, nil
	}
	o.AcceptNewHostKeys = false
	return FromSpec(c, o)
}

// TargetOf is the SSH target of spec host h: its name, address and port (0: the Dialer's default),
// and its hosts[*].ssh overrides (user, key file; "" for spec.ssh's).
func TargetOf(h v1alpha1.Host) Target {
	t := Target{Name: h.Name, Address: v1alpha1.CanonicalAddress(h.Address), Port: h.Port}
	if h.SSH != nil {
		t.User, t.IdentityFile = h.SSH.User, h.SSH.IdentityFile
		t.Bastion = bastionConfig(h.SSH.Bastion, "bastion of "+h.Name)
	}
	return t
}

// bastionConfig is the BastionConfig of a spec bastion (defaulted), named name in messages; nil for
// nil.
func bastionConfig(b *v1alpha1.Bastion, name string) *BastionConfig {
	if b == nil {
		return nil
	}
	return &BastionConfig{
		Target:         Target{Name: name, Address: b.Address, Port: b.Port},
		User:           b.User,
		IdentityFile:   b.IdentityFile,
		KnownHostsFile: b.KnownHostsFile,
	}
}

func bastionKeyFile(b *v1alpha1.Bastion) string {
	if b == nil {
		return ""
	}
	return b.IdentityFile
}
