package backup

import (
	"context"
	"fmt"
	"os"

	"filippo.io/age"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/internal/exitcode"
	"github.com/hactl/hactl/specload"
)

// IdentityEnv names the environment variable holding the path of the age identity file: the
// default of --identity-file.
const IdentityEnv = "HACTL_AGE_IDENTITY_FILE"

// StoreOptions say how OpenStore opens spec.backup's object store.
type StoreOptions struct {
	// Source names the spec file in errors ("cluster.yaml: spec.backup is not set ...").
	Source string
	// Bucket, when not "", replaces spec.backup.objectStore.bucket (an s3://BUCKET/KEY source).
	Bucket string
	// Getenv reads the environment variables the spec names for the credentials (nil: os.Getenv).
	Getenv func(string) string
}

// CheckSpec checks, without contacting anything, that spec.backup is set (else an
// *exitcode.UsageError saying to add it in order to purpose, e.g. "back up"), that the files it names
// exist and that the environment variables it names are set (a *v1alpha1.ValidationError naming
// the fields and variables, never a value). source names the spec file; getenv nil is os.Getenv.
func CheckSpec(c *v1alpha1.Cluster, source, purpose string, getenv func(string) string) error {
	if c.Spec.Backup == nil {
		return &exitcode.UsageError{Err: fmt.Errorf("%s: spec.backup is not set: add spec.backup.objectStore (endpoint, bucket, credentials) to %s (`hactl init` shows an example)", source, purpose)}
	}
	return c.ValidationError(source, append(specload.ValidateBackupFiles(c), specload.ValidateBackupEnvironment(c, orEnviron(getenv))...))
}

// OpenStore opens spec.backup's object store and checks its bucket (S3.CheckBucket). Errors:
// spec.backup missing, its files or environment incomplete, or a bad store configuration → exit 2
// (CheckSpec's errors, *exitcode.UsageError); the bucket check fails → its *BucketError (exit 1,
// found remotely).
func OpenStore(ctx context.Context, c *v1alpha1.Cluster, o StoreOptions) (*S3, error) {
	if err := CheckSpec(c, o.Source, "back up", o.Getenv); err != nil {
		return nil, err
	}
	cfg, err := S3ConfigFromSpec(c, orEnviron(o.Getenv))
	if err != nil {
		return nil, &exitcode.UsageError{Err: err}
	}
	if o.Bucket != "" {
		cfg.Bucket = o.Bucket
	}
	st, err := NewS3(cfg)
	if err != nil {
		return nil, &exitcode.UsageError{Err: err}
	}
	if err := st.CheckBucket(ctx); err != nil {
		return nil, err
	}
	return st, nil
}

// ListCluster lists the snapshots of the spec's cluster: List under spec.backup.objectStore.prefix
// and metadata.name (spec.backup must be set). Errors are List's.
func ListCluster(ctx context.Context, store Store, c *v1alpha1.Cluster) (*Listing, error) {
	return List(ctx, store, c.Spec.Backup.ObjectStore.Prefix, c.Metadata.Name)
}

// IdentitiesFrom reads the age identities of file (--identity-file) or, when file is "", of the
// file $HACTL_AGE_IDENTITY_FILE names (read with getenv; nil is os.Getenv); none when both are "".
// A missing or unparsable file is an *exitcode.UsageError naming --identity-file.
func IdentitiesFrom(file string, getenv func(string) string) ([]age.Identity, error) {
	if file == "" {
		file = orEnviron(getenv)(IdentityEnv)
	}
	if file == "" {
		return nil, nil
	}
	ids, err := ReadIdentities(file)
	if err != nil {
		return nil, &exitcode.UsageError{Err: fmt.Errorf("--identity-file: %w", err)}
	}
	return ids, nil
}

// orEnviron is getenv, or os.Getenv when it is nil.
func orEnviron(getenv func(string) string) func(string) string {
	if getenv == nil {
		return os.Getenv
	}
	return getenv
}
