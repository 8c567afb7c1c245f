package deploy

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hactlv1 "github.com/hactl/hactl/operator/api/v1alpha1"
	"github.com/hactl/hactl/pki"
	"github.com/hactl/hactl/provision"
)

// Self-healing's Secrets.
const (
	// SSHKeySecret holds the private key the operator logs in to the spares with (key
	// ssh-privatekey, type kubernetes.io/ssh-auth); applied only with --auto-replace.
	SSHKeySecret = "hactl-operator-ssh"
	// SpareSecretPrefix + a spare's name is the Secret with its etcd certificates issued ahead:
	// ca.crt, server.crt, server.key, peer.crt and peer.key (the CA key stays in the state dir).
	SpareSecretPrefix = "hactl-etcd-spare-"
	// DefaultGracePeriod is how long a member must stay unhealthy before it is replaced.
	DefaultGracePeriod = 5 * time.Minute
)

// HealingOptions are the operator's self-healing: the spares come from spec.etcd.spares.
type HealingOptions struct {
	// AutoReplace lets the operator replace a lost member by itself; false: it reports only.
	AutoReplace bool
	// GracePeriod is how long a member stays unhealthy before it is replaced (0: 5m); at least
	// 3 × spec.etcd.electionTimeout.
	GracePeriod time.Duration
	// SSHKeyFile is the private key put into SSHKeySecret with AutoReplace (default
	// spec.ssh.identityFile): unencrypted, since the operator cannot be asked for a passphrase.
	// A key authorized on the spares only limits what the Secret opens.
	SSHKeyFile string
}

// healingSpec sets ec.Spec.Healing from spec.etcd.spares and o.Healing (the new members' settings
// from spec.etcd and token, the cluster's --initial-cluster-token) and returns the Secrets it
// refers to (names only in their ObjectMeta): per spare its server and peer certificates, issued
// into the state dir as a member's are (pki.CA.EnsureMember; not during a dry run) for its name
// and address, and with AutoReplace the SSH key. Each spare's host keys are pinned from
// spec.ssh.knownHostsFile. No spares and no options: nothing. Errors (*UsageError): --auto-replace
// without spares, a grace period under 3 × the election timeout, a spare without a host key in
// known_hosts, an SSH key that is missing, unreadable, not a private key or encrypted.
func healingSpec(ec *hactlv1.EtcdCluster, o Options, ca *pki.CA, pkiDir, token string) ([]*corev1.Secret, error) {
	c := o.Cluster
	h := o.Healing
	spares := c.Spec.Etcd.Spares
	if h == nil {
		if len(spares) == 0 {
			return nil, nil
		}
		h = &HealingOptions{}
	}
	if len(spares) == 0 {
		flag := "--grace-period"
		if h.AutoReplace {
			flag = "--auto-replace"
		}
		return nil, &UsageError{flag, "the spec has no spec.etcd.spares: list the hosts a lost member may be moved onto (name, address, zone) there"}
	}
	grace := h.GracePeriod
	if grace == 0 {
		grace = DefaultGracePeriod
	}
	if et := c.Spec.Etcd.ElectionTimeout.Duration; grace < 3*et || grace > 24*time.Hour {
		return nil, &UsageError{"--grace-period", fmt.Sprintf("%s: between 3 × spec.etcd.electionTimeout (%s) and 24h: a member is declared lost only after several elections could have brought it back", grace, 3*et)}
	}
	e := c.Spec.Etcd
	hs := &hactlv1.HealingSpec{AutoReplace: h.AutoReplace, GracePeriod: &metav1.Duration{Duration: grace}, SSHUser: c.Spec.SSH.User,
		Member: &hactlv1.MemberTemplate{Version: e.Version, DataDir: e.DataDir, ClientPort: int32(e.ClientPort), PeerPort: int32(e.PeerPort),
			HeartbeatInterval: metav1.Duration{Duration: e.HeartbeatInterval.Duration}, QuotaBackendBytes: e.QuotaBackendBytes,
			AutoCompactionMode: e.AutoCompaction.Mode, AutoCompactionRetention: e.AutoCompaction.Retention, MetricsAddress: e.MetricsAddress,
			InitialClusterToken: token}}
	var secrets []*corev1.Secret
	for i, s := range spares {
		keys, err := provision.KnownHostKeys(c.Spec.SSH.KnownHostsFile, s.Address, s.Port)
		if err != nil {
			return nil, &UsageError{"spec.ssh.knownHostsFile", err.Error()}
		}
		if len(keys) == 0 {
			return nil, &UsageError{fmt.Sprintf("spec.etcd.spares[%d]", i), fmt.Sprintf("%s (%s port %d) has no host key in %s: the operator pins a spare's host keys and never accepts one blindly. Add it after checking its fingerprint with the machine's owner: ssh-keyscan -p %d %s >> %s",
				s.Name, s.Address, s.Port, c.Spec.SSH.KnownHostsFile, s.Port, s.Address, c.Spec.SSH.KnownHostsFile)}
		}
		sh := hactlv1.SpareHost{Name: s.Name, Address: s.Address, SSHPort: int32(s.Port), Zone: s.Zone,
			CertificatesSecret: hactlv1.SecretRef{Name: SpareSecretPrefix + s.Name}}
		for _, k := range keys {
			sh.HostKeys = append(sh.HostKeys, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k))))
		}
		hs.Spares = append(hs.Spares, sh)
		data, err := spareCertificates(ca, pkiDir, s.Name, s.Address, o.DryRun)
		if err != nil {
			return nil, err
		}
		secrets = append(secrets, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: sh.CertificatesSecret.Name}, Type: corev1.SecretTypeOpaque, Data: data})
	}
	if h.AutoReplace {
		key, err := readSSHKey(h.SSHKeyFile, c.Spec.SSH.IdentityFile)
		if err != nil {
			return nil, err
		}
		secrets = append(secrets, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: SSHKeySecret}, Type: corev1.SecretTypeSSHAuth,
			Data: map[string][]byte{corev1.SSHAuthPrivateKey: key}})
		hs.SSHKeySecret = &hactlv1.SecretRef{Name: SSHKeySecret}
	}
	ec.Spec.Healing = hs
	return secrets, nil
}

