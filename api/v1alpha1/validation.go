package v1alpha1

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/hactl/hactl/api/limits"
)

// Limits and reserved values checked by Validate (etcd's timing limits and the ports hactl reserves
// are in api/limits).
const (
	// SuggestedMaxQuotaBackendBytes is the backend quota etcd's docs give as the suggested maximum
	// (8 GiB); larger values draw a warning.
	SuggestedMaxQuotaBackendBytes = int64(8) << 30
	// MaxEtcdMembers is the largest member count hactl supports.
	MaxEtcdMembers = 5
)

// SupportedEtcdMinors returns the etcd major.minor versions hactl renders flags for ("3.5", "3.6").
func SupportedEtcdMinors() []string { return []string{"3.5", "3.6"} }

// Warning is a problem that does not stop hactl but the user should know about.
type Warning struct {
	// Field is the field path the warning is about (e.g. spec.hosts[1].zone).
	Field string
	// Message says what the risk is.
	Message string
}

// String renders "field: message".
func (w Warning) String() string {
	if w.Field == "" {
		return w.Message
	}
	return w.Field + ": " + w.Message
}

// ValidationError is returned by Decode (and specload's Load and Decode) when the spec breaks one or
// more rules. Error() gives one line per problem, "source:line: path: message", with the line of the
// field (or its nearest parent present in the document) when known. Its exit code is 2.
type ValidationError struct {
	// Source names the document (usually the file path); may be "".
	Source string
	// Errors are all the problems found.
	Errors field.ErrorList
	// lines maps field paths to lines in the source document.
	lines map[string]int
}

// NewValidationError wraps errs (e.g. from specload.ValidateLocalFiles) in a *ValidationError so
// callers get the same rendering and exit code as Decode's, without lines; it returns a nil error
// when errs is empty.
func NewValidationError(source string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return &ValidationError{Source: source, Errors: errs}
}

// Error returns one line per problem.
func (e *ValidationError) Error() string {
	out := make([]string, 0, len(e.Errors))
	for _, fe := range e.Errors {
		out = append(out, prefix(e.Source, e.Line(fe.Field))+fe.Error())
	}
	return strings.Join(out, "\n")
}

// Line returns the line of fieldPath in the source document, falling back to the nearest parent
// present there; 0 when unknown.
func (e *ValidationError) Line(fieldPath string) int {
	if e.lines == nil {
		return 0
	}
	for p := fieldPath; p != ""; p = parentPath(p) {
		if l, ok := e.lines[p]; ok {
			return l
		}
	}
	return 0
}

// parentPath drops the last ".name" or "[i]" of a field path.
func parentPath(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i < 0 {
		return ""
	}
	return p[:i]
}

// Unwrap returns the individual *field.Error values, for errors.As.
func (e *ValidationError) Unwrap() []error {
	out := make([]error, len(e.Errors))
	for i, fe := range e.Errors {
		out[i] = fe
	}
	return out
}

// ExitCode is 2: the input is invalid.
func (e *ValidationError) ExitCode() int { return 2 }

// FailoverRule proves that the VIP of a defaulted, otherwise valid spec.loadBalancer leaves an LB
// host whose HAProxy check fails: it returns the broken rule as a field error (at
// spec.loadBalancer.checkWeight, spec.loadBalancer.priorities or spec.loadBalancer), or nil when the
// VIP fails over. lb.FailoverRule is the implementation: the priorities, the check weight and the
// proof are lb's own (lb.Plan configures the same), and this package, a leaf, can't import lb.
type FailoverRule func(c *Cluster) *field.Error

// Validate checks a defaulted Cluster (SetDefaults first) and returns every broken rule, each with
// its field path and a message saying how to fix it, plus warnings. It is pure: it reads no files
// and no environment (specload's ValidateLocalFiles and ValidateEnvironment do).
//
// The errors start with the fields the document set to an explicit 0 where 0 would silently mean
// the default (see zeroDefault; only a decoded Cluster records them), then follow the spec's order.
//
// Rule sources: etcd member counts and zone spread follow raft's quorum arithmetic (quorum = n/2+1,
// tolerated failures = (n-1)/2; etcd FAQ "Why an odd number of cluster members?"); the timing limits
// are etcd's own (embed.Config.Validate: heartbeat > 0, election >= limits.MinElectionHeartbeatRatio
// x heartbeat, election <= limits.MaxElectionTimeout) with flags in whole milliseconds; retention
// parsing follows etcd's parseCompactionRetention. Environment variable names follow the POSIX
// shell's name rule.
//
// spec.loadBalancer (see loadBalancer in validation_lb.go): the VIP is an address with the prefix
// length of the LB hosts' network that holds every LB host's address and is no host's address;
// virtualRouterID 1-255; advertInterval whole seconds up to 255s (IPv4, VRRPv2) or 40s (IPv6,
// VRRPv3); auth names exactly one of a file and an environment variable (never the secret; none with
// an IPv6 VIP); at least 2 LB hosts (role lb, or the control-plane hosts when colocated) and at least
// one backend (role control-plane), no two at the same address:port; frontendPort differs from the
// apiserver's and etcd's ports on hosts running both, and from limits.LBLocalPort (HAProxy's local
// endpoint); priorities 1-254, distinct, for every LB host or none; checkWeight -253..253; nopreempt
// only with checkWeight 0 (the numbers are api/limits'). Once those hold, failover proves that a host
// whose HAProxy check fails never keeps the VIP while another host's check passes; a nil failover
// leaves that proof out (specload always passes lb.FailoverRule).
func Validate(c *Cluster, failover FailoverRule) (field.ErrorList, []Warning) {
	v := &validator{errs: explicitZeroErrors(c.explicitZeros), failover: failover}
	if c.APIVersion != APIVersion {
		v.errs = append(v.errs, field.Invalid(field.NewPath("apiVersion"), c.APIVersion, "set apiVersion: "+APIVersion))
	}
	if c.Kind != Kind {
		v.errs = append(v.errs, field.Invalid(field.NewPath("kind"), c.Kind, "set kind: "+Kind))
	}
	v.add(checkLabel(field.NewPath("metadata", "name"), c.Metadata.Name, "the cluster name", "prod"))
	spec := field.NewPath("spec")
	v.ssh(&c.Spec.SSH, spec.Child("ssh"))
	v.hosts(c.Spec.Hosts, spec.Child("hosts"), c.Spec.SSH.Port)
	v.etcd(&c.Spec.Etcd, spec.Child("etcd"))
	v.spares(c, spec.Child("etcd", "spares"))
	v.topology(c, spec.Child("hosts"))
	v.loadBalancer(c, spec.Child("loadBalancer"))
	v.kubernetes(c, spec.Child("kubernetes"))
	v.scheduler(c, spec.Child("scheduler"))
	v.backup(c.Spec.Backup, spec.Child("backup"))
	return v.errs, v.warns
}

