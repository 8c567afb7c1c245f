package etcdphases

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hactl/hactl/bootstrap/runctx"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/internal/shell"
	"github.com/hactl/hactl/pki"
	"github.com/hactl/hactl/state"
)

// StateMissingError refuses to go on when the hosts already carry this cluster, the local state dir
// has no record of it (no cluster.json) and the record cannot be recovered from the members (see
// recoverState): starting over would mean a second CA and a new token for an existing cluster, which
// hactl never does (kubeadm keeps the CA key on the members for the same reason).
type StateMissingError struct {
	Host, Cluster, Token, StateDir string
	// Reason says why recovery is impossible; Err is the underlying error, if any
	// (*CAMismatchError, *TokenMismatchError, a command or certificate error).
	Reason string
	Err    error
}

func (e *StateMissingError) Error() string {
	return fmt.Sprintf("%s already runs a member of cluster %q (token %s) but the state dir %s has no cluster.json, and it "+
		"cannot be recovered from the members: %s. hactl will not create a second CA for an existing cluster; restore the "+
		"state dir from its backup or point spec.stateDir at it", e.Host, e.Cluster, e.Token, e.StateDir, e.Reason)
}

func (e *StateMissingError) Unwrap() error { return e.Err }

// CAMismatchError: the members do not all hold the same etcd CA certificate, so there is no one CA to
// recover.
type CAMismatchError struct {
	// ByFingerprint maps each CA fingerprint (pki.Fingerprint) to the hosts holding it.
	ByFingerprint map[string][]string
}

func (e *CAMismatchError) Error() string {
	return "the members hold different etcd CAs (" + describeGroups(e.ByFingerprint) + ")"
}

// TokenMismatchError: the members' markers name different cluster tokens.
type TokenMismatchError struct {
	// ByToken maps each token to the hosts whose marker names it.
	ByToken map[string][]string
}

func (e *TokenMismatchError) Error() string {
	return "the members' markers (" + remoteMarker + ") name different cluster tokens (" + describeGroups(e.ByToken) + ")"
}

func describeGroups(m map[string][]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + " on " + strings.Join(m[k], ", ")
	}
	return strings.Join(parts, "; ")
}

// recovery is what recoverState found; nil when the state dir had cluster.json.
type recovery struct {
	source      string // member the CA (and its key) was read from
	fingerprint string
	ca          *x509.Certificate
	caPEM       []byte
	// anyData: some member holds etcd data, so the cluster formed at some point (the recovered
	// record has no cluster ID until detect/wait fill it in).
	anyData bool
}

// readPaths are the public files preflight reads back from every host: the unit (its flags are
// the member's record) and the certificates (for state recovery). Never a key.
var readPaths = []string{remoteUnit, etcd.RemoteCACert, etcd.RemoteServerCert, etcd.RemotePeerCert}

// carriesCluster returns the first member whose marker names this cluster ("" when none does).
func (ph *PKI) carriesCluster() string {
	b := ph.g
	for _, m := range b.members {
		if f := b.ledger.facts[m.Name]; f != nil && f.Marker != nil && f.Marker.Cluster == b.run.Spec.Metadata.Name {
			return m.Name
		}
	}
	return ""
}

// recoverState rebuilds the state dir of a cluster whose hosts carry it while the state dir has no
// cluster.json:
//
//   - the token comes from the members' markers (all equal, else *TokenMismatchError);
//   - the CA certificate from the members (all that hold one must hold the same one, else
//     *CAMismatchError; a CA already in the state dir must be that one too), its key from one member
//     (read only here, never logged), checked against the certificate and written to the state dir;
//   - each member's record (--initial-cluster, --initial-cluster-state, peer and client URLs) from
//     the flags of its installed etcd.service, so the unit renders byte-identical and nothing
//     restarts; cluster and member IDs are filled in by detect and wait as on every run;
//   - each member's server and peer certificates and keys are read back too, so nothing changes on
//     the hosts; pki then re-issues only what is unusable (a plan change and a rolling restart) and
//     creates the client certificates.
//
// A dry run reads no key and writes nothing: it only reports what would be recovered. Every refusal
// is a *StateMissingError; a second CA is never generated.
// recoverer rebuilds a missing state dir from the members (recoverState).
type recoverer struct{ g *Group }

