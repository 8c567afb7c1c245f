package specload

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hactl/hactl/api/v1alpha1"
)

// TestBackupSpecs loads testdata/backup/invalid-*.yaml (each naming the field path and line of one
// problem, exit 2) and valid-*.yaml.
func TestBackupSpecs(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	tests := []struct {
		file, field string
		line        int
		notShown    string // a value the message must not quote
	}{
		{"invalid-unknown-field.yaml", "spec.backup.retention", 24, ""},
		{"invalid-inline-secret.yaml", "spec.backup.objectStore.credentials.env.secretAccessKey", 25, "wJalrXUtnFEMI"},
		{"invalid-inline-keys.yaml", "spec.backup.objectStore.credentials.accessKeyID", 23, ""},
		{"invalid-no-credentials.yaml", "spec.backup.objectStore.credentials", 18, ""},
		{"invalid-endpoint-scheme.yaml", "spec.backup.objectStore.endpoint", 19, ""},
		{"invalid-bucket-name.yaml", "spec.backup.objectStore.bucket", 20, ""},
		{"invalid-tls-and-plain.yaml", "spec.backup.objectStore.plainHTTP", 21, ""},
		{"invalid-lookup.yaml", "spec.backup.objectStore.bucketLookup", 21, ""},
		{"invalid-compression.yaml", "spec.backup.compression", 24, ""},
		{"invalid-identity-as-recipient.yaml", "spec.backup.encryption.recipients[0]", 25, "GFPYYSJZ"},
		{"invalid-prefix.yaml", "spec.backup.objectStore.prefix", 21, ""},
		{"invalid-delta-every.yaml", "spec.backup.deltaEvery", 24, ""},
	}
	files, _ := filepath.Glob("testdata/backup/invalid-*.yaml")
	if len(files) != len(tests) {
		t.Errorf("%d invalid files, %d cases", len(files), len(tests))
	}
	for _, tc := range tests {
		t.Run(strings.TrimSuffix(tc.file, ".yaml"), func(t *testing.T) {
			path := filepath.Join("testdata", "backup", tc.file)
			_, _, err := Load(path)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			t.Log(err)
			var ec exitCoder
			if !errors.As(err, &ec) || ec.ExitCode() != 2 {
				t.Errorf("exit code of %T is not 2", err)
			}
			if want := fmt.Sprintf("%s:%d: %s: ", path, tc.line, tc.field); !strings.Contains(err.Error(), want) {
				t.Errorf("error lacks %q", want)
			}
			if tc.notShown != "" && strings.Contains(err.Error(), tc.notShown) {
				t.Errorf("error quotes the secret")
			}
		})
	}

	c, _, err := Load("testdata/backup/valid-minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b := c.Spec.Backup
	if b.Compression != v1alpha1.CompressionZstd || b.ObjectStore.Region != "us-east-1" || b.ObjectStore.BucketLookup != v1alpha1.BucketLookupPath || b.Encryption != nil {
		t.Errorf("defaults: %+v", b)
	}
	c, _, err = Load("testdata/backup/valid-aws-encrypted.yaml")
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs("testdata/backup/s3-credentials")
	if o := c.Spec.Backup.ObjectStore; o.BucketLookup != v1alpha1.BucketLookupAuto || o.Credentials.File != abs || o.Region != "eu-central-1" {
		t.Errorf("objectStore %+v", o)
	}
}

// TestBackupCredentials: env and file credentials (mode 0600, both formats), and their errors
// naming the field and the variable or file, never a key.
func TestBackupCredentials(t *testing.T) {
	c, _, err := Load("testdata/backup/valid-minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HACTL_S3_ACCESS_KEY": "AKIA1", "HACTL_S3_SECRET_KEY": "s3cr3t"}
	got, err := ReadBackupCredentials(c, func(k string) string { return env[k] })
	if err != nil || got.AccessKeyID != "AKIA1" || got.SecretAccessKey != "s3cr3t" {
		t.Fatalf("env: %+v %v", got, err)
	}
	if errs := ValidateBackupEnvironment(c, func(k string) string { return env[k] }); len(errs) != 0 {
		t.Errorf("environment: %v", errs)
	}
	delete(env, "HACTL_S3_SECRET_KEY")
	_, err = ReadBackupCredentials(c, func(k string) string { return env[k] })
	if err == nil || !strings.Contains(err.Error(), "spec.backup.objectStore.credentials.env.secretAccessKey") || !strings.Contains(err.Error(), "HACTL_S3_SECRET_KEY") {
		t.Errorf("missing variable: %v", err)
	}
	if errs := ValidateBackupEnvironment(c, func(k string) string { return env[k] }); len(errs) != 1 || errs[0].Field != "spec.backup.objectStore.credentials.env.secretAccessKey" {
		t.Errorf("environment: %v", errs)
	}

	dir := t.TempDir()
	c.Spec.Backup.ObjectStore.Credentials = v1alpha1.ObjectStoreCredentials{File: filepath.Join(dir, "creds")}
	for _, tc := range []struct {
		content string
		mode    os.FileMode
		want    string // "" = ok
	}{
		{"accessKeyID: AKIA2\nsecretAccessKey: \"s3cr3t2\"\n", 0o600, ""},
		{"[other]\naws_access_key_id = X\n[default]\naws_access_key_id = AKIA2\naws_secret_access_key = s3cr3t2\n", 0o600, ""},
		{"accessKeyID: AKIA2\nsecretAccessKey: s3cr3t2\n", 0o644, "chmod 600"},
		{"accessKeyID: AKIA2\n", 0o600, "holds no access key"},
		{"password: s3cr3t2\n", 0o600, "unknown key \"password\""},
	} {
		os.WriteFile(c.Spec.Backup.ObjectStore.Credentials.File, []byte(tc.content), tc.mode)
		os.Chmod(c.Spec.Backup.ObjectStore.Credentials.File, tc.mode)
		got, err := ReadBackupCredentials(c, os.Getenv)
		errs := ValidateBackupFiles(c)
		switch {
		case tc.want == "" && (err != nil || got.AccessKeyID != "AKIA2" || got.SecretAccessKey != "s3cr3t2" || len(errs) != 0):
			t.Errorf("%q: %+v %v %v", tc.content, got, err, errs)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || len(errs) != 1):
			t.Errorf("%q: %v %v, want %q", tc.content, err, errs, tc.want)
		case err != nil && strings.Contains(err.Error(), "s3cr3t2"):
			t.Errorf("error quotes the secret: %v", err)
		}
	}
}