// validator collects Validate's errors and warnings. Its methods walk the spec's sections in order
// (ssh, hosts, etcd, loadBalancer, kubernetes, scheduler, backup) and append, through add, what the
// leaf checks find: plain functions (checkLabel, checkPort, parseVIP, ...) that look at one value
// and return a *field.Error (nil when fine) or a field.ErrorList.
type validator struct {
	errs     field.ErrorList
	warns    []Warning
	failover FailoverRule // nil: the failover proof is left out
}

// add appends the problems the checks found, in order, skipping nils (a leaf check returns nil when
// its value is fine).
func (v *validator) add(errs ...*field.Error) { v.errs = append(v.errs, nonNil(errs...)...) }

// nonNil returns errs without its nil entries, in order (nil when none is left): for leaf checks
// that combine the results of several others.
func nonNil(errs ...*field.Error) field.ErrorList {
	var out field.ErrorList
	for _, e := range errs {
		if e != nil {
			out = append(out, e)
		}
	}
	return out
}

// warn records a warning at p, its message formatted from format and args.
func (v *validator) warn(p *field.Path, format string, args ...any) {
	v.warns = append(v.warns, Warning{Field: p.String(), Message: fmt.Sprintf(format, args...)})
}

// checkLabel checks the required field at p holding s, an RFC 1123 label (as Kubernetes names are:
// at most 63 characters of a-z, 0-9 and '-', starting and ending with a letter or digit); what names
// the field in the message and example is a valid value. It returns nil when s is one, else a
// Required (s empty) or Invalid error at p.
func checkLabel(p *field.Path, s, what, example string) *field.Error {
	if s == "" {
		return field.Required(p, fmt.Sprintf("set %s: a lowercase RFC 1123 label such as %q", what, example))
	}
	if !isDNS1123Label(s) {
		return field.Invalid(p, s, fmt.Sprintf("%s must be a lowercase RFC 1123 label: at most 63 characters of a-z, 0-9 and '-', starting and ending with a letter or digit, e.g. %q", what, example))
	}
	return nil
}

func validPort(port int) bool { return port >= 1 && port <= 65535 }

// checkPort checks the TCP port at p (what names it in the message): nil when it is 1-65535, else an
// Invalid error at p.
func checkPort(p *field.Path, port int, what string) *field.Error {
	if !validPort(port) {
		return field.Invalid(p, port, fmt.Sprintf("%s must be a TCP port between 1 and 65535", what))
	}
	return nil
}

// checkPositive checks the duration at p (example is a valid value): nil when it is > 0, else an
// Invalid error at p.
func checkPositive(p *field.Path, d Duration, example string) *field.Error {
	if d.Duration <= 0 {
		return field.Invalid(p, d.Duration.String(), "must be a positive duration, e.g. "+example)
	}
	return nil
}

func (v *validator) ssh(s *SSH, p *field.Path) {
	if strings.TrimSpace(s.User) == "" {
		v.add(field.Required(p.Child("user"), "set the remote login user, e.g. root"))
	}
	v.add(checkPort(p.Child("port"), s.Port, "the default SSH port"))

	// Authentication: key files and/or the agent.
	if modes := agentModes(); !slices.Contains(modes, s.Agent) {
		v.add(field.NotSupported(p.Child("agent"), s.Agent, modes))
	}
	if s.IdentityFile == "" && len(s.IdentityFiles) == 0 && s.Agent == AgentNever {
		v.add(field.Required(p.Child("identityFile"), "no SSH authentication method: set identityFile (a local private key, e.g. ~/.ssh/id_ed25519), "+
			"identityFiles (several key files tried in order), or agent: auto or required (the keys of the ssh-agent at SSH_AUTH_SOCK); agent is \"never\""))
	}
	v.add(checkKeyFile(p.Child("identityFile"), s.IdentityFile))
	seen := map[string]string{}
	if s.IdentityFile != "" {
		seen[s.IdentityFile] = p.Child("identityFile").String()
	}
	for i, f := range s.IdentityFiles {
		fp := p.Child("identityFiles").Index(i)
		if f == "" {
			v.add(field.Required(fp, "an empty entry: set the path of a local private key file, e.g. ~/.ssh/id_rsa, or remove the entry"))
			continue
		}
		if e := checkKeyFile(fp, f); e != nil {
			v.add(e)
			continue
		}
		if first, dup := seen[f]; dup {
			e := field.Duplicate(fp, f)
			e.Detail = "already listed as " + first + "; list each key file once"
			v.add(e)
			continue
		}
		seen[f] = fp.String()
	}
	v.add(checkEnvName(p.Child("passphraseEnv"), s.PassphraseEnv, "HACTL_SSH_PASSPHRASE", "key passphrase"))
	if IsEnvName(s.PassphraseEnv) && s.IdentityFile == "" && len(s.IdentityFiles) == 0 && (s.Bastion == nil || s.Bastion.IdentityFile == "") {
		v.warn(p.Child("passphraseEnv"), "no key file is set (identityFile, identityFiles, bastion.identityFile), so the passphrase is never used; agent keys need none")
	}

	if s.KnownHostsFile == "" {
		v.add(field.Required(p.Child("knownHostsFile"), "set the local known_hosts file, e.g. ~/.ssh/known_hosts"))
	}
	v.add(checkPositive(p.Child("connectTimeout"), s.ConnectTimeout, "10s"),
		checkPositive(p.Child("commandTimeout"), s.CommandTimeout, "2m"))
	if s.MaxParallel < 1 {
		v.add(field.Invalid(p.Child("maxParallel"), s.MaxParallel, "must be at least 1 (the number of hosts worked on at once), e.g. 10"))
	}

	sp := p.Child("sudo", "passwordEnv")
	v.add(checkEnvName(sp, s.Sudo.PasswordEnv, "HACTL_SUDO_PASSWORD", "sudo password"))
	if IsEnvName(s.Sudo.PasswordEnv) && s.User == DefaultSSHUser {
		v.warn(sp, "spec.ssh.user is root, which needs no sudo: the sudo password is never used")
	}

	if s.Bastion != nil {
		v.bastion(s.Bastion, p.Child("bastion"))
	}
}