// spareCertificates issues (or keeps, when still usable) the spare's server and peer certificates
// in the state dir, as for a member of that name and address, and returns the Secret's data. A
// dry run issues nothing and returns what exists.
func spareCertificates(ca *pki.CA, pkiDir, name, address string, dryRun bool) (map[string][]byte, error) {
	addr, err := netip.ParseAddr(address)
	if err != nil {
		return nil, fmt.Errorf("spare %s: %w", name, err)
	}
	if !dryRun {
		if _, err := ca.EnsureMember(pkiDir, name, []netip.Addr{addr}); err != nil {
			return nil, fmt.Errorf("spare %s: %w", name, err)
		}
	}
	dir := pki.MemberDir(pkiDir, name)
	data := map[string][]byte{"ca.crt": ca.CertPEM}
	for key, path := range map[string]string{
		"server.crt": pki.CertPath(dir, pki.ServerBase), "server.key": pki.KeyPath(dir, pki.ServerBase),
		"peer.crt": pki.CertPath(dir, pki.PeerBase), "peer.key": pki.KeyPath(dir, pki.PeerBase),
	} {
		b, err := os.ReadFile(path)
		if err != nil && !(dryRun && errors.Is(err, os.ErrNotExist)) {
			return nil, err
		}
		data[key] = b
	}
	return data, nil
}

// readSSHKey reads the private key file (file, else fallback) for the SSH key Secret. Errors
// (*UsageError naming the flag): none given, unreadable, not a private key, or encrypted.
func readSSHKey(file, fallback string) ([]byte, error) {
	flag := "--ssh-key"
	if file == "" {
		file, flag = fallback, "spec.ssh.identityFile"
	}
	if file == "" {
		return nil, &UsageError{"--ssh-key", "--auto-replace needs the private key the operator logs in to the spares with: give --ssh-key FILE (best a key authorized on the spares only)"}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, &UsageError{flag, err.Error()}
	}
	if _, err := ssh.ParseRawPrivateKey(b); err != nil {
		var pe *ssh.PassphraseMissingError
		if errors.As(err, &pe) {
			return nil, &UsageError{flag, fmt.Sprintf("%s is encrypted: the operator cannot be asked for a passphrase; give --ssh-key with an unencrypted key authorized on the spares only", file)}
		}
		return nil, &UsageError{flag, fmt.Sprintf("%s is not an SSH private key: %v", file, err)}
	}
	return b, nil
}

// healingSecrets are the Secrets the operator reads for self-healing, for its Role.
func healingSecrets(ec *hactlv1.EtcdCluster) []string {
	h := ec.Spec.Healing
	if h == nil {
		return nil
	}
	var out []string
	for _, s := range h.Spares {
		out = append(out, s.CertificatesSecret.Name)
	}
	if h.SSHKeySecret != nil {
		out = append(out, h.SSHKeySecret.Name)
	}
	return out
}

// CheckGracePeriod refuses a --grace-period of 0 or less (*UsageError, exit 2) before anything is
// contacted: HealingOptions reads 0 as DefaultGracePeriod, which a 0 the user gave must never
// silently become. The spec's bounds (3 x spec.etcd.electionTimeout to 24h) are Build's.
func CheckGracePeriod(d time.Duration) error {
	if d <= 0 {
		return &UsageError{"--grace-period", fmt.Sprintf("%s: a positive duration, between 3 × spec.etcd.electionTimeout and 24h (leave the flag out for %s)", d, DefaultGracePeriod)}
	}
	return nil
}
