package specload

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/internal/shell"
)

// ValidateLocalFiles checks the local files a loaded (defaulted) spec names, before any host is
// contacted:
//   - the etcd binaries (unless spec.etcd.download is set) exist and are regular executable files;
//   - every key file (spec.ssh.identityFile, spec.ssh.identityFiles[*], spec.ssh.bastion.identityFile)
//     exists, is not readable by group or others (mode 0600 or stricter, as ssh demands) and is an SSH
//     private key (encrypted keys are fine: their passphrase comes from passphraseEnv or a prompt);
//   - the directory of spec.ssh.knownHostsFile exists (hosts' keys may be added with
//     --accept-new-host-keys);
//   - with a bastion, spec.ssh.bastion.knownHostsFile exists and holds an entry for the bastion's
//     address:port (a bastion's key is never accepted blindly);
//   - spec.loadBalancer.healthCheck.caFile, when set, is a readable file of PEM certificates with a CA
//     among them (no private key);
//   - spec.loadBalancer.auth.file, when set, is a regular file not accessible by group or others
//     whose content (one trailing newline removed) is a valid VRRP secret: at most
//     limits.MaxVRRPSecretLength characters (keepalived silently truncates longer ones), see
//     v1alpha1.VRRPSecretProblem. Messages never quote it.
//   - spec.kubernetes: the local kubelet, kubeadm and kubectl binaries, the image archives (readable,
//     together holding every image kubeadm needs) and the kubelet configuration file (strict; see
//     ReadKubeletConfiguration).
//
// It returns every problem, each at its field; wrap them with Cluster.ValidationError for
// "source:line:" and exit code 2. It is separate from Load so commands that contact no host need
// none of these files; see also ValidateEnvironment.
func ValidateLocalFiles(c *v1alpha1.Cluster) field.ErrorList {
	var errs field.ErrorList
	if c.Spec.Etcd.Download == nil {
		bp := field.NewPath("spec", "etcd", "binaries")
		for _, b := range []struct{ name, path string }{
			{"etcd", c.Spec.Etcd.Binaries.Etcd},
			{"etcdctl", c.Spec.Etcd.Binaries.Etcdctl},
			{"etcdutl", c.Spec.Etcd.Binaries.Etcdutl},
		} {
			if b.path == "" {
				continue // required-ness is Validate's job
			}
			p := bp.Child(b.name)
			fi, err := os.Stat(b.path)
			switch {
			case err != nil:
				errs = append(errs, field.Invalid(p, b.path, fileProblem(err, "the "+b.name+" binary").Error()))
			case !fi.Mode().IsRegular():
				errs = append(errs, field.Invalid(p, b.path, "is not a regular file; point it at the "+b.name+" binary"))
			case fi.Mode().Perm()&0o111 == 0:
				errs = append(errs, field.Invalid(p, b.path, fmt.Sprintf("is not executable; run: chmod +x %s", b.path)))
			}
		}
	}

	sp := field.NewPath("spec", "ssh")
	errs = append(errs, checkKeyFile(sp.Child("identityFile"), c.Spec.SSH.IdentityFile)...)
	for i, f := range c.Spec.SSH.IdentityFiles {
		errs = append(errs, checkKeyFile(sp.Child("identityFiles").Index(i), f)...)
	}
	for i, h := range c.Spec.Hosts {
		if h.SSH != nil {
			errs = append(errs, checkKeyFile(field.NewPath("spec", "hosts").Index(i).Child("ssh", "identityFile"), h.SSH.IdentityFile)...)
		}
	}

	if kh := c.Spec.SSH.KnownHostsFile; kh != "" {
		p := sp.Child("knownHostsFile")
		dir := filepath.Dir(kh)
		fi, err := os.Stat(dir)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(p, kh, fileProblem(err, "the directory "+dir).Error()))
		case !fi.IsDir():
			errs = append(errs, field.Invalid(p, kh, dir+" is not a directory"))
		default:
			if fi, err := os.Stat(kh); err == nil && !fi.Mode().IsRegular() {
				errs = append(errs, field.Invalid(p, kh, "is not a regular file; point it at a known_hosts file (it is created when missing)"))
			}
		}
	}

	bastions := map[*field.Path]*v1alpha1.Bastion{}
	if b := c.Spec.SSH.Bastion; b != nil {
		bastions[sp.Child("bastion")] = b
	}
	for i, h := range c.Spec.Hosts {
		if h.SSH != nil && h.SSH.Bastion != nil {
			bastions[field.NewPath("spec", "hosts").Index(i).Child("ssh", "bastion")] = h.SSH.Bastion
		}
	}
	for _, bp := range slices.SortedFunc(maps.Keys(bastions), func(a, b *field.Path) int { return strings.Compare(a.String(), b.String()) }) {
		b := bastions[bp]
		errs = append(errs, checkKeyFile(bp.Child("identityFile"), b.IdentityFile)...)
		if b.KnownHostsFile != "" && b.Address != "" && b.Port >= 1 && b.Port <= 65535 { // else Validate reported the port
			if msg := bastionKnownHostsProblem(b); msg != "" {
				errs = append(errs, field.Invalid(bp.Child("knownHostsFile"), b.KnownHostsFile, msg))
			}
		}
	}
	errs = append(errs, validateLBLocalFiles(c)...)
	return append(errs, validateKubeLocalFiles(c)...)
}