func agentModes() []string { return []string{AgentAuto, AgentNever, AgentRequired} }

// checkKeyFile checks the local key file path f at p for pasted key material: nil when the path is
// usable ("" is: required-ness is checked by the caller), else an Invalid error at p that never
// echoes f.
func checkKeyFile(p *field.Path, f string) *field.Error {
	if looksLikeSecret(f) || strings.ContainsAny(f, "\n\r") {
		// Never echo it: it is probably the key itself pasted in.
		return field.Invalid(p, "(value not shown)", "looks like the contents of a private key, not a file path: set the path of the key file, e.g. ~/.ssh/id_ed25519, and keep key material out of the spec")
	}
	return nil
}

// MaxEnvNameLength bounds the environment variable names the spec may hold (passphraseEnv,
// sudo.passwordEnv, loadBalancer.auth.env, backup credentials): real names are short, so a longer
// value is most likely a secret pasted in.
const MaxEnvNameLength = 64

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// IsEnvName reports whether s is a portable environment variable name: at most MaxEnvNameLength
// letters, digits and '_', not starting with a digit (a "name" in POSIX.1-2017's Base Definitions).
// Validate refuses any other value where the spec names a variable, so readers of the environment
// look up only names for which it holds.
func IsEnvName(s string) bool { return len(s) <= MaxEnvNameLength && envNameRE.MatchString(s) }

// checkEnvName checks the field at p naming an environment variable that holds a secret ("" = not
// used; example is a valid name, what names the secret): nil when name is "" or an IsEnvName name,
// else an Invalid error at p. The value is only echoed when it is clearly a variable reference
// ("$NAME"): anything else that is not a name may be the secret itself.
func checkEnvName(p *field.Path, name, example, what string) *field.Error {
	if name == "" || IsEnvName(name) {
		return nil
	}
	ref := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(name, "$"), "{"), "}")
	switch {
	case strings.HasPrefix(name, "$") && IsEnvName(ref):
		return field.Invalid(p, name, fmt.Sprintf("write the variable's name without $ or braces: %s (hactl reads the %s from it)", ref, what))
	case len(name) > MaxEnvNameLength || strings.ContainsFunc(name, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) ||
		strings.ContainsFunc(name, func(r rune) bool {
			return !strings.ContainsRune("-._", r) && (unicode.IsPunct(r) || unicode.IsSymbol(r))
		}):
		return field.Invalid(p, "(value not shown)", fmt.Sprintf("looks like a secret, not an environment variable name: name the environment variable, don't put the secret here, e.g. %s, and export %s=... before running hactl (if this was the real %s, change it: the spec is not a safe place)", example, example, what))
	default:
		return field.Invalid(p, "(value not shown)", fmt.Sprintf("must be an environment variable name (letters, digits and '_', not starting with a digit, at most %d characters), e.g. %s; it names the variable holding the %s, never the secret itself", MaxEnvNameLength, example, what))
	}
}

// bastion checks spec.ssh.bastion (defaulted).
func (v *validator) bastion(b *Bastion, p *field.Path) {
	if b.Address == "" {
		v.add(field.Required(p.Child("address"), "a bastion needs an address: its IP address or DNS name as reachable from this machine, e.g. bastion.example.com; or remove spec.ssh.bastion to reach the hosts directly"))
	} else {
		v.add(checkDialAddress(p.Child("address"), b.Address, "the bastion", "e.g. 203.0.113.10, 2001:db8::10 or bastion.example.com", "set the port in "+p.Child("port").String()))
	}
	v.add(checkPort(p.Child("port"), b.Port, "the bastion's SSH port"))
	if strings.TrimSpace(b.User) == "" {
		v.add(field.Required(p.Child("user"), "set the bastion's login user, or leave it out to use spec.ssh.user"))
	}
	v.add(checkKeyFile(p.Child("identityFile"), b.IdentityFile))
	if b.KnownHostsFile == "" {
		v.add(field.Required(p.Child("knownHostsFile"), "set the local known_hosts file holding the bastion's host key, e.g. ~/.ssh/known_hosts"))
	}
}