func (r *recoverer) recoverState(ctx context.Context) error {
	b := r.g
	name, stateDir := b.run.Spec.Metadata.Name, b.run.Spec.Spec.StateDir
	var ours []Member
	tokens := map[string][]string{}
	for _, m := range b.members {
		f := b.ledger.facts[m.Name]
		if f == nil || f.Marker == nil || f.Marker.Cluster != name {
			continue
		}
		ours = append(ours, m)
		tokens[f.Marker.Token] = append(tokens[f.Marker.Token], m.Name)
	}
	if len(ours) == 0 {
		return errors.New("recoverState: no host carries this cluster")
	}
	first := ours[0].Name
	refuse := func(reason string, err error) error {
		return &StateMissingError{Host: first, Cluster: name, Token: b.ledger.facts[first].Marker.Token, StateDir: stateDir, Reason: reason, Err: err}
	}
	if len(tokens) > 1 {
		e := &TokenMismatchError{ByToken: tokens}
		return refuse(e.Error(), e)
	}
	token := b.ledger.facts[first].Marker.Token

	byFP := map[string][]string{}
	rec := &recovery{}
	var candidates []Member // members holding the CA certificate, in spec order
	for _, m := range ours {
		raw := b.ledger.facts[m.Name].Files[etcd.RemoteCACert]
		if raw == nil {
			continue
		}
		cert, err := pki.ParseCertPEM(raw)
		if err != nil {
			return refuse(fmt.Sprintf("%s: %s cannot be parsed: %v", m.Name, etcd.RemoteCACert, err), err)
		}
		fp := pki.Fingerprint(cert)
		byFP[fp] = append(byFP[fp], m.Name)
		if rec.ca == nil {
			rec.ca, rec.caPEM, rec.fingerprint = cert, raw, fp
		}
		candidates = append(candidates, m)
	}
	switch {
	case len(byFP) == 0:
		return refuse("no member holds "+etcd.RemoteCACert, nil)
	case len(byFP) > 1:
		e := &CAMismatchError{ByFingerprint: byFP}
		return refuse(e.Error(), e)
	}
	pkiDir := filepath.Join(stateDir, "pki")
	if local, err := pki.ReadCert(pki.CertPath(pkiDir, pki.CABase)); err == nil {
		if !bytes.Equal(local.Raw, rec.ca.Raw) {
			return refuse(fmt.Sprintf("the state dir's %s is CA %s but the members hold CA %s (is spec.stateDir another cluster's?)",
				pki.CertPath(pkiDir, pki.CABase), pki.Fingerprint(local), rec.fingerprint), pki.ErrCAMismatch)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}

	st := &state.Cluster{Name: name, Token: token, Members: map[string]*state.Member{}}
	for _, m := range ours {
		f := b.ledger.facts[m.Name]
		rec.anyData = rec.anyData || f.Data == DataMember
		unit := f.Files[remoteUnit]
		if unit == nil {
			continue // never installed: planned like any new member
		}
		r, err := recordFromUnit(unit)
		if err != nil {
			return refuse(fmt.Sprintf("%s: cannot read the member's settings back from %s: %v", m.Name, remoteUnit, err), err)
		}
		st.Members[m.Name] = r
	}
	b.st = st
	b.recovery = rec
	rec.source = candidates[0].Name
	if b.run.DryRun {
		b.run.Printer.Infof("  the state dir %s has no cluster.json: bootstrap will recover it from %s (CA fingerprint %s, token %s); nothing read or written now",
			stateDir, rec.source, rec.fingerprint, token)
		return nil
	}
	ca, err := r.recoverCA(ctx, pkiDir, candidates, rec)
	if err != nil {
		return refuse(err.Error(), err)
	}
	for _, m := range ours {
		if err := r.recoverMemberCerts(ctx, pkiDir, m, ca); err != nil {
			return err
		}
	}
	b.run.Printer.Infof("  recovered state dir from %s (CA fingerprint %s)", rec.source, rec.fingerprint)
	return nil
}

// recordFromUnit rebuilds a member's state record from its installed unit's flags.
func recordFromUnit(unit []byte) (*state.Member, error) {
	flags, err := etcd.ParseUnitFlags(unit)
	if err != nil {
		return nil, err
	}
	r := &state.Member{
		InitialCluster:      flags["initial-cluster"],
		InitialClusterState: flags["initial-cluster-state"],
		PeerURL:             flags["initial-advertise-peer-urls"],
		ClientURL:           flags["advertise-client-urls"],
	}
	switch {
	case r.InitialCluster == "":
		return nil, errors.New("no --initial-cluster")
	case r.InitialClusterState != string(etcd.StateNew) && r.InitialClusterState != string(etcd.StateExisting):
		return nil, fmt.Errorf("--initial-cluster-state %q is not new or existing", r.InitialClusterState)
	case r.PeerURL == "" || strings.Contains(r.PeerURL, ","):
		return nil, fmt.Errorf("--initial-advertise-peer-urls %q is not one URL", r.PeerURL)
	case r.ClientURL == "" || strings.Contains(r.ClientURL, ","):
		return nil, fmt.Errorf("--advertise-client-urls %q is not one URL", r.ClientURL)
	}
	return r, nil
}

// recoverCA loads the CA into the state dir: it is kept when the state dir already holds it (checked
// by recoverState), else its key is read from the first candidate that has one and written with the
// certificate (pki.RestoreCA: key matches, never over another CA).
func (r *recoverer) recoverCA(ctx context.Context, pkiDir string, candidates []Member, rec *recovery) (*pki.CA, error) {
	if _, err := os.Stat(pki.KeyPath(pkiDir, pki.CABase)); err == nil {
		ca, _, err := pki.LoadOrCreateCA(pkiDir)
		return ca, err
	}
	var errs []error
	for _, m := range candidates {
		files, err := r.readRemotePKI(ctx, m, []string{"ca.key"})
		if err != nil {
			return nil, err
		}
		key := files["ca.key"]
		if key == nil {
			errs = append(errs, fmt.Errorf("%s has no %s/ca.key", m.Name, remotePKIDir))
			continue
		}
		ca, err := pki.RestoreCA(pkiDir, rec.caPEM, key)
		if err != nil {
			return nil, fmt.Errorf("%s: %s/ca.key: %w", m.Name, remotePKIDir, err)
		}
		rec.source = m.Name
		return ca, nil
	}
	return nil, errors.Join(errs...)
}

// recoverMemberCerts reads m's server and peer certificates and keys back into the state dir when
// the state dir lacks them. A pair that is not usable (not this CA's, key mismatch) is left out with
// a warning: pki issues a new one, which the plan shows and etcd/start rolls out.
func (r *recoverer) recoverMemberCerts(ctx context.Context, pkiDir string, m Member, ca *pki.CA) error {
	b := r.g
	dir := pki.MemberDir(pkiDir, m.Name)
	var want []string
	for _, base := range []string{pki.ServerBase, pki.PeerBase} {
		for _, p := range []string{pki.CertPath(dir, base), pki.KeyPath(dir, base)} {
			if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
				want = append(want, base+".crt", base+".key")
				break
			}
		}
	}
	if len(want) == 0 {
		return nil
	}
	files, err := r.readRemotePKI(ctx, m, want)
	if err != nil {
		return err
	}
	for _, base := range []string{pki.ServerBase, pki.PeerBase} {
		crt, key := files[base+".crt"], files[base+".key"]
		if crt == nil || key == nil {
			continue
		}
		if _, err := ca.RestoreLeaf(dir, base, crt, key); err != nil {
			b.run.Printer.Warnf("%s: the %s certificate on the host is not usable (%v): a new one will be issued and rolled out", m.Name, base, err)
		}
	}
	return nil
}

