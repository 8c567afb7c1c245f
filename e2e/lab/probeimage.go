package lab

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// The lab's test workload image (e2e/cmd/kube-probe), in an image archive the Kubernetes specs
// list next to the Kubernetes images: hactl imports it like any air-gapped application image.
const (
	// probeRepo is its repository (a registry-style name with a dot: containerd keeps it as is).
	probeRepo = "hactl-lab.local/probe"
	// probeSource is the program's directory in the repository.
	probeSource = "e2e/cmd/kube-probe"
)

// probeTag is the image's tag: a hash of the program's source and the Go release building it.
func probeTag(repoRoot string) (string, error) {
	src, err := os.ReadFile(filepath.Join(repoRoot, probeSource, "main.go"))
	if err != nil {
		return "", fmt.Errorf("probe image: %w", err)
	}
	h := sha256.New()
	h.Write(src)
	h.Write([]byte(runtime.Version()))
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

// ProbeImage returns the probe image's reference for the repository at repoRoot.
func ProbeImage(repoRoot string) (string, error) {
	tag, err := probeTag(repoRoot)
	if err != nil {
		return "", err
	}
	return probeRepo + ":" + tag, nil
}

// probeArchive is where the probe image's archive lives in binDir.
func probeArchive(binDir, tag string) string {
	return filepath.Join(binDir, "lab-images", "probe-"+tag+".tar")
}

// ensureProbeArchive builds the probe image's archive unless it exists: a static build of
// e2e/cmd/kube-probe, an image FROM scratch (the classic builder works offline), `docker save`,
// then the local tag is removed (the machine keeps no docker image outside hactl-lab/host).
func ensureProbeArchive(ctx context.Context, o Options) (string, error) {
	if o.RepoRoot == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", err
		}
		if o.RepoRoot, err = FindRepoRoot(wd); err != nil {
			return "", err
		}
	}
	tag, err := probeTag(o.RepoRoot)
	if err != nil {
		return "", err
	}
	out := probeArchive(o.BinDir, tag)
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	tmp, err := os.MkdirTemp("", "hactl-lab-probe-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	build := func(name string, env []string, args ...string) error {
		o.Debugf.printf("$ %s %v", name, args)
		cmd := execCommand(ctx, name, args...)
		cmd.Dir = o.RepoRoot
		cmd.Env = append(os.Environ(), env...)
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("probe image: %s %v: %w\n%s", name, args, err, b)
		}
		return nil
	}
	if err := build("go", []string{"CGO_ENABLED=0"}, "build", "-trimpath", "-o", filepath.Join(tmp, "probe"), "./"+probeSource); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(tmp, "Dockerfile"), []byte("FROM scratch\nCOPY probe /probe\nENTRYPOINT [\"/probe\"]\n"), 0o644); err != nil {
		return "", err
	}
	ref := probeRepo + ":" + tag
	if err := build("docker", []string{"DOCKER_BUILDKIT=0"}, "build", "-q", "-t", ref, tmp); err != nil {
		return "", err
	}
	defer build("docker", nil, "rmi", ref) //nolint:errcheck // best effort: the archive is what counts
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", err
	}
	if err := build("docker", nil, "save", "-o", out+".tmp", ref); err != nil {
		return "", err
	}
	if err := os.Rename(out+".tmp", out); err != nil {
		return "", err
	}
	o.Logf.printf("lab: probe image %s saved to %s", ref, out)
	return out, nil
}

var execCommand = exec.CommandContext
