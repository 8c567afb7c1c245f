// Package s3test starts a real MinIO server (bin/minio, built by hack/build-minio.sh) on 127.0.0.1
// for tests, with a fresh data dir and bucket (path-style lookup, plain HTTP, region us-east-1).
package s3test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Test credentials of the server Start runs (MinIO's root user; local only).
const (
	AccessKey = "hactl-test"
	SecretKey = "hactl-test-secret"
	Bucket    = "etcd-backups"
	Region    = "us-east-1"
)

// Server is a running MinIO server.
type Server struct {
	// Endpoint is 127.0.0.1:port (plain HTTP).
	Endpoint string
	Dir      string
}

// Binary returns the path of bin/minio in the repository, or "" when it is missing.
func Binary() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		// A nested module (cmd/hactl-operator) has its own go.mod: keep walking up to the one
		// whose bin/ holds the build.
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, "bin", "minio")
			if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
				return p
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

func Start(t testing.TB) *Server {
	t.Helper()
	bin := Binary()
	if bin == "" {
		if os.Getenv("HACTL_REQUIRE_MINIO") == "1" {
			t.Fatal("bin/minio is missing and HACTL_REQUIRE_MINIO=1: run `make minio-bin` (hack/build-minio.sh)")
		}
		t.Skip("bin/minio is missing: run `make minio-bin` (hack/build-minio.sh) to run the object store tests")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	cmd := exec.Command(bin, "server", filepath.Join(dir, "data"), "--address", addr, "--console-address", "127.0.0.1:0", "--quiet")
	cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+AccessKey, "MINIO_ROOT_PASSWORD="+SecretKey,
		"MINIO_BROWSER=off", "MINIO_UPDATE=off", "MINIO_CONFIG_DIR="+filepath.Join(dir, "config"))
	logf, err := os.Create(filepath.Join(dir, "minio.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		logf.Close()
	})
	var last error
	exited := errors.New("minio exited")
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		select {
		case <-done:
			return false, exited
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/minio/health/ready", nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if last = err; err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "minio.log"))
		if errors.Is(err, exited) {
			t.Fatalf("minio exited: %s", log)
		}
		t.Fatalf("minio not ready on %s after 30s: %v (last: %v)\n%s", addr, err, last, log)
	}
	cl, err := minio.New(addr, &minio.Options{Creds: credentials.NewStaticV4(AccessKey, SecretKey, ""), Region: Region})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.MakeBucket(ctx, Bucket, minio.MakeBucketOptions{Region: Region}); err != nil {
		t.Fatalf("make bucket: %v", err)
	}
	s := &Server{Endpoint: addr, Dir: dir}
	t.Logf("minio on %s (%s)", addr, fmt.Sprint(bin))
	return s
}