// readRemotePKI reads files (names in remotePKIDir, keys included) from m with one command. The
// content is never logged: only the command (names) is.
func (r *recoverer) readRemotePKI(ctx context.Context, m Member, names []string) (map[string][]byte, error) {
	b := r.g
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = shell.Quote(path.Base(n))
	}
	cmd := fmt.Sprintf(`cd %s && for f in %s; do if [ -f "$f" ]; then printf '%%s=' "$f"; base64 -w0 "$f"; echo; fi; done`,
		shell.Quote(remotePKIDir), strings.Join(quoted, " "))
	sctx, cancel := b.run.StepCtx(ctx)
	defer cancel()
	res, err := b.run.Exec(sctx, m.Name, "pki/recover", cmd)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	sc := bufio.NewScanner(bytes.NewReader(res.Stdout))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return nil, fmt.Errorf("%s: reading %s back: bad base64", m.Name, k)
		}
		out[k] = raw
	}
	return out, nil
}

// recoveredFile is, during a dry run of a recovery (the state dir's files do not exist yet), what a
// member's PKI file will be once recovered: the host's own checksum when bootstrap will read it back
// unchanged, or a note when it will be re-issued.
func (r *recoverer) recoveredFile(m Member, remoteName string) (sha, note string) {
	b := r.g
	f := b.ledger.facts[m.Name]
	remote := filepath.Join(remotePKIDir, remoteName)
	if b.recovery == nil || f == nil || f.Sums[remote] == "" {
		return "", "to be created"
	}
	base := strings.TrimSuffix(strings.TrimSuffix(remoteName, ".crt"), ".key")
	switch base {
	case pki.CABase:
		if remoteName == "ca.crt" {
			return runctx.Sum(b.recovery.caPEM), ""
		}
		return f.Sums[remote], ""
	case pki.ServerBase, pki.PeerBase:
		raw := f.Files[filepath.Join(remotePKIDir, base+".crt")]
		cert, err := pki.ParseCertPEM(raw)
		if err != nil {
			return "", "to be re-issued"
		}
		ca := &pki.CA{Cert: b.recovery.ca}
		if err := ca.UsableMemberCert(cert, m.Name, m.addrs()); err != nil {
			return "", "to be re-issued"
		}
		return f.Sums[remote], ""
	}
	return "", "to be created"
}