// checkKeyFile checks one local private key file ("" = not set: nothing to check).
func checkKeyFile(p *field.Path, id string) field.ErrorList {
	if id == "" {
		return nil
	}
	fi, err := os.Stat(id)
	switch {
	case err != nil:
		return field.ErrorList{field.Invalid(p, id, fileProblem(err, "the SSH private key").Error())}
	case !fi.Mode().IsRegular():
		return field.ErrorList{field.Invalid(p, id, "is not a regular file; point it at the SSH private key")}
	case fi.Mode().Perm()&0o077 != 0:
		return field.ErrorList{field.Invalid(p, id, fmt.Sprintf("has mode %04o: a private key must not be accessible by group or others (ssh refuses it); run: chmod 600 %s", fi.Mode().Perm(), shell.Quote(id)))}
	}
	if msg := checkPrivateKey(id); msg != "" {
		return field.ErrorList{field.Invalid(p, id, msg)}
	}
	return nil
}

// bastionKnownHostsProblem says why b.KnownHostsFile can't verify the bastion's host key, or "".
//
// The file is read with golang.org/x/crypto/ssh/knownhosts (hashed entries, patterns and
// "[host]:port" forms as OpenSSH writes them) and looked up by calling its callback with a dummy key
// for address:port: a *knownhosts.KeyError with an empty Want means the file has no key for it, a
// non-empty Want means it has one. @cert-authority lines are not counted: hactl verifies the
// bastion against a plain host key entry.
func bastionKnownHostsProblem(b *v1alpha1.Bastion) string {
	hint := fmt.Sprintf("hactl never accepts a bastion's host key blindly (not even with --accept-new-host-keys): get the key from the bastion's administrator, or fetch it and compare its fingerprint with theirs: ssh-keyscan -p %d %s >> %s && ssh-keygen -lf %s",
		b.Port, shell.Quote(b.Address), shell.Quote(b.KnownHostsFile), shell.Quote(b.KnownHostsFile))
	fi, err := os.Stat(b.KnownHostsFile)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "bastion without a known_hosts entry: the file does not exist; " + hint
	case err != nil:
		return fmt.Sprintf("can't read the bastion's known_hosts file: %v", err)
	case !fi.Mode().IsRegular():
		return "is not a regular file; point it at the known_hosts file holding the bastion's host key"
	}
	cb, err := knownhosts.New(b.KnownHostsFile)
	if err != nil {
		return fmt.Sprintf("can't be read as a known_hosts file (%v); fix or replace it: it must hold the bastion's host key", err)
	}
	hostport := net.JoinHostPort(b.Address, strconv.Itoa(b.Port))
	key, err := dummyHostKey()
	if err != nil {
		return fmt.Sprintf("can't look up the bastion %s in it: %v", knownhosts.Normalize(hostport), err)
	}
	err = cb(hostport, &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: b.Port}, key)
	var ke *knownhosts.KeyError
	switch {
	case err == nil:
		return "" // the dummy key itself is listed: an entry, however odd
	case errors.As(err, &ke) && len(ke.Want) == 0:
		return fmt.Sprintf("bastion without a known_hosts entry: the file has no host key for %s; %s", knownhosts.Normalize(hostport), hint)
	case errors.As(err, &ke):
		return ""
	default: // e.g. a revoked key
		return fmt.Sprintf("can't look up the bastion %s in it: %v", knownhosts.Normalize(hostport), err)
	}
}

// dummyHostKey returns the all-zero ed25519 public key: no host has it, so looking it up in a
// known_hosts file answers whether the file holds any key for a host.
func dummyHostKey() (ssh.PublicKey, error) {
	return ssh.NewPublicKey(ed25519.PublicKey(make([]byte, ed25519.PublicKeySize)))
}

// maxKeyBytes bounds how much of an identity file is read: private keys are a few KiB.
const maxKeyBytes = 1 << 20

