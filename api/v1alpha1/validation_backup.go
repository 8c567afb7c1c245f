package v1alpha1

import (
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"filippo.io/age"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/hactl/hactl/api/limits"
)

func compressionModes() []string { return []string{CompressionZstd, CompressionNone} }
func bucketLookups() []string    { return []string{BucketLookupPath, BucketLookupDNS, BucketLookupAuto} }

var (
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
	if b.DeltaEvery.Duration == 0 {
		b.DeltaEvery.Duration = DefaultDeltaEvery
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

// backup checks spec.backup (defaulted). It reads no files and no environment (specload's
// ValidateBackupFiles and ValidateBackupEnvironment do).
func (v *validator) backup(b *Backup, p *field.Path) {
	if b == nil {
		return
	}
	if modes := compressionModes(); !slices.Contains(modes, b.Compression) {
		v.add(field.NotSupported(p.Child("compression"), b.Compression, modes))
	}
	v.objectStore(&b.ObjectStore, p.Child("objectStore"))
	if d := b.DeltaEvery.Duration; d < limits.MinDeltaEvery || d%time.Second != 0 {
		v.add(field.Invalid(p.Child("deltaEvery"), b.DeltaEvery.String(), fmt.Sprintf("must be whole seconds, at least %s (each delta is an object-store write), e.g. 30s", limits.MinDeltaEvery)))
	}
	if e := b.Encryption; e != nil {
		ep := p.Child("encryption")
		if len(e.Recipients) == 0 && e.RecipientsFile == "" {
			v.add(field.Required(ep, "name at least one age recipient: recipients (public keys, age1...) and/or recipientsFile (a file of them); or remove encryption to store snapshots unencrypted"))
		}
		var kinds []string
		for i, r := range e.Recipients {
			rp := ep.Child("recipients").Index(i)
			if msg := RecipientProblem(r); msg != "" {
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
	if lookups := bucketLookups(); !slices.Contains(lookups, o.BucketLookup) {
		v.add(field.NotSupported(p.Child("bucketLookup"), o.BucketLookup, lookups))
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
		v.add(checkEnvName(envp.Child("accessKeyID"), e.AccessKeyID, "AWS_ACCESS_KEY_ID", "access key ID"),
			checkEnvName(envp.Child("secretAccessKey"), e.SecretAccessKey, "AWS_SECRET_ACCESS_KEY", "secret access key"),
			checkEnvName(envp.Child("sessionToken"), e.SessionToken, "AWS_SESSION_TOKEN", "session token"))
	}
	if c.File != "" && (looksLikeSecret(c.File) || strings.ContainsAny(c.File, "\n\r")) {
		v.add(field.Invalid(cp.Child("file"), "(value not shown)", "looks like a secret, not a file path: set the path of a local credentials file (mode 0600); keys never go in the spec"))
	}
}

// RecipientProblem says what is wrong with an age recipient ("" when nothing): it must be an age
// public key (age1..., parsed with filippo.io/age), not an identity (AGE-SECRET-KEY-...). Messages
// never quote what looks like a private key. Validate applies it to spec.backup.encryption.recipients,
// specload to the lines of recipientsFile.
func RecipientProblem(r string) string {
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
