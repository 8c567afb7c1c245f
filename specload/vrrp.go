package specload

import (
	"fmt"
	"io"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/hactl/hactl/api/limits"
	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/internal/shell"
	"github.com/hactl/hactl/lb"
)

// maxSecretFileBytes bounds how much of an auth secret file is read.
const maxSecretFileBytes = 4096

// ReadVRRPSecret returns the VRRP PASS secret spec.loadBalancer.auth names: the content of auth.file
// (a regular file, mode 0600 or stricter, at most maxSecretFileBytes; one trailing newline removed)
// or the value of the environment variable auth.env (getenv is os.Getenv in production). It returns
// "" and no error when the spec has no load balancer or no auth, and an error naming the field (never
// the secret) when the secret can't be read or breaks v1alpha1.VRRPSecretProblem's rules.
func ReadVRRPSecret(c *v1alpha1.Cluster, getenv func(string) string) (string, error) {
	lb := c.Spec.LoadBalancer
	if lb == nil || lb.Auth == nil {
		return "", nil
	}
	ap := field.NewPath("spec", "loadBalancer", "auth")
	var s string
	switch a := lb.Auth; {
	case a.File != "" && a.Env != "":
		return "", fmt.Errorf("%s: set exactly one of file and env", ap)
	case a.File != "":
		secret, err := readSecretFile(a.File)
		if err != nil {
			return "", fmt.Errorf("%s: %s: %w", ap.Child("file"), a.File, err)
		}
		s = secret
		if msg := v1alpha1.VRRPSecretProblem(s); msg != "" {
			return "", fmt.Errorf("%s: the auth secret in %s %s", ap.Child("file"), a.File, msg)
		}
	case a.Env != "":
		s = getenv(a.Env)
		if s == "" {
			return "", fmt.Errorf("%s: names the environment variable %s, which is not set (or is empty)", ap.Child("env"), a.Env)
		}
		if msg := v1alpha1.VRRPSecretProblem(s); msg != "" {
			return "", fmt.Errorf("%s: the auth secret in %s %s", ap.Child("env"), a.Env, msg)
		}
	default:
		return "", fmt.Errorf("%s: set file or env", ap)
	}
	return s, nil
}

// readSecretFile reads an auth secret file: a regular file, not readable by group or others, at
// most maxSecretFileBytes; one trailing newline ("\n" or "\r\n") is removed. It returns the secret or
// a *fileError saying what is wrong (never quoting the content; wrapping the cause when reading
// failed).
func readSecretFile(name string) (string, error) {
	fi, err := os.Stat(name)
	switch {
	case err != nil:
		return "", fileProblem(err, "the auth secret file")
	case !fi.Mode().IsRegular():
		return "", problemf("is not a regular file; point it at a file holding the VRRP auth secret")
	case fi.Mode().Perm()&0o077 != 0:
		return "", problemf("has mode %04o: a secret file must not be accessible by group or others; run: chmod 600 %s", fi.Mode().Perm(), shell.Quote(name))
	}
	f, err := os.Open(name)
	if err != nil {
		return "", fileProblem(err, "the auth secret file")
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSecretFileBytes+1))
	switch {
	case err != nil:
		return "", fileProblem(err, "the auth secret file")
	case len(data) > maxSecretFileBytes:
		return "", problemf("is larger than %d bytes, which no VRRP secret is: point it at the file holding the secret (at most %d characters)", maxSecretFileBytes, limits.MaxVRRPSecretLength)
	}
	s := string(data)
	if t, ok := strings.CutSuffix(s, "\n"); ok {
		s = strings.TrimSuffix(t, "\r")
	}
	return s, nil
}

// ReadAuthSecret reads the secret spec.loadBalancer.auth names (ReadVRRPSecret) into the
// lb.AuthSecret that lb.RenderKeepalived takes. It returns the zero AuthSecret when the spec has no
// auth; errors are ReadVRRPSecret's or lb.NewAuthSecret's, none quoting the secret.
func ReadAuthSecret(c *v1alpha1.Cluster, getenv func(string) string) (lb.AuthSecret, error) {
	s, err := ReadVRRPSecret(c, getenv)
	if err != nil || s == "" {
		return lb.AuthSecret{}, err
	}
	return lb.NewAuthSecret(s)
}
