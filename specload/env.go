package specload

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/hactl/hactl/api/limits"
	"github.com/hactl/hactl/api/v1alpha1"
)

// ValidateEnvironment checks what the spec expects from hactl's environment, before any host is
// contacted; getenv is os.Getenv in production (an unset and an empty variable are the same here: an
// empty secret is no secret):
//   - spec.ssh.passphraseEnv and spec.ssh.sudo.passwordEnv, when set, name variables that are set;
//   - agent "required" needs SSH_AUTH_SOCK; agent "auto" without any key file (identityFile,
//     identityFiles) needs it too, or nothing could authenticate;
//   - spec.loadBalancer.auth.env, when set, names a variable that is set to a valid VRRP secret (at
//     most limits.MaxVRRPSecretLength characters, see v1alpha1.VRRPSecretProblem).
//
// Run it after Load (names are then valid); wrap the result with Cluster.ValidationError (exit 2).
// Messages name the variables, never their values.
func ValidateEnvironment(c *v1alpha1.Cluster, getenv func(string) string) field.ErrorList {
	var errs field.ErrorList
	s := c.Spec.SSH
	p := field.NewPath("spec", "ssh")
	unset := func(fp *field.Path, name, prompt string) {
		if name == "" || !v1alpha1.IsEnvName(name) || getenv(name) != "" {
			return
		}
		errs = append(errs, field.Invalid(fp, name, fmt.Sprintf("names the environment variable %s, which is not set (or is empty): export %s=... before running hactl, or remove the field to be prompted %s", name, name, prompt)))
	}
	unset(p.Child("passphraseEnv"), s.PassphraseEnv, "for the key passphrase")
	unset(p.Child("sudo", "passwordEnv"), s.Sudo.PasswordEnv, "for the sudo password (or to use passwordless sudo)")

	const sock = "SSH_AUTH_SOCK"
	startAgent := "start an agent holding your key (eval \"$(ssh-agent)\" && ssh-add ~/.ssh/id_ed25519) or forward one (ssh -A)"
	if getenv(sock) == "" {
		switch {
		case s.Agent == v1alpha1.AgentRequired:
			errs = append(errs, field.Invalid(p.Child("agent"), s.Agent, fmt.Sprintf("the agent is required but %s is not set: %s, or set agent: auto and a key file (identityFile)", sock, startAgent)))
		case s.Agent == v1alpha1.AgentAuto && s.IdentityFile == "" && len(s.IdentityFiles) == 0:
			errs = append(errs, field.Invalid(p.Child("agent"), s.Agent, fmt.Sprintf("no key file is set (identityFile, identityFiles) and %s is not set, so there is no way to log in: %s, or set spec.ssh.identityFile", sock, startAgent)))
		}
	}
	return append(errs, validateLBEnvironment(c, getenv)...)
}

// validateLBEnvironment is ValidateEnvironment's part for spec.loadBalancer.
func validateLBEnvironment(c *v1alpha1.Cluster, getenv func(string) string) field.ErrorList {
	lb := c.Spec.LoadBalancer
	if lb == nil || lb.Auth == nil || lb.Auth.Env == "" || !v1alpha1.IsEnvName(lb.Auth.Env) {
		return nil
	}
	name := lb.Auth.Env
	p := field.NewPath("spec", "loadBalancer", "auth", "env")
	s := getenv(name)
	if s == "" {
		return field.ErrorList{field.Invalid(p, name, fmt.Sprintf("names the environment variable %s, which is not set (or is empty): export %s=... (the VRRP auth secret, at most %d characters) before running hactl, or remove spec.loadBalancer.auth to run VRRP without authentication", name, name, limits.MaxVRRPSecretLength))}
	}
	if msg := v1alpha1.VRRPSecretProblem(s); msg != "" {
		return field.ErrorList{field.Invalid(p, name, fmt.Sprintf("the auth secret in %s %s", name, msg))}
	}
	return nil
}
