package v1alpha1

// Backup is where and how `hactl backup` stores etcd snapshots (spec.backup): an S3-compatible
// object store, optional zstd compression and optional client-side age encryption. Snapshots live
// under <objectStore.prefix>/<metadata.name>/.
type Backup struct {
	// ObjectStore is the S3-compatible bucket snapshots are streamed into.
	ObjectStore ObjectStore `json:"objectStore"`
	// Compression is "zstd" (default) or "none".
	Compression string `json:"compression,omitempty"`
	// Encryption encrypts every snapshot to age recipients before it leaves this machine (etcd
	// snapshots hold every Kubernetes Secret); nil stores snapshots unencrypted. Decryption
	// identities are never in the spec: `hactl backup verify --identity-file` names them.
	Encryption *BackupEncryption `json:"encryption,omitempty"`
	// DeltaEvery is how often `hactl backup agent` (installed on every member by `hactl backup
	// schedule --deltas`) stores the changes since the last delta, so a restore reaches a revision at
	// most about this old: the RPO with deltas (default 30s, DefaultDeltaEvery; at least 5s, and
	// shorter than the full snapshots' interval).
	DeltaEvery Duration `json:"deltaEvery,omitzero"`
}

// ObjectStore is an S3-compatible endpoint and bucket (AWS S3, MinIO, Ceph RGW, ...).
type ObjectStore struct {
	// Endpoint is "host:port" (or "host"), without a scheme: https unless PlainHTTP is true.
	Endpoint string `json:"endpoint"`
	// Bucket is the existing bucket (hactl never creates one).
	Bucket string `json:"bucket"`
	// Prefix is an optional key prefix ("backups/etcd"), without leading or trailing "/".
	Prefix string `json:"prefix,omitempty"`
	// Region is the bucket's region (default us-east-1, which MinIO uses too).
	Region string `json:"region,omitempty"`
	// BucketLookup is the request style: "path" (https://endpoint/bucket/key), "dns"
	// (https://bucket.endpoint/key) or "auto". Default: auto for *.amazonaws.com, else path.
	BucketLookup string `json:"bucketLookup,omitempty"`
	// TLS holds the CA the endpoint's certificate is verified against (default: the system roots).
	TLS *ObjectStoreTLS `json:"tls,omitempty"`
	// PlainHTTP talks to the endpoint over plain HTTP (no TLS); it must be set explicitly and
	// can't be combined with TLS. Snapshots still carry hactl's sha256 and, with encryption, are
	// unreadable to anyone between.
	PlainHTTP bool `json:"plainHTTP,omitempty"`
	// Credentials names where the access key comes from: environment variables or a file, never
	// the keys themselves.
	Credentials ObjectStoreCredentials `json:"credentials"`
}

// ObjectStoreTLS configures TLS to the object store.
type ObjectStoreTLS struct {
	// CAFile is a local PEM bundle of the CA(s) that signed the endpoint's certificate.
	CAFile string `json:"caFile,omitempty"`
}

// ObjectStoreCredentials names the source of the S3 access key: exactly one of Env and File.
type ObjectStoreCredentials struct {
	// Env names the environment variables holding the keys.
	Env *CredentialsEnv `json:"env,omitempty"`
	// File is a local file (mode 0600 or stricter) holding the keys: either "accessKeyID: ..." and
	// "secretAccessKey: ..." lines (optionally "sessionToken: ..."), or an AWS credentials file's
	// aws_access_key_id / aws_secret_access_key (/ aws_session_token) of its [default] profile.
	File string `json:"file,omitempty"`
}

// CredentialsEnv names environment variables (never their values).
type CredentialsEnv struct {
	// AccessKeyID names the variable holding the access key ID, e.g. AWS_ACCESS_KEY_ID.
	AccessKeyID string `json:"accessKeyID"`
	// SecretAccessKey names the variable holding the secret key, e.g. AWS_SECRET_ACCESS_KEY.
	SecretAccessKey string `json:"secretAccessKey"`
	// SessionToken optionally names the variable holding a session token (temporary credentials).
	SessionToken string `json:"sessionToken,omitempty"`
}

// BackupEncryption lists the age recipients (public keys) every snapshot is encrypted to: the
// union of Recipients and the lines of RecipientsFile; at least one in all.
type BackupEncryption struct {
	// Recipients are age public keys ("age1...").
	Recipients []string `json:"recipients,omitempty"`
	// RecipientsFile is a local file of age recipients, one per line ("#" comments allowed).
	RecipientsFile string `json:"recipientsFile,omitempty"`
}

// Compression modes (spec.backup.compression).
const (
	CompressionZstd = "zstd"
	CompressionNone = "none"
)

// Bucket lookup styles (spec.backup.objectStore.bucketLookup).
const (
	BucketLookupPath = "path"
	BucketLookupDNS  = "dns"
	BucketLookupAuto = "auto"
)

// Defaults of spec.backup.
const (
	DefaultBackupCompression = CompressionZstd
	DefaultBackupRegion      = "us-east-1"
)