func (v *validator) hosts(hosts []Host, p *field.Path, sshPort int) {
	if len(hosts) == 0 {
		v.add(field.Required(p, "list at least one host (3 hosts with role etcd in 3 zones for high availability)"))
		return
	}
	names := map[string]int{}
	addrs := map[string]int{}  // address or privateAddress → host index
	privs := map[string]bool{} // the privateAddresses among them
	for i, h := range hosts {
		hp := p.Index(i)
		v.add(checkLabel(hp.Child("name"), h.Name, "the host name (also the etcd member name)", "cp-a"))
		if j, dup := names[h.Name]; dup && h.Name != "" {
			e := field.Duplicate(hp.Child("name"), h.Name)
			e.Detail = fmt.Sprintf("already used by %s; host names must be unique (they are the etcd member names)", p.Index(j))
			v.add(e)
		} else if h.Name != "" {
			names[h.Name] = i
		}
		if e := checkAddress(hp.Child("address"), h.Address); e != nil {
			v.add(e)
		} else if j, dup := addrs[h.Address]; dup {
			e := field.Duplicate(hp.Child("address"), h.Address)
			e.Detail = fmt.Sprintf("same address as %s (%s) once canonicalised; every host needs its own address", p.Index(j), hosts[j].Name)
			if privs[h.Address] {
				e.Detail = fmt.Sprintf("the privateAddress of %s (%s) too; every host needs its own addresses", hosts[j].Name, p.Index(j))
			}
			v.add(e)
		} else {
			addrs[h.Address] = i
		}
		if pa := h.PrivateAddress; pa != "" {
			pp := hp.Child("privateAddress")
			if pa == h.Address {
				v.add(field.Invalid(pp, pa, "is the host's address too: leave privateAddress out when the host has one address"))
			} else if e := checkAddress(pp, pa); e != nil {
				v.add(e)
			} else if j, dup := addrs[pa]; dup {
				e := field.Duplicate(pp, pa)
				e.Detail = fmt.Sprintf("an address of %s (%s) too; every host needs its own addresses", hosts[j].Name, p.Index(j))
				v.add(e)
			} else {
				addrs[pa], privs[pa] = i, true
			}
		}
		if h.Port != sshPort || validPort(sshPort) { // an inherited bad spec.ssh.port is reported once
			v.add(checkPort(hp.Child("port"), h.Port, "the SSH port"))
		}
		if hs := h.SSH; hs != nil {
			sp := hp.Child("ssh")
			if hs.Port != 0 && hs.Port != h.Port {
				v.add(field.Invalid(sp.Child("port"), hs.Port, fmt.Sprintf("differs from %s (%d): both set this host's SSH port; keep one of the two", hp.Child("port"), h.Port)))
			}
			if hs.User != "" && (strings.TrimSpace(hs.User) != hs.User || strings.ContainsAny(hs.User, " \t\n@:")) {
				v.add(field.Invalid(sp.Child("user"), hs.User, "must be a login name without spaces, '@' or ':', e.g. admin; leave it out to use spec.ssh.user"))
			}
			v.add(checkKeyFile(sp.Child("identityFile"), hs.IdentityFile))
			if hs.Bastion != nil {
				v.bastion(hs.Bastion, sp.Child("bastion"))
			}
		}
		v.add(checkLabel(hp.Child("zone"), h.Zone, "the availability zone", "az-a"))
		v.add(checkRoles(hp.Child("roles"), h.Roles)...)
	}
	if len(hosts) > 1 {
		for i, h := range hosts {
			if ip, err := netip.ParseAddr(h.Address); err == nil && ip.IsLoopback() {
				v.add(field.Invalid(p.Index(i).Child("address"), h.Address, "a loopback address can't identify one of several hosts: from hactl it is this machine, and in etcd peer URLs each member would reach itself; write the host's own network address"))
			}
			if ip, err := netip.ParseAddr(h.PrivateAddress); err == nil && ip.IsLoopback() {
				v.add(field.Invalid(p.Index(i).Child("privateAddress"), h.PrivateAddress, "a loopback address can't identify one of several hosts: in etcd peer URLs each member would reach itself; write the host's address on the cluster network"))
			}
		}
	}
}

// checkDialAddress checks the address a at ap that hactl or the nodes dial as written, what naming
// the machine (e.g. "the bastion") and example giving valid values: an IP literal without zone (it
// is looked up as written) that names one unicast machine, or a DNS name, without port or brackets
// (portHint says where the port goes). It returns nil when the address is usable, else a Required
// (a empty) or Invalid error at ap.
func checkDialAddress(ap *field.Path, a, what, example, portHint string) *field.Error {
	if a == "" {
		return field.Required(ap, fmt.Sprintf("set the address of %s: its IP address or DNS name, %s", what, example))
	}
	ip, err := netip.ParseAddr(a)
	if err != nil {
		if isDNSName(a) {
			return nil
		}
		hint := fmt.Sprintf("must be an IP address or a DNS name (%s), without a port or brackets", example)
		if _, port, err := net.SplitHostPort(a); err == nil && port != "" {
			hint += ": " + portHint
		}
		return field.Invalid(ap, a, hint)
	}
	switch {
	case ip.Zone() != "":
		return field.Invalid(ap, a, fmt.Sprintf("an IPv6 zone index (%%%s) can't be used for %s: it names a network interface of this machine, and the address is dialled and checked as written; use a global or unique-local address or a DNS name", ip.Zone(), what))
	case ip.Is6() && ip.IsLinkLocalUnicast():
		return field.Invalid(ap, a, fmt.Sprintf("an IPv6 link-local address can't be dialled without a zone index, which the address of %s can't carry; use a global or unique-local address or a DNS name", what))
	case ip.IsUnspecified(), ip.IsMulticast(), ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return field.Invalid(ap, a, fmt.Sprintf("can't identify one machine: write the unicast IP address or the DNS name of %s", what))
	}
	return nil
}

// checkAddress checks the host address a at p: nil when it is a usable IP literal (one unicast
// address without zone, as etcd peer URLs and certificate SANs need), else a Required (a empty) or
// Invalid error at p.
func checkAddress(p *field.Path, a string) *field.Error {
	if a == "" {
		return field.Required(p, "set the host's IP address (IPv4 or IPv6 literal)")
	}
	ip, err := netip.ParseAddr(a)
	if err != nil {
		if isDNSName(a) {
			return field.Invalid(p, a, "looks like a DNS name; write the host's IP address instead: etcd peer URLs and certificate SANs use the IP, so it must not depend on name resolution")
		}
		return field.Invalid(p, a, "must be an IPv4 (e.g. 10.0.0.11) or IPv6 (e.g. 2001:db8::11) literal, without port or brackets")
	}
	switch {
	case ip.Zone() != "":
		return field.Invalid(p, a, fmt.Sprintf("an IPv6 zone index (%%%s) is not allowed: it can't appear in etcd peer URLs or certificate SANs; use a global or unique-local address of the host", ip.Zone()))
	case ip.IsUnspecified():
		return field.Invalid(p, a, "the unspecified address can't reach a host; write the host's own IP address")
	case ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return field.Invalid(p, a, "the limited broadcast address can't identify a host; write the host's own unicast IP address")
	case ip.IsMulticast():
		return field.Invalid(p, a, "a multicast address can't identify a host; write the host's own unicast IP address")
	case ip.Is6() && ip.IsLinkLocalUnicast():
		return field.Invalid(p, a, "an IPv6 link-local address needs a zone index, which etcd URLs and certificate SANs can't carry; use a global or unique-local address of the host")
	}
	return nil
}

