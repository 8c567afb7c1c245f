// Package specload loads hactl's cluster spec from a file and does everything around the spec that
// touches this machine: reading the spec file, checking the local files it names (SSH keys and
// their modes, known_hosts, the bastion's entry, the etcd binaries, CA bundles, secret files),
// checking the environment variables it names, and reading the secrets it names (the VRRP auth
// secret, the object store's credentials, age recipients). The spec's types, strict decoding,
// defaults and rules are api/v1alpha1's, which does no I/O; the VRRP failover proof is lb's
// (lb.FailoverRule), which Load and Decode pass to v1alpha1's validation.
//
// Every error about the input is a *v1alpha1.DecodeError or a *v1alpha1.ValidationError (a
// field.ErrorList rendered "source:line: field: message"), with ExitCode() == 2: the input is wrong,
// and nothing has been contacted yet.
package specload

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/lb"
)

// MaxSpecBytes bounds the size of a spec file: a real spec is a few KiB, so anything larger is the
// wrong file (or a device such as /dev/zero that would never end).
const MaxSpecBytes = 1 << 20

// Load reads the spec file at path (at most MaxSpecBytes) and returns the decoded, defaulted and
// validated Cluster: Decode with source = path and baseDir = the directory of path, so relative local
// paths in the spec resolve against the spec file's directory.
//
// Load does not look at the local files the spec names (binaries, key files, the bastion's
// known_hosts) nor at the environment (passphraseEnv, sudo.passwordEnv, SSH_AUTH_SOCK); call
// ValidateLocalFiles and ValidateEnvironment before any host is contacted.
//
// Errors: *v1alpha1.DecodeError (unreadable or too large file, wrapping the cause for errors.Is;
// YAML syntax, unknown field, wrong type, duplicate key, several documents, wrong apiVersion/kind)
// or *v1alpha1.ValidationError (the spec breaks a rule); both have ExitCode() == 2. Warnings are
// returned even when the error is a *v1alpha1.ValidationError.
func Load(path string) (*v1alpha1.Cluster, []v1alpha1.Warning, error) {
	if path == "" {
		err := errors.New("no spec file: -f is empty; give the cluster spec, e.g. -f cluster.yaml (`hactl init -f cluster.yaml` writes an example)")
		return nil, nil, &v1alpha1.DecodeError{Source: "-f", Problems: []v1alpha1.Problem{{Message: err.Error()}}, Err: err}
	}
	data, err := readSpec(path)
	if err != nil {
		msg := err.Error()
		if errors.Is(err, fs.ErrNotExist) {
			msg += fmt.Sprintf("; check -f, or write an example spec there with `hactl init -f %s`", path)
		}
		return nil, nil, &v1alpha1.DecodeError{Source: path, Problems: []v1alpha1.Problem{{Message: msg}}, Err: err}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, nil, &v1alpha1.DecodeError{Source: path, Problems: []v1alpha1.Problem{{Message: err.Error()}}, Err: err}
	}
	return Decode(data, path, filepath.Dir(abs))
}

// Decode decodes, defaults and validates one spec document: v1alpha1.Decode with the current user's
// home directory for "~" (os.UserHomeDir; left as written when unknown), baseDir for relative local
// paths ("" keeps them relative to the working directory) and lb.FailoverRule. source names the
// document in messages. Errors as Load's.
func Decode(data []byte, source, baseDir string) (*v1alpha1.Cluster, []v1alpha1.Warning, error) {
	return v1alpha1.Decode(data, source, dirs(baseDir), lb.FailoverRule)
}

// Validate is the validation Decode runs, for a Cluster built in code (defaulted first):
// v1alpha1.Validate with lb.FailoverRule. It returns every broken rule and the warnings.
func Validate(c *v1alpha1.Cluster) (field.ErrorList, []v1alpha1.Warning) {
	return v1alpha1.Validate(c, lb.FailoverRule)
}

// dirs returns what local paths resolve against: baseDir, and the home directory ("" when
// os.UserHomeDir can't tell, which leaves "~" paths as written).
func dirs(baseDir string) v1alpha1.Dirs {
	home, err := os.UserHomeDir()
	if err != nil {
		home = ""
	}
	return v1alpha1.Dirs{Base: baseDir, Home: home}
}

// errSpecTooLarge is wrapped when a spec file exceeds MaxSpecBytes.
var errSpecTooLarge = fmt.Errorf("the file is larger than %d bytes; a cluster spec is a few KiB: check that -f names the spec file", MaxSpecBytes)

// readSpec reads at most MaxSpecBytes of path.
func readSpec(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSpecBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxSpecBytes {
		return nil, errSpecTooLarge
	}
	return data, nil
}
