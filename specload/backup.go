package specload

import (
	"bufio"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/internal/shell"
)

// BackupCredentials are the object store's access key, read from where spec.backup names
// (ReadBackupCredentials). They are secrets: never print or store them.
type BackupCredentials struct {
	AccessKeyID, SecretAccessKey, SessionToken string
}

// maxCredentialsFileBytes bounds how much of a credentials file is read.
const maxCredentialsFileBytes = 64 << 10

// ReadBackupCredentials returns the access key spec.backup.objectStore.credentials names: the
// values of its environment variables (getenv is os.Getenv in production) or the content of its
// file (mode 0600 or stricter; see ObjectStoreCredentials.File for the formats). Errors name the
// field and the variable or file, never a key; none of them is returned without spec.backup.
func ReadBackupCredentials(c *v1alpha1.Cluster, getenv func(string) string) (BackupCredentials, error) {
	if c.Spec.Backup == nil {
		return BackupCredentials{}, errors.New("spec.backup: not set: add spec.backup.objectStore to back up")
	}
	cp := field.NewPath("spec", "backup", "objectStore", "credentials")
	switch cr := c.Spec.Backup.ObjectStore.Credentials; {
	case cr.Env != nil:
		e := cr.Env
		out := BackupCredentials{AccessKeyID: getenv(e.AccessKeyID), SecretAccessKey: getenv(e.SecretAccessKey)}
		if e.SessionToken != "" {
			out.SessionToken = getenv(e.SessionToken)
		}
		for _, x := range []struct{ field, name, val string }{
			{"accessKeyID", e.AccessKeyID, out.AccessKeyID},
			{"secretAccessKey", e.SecretAccessKey, out.SecretAccessKey},
			{"sessionToken", e.SessionToken, out.SessionToken},
		} {
			if x.name != "" && x.val == "" {
				return BackupCredentials{}, fmt.Errorf("%s: names the environment variable %s, which is not set (or is empty): export %s=... before running hactl", cp.Child("env", x.field), x.name, x.name)
			}
		}
		return out, nil
	case cr.File != "":
		out, err := readCredentialsFile(cr.File)
		if err != nil {
			return BackupCredentials{}, fmt.Errorf("%s: %s: %w", cp.Child("file"), cr.File, err)
		}
		return out, nil
	}
	return BackupCredentials{}, fmt.Errorf("%s: set env or file", cp)
}

// readCredentialsFile parses a credentials file; it returns a *fileError (never quoting the
// content; wrapping the cause when reading failed) when the file is unusable.
func readCredentialsFile(name string) (BackupCredentials, error) {
	fi, err := os.Stat(name)
	switch {
	case err != nil:
		return BackupCredentials{}, fileProblem(err, "the credentials file")
	case !fi.Mode().IsRegular():
		return BackupCredentials{}, problemf("is not a regular file; point it at the file holding the access key")
	case fi.Mode().Perm()&0o077 != 0:
		return BackupCredentials{}, problemf("has mode %04o: a credentials file must not be accessible by group or others; run: chmod 600 %s", fi.Mode().Perm(), shell.Quote(name))
	}
	f, err := os.Open(name)
	if err != nil {
		return BackupCredentials{}, fileProblem(err, "the credentials file")
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxCredentialsFileBytes+1))
	switch {
	case err != nil:
		return BackupCredentials{}, fileProblem(err, "the credentials file")
	case len(data) > maxCredentialsFileBytes:
		return BackupCredentials{}, problemf("is larger than %d bytes, which no credentials file is", maxCredentialsFileBytes)
	}
	var out BackupCredentials
	section := ""
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
			continue
		}
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			section = strings.TrimSpace(strings.Trim(line, "[]"))
			continue
		}
		if section != "" && section != "default" {
			continue
		}
		k, val, ok := strings.Cut(line, "=")
		if k2, v2, ok2 := strings.Cut(line, ":"); !ok || (ok2 && len(k2) < len(k)) {
			k, val, ok = k2, v2, ok2
		}
		if !ok {
			return BackupCredentials{}, problemf("line %d is not \"key: value\" or \"key = value\"", n)
		}
		val = strings.Trim(strings.TrimSpace(val), `"'`)
		switch strings.TrimSpace(k) {
		case "accessKeyID", "aws_access_key_id":
			out.AccessKeyID = val
		case "secretAccessKey", "aws_secret_access_key":
			out.SecretAccessKey = val
		case "sessionToken", "aws_session_token":
			out.SessionToken = val
		default:
			return BackupCredentials{}, problemf("line %d: unknown key %q; known keys: accessKeyID, secretAccessKey, sessionToken (or aws_access_key_id, aws_secret_access_key, aws_session_token)", n, strings.TrimSpace(k))
		}
	}
	if out.AccessKeyID == "" || out.SecretAccessKey == "" {
		return BackupCredentials{}, problemf("holds no access key: it needs accessKeyID and secretAccessKey (or an AWS credentials file's [default] aws_access_key_id and aws_secret_access_key)")
	}
	return out, nil
}

// maxRecipientsFileBytes bounds how much of a recipients file is read.
const maxRecipientsFileBytes = 1 << 20

