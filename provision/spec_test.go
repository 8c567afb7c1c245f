package provision

import (
	"testing"

	"github.com/hactl/hactl/api/v1alpha1"
)

// TestConfigFromSpec: spec.ssh maps onto provision.Config; secrets come from the environment variables the
// spec names, else from the prompt, else nowhere.
func TestConfigFromSpec(t *testing.T) {
	env := map[string]string{"KEY_PW": "k3y", "SUDO_PW": "sud0"}
	getenv := func(k string) string { return env[k] }
	var asked []string
	prompt := func(p string) ([]byte, error) { asked = append(asked, p); return []byte("typed"), nil }
	for _, tc := range []struct {
		name           string
		mutate         func(s *v1alpha1.SSH)
		prompt         Prompter
		passphrase     string // "" = no callback
		sudo           string // "" = no callback
		bastion        bool
		wantAskedCount int
	}{
		{name: "root with a key file: no secrets", mutate: func(*v1alpha1.SSH) {}},
		{name: "environment variables", mutate: func(s *v1alpha1.SSH) { s.PassphraseEnv, s.Sudo.PasswordEnv = "KEY_PW", "SUDO_PW" },
			prompt: prompt, passphrase: "k3y", sudo: "sud0"},
		{name: "prompt when no variable is named", mutate: func(*v1alpha1.SSH) {}, prompt: prompt,
			passphrase: "typed", sudo: "typed", wantAskedCount: 2},
		{name: "bastion", mutate: func(s *v1alpha1.SSH) {
			s.Bastion = &v1alpha1.Bastion{Address: "bastion.example", Port: 2222, User: "jump", KnownHostsFile: "/kh"}
		}, bastion: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asked = nil
			c := &v1alpha1.Cluster{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind}
			c.Metadata.Name = "lab"
			c.Spec.Hosts = []v1alpha1.Host{{Name: "cp-a", Address: "10.0.0.1", Zone: "a", Roles: []v1alpha1.Role{v1alpha1.RoleEtcd}}}
			v1alpha1.SetDefaults(c, v1alpha1.Dirs{})
			c.Spec.SSH.User, c.Spec.SSH.Agent, c.Spec.SSH.IdentityFiles = "hactl", "never", []string{"/k2"}
			tc.mutate(&c.Spec.SSH)
			cfg := ConfigFromSpec(c, SpecOptions{AcceptNewHostKeys: true, Prompt: tc.prompt, Getenv: getenv})
			if cfg.User != "hactl" || cfg.Agent != "never" || len(cfg.IdentityFiles) != 1 || !cfg.AcceptNewHostKeys {
				t.Errorf("config %+v", cfg)
			}
			got := func(f func() ([]byte, error)) string {
				b, err := f()
				if err != nil {
					t.Fatal(err)
				}
				return string(b)
			}
			if (cfg.Passphrase == nil) != (tc.passphrase == "") || (cfg.Passphrase != nil && got(func() ([]byte, error) { return cfg.Passphrase("/k") }) != tc.passphrase) {
				t.Errorf("passphrase callback: want %q", tc.passphrase)
			}
			if (cfg.SudoPassword == nil) != (tc.sudo == "") || (cfg.SudoPassword != nil && got(cfg.SudoPassword) != tc.sudo) {
				t.Errorf("sudo callback: want %q", tc.sudo)
			}
			if len(asked) != tc.wantAskedCount {
				t.Errorf("prompted %q", asked)
			}
			if (cfg.Bastion != nil) != tc.bastion {
				t.Fatalf("bastion %+v", cfg.Bastion)
			}
			if tc.bastion && (cfg.Bastion.Target.Address != "bastion.example" || cfg.Bastion.Target.Port != 2222 || cfg.Bastion.User != "jump" || cfg.Bastion.KnownHostsFile != "/kh") {
				t.Errorf("bastion %+v", cfg.Bastion)
			}
		})
	}
}