// TestReadersWrapTheCause: the secret readers' errors wrap what failed (here fs.ErrNotExist), with
// the field, the file and the message in the text.
func TestReadersWrapTheCause(t *testing.T) {
	c, _, err := Load("testdata/backup/valid-aws-encrypted.yaml")
	if err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing")
	c.Spec.Backup.Encryption.RecipientsFile = missing
	c.Spec.LoadBalancer = &v1alpha1.LoadBalancer{Auth: &v1alpha1.VRRPAuth{File: missing}}
	_, credsErr := ReadBackupCredentials(c, os.Getenv) // testdata/backup/s3-credentials does not exist
	_, recipErr := BackupRecipients(c)
	_, vrrpErr := ReadVRRPSecret(c, os.Getenv)
	for _, tc := range []struct {
		err  error
		want string
	}{
		{credsErr, "spec.backup.objectStore.credentials.file: "},
		{recipErr, "spec.backup.encryption.recipientsFile: " + missing + ": the recipients file does not exist"},
		{vrrpErr, "spec.loadBalancer.auth.file: " + missing + ": the auth secret file does not exist"},
	} {
		if !errors.Is(tc.err, fs.ErrNotExist) || !strings.HasPrefix(fmt.Sprint(tc.err), tc.want) {
			t.Errorf("error %v: want one wrapping fs.ErrNotExist, starting %q", tc.err, tc.want)
		}
	}
}