// BackupRecipients returns the age recipients of spec.backup.encryption: Recipients followed by
// the lines of RecipientsFile (empty lines and "#" comments skipped). It returns nil without
// encryption, and an error naming the field when the file can't be read or holds no valid
// recipient.
func BackupRecipients(c *v1alpha1.Cluster) ([]string, error) {
	if c.Spec.Backup == nil || c.Spec.Backup.Encryption == nil {
		return nil, nil
	}
	e := c.Spec.Backup.Encryption
	out := slices.Clone(e.Recipients)
	if e.RecipientsFile != "" {
		rs, err := readRecipientsFile(e.RecipientsFile)
		if err != nil {
			return nil, fmt.Errorf("spec.backup.encryption.recipientsFile: %s: %w", e.RecipientsFile, err)
		}
		out = append(out, rs...)
	}
	return out, nil
}

func readRecipientsFile(name string) ([]string, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fileProblem(err, "the recipients file")
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxRecipientsFileBytes+1))
	switch {
	case err != nil:
		return nil, fileProblem(err, "the recipients file")
	case len(data) > maxRecipientsFileBytes:
		return nil, problemf("is larger than %d bytes, which no recipients file is", maxRecipientsFileBytes)
	}
	var out []string
	for n, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if msg := v1alpha1.RecipientProblem(line); msg != "" {
			return nil, problemf("line %d %s", n+1, msg)
		}
		out = append(out, line)
	}
	if len(out) == 0 {
		return nil, problemf("holds no age recipient (one public key, age1..., per line)")
	}
	return out, nil
}

// ValidateBackupFiles checks the local files spec.backup names (nil without spec.backup): the
// credentials file is a usable credentials file with mode 0600 or stricter, the CA file holds PEM
// certificates, and the recipients file holds age recipients. It is separate from
// ValidateLocalFiles so that commands which don't touch the object store (bootstrap, status) don't
// need the backup's files; `hactl backup` runs it before contacting anything. Wrap the result with
// Cluster.ValidationError (exit 2).
func ValidateBackupFiles(c *v1alpha1.Cluster) field.ErrorList {
	b := c.Spec.Backup
	if b == nil {
		return nil
	}
	var errs field.ErrorList
	p := field.NewPath("spec", "backup")
	op := p.Child("objectStore")
	if f := b.ObjectStore.Credentials.File; f != "" {
		if _, err := readCredentialsFile(f); err != nil {
			errs = append(errs, field.Invalid(op.Child("credentials", "file"), f, err.Error()))
		}
	}
	if t := b.ObjectStore.TLS; t != nil && t.CAFile != "" {
		if msg := pemCertsProblem(t.CAFile); msg != "" {
			errs = append(errs, field.Invalid(op.Child("tls", "caFile"), t.CAFile, msg))
		}
	}
	if e := b.Encryption; e != nil && e.RecipientsFile != "" {
		if _, err := readRecipientsFile(e.RecipientsFile); err != nil {
			errs = append(errs, field.Invalid(p.Child("encryption", "recipientsFile"), e.RecipientsFile, err.Error()))
		}
	}
	return errs
}

// pemCertsProblem says why name is not a readable PEM certificate bundle ("" when it is).
func pemCertsProblem(name string) string {
	data, err := os.ReadFile(name)
	if err != nil {
		return fileProblem(err, "the CA file").Error()
	}
	n := 0
	for rest := data; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if strings.Contains(b.Type, "PRIVATE KEY") {
			return "holds a private key: point it at the CA certificate only"
		}
		if b.Type == "CERTIFICATE" {
			if _, err := x509.ParseCertificate(b.Bytes); err != nil {
				return fmt.Sprintf("holds a certificate that can't be parsed: %v", err)
			}
			n++
		}
	}
	if n == 0 {
		return "holds no PEM certificate: point it at the CA certificate (PEM) that signed the object store's certificate"
	}
	return ""
}

// ValidateBackupEnvironment checks that the environment variables spec.backup's credentials name
// are set (getenv is os.Getenv in production); nil without spec.backup or with a credentials file.
// Like ValidateBackupFiles it is only run by the commands that use the object store. Messages name
// the variables, never their values.
func ValidateBackupEnvironment(c *v1alpha1.Cluster, getenv func(string) string) field.ErrorList {
	b := c.Spec.Backup
	if b == nil || b.ObjectStore.Credentials.Env == nil {
		return nil
	}
	e := b.ObjectStore.Credentials.Env
	p := field.NewPath("spec", "backup", "objectStore", "credentials", "env")
	var errs field.ErrorList
	for _, x := range []struct{ field, name string }{
		{"accessKeyID", e.AccessKeyID}, {"secretAccessKey", e.SecretAccessKey}, {"sessionToken", e.SessionToken},
	} {
		if x.name != "" && v1alpha1.IsEnvName(x.name) && getenv(x.name) == "" {
			errs = append(errs, field.Invalid(p.Child(x.field), x.name, fmt.Sprintf("names the environment variable %s, which is not set (or is empty): export %s=... before running hactl", x.name, x.name)))
		}
	}
	return errs
}