// checkPrivateKey says why file is not a usable SSH private key, or "". The message never quotes
// the file's content.
func checkPrivateKey(file string) string {
	f, err := os.Open(file)
	if err != nil {
		return fileProblem(err, "the SSH private key").Error()
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxKeyBytes+1))
	switch {
	case err != nil:
		return fileProblem(err, "the SSH private key").Error()
	case len(data) > maxKeyBytes:
		return fmt.Sprintf("is larger than %d bytes, which no SSH private key is: point it at the private key file, e.g. ~/.ssh/id_ed25519", maxKeyBytes)
	}
	_, err = ssh.ParsePrivateKey(data)
	var pm *ssh.PassphraseMissingError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &pm):
		return "" // encrypted: the passphrase comes from spec.ssh.passphraseEnv or a prompt
	case bytes.HasPrefix(bytes.TrimSpace(data), []byte("ssh-")) || bytes.HasPrefix(bytes.TrimSpace(data), []byte("ecdsa-")):
		return "is a public key: point it at the private half (the same path without .pub)"
	default:
		return "is not an SSH private key hactl can read (OpenSSH, PKCS#1/#8 or SEC1 PEM): point it at the private key file, e.g. ~/.ssh/id_ed25519"
	}
}

// fileError is what is wrong with a local file the spec names: Error is the message for the user
// (it never quotes the file's content), Unwrap the cause when an operation on the file failed (a
// *fs.PathError, for errors.Is(err, fs.ErrNotExist)), nil for a file that reads but is unusable.
type fileError struct {
	msg string
	err error
}

func (e *fileError) Error() string { return e.msg }
func (e *fileError) Unwrap() error { return e.err }

// fileProblem says why what (e.g. "the CA file") could not be stat'ed, opened or read: err is the
// cause, wrapped.
func fileProblem(err error, what string) *fileError {
	if errors.Is(err, os.ErrNotExist) {
		return &fileError{what + " does not exist; fix the path (relative paths are relative to the spec file)", err}
	}
	return &fileError{fmt.Sprintf("can't read %s: %v", what, err), err}
}

// problemf is a *fileError without a cause: the file reads, but its content or mode is wrong.
func problemf(format string, args ...any) *fileError {
	return &fileError{msg: fmt.Sprintf(format, args...)}
}

// checkCAFile says what is wrong with a local CA bundle ("" when nothing): it must be a readable
// regular file of PEM certificates, at least one of them a CA.
func checkCAFile(name string) string {
	fi, err := os.Stat(name)
	switch {
	case err != nil:
		return fileProblem(err, "the CA file").Error()
	case !fi.Mode().IsRegular():
		return "is not a regular file; point it at the CA certificate (PEM) that signed the apiservers' certificates, e.g. a copy of kubeadm's /etc/kubernetes/pki/ca.crt"
	}
	f, err := os.Open(name)
	if err != nil {
		return fileProblem(err, "the CA file").Error()
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxKeyBytes+1))
	if err != nil {
		return fileProblem(err, "the CA file").Error()
	}
	if len(data) > maxKeyBytes {
		return fmt.Sprintf("is larger than %d bytes, which no CA bundle is", maxKeyBytes)
	}
	var certs, cas int
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if strings.Contains(b.Type, "PRIVATE KEY") {
			return "holds a private key: point it at the CA certificate only (HAProxy needs no key to verify the apiservers)"
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return fmt.Sprintf("holds a certificate that can't be parsed: %v", err)
		}
		certs++
		if cert.IsCA {
			cas++
		}
	}
	switch {
	case certs == 0:
		return "holds no PEM certificate: point it at the CA certificate that signed the apiservers' certificates, e.g. a copy of kubeadm's /etc/kubernetes/pki/ca.crt"
	case cas == 0:
		return "holds no CA certificate (none has the CA flag): point it at the CA that signed the apiservers' certificates, not at a serving certificate"
	}
	return ""
}

// validateLBLocalFiles is ValidateLocalFiles' part for spec.loadBalancer.
func validateLBLocalFiles(c *v1alpha1.Cluster) field.ErrorList {
	lb := c.Spec.LoadBalancer
	if lb == nil {
		return nil
	}
	var errs field.ErrorList
	p := field.NewPath("spec", "loadBalancer")
	if f := lb.HealthCheck.CAFile; f != "" {
		if msg := checkCAFile(f); msg != "" {
			errs = append(errs, field.Invalid(p.Child("healthCheck", "caFile"), f, msg))
		}
	}
	if a := lb.Auth; a != nil && a.File != "" {
		fp := p.Child("auth", "file")
		if s, err := readSecretFile(a.File); err != nil {
			errs = append(errs, field.Invalid(fp, a.File, err.Error()))
		} else if msg := v1alpha1.VRRPSecretProblem(s); msg != "" {
			errs = append(errs, field.Invalid(fp, a.File, "the auth secret in this file "+msg))
		}
	}
	return errs
}