// spares checks spec.etcd.spares: each a name, address, port and zone, the name and address used
// by no host and no other spare.
func (v *validator) spares(c *Cluster, p *field.Path) {
	names := map[string]string{}
	addrs := map[string]string{}
	for i, h := range c.Spec.Hosts {
		names[h.Name] = field.NewPath("spec", "hosts").Index(i).String()
		addrs[h.Address] = names[h.Name]
	}
	for i, h := range c.Spec.Etcd.Spares {
		hp := p.Index(i)
		v.add(checkLabel(hp.Child("name"), h.Name, "the spare's name (the etcd member name once it receives one)", "spare-a"))
		if at, dup := names[h.Name]; dup && h.Name != "" {
			e := field.Duplicate(hp.Child("name"), h.Name)
			e.Detail = fmt.Sprintf("already used by %s; a spare is a host that runs no member yet, with a name of its own", at)
			if strings.HasPrefix(at, "spec.hosts") && slices.ContainsFunc(c.Spec.Hosts, func(x Host) bool { return x.Name == h.Name && x.HasRole(RoleEtcd) }) {
				e.Detail = fmt.Sprintf("%s (%s) is already an etcd member: a spare must be a host without a member, listed only here", h.Name, at)
			}
			v.add(e)
		} else if h.Name != "" {
			names[h.Name] = hp.String()
		}
		if e := checkAddress(hp.Child("address"), h.Address); e != nil {
			v.add(e)
		} else if at, dup := addrs[h.Address]; dup {
			e := field.Duplicate(hp.Child("address"), h.Address)
			e.Detail = fmt.Sprintf("same address as %s once canonicalised; a spare is a machine of its own", at)
			v.add(e)
		} else {
			addrs[h.Address] = hp.String()
		}
		if h.Port != c.Spec.SSH.Port || validPort(c.Spec.SSH.Port) {
			v.add(checkPort(hp.Child("port"), h.Port, "the SSH port"))
		}
		v.add(checkLabel(hp.Child("zone"), h.Zone, "the availability zone (a heal prefers a spare in the lost member's zone)", "az-a"))
	}
}

func validRoles() []Role { return []Role{RoleEtcd, RoleControlPlane, RoleLB, RoleWorker} }

// checkRoles checks a host's roles at p: at least one, each of validRoles, none twice. It returns
// the problems in list order (a Required error at p when there is no role; NotSupported or Duplicate
// at p[i]), nil when there are none.
func checkRoles(p *field.Path, roles []Role) field.ErrorList {
	if len(roles) == 0 {
		return field.ErrorList{field.Required(p, "give the host at least one role: etcd, control-plane, worker or lb")}
	}
	var errs field.ErrorList
	seen := map[Role]bool{}
	for i, r := range roles {
		rp := p.Index(i)
		switch {
		case !slices.Contains(validRoles(), r):
			errs = append(errs, field.NotSupported(rp, string(r), validRoles()))
		case seen[r]:
			e := field.Duplicate(rp, string(r))
			e.Detail = "list each role once"
			errs = append(errs, e)
		}
		seen[r] = true
	}
	return errs
}

