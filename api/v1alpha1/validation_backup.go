package v1alpha1

import (
	"bufio"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"filippo.io/age"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	compressionModes = []string{CompressionZstd, CompressionNone}
	bucketLookups    = []string{BucketLookupPath, BucketLookupDNS, BucketLookupAuto}
	// bucketNameRE: S3 bucket naming rules (3-63 characters of lowercase letters, digits, '.' and
	// '-', starting and ending with a letter or digit).
	bucketNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)
	// regionRE: region names such as us-east-1, eu-central-1, or a MinIO site name.
	regionRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$`)
	// prefixRE: key prefix segments of safe characters, separated by single '/'.
	prefixRE = regexp.MustCompile(`^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$`)
)

// setDefaults fills spec.backup's defaults (compression zstd, region us-east-1, bucketLookup auto
// for *.amazonaws.com endpoints and path for any other) and returns its local paths (tls.caFile,
// credentials.file, encryption.recipientsFile) for SetDefaults to resolve.
func (b *Backup) setDefaults() []*string {
	if b.Compression == "" {
		b.Compression = DefaultBackupCompression
	}
	o := &b.ObjectStore
	if o.Region == "" {
		o.Region = DefaultBackupRegion
	}
	if o.BucketLookup == "" {
		o.BucketLookup = BucketLookupPath
		if host, _, err := net.SplitHostPort(o.Endpoint); (err == nil && isAWSHost(host)) || isAWSHost(o.Endpoint) {
			o.BucketLookup = BucketLookupAuto
		}
	}
	paths := []*string{&o.Credentials.File}
	if o.TLS != nil {
		paths = append(paths, &o.TLS.CAFile)
	}
	if b.Encryption != nil {
		paths = append(paths, &b.Encryption.RecipientsFile)
	}
	return paths
}

func isAWSHost(h string) bool {
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	return h == "amazonaws.com" || strings.HasSuffix(h, ".amazonaws.com")
}

// backup checks spec.backup (defaulted). It reads no files and no environment (see
// validateBackupLocalFiles and validateBackupEnvironment).
func (v *validator) backup(b *Backup, p *field.Path) {
	if b == nil {
		return
	}
	if !slices.Contains(compressionModes, b.Compression) {
		v.add(field.NotSupported(p.Child("compression"), b.Compression, compressionModes))
	}
	v.objectStore(&b.ObjectStore, p.Child("objectStore"))
	if e := b.Encryption; e != nil {
		ep := p.Child("encryption")
		if len(e.Recipients) == 0 && e.RecipientsFile == "" {
			v.add(field.Required(ep, "name at least one age recipient: recipients (public keys, age1...) and/or recipientsFile (a file of them); or remove encryption to store snapshots unencrypted"))
		}
		var kinds []string
		for i, r := range e.Recipients {
			rp := ep.Child("recipients").Index(i)
			if msg := recipientProblem(r); msg != "" {
				v.add(field.Invalid(rp, shownRecipient(r), msg))
				continue
			}
			kinds = append(kinds, recipientKind(r))
		}
		if slices.Contains(kinds, "hybrid") && slices.Contains(kinds, "x25519") {
			v.add(field.Invalid(ep.Child("recipients"), "(mixed)", "post-quantum (age1pq1...) and X25519 (age1...) recipients can't be mixed in one file (age refuses it): use one kind"))
		}
		if looksLikeSecret(e.RecipientsFile) || strings.HasPrefix(strings.TrimSpace(e.RecipientsFile), "AGE-SECRET-KEY-") {
			v.add(field.Invalid(ep.Child("recipientsFile"), "(value not shown)", "looks like a private key, not a file path: set the path of a file of age recipients (public keys); identities never go in the spec"))
		}
	}
}

func (v *validator) objectStore(o *ObjectStore, p *field.Path) {
	ep := p.Child("endpoint")
	switch ep2 := o.Endpoint; {
	case ep2 == "":
		v.add(field.Required(ep, "set the object store's host:port, e.g. s3.eu-central-1.amazonaws.com or minio.example.com:9000"))
	case strings.Contains(ep2, "://"):
		scheme, rest, _ := strings.Cut(ep2, "://")
		hint := "https is used unless plainHTTP: true"
		if scheme == "http" {
			hint = "for plain HTTP set plainHTTP: true"
		}
		v.add(field.Invalid(ep, ep2, fmt.Sprintf("write host:port without a scheme (%s), e.g. %s", hint, strings.TrimSuffix(rest, "/"))))
	case strings.ContainsAny(ep2, "/?#@ "):
		v.add(field.Invalid(ep, "(value not shown)", "must be host or host:port only: no path, query, user info or spaces (the bucket and prefix are separate fields; credentials never go here)"))
	default:
		if host, port, err := net.SplitHostPort(ep2); err == nil {
			if n, err := strconv.Atoi(port); err != nil || !validPort(n) || host == "" {
				v.add(field.Invalid(ep, ep2, "must be host:port with a port between 1 and 65535, e.g. minio.example.com:9000"))
			}
		} else if strings.Contains(ep2, ":") && !strings.HasPrefix(ep2, "[") && strings.Count(ep2, ":") == 1 {
			v.add(field.Invalid(ep, ep2, "must be host:port with a port between 1 and 65535, e.g. minio.example.com:9000"))
		}
	}
	if o.Bucket == "" {
		v.add(field.Required(p.Child("bucket"), "set the bucket snapshots go into (it must exist; hactl never creates one), e.g. etcd-backups"))
	} else if !bucketNameRE.MatchString(o.Bucket) || strings.Contains(o.Bucket, "..") {
		v.add(field.Invalid(p.Child("bucket"), o.Bucket, "must be an S3 bucket name: 3-63 characters of lowercase letters, digits, '.' and '-', starting and ending with a letter or digit, e.g. etcd-backups"))
	}
	if o.Prefix != "" && !prefixRE.MatchString(o.Prefix) {
		v.add(field.Invalid(p.Child("prefix"), o.Prefix, "must be key segments of letters, digits, '.', '_' and '-' separated by single '/', without a leading or trailing '/', e.g. backups/etcd"))
	}
	if !regionRE.MatchString(o.Region) {
		v.add(field.Invalid(p.Child("region"), o.Region, "must be a region name such as us-east-1 (MinIO's default too)"))
	}
	if !slices.Contains(bucketLookups, o.BucketLookup) {
		v.add(field.NotSupported(p.Child("bucketLookup"), o.BucketLookup, bucketLookups))
	}
	if o.PlainHTTP && o.TLS != nil {
		v.add(field.Invalid(p.Child("plainHTTP"), true, "plain HTTP uses no TLS: remove tls, or remove plainHTTP to use https"))
	}
	if o.TLS != nil && o.TLS.CAFile == "" {
		v.add(field.Required(p.Child("tls", "caFile"), "set the local CA bundle (PEM) the endpoint's certificate is verified against, or remove tls to use the system's roots"))
	}

	cp := p.Child("credentials")
	c := o.Credentials
	switch {
	case c.Env == nil && c.File == "":
		v.add(field.Required(cp, "name where the access key comes from: env (the NAMES of the environment variables holding it, e.g. accessKeyID: AWS_ACCESS_KEY_ID, secretAccessKey: AWS_SECRET_ACCESS_KEY) or file (a local file, mode 0600); never the keys themselves"))
	case c.Env != nil && c.File != "":
		v.add(field.Invalid(cp.Child("file"), c.File, "set exactly one of env and file"))
	}
	if e := c.Env; e != nil {
		envp := cp.Child("env")
		if e.AccessKeyID == "" {
			v.add(field.Required(envp.Child("accessKeyID"), "name the environment variable holding the access key ID, e.g. AWS_ACCESS_KEY_ID"))
		}
		if e.SecretAccessKey == "" {
			v.add(field.Required(envp.Child("secretAccessKey"), "name the environment variable holding the secret access key, e.g. AWS_SECRET_ACCESS_KEY"))
		}
		v.envName(envp.Child("accessKeyID"), e.AccessKeyID, "AWS_ACCESS_KEY_ID", "access key ID")
		v.envName(envp.Child("secretAccessKey"), e.SecretAccessKey, "AWS_SECRET_ACCESS_KEY", "secret access key")
		v.envName(envp.Child("sessionToken"), e.SessionToken, "AWS_SESSION_TOKEN", "session token")
	}
	if c.File != "" && (looksLikeSecret(c.File) || strings.ContainsAny(c.File, "\n\r")) {
		v.add(field.Invalid(cp.Child("file"), "(value not shown)", "looks like a secret, not a file path: set the path of a local credentials file (mode 0600); keys never go in the spec"))
	}
}

// recipientProblem says what is wrong with an age recipient ("" when nothing). Messages never
// quote what looks like a private key.
func recipientProblem(r string) string {
	switch {
	case strings.HasPrefix(strings.ToUpper(strings.TrimSpace(r)), "AGE-SECRET-KEY-"):
		return "is an age PRIVATE key (identity): put its public key here (age-keygen -y FILE prints it) and keep the identity out of the spec; if this was a real key, it is no longer secret"
	case !strings.HasPrefix(r, "age1"):
		return "must be an age public key (age1..., as age-keygen prints it)"
	}
	if _, err := age.ParseRecipients(strings.NewReader(r)); err != nil {
		return fmt.Sprintf("is not a valid age recipient: %v", err)
	}
	return ""
}

func recipientKind(r string) string {
	if strings.HasPrefix(r, "age1pq1") {
		return "hybrid"
	}
	return "x25519"
}

// shownRecipient is r when it may be echoed (a public key), else a placeholder.
func shownRecipient(r string) string {
	if strings.HasPrefix(r, "age1") {
		return r
	}
	return "(value not shown)"
}

// BackupCredentials are the object store's access key, read from where spec.backup names.
type BackupCredentials struct {
	AccessKeyID, SecretAccessKey, SessionToken string
}

// maxCredentialsFileBytes bounds how much of a credentials file is read.
const maxCredentialsFileBytes = 64 << 10

// ReadBackupCredentials returns the access key spec.backup.objectStore.credentials names: the
// values of its environment variables (getenv is os.Getenv in production) or the content of its
// file (mode 0600 or stricter; see ObjectStoreCredentials.File for the formats). Errors name the
// field and the variable or file, never a key; none of them is returned without spec.backup.
func ReadBackupCredentials(c *Cluster, getenv func(string) string) (BackupCredentials, error) {
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
		out, msg := readCredentialsFile(cr.File)
		if msg != "" {
			return BackupCredentials{}, fmt.Errorf("%s: %s: %s", cp.Child("file"), cr.File, msg)
		}
		return out, nil
	}
	return BackupCredentials{}, fmt.Errorf("%s: set env or file", cp)
}

// readCredentialsFile parses a credentials file; it returns a message (never quoting the content)
// when the file is unusable.
func readCredentialsFile(name string) (BackupCredentials, string) {
	fi, err := os.Stat(name)
	switch {
	case err != nil:
		return BackupCredentials{}, fileProblem(err, "the credentials file")
	case !fi.Mode().IsRegular():
		return BackupCredentials{}, "is not a regular file; point it at the file holding the access key"
	case fi.Mode().Perm()&0o077 != 0:
		return BackupCredentials{}, fmt.Sprintf("has mode %04o: a credentials file must not be accessible by group or others; run: chmod 600 %s", fi.Mode().Perm(), shellQuote(name))
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
		return BackupCredentials{}, fmt.Sprintf("is larger than %d bytes, which no credentials file is", maxCredentialsFileBytes)
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
			return BackupCredentials{}, fmt.Sprintf("line %d is not \"key: value\" or \"key = value\"", n)
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
			return BackupCredentials{}, fmt.Sprintf("line %d: unknown key %q; known keys: accessKeyID, secretAccessKey, sessionToken (or aws_access_key_id, aws_secret_access_key, aws_session_token)", n, strings.TrimSpace(k))
		}
	}
	if out.AccessKeyID == "" || out.SecretAccessKey == "" {
		return BackupCredentials{}, "holds no access key: it needs accessKeyID and secretAccessKey (or an AWS credentials file's [default] aws_access_key_id and aws_secret_access_key)"
	}
	return out, ""
}

// maxRecipientsFileBytes bounds how much of a recipients file is read.
const maxRecipientsFileBytes = 1 << 20

// BackupRecipients returns the age recipients of spec.backup.encryption: Recipients followed by
// the lines of RecipientsFile (empty lines and "#" comments skipped). It returns nil without
// encryption, and an error naming the field when the file can't be read or holds no valid
// recipient.
func BackupRecipients(c *Cluster) ([]string, error) {
	if c.Spec.Backup == nil || c.Spec.Backup.Encryption == nil {
		return nil, nil
	}
	e := c.Spec.Backup.Encryption
	out := slices.Clone(e.Recipients)
	if e.RecipientsFile != "" {
		rs, msg := readRecipientsFile(e.RecipientsFile)
		if msg != "" {
			return nil, fmt.Errorf("spec.backup.encryption.recipientsFile: %s: %s", e.RecipientsFile, msg)
		}
		out = append(out, rs...)
	}
	return out, nil
}

func readRecipientsFile(name string) ([]string, string) {
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
		return nil, fmt.Sprintf("is larger than %d bytes, which no recipients file is", maxRecipientsFileBytes)
	}
	var out []string
	for n, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if msg := recipientProblem(line); msg != "" {
			return nil, fmt.Sprintf("line %d %s", n+1, msg)
		}
		out = append(out, line)
	}
	if len(out) == 0 {
		return nil, "holds no age recipient (one public key, age1..., per line)"
	}
	return out, ""
}

// ValidateBackupFiles checks the local files spec.backup names (nil without spec.backup): the
// credentials file is a usable credentials file with mode 0600 or stricter, the CA file holds PEM
// certificates, and the recipients file holds age recipients. It is separate from
// ValidateLocalFiles so that commands which don't touch the object store (bootstrap, status) don't
// need the backup's files; `hactl backup` runs it before contacting anything. Wrap the result with
// Cluster.ValidationError (exit 2).
func ValidateBackupFiles(c *Cluster) field.ErrorList {
	b := c.Spec.Backup
	if b == nil {
		return nil
	}
	var errs field.ErrorList
	p := field.NewPath("spec", "backup")
	op := p.Child("objectStore")
	if f := b.ObjectStore.Credentials.File; f != "" {
		if _, msg := readCredentialsFile(f); msg != "" {
			errs = append(errs, field.Invalid(op.Child("credentials", "file"), f, msg))
		}
	}
	if t := b.ObjectStore.TLS; t != nil && t.CAFile != "" {
		if msg := pemCertsProblem(t.CAFile); msg != "" {
			errs = append(errs, field.Invalid(op.Child("tls", "caFile"), t.CAFile, msg))
		}
	}
	if e := b.Encryption; e != nil && e.RecipientsFile != "" {
		if _, msg := readRecipientsFile(e.RecipientsFile); msg != "" {
			errs = append(errs, field.Invalid(p.Child("encryption", "recipientsFile"), e.RecipientsFile, msg))
		}
	}
	return errs
}

// pemCertsProblem says why name is not a readable PEM certificate bundle ("" when it is).
func pemCertsProblem(name string) string {
	data, err := os.ReadFile(name)
	if err != nil {
		return fileProblem(err, "the CA file")
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
func ValidateBackupEnvironment(c *Cluster, getenv func(string) string) field.ErrorList {
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
		if x.name != "" && isEnvName(x.name) && getenv(x.name) == "" {
			errs = append(errs, field.Invalid(p.Child(x.field), x.name, fmt.Sprintf("names the environment variable %s, which is not set (or is empty): export %s=... before running hactl", x.name, x.name)))
		}
	}
	return errs
}