var (
	dns1123LabelRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dnsNameRE      = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*\.?$`)
)

// isDNS1123Label reports whether s is a lowercase RFC 1123 label (as Kubernetes names are).
func isDNS1123Label(s string) bool { return len(s) <= 63 && dns1123LabelRE.MatchString(s) }

// isDNSName reports whether s looks like a host name (and so is not a mistyped IP literal). A
// dotted all-digit string such as "10.0.0.256" is a bad IP, not a name.
func isDNSName(s string) bool {
	if len(s) > 253 || !dnsNameRE.MatchString(s) {
		return false
	}
	return strings.ContainsFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
}

var versionRE = regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)

func (v *validator) etcd(e *Etcd, p *field.Path) {
	// version
	vp := p.Child("version")
	if e.Version == "" {
		v.add(field.Required(vp, "set the etcd version the binaries report, e.g. v3.6.16"))
	} else if sv := semver(e.Version); sv == nil { // semver's rules: no leading zeros
		v.add(field.Invalid(vp, e.Version, "must look like vX.Y.Z, e.g. v3.6.16"))
	} else if mm, minors := minorOf(sv), SupportedEtcdMinors(); !slices.Contains(minors, mm) {
		v.add(field.Invalid(vp, e.Version, fmt.Sprintf("etcd %s is not supported: hactl renders flags for etcd %s; use e.g. v3.6.16", mm, strings.Join(minors, " or "))))
	}

	// binaries or download: exactly one
	switch {
	case e.Download != nil && e.Binaries != (EtcdBinaries{}):
		v.add(field.Forbidden(p.Child("download"), "spec.etcd.binaries is set too: set exactly one of binaries (local files uploaded to the hosts, for air-gapped sites) and download (a release tarball each host fetches from a URL and checks against its sha256); remove the other"))
	case e.Download == nil && e.Binaries.Etcd == "":
		v.add(field.Required(p.Child("binaries", "etcd"), "set the local path of the etcd binary to upload (etcdctl and etcdutl are optional), or instead set download: {url, sha256} to have each host fetch the etcd release tarball"))
	}
	if e.Download != nil {
		v.add(checkDownload(p.Child("download"), e.Download.URL, e.Download.SHA256,
			"set the http(s) URL of the etcd release tarball, e.g. https://github.com/etcd-io/etcd/releases/download/v3.6.16/etcd-v3.6.16-linux-amd64.tar.gz, or an internal mirror's",
			"the tarball", "the release's SHA256SUMS file or `sha256sum <tarball>`")...)
	}

	// dataDir: a remote, Linux path
	dp := p.Child("dataDir")
	switch {
	case !path.IsAbs(e.DataDir):
		v.add(field.Invalid(dp, e.DataDir, "must be an absolute path on the member hosts (remote paths are not resolved against anything), e.g. /var/lib/etcd"))
	case e.DataDir == "/":
		v.add(field.Invalid(dp, e.DataDir, "must not be the root directory; use a dedicated directory such as /var/lib/etcd"))
	case strings.ContainsFunc(e.DataDir, unicode.IsControl):
		v.add(field.Invalid(dp, e.DataDir, "must not contain control characters such as newlines or tabs (it becomes a flag of etcd's systemd unit); use a plain path such as /var/lib/etcd"))
	case path.Clean(e.DataDir) != e.DataDir:
		v.add(field.Invalid(dp, e.DataDir, fmt.Sprintf("must be a clean path (no trailing '/', '.', '..' or '//'); write %s", path.Clean(e.DataDir))))
	default:
		if msg := reservedDataDir(e.DataDir); msg != "" {
			v.add(field.Invalid(dp, e.DataDir, msg+"; use a dedicated directory such as /var/lib/etcd"))
		}
	}

	// ports
	v.add(checkPort(p.Child("clientPort"), e.ClientPort, "the etcd client port"),
		checkPort(p.Child("peerPort"), e.PeerPort, "the etcd peer port"))
	if e.ClientPort == e.PeerPort {
		v.add(field.Invalid(p.Child("peerPort"), e.PeerPort, fmt.Sprintf("must differ from clientPort (%d): etcd listens on both; the usual pair is 2379/2380", e.ClientPort)))
	}
	for _, x := range []struct {
		name string
		port int
	}{{"clientPort", e.ClientPort}, {"peerPort", e.PeerPort}} {
		if x.port == limits.EtcdMetricsPort {
			v.add(field.Invalid(p.Child(x.name), x.port, fmt.Sprintf("port %d is reserved: hactl serves etcd metrics on 127.0.0.1:%d; pick another port", limits.EtcdMetricsPort, limits.EtcdMetricsPort)))
		}
	}

	switch e.MetricsAddress {
	case "":
	case MetricsAddressHost, "0.0.0.0", "::":
		v.warn(p.Child("metricsAddress"), "etcd serves /metrics and /health on port %d beyond loopback, over plain HTTP without authentication: allow that port from your scrapers only", limits.EtcdMetricsPort)
	default:
		v.add(field.NotSupported(p.Child("metricsAddress"), e.MetricsAddress, []string{"", MetricsAddressHost, "0.0.0.0", "::"}))
	}

	// timings
	hb, el := e.HeartbeatInterval.Duration, e.ElectionTimeout.Duration
	hp, ep := p.Child("heartbeatInterval"), p.Child("electionTimeout")
	hbOK := false
	switch {
	case hb <= 0:
		v.add(field.Invalid(hp, hb.String(), "must be > 0, e.g. 100ms (etcd's default)"))
	case hb%time.Millisecond != 0:
		v.add(field.Invalid(hp, hb.String(), "must be whole milliseconds (etcd takes --heartbeat-interval in ms), e.g. 100ms"))
	default:
		hbOK = true
	}
	switch {
	case el <= 0:
		v.add(field.Invalid(ep, el.String(), "must be > 0, e.g. 1000ms (etcd's default)"))
	case el%time.Millisecond != 0:
		v.add(field.Invalid(ep, el.String(), "must be whole milliseconds (etcd takes --election-timeout in ms), e.g. 1000ms"))
	case el > limits.MaxElectionTimeout:
		v.add(field.Invalid(ep, el.String(), fmt.Sprintf("must be at most %dms (etcd refuses longer election timeouts); etcd's tuning guide suggests about %d x the heartbeat, e.g. %dms",
			limits.MaxElectionTimeout.Milliseconds(), limits.SuggestedElectionHeartbeatRatio, DefaultElectionTimeout.Milliseconds())))
	case hbOK && el < limits.MinElectionHeartbeatRatio*hb:
		v.add(field.Invalid(ep, el.String(), fmt.Sprintf("must be at least %d x heartbeatInterval (%v) = %v, or etcd refuses to start; etcd's tuning guide suggests about %d x, e.g. %v",
			limits.MinElectionHeartbeatRatio, hb, limits.MinElectionHeartbeatRatio*hb, limits.SuggestedElectionHeartbeatRatio, limits.SuggestedElectionHeartbeatRatio*hb)))
	}

	// quota
	qp := p.Child("quotaBackendBytes")
	switch {
	case e.QuotaBackendBytes <= 0:
		v.add(field.Invalid(qp, e.QuotaBackendBytes, "must be a positive number of bytes, e.g. 2147483648 (2 GiB, etcd's default)"))
	case e.QuotaBackendBytes > SuggestedMaxQuotaBackendBytes:
		v.warn(qp, "%d bytes is above 8 GiB (8589934592), etcd's suggested maximum backend size: larger databases make snapshots, defragmentation and member recovery slow", e.QuotaBackendBytes)
	}

	// auto compaction
	ap := p.Child("autoCompaction")
	ac := e.AutoCompaction
	rp := ap.Child("retention")
	switch ac.Mode {
	case CompactionPeriodic:
		if n, err := strconv.Atoi(ac.Retention); err == nil {
			if n <= 0 {
				v.add(field.Invalid(rp, ac.Retention, "periodic retention must be > 0: a duration such as \"1h\" or a whole number of hours such as \"1\""))
			}
		} else if d, err := time.ParseDuration(ac.Retention); err != nil {
			v.add(field.Invalid(rp, ac.Retention, "periodic retention must be a duration such as \"1h\" or \"30m\", or a whole number of hours such as \"1\" (as etcd accepts)"))
		} else if d <= 0 {
			v.add(field.Invalid(rp, ac.Retention, "periodic retention must be > 0, e.g. \"1h\""))
		}
	case CompactionRevision:
		if ac.Retention == "" {
			v.add(field.Required(rp, "revision mode needs the number of revisions to keep, e.g. \"1000\""))
		} else if n, err := strconv.ParseInt(ac.Retention, 10, 64); err != nil || n < 0 {
			v.add(field.Invalid(rp, ac.Retention, "revision retention must be a non-negative whole number of revisions to keep, e.g. \"1000\""))
		}
	default:
		v.add(field.NotSupported(ap.Child("mode"), ac.Mode, []string{CompactionPeriodic, CompactionRevision}))
	}
}

// checkDownload checks a download at p (spec.etcd.download, spec.kubernetes.download.*; defaulted:
// sha256 lower-cased): its url u by checkDownloadURL's rules (missingURL is the message when it is
// empty), then its sha256 h by checkSHA256's (what names the file, source where its digest is
// found). It returns the problems in that order (at p.url, then p.sha256), nil when there are none.
func checkDownload(p *field.Path, u, h, missingURL, what, source string) field.ErrorList {
	up := p.Child("url")
	var urlErr *field.Error
	if u == "" {
		urlErr = field.Required(up, missingURL)
	} else if msg, shown := checkDownloadURL(u); msg != "" {
		urlErr = field.Invalid(up, shown, msg)
	}
	return nonNil(urlErr, checkSHA256(p.Child("sha256"), h, what, source))
}

// checkSHA256 checks the mandatory sha256 h of a download at hp (what names the file in messages,
// source where its digest is found): nil when h is 64 hex digits, else a Required (h empty) or
// Invalid error at hp.
func checkSHA256(hp *field.Path, h, what, source string) *field.Error {
	switch {
	case h == "":
		return field.Required(hp, fmt.Sprintf("URL without sha256: set %s's sha256 (64 hex digits, from %s); hactl never installs a download it can't verify", what, source))
	case strings.HasPrefix(h, "sha256:") && isSHA256Hex(strings.TrimPrefix(h, "sha256:")):
		return field.Invalid(hp, h, "write the 64 hex digits without the \"sha256:\" prefix")
	case strings.ContainsFunc(h, unicode.IsSpace):
		return field.Invalid(hp, h, "must be only the 64 hex digits of the digest (sha256sum prints the file name after it: leave that out)")
	case len(h) != sha256HexLen:
		return field.Invalid(hp, h, fmt.Sprintf("sha256 of the wrong length: %d characters, want %d hex digits (a sha256 is 32 bytes; sha1 is 40 digits, sha512 128)", len(h), sha256HexLen))
	case !isSHA256Hex(h):
		return field.Invalid(hp, h, "must be hex digits only (0-9, a-f)")
	}
	return nil
}

// sha256HexLen is the length of a sha256 digest written in hex.
const sha256HexLen = 64

var sha256RE = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)

func isSHA256Hex(s string) bool { return sha256RE.MatchString(s) }

// checkDownloadURL says what is wrong with a download URL ("" when nothing) and gives the value
// safe to show in the message: a URL carrying credentials is shown with them removed.
//
// Rules: net/url parses it; the scheme is http or https (the sha256, not the transport, is what is
// trusted, so plain http to a mirror is fine); a host is present; no userinfo (the URL is in the
// debug log and on the hosts' command lines, so credentials there would leak); no IPv6 zone index
// (it names an interface of one machine, and every host fetches the URL); no white space or control
// characters (percent-encode them).
func checkDownloadURL(raw string) (msg, shown string) {
	// Until the URL is parsed, an "@" may be the end of credentials: don't echo it then.
	unparsed := raw
	if strings.Contains(raw, "@") {
		unparsed = "(value not shown: it may hold credentials)"
	}
	if strings.ContainsFunc(raw, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		return "must not contain white space or control characters; percent-encode them (a space is %20)", unparsed
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Error quotes the URL, which may hold credentials: give only the cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Sprintf("is not a valid URL (%v); write an http(s) URL such as https://mirror.example.com/etcd/etcd-v3.6.16-linux-amd64.tar.gz", err), unparsed
	}
	if u.RawQuery != "" {
		q := *u
		q.RawQuery = ""
		return fmt.Sprintf("must not have a query string (presigned URLs carry their token there): the URL is written to the debug log and to the hosts' commands; serve the file at %s without one — its sha256 is what is trusted", &q), "(value not shown: its query string may hold credentials)"
	}
	if u.User != nil {
		u.User = nil
		return fmt.Sprintf("must not contain credentials (user:password@): the URL is written to the debug log and to the hosts' commands; the URL without them is %s: serve the tarball without authentication (its sha256 is checked) or from a mirror inside your network", u), "(value not shown: it contains credentials)"
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Sprintf("must be an http or https URL, got scheme %q; e.g. https://github.com/etcd-io/etcd/releases/download/v3.6.16/etcd-v3.6.16-linux-amd64.tar.gz", u.Scheme), raw
	case u.Hostname() == "":
		return "must name a host, e.g. https://mirror.example.com/etcd/etcd-v3.6.16-linux-amd64.tar.gz", raw
	}
	if ip, err := netip.ParseAddr(u.Hostname()); err == nil && ip.Zone() != "" {
		return fmt.Sprintf("an IPv6 zone index (%%%s) can't be used: it names a network interface of one machine, and every host fetches this URL; use a global or unique-local address or a DNS name", ip.Zone()), raw
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || !validPort(n) {
			return fmt.Sprintf("port %s must be between 1 and 65535", port), raw
		}
	}
	return "", raw
}

// volatileTrees returns the remote trees whose content does not survive a reboot or is pruned by
// systemd-tmpfiles (tmpfiles.d(5): /tmp and /var/tmp are cleaned by age), or that are not real
// directories at all: an etcd data dir there loses the member's data.
func volatileTrees() []string {
	return []string{"/tmp", "/var/tmp", "/run", "/var/run", "/dev", "/proc", "/sys"}
}

// systemTrees returns the trees holding the OS and hactl's own files (binaries in /usr/local/bin,
// certificates in /etc/etcd/pki, the unit in /etc/systemd/system, the marker in /etc/hactl): etcd's
// data must not live there, and hactl makes the data dir mode 0700, which would lock other users out
// of them.
func systemTrees() []string {
	return []string{"/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot"}
}

// systemDirs returns the shared directories that may hold a data dir but must not be one.
func systemDirs() []string {
	return []string{"/var", "/var/lib", "/var/log", "/var/cache", "/var/spool", "/var/opt", "/home", "/root",
		"/opt", "/srv", "/mnt", "/media"}
}

// reservedDataDir says why dir (absolute and clean) can't be an etcd data dir, or "".
func reservedDataDir(dir string) string {
	under := func(tree string) bool { return dir == tree || strings.HasPrefix(dir, tree+"/") }
	for _, t := range volatileTrees() {
		if under(t) {
			return fmt.Sprintf("is under %s, which is not persistent storage (cleared at reboot or pruned by systemd-tmpfiles): the member would lose its data", t)
		}
	}
	for _, t := range systemTrees() {
		if under(t) {
			return fmt.Sprintf("is under %s, which holds the operating system and the files hactl installs, not data", t)
		}
	}
	if slices.Contains(systemDirs(), dir) {
		return fmt.Sprintf("%s is a shared system directory: hactl makes the data dir mode 0700 and etcd owns its content", dir)
	}
	return ""
}

// topology checks the etcd member count and how members spread over zones.
func (v *validator) topology(c *Cluster, p *field.Path) {
	var members []int // indexes into spec.hosts
	for i, h := range c.Spec.Hosts {
		if h.HasRole(RoleEtcd) {
			members = append(members, i)
		}
	}
	n := len(members)
	quorum := Quorum(n)
	switch {
	case len(c.Spec.Hosts) == 0:
		return // already reported
	case n == 0:
		v.add(field.Required(p, "no host has role etcd; give role etcd to 3 hosts in 3 different zones (or 5 hosts in at least 3 zones)"))
		return
	case n == 1:
		v.warn(p.Index(members[0]), "NOT highly available: a single member has no fault tolerance; losing host %q loses the cluster. Use 3 etcd members in 3 zones for anything that matters", c.Spec.Hosts[members[0]].Name)
		return
	case n > MaxEtcdMembers:
		v.add(field.Invalid(p, n, fmt.Sprintf("%d hosts have role etcd; hactl supports 3 or 5 etcd members: every write waits for a quorum, so more members slow every write while 5 already tolerate 2 failures; give role etcd to 5 hosts (or 3) and other roles to the rest", n)))
		return
	case n%2 == 0:
		use := fmt.Sprintf("use %d or %d etcd members", n-1, n+1)
		if n == 2 {
			use = "use 3 etcd members (or 1 for a test cluster without fault tolerance)"
		}
		v.add(field.Invalid(p, n, fmt.Sprintf("%d hosts have role etcd; an even member count is refused: %d members tolerate %d failure(s), no more than %d members do, yet need a larger quorum (%d instead of %d) for every write, so they are no more available and slower; %s",
			n, n, (n-1)/2, n-1, quorum, Quorum(n-1), use)))
		return
	}

	// Zone spread: a zone holding a quorum of members takes the cluster down with it.
	zoneOf := make([]string, len(members))
	for j, i := range members {
		zoneOf[j] = c.Spec.Hosts[i].Zone
	}
	name, at := ZoneHoldingQuorum(zoneOf)
	if name == "" {
		return
	}
	var hostNames []string
	for _, j := range at {
		hostNames = append(hostNames, c.Spec.Hosts[members[j]].Name)
	}
	// Point at the member that made the zone reach quorum: moving it is the fix.
	zp := p.Index(members[at[quorum-1]]).Child("zone")
	what := fmt.Sprintf("zone %q holds %d of the %d etcd members (%s) and a quorum is %d, so losing zone %q loses quorum and etcd stops accepting writes",
		name, len(at), n, strings.Join(hostNames, ", "), quorum, name)
	if c.Spec.Etcd.AcceptZoneQuorumLoss {
		v.warn(zp, "%s; accepted because spec.etcd.acceptZoneQuorumLoss is true", what)
		return
	}
	v.add(field.Invalid(zp, name, fmt.Sprintf("%s; %s, or set spec.etcd.acceptZoneQuorumLoss: true to accept this", what, spreadAdvice(n))))
}

// Quorum is the number of votes n voting members need to commit: a majority, ⌊n/2⌋+1 (raft; etcd
// FAQ "Failure tolerance"). It is hactl's one copy of the formula: the spec's topology check uses it
// here, and etcd/membership.Quorum (the removal guard, bootstrap's rolling restart, the operator's
// status) returns it.
func Quorum(n int) int { return n/2 + 1 }

// ZoneHoldingQuorum returns the zone that holds a quorum (⌊n/2⌋+1, raft's majority) of n members,
// given each member's zone, and the indexes of its members; "" and nil when none does (at most one
// zone can). Empty zones are not counted. Losing that zone loses the cluster: the rule of the spec's
// topology check and of a removal's result (etcd/membership.CheckTopology).
func ZoneHoldingQuorum(zones []string) (string, []int) {
	quorum := Quorum(len(zones))
	at := map[string][]int{}
	for i, z := range zones {
		if z == "" {
			continue
		}
		if at[z] = append(at[z], i); len(at[z]) == quorum {
			for j := i + 1; j < len(zones); j++ {
				if zones[j] == z {
					at[z] = append(at[z], j)
				}
			}
			return z, at[z]
		}
	}
	return "", nil
}

func spreadAdvice(n int) string {
	if n == 3 {
		return "put the 3 members in 3 distinct zones"
	}
	return fmt.Sprintf("spread the %d members over at least 3 zones with at most %d per zone", n, (n-1)/2)
}
