package kubephases

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/internal/shell"
	"github.com/hactl/hactl/provision"
)

// stageSuffix names a binary uploaded or downloaded next to its final path, checked, then renamed
// over it (same directory: the rename is atomic).
const stageSuffix = ".hactl-stage"

// Exit codes of the install command for what it diagnoses itself.
const (
	exitChecksum = 91
	exitVersion  = 92
	exitFetch    = 93
)

// Binaries installs kubelet, kubeadm and kubectl where their sha256 differs: each is uploaded (or
// downloaded on the host) next to its final path, its sha256 and the version it reports checked on
// the host, and only when every artifact of the host passed are they renamed into place. It runs
// before anything else is installed (etcd, the load balancer, the runtime): a wrong checksum or
// version stops the run with nothing installed.
type Binaries struct{ g *Group }

// Title is PhaseBinaries.
func (*Binaries) Title() string { return PhaseBinaries }

// Mutates: the phase changes hosts.
func (*Binaries) Mutates() bool { return true }

// ShouldRun: some node lacks a binary.
func (ph *Binaries) ShouldRun() bool {
	if !ph.g.planned() {
		return false
	}
	for _, n := range ph.g.nodes {
		if len(ph.g.plan(n.host.Name).binaries) > 0 {
			return true
		}
	}
	return false
}

// ChecksumError refuses a downloaded artifact whose sha256 is not the spec's. Nothing was installed.
type ChecksumError struct {
	Host, Artifact, URL, Want, Got string
}

func (e *ChecksumError) Error() string {
	return fmt.Sprintf("host %s: %s from %s has sha256 %s, but spec.kubernetes.download.%s.sha256 is %s: nothing was installed; fix the sha256 or the URL",
		e.Host, e.Artifact, e.URL, e.Got, e.Artifact, e.Want)
}

// ExitCode is 1: a runtime failure on a host.
func (e *ChecksumError) ExitCode() int { return 1 }

// VersionError refuses an artifact that reports another version than the spec's. Nothing was
// installed.
type VersionError struct {
	Host, Artifact, Want, Got string
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("host %s: %s reports %q, but the spec wants %s (spec.kubernetes.version / kubeletVersion): nothing was installed",
		e.Host, e.Artifact, e.Got, e.Want)
}

// Run does the phase's work, on every node at once within maxParallel. Errors per host:
// *ChecksumError, *VersionError, upload and command errors.
//
// It also starts the installation of the runtime packages in the background (see startPackages).
func (ph *Binaries) Run(ctx context.Context) error {
	g := ph.g
	err := g.forEach(ctx, g.nodes, func(ctx context.Context, n node) error {
		arts := g.plan(n.host.Name).binaries
		if len(arts) == 0 {
			return nil
		}
		var uploads []provision.File
		var closers []io.Closer
		defer func() {
			for _, c := range closers {
				c.Close()
			}
		}()
		for _, a := range arts {
			if a.local == "" {
				continue
			}
			f, err := os.Open(a.local)
			if err != nil {
				return err
			}
			closers = append(closers, f)
			fi, err := f.Stat()
			if err != nil {
				return err
			}
			uploads = append(uploads, provision.File{Path: binPath(a.name) + stageSuffix, Mode: 0o755, Reader: f, Size: fi.Size(), SHA256: a.sum})
		}
		sctx, cancel := g.run.StepCtx(ctx)
		defer cancel()
		if len(uploads) > 0 {
			if err := g.run.Upload(sctx, n.host.Name, PhaseBinaries, uploads); err != nil {
				return err
			}
		}
		k := g.run.Spec.Spec.Kubernetes
		res, err := g.run.Exec(sctx, n.host.Name, PhaseBinaries, installScript(k, arts))
		if err != nil {
			return binaryFailure(k, n, arts, res, err)
		}
		var names []string
		for _, a := range arts {
			names = append(names, a.name)
		}
		g.run.Printer.Hostf(n.host.Name, "installed %s (sha256 and version checked)", strings.Join(names, ", "))
		return nil
	})
	if err == nil {
		g.startPackages(ctx) // after the checks: nothing is installed when a binary is refused
	}
	return err
}

// versionCommand prints the version artifact name reports (one line, e.g. "v1.37.2").
func versionCommand(name, path string) string {
	switch name {
	case "kubelet": // "Kubernetes v1.37.2"
		return shell.Quote(path) + " --version | awk '{print $2}'"
	case "kubeadm":
		return shell.Quote(path) + " version -o short"
	default: // kubectl: "Client Version: v1.37.2"
		return shell.Quote(path) + " version --client 2>/dev/null | awk '/^Client Version:/ {print $3}'"
	}
}

// wantVersion is the version artifact name must report under spec.kubernetes k.
func wantVersion(k *v1alpha1.Kubernetes, name string) string {
	if name == "kubelet" {
		return k.KubeletVersion
	}
	return k.Version
}

// installScript downloads what comes from URLs, checks every staged artifact's sha256 and version
// (wantVersion under spec.kubernetes k), then renames them all into place. Staged files are removed
// on any failure.
func installScript(k *v1alpha1.Kubernetes, arts []artifact) string {
	var b strings.Builder
	// Every staged file (uploaded ones included) is removed when anything fails.
	var staged []string
	for _, a := range arts {
		staged = append(staged, binPath(a.name)+stageSuffix)
	}
	fmt.Fprintf(&b, "set -eu\nstaged=%s\ncleanup() { [ -z \"$staged\" ] || rm -f $staged; }\ntrap cleanup EXIT\n", shell.Quote(strings.Join(staged, " ")))
	for _, a := range arts {
		st := binPath(a.name) + stageSuffix
		if a.dl != nil {
			fmt.Fprintf(&b, `if command -v curl >/dev/null 2>&1; then curl -fsSL --retry 3 -o %[1]s %[2]s || { echo "fetch %[3]s: curl failed" >&2; exit %[4]d; }
elif command -v wget >/dev/null 2>&1; then wget -q -O %[1]s %[2]s || { echo "fetch %[3]s: wget failed" >&2; exit %[4]d; }
else echo "fetch %[3]s: neither curl nor wget on the host" >&2; exit %[4]d; fi
chmod 0755 %[1]s
`, shell.Quote(st), shell.Quote(a.dl.URL), a.name, exitFetch)
			// An upload's sha256 was checked by the upload itself.
			fmt.Fprintf(&b, "got=$(sha256sum %s | awk '{print $1}')\n", shell.Quote(st))
			fmt.Fprintf(&b, "[ \"$got\" = %s ] || { echo \"checksum %s $got\" >&2; exit %d; }\n", shell.Quote(a.sum), a.name, exitChecksum)
		}
	}
	for _, a := range arts {
		st := binPath(a.name) + stageSuffix
		fmt.Fprintf(&b, "v=$(%s 2>/dev/null || true)\n", versionCommand(a.name, st))
		fmt.Fprintf(&b, "[ \"$v\" = %s ] || { echo \"version %s $v\" >&2; exit %d; }\n", shell.Quote(wantVersion(k, a.name)), a.name, exitVersion)
	}
	for _, a := range arts {
		fmt.Fprintf(&b, "mv -f %s %s\n", shell.Quote(binPath(a.name)+stageSuffix), shell.Quote(binPath(a.name)))
	}
	b.WriteString("staged=''\n")
	return b.String()
}

// binaryFailure turns the install command's failure on node n into a typed error (the version wanted
// under spec.kubernetes k).
func binaryFailure(k *v1alpha1.Kubernetes, n node, arts []artifact, res provision.Result, err error) error {
	var ce *provision.CommandError
	if !asCommandError(err, &ce) {
		return err
	}
	last := lastLine(string(res.Stderr))
	fields := strings.Fields(last)
	find := func(name string) artifact {
		for _, a := range arts {
			if a.name == name {
				return a
			}
		}
		return artifact{name: name}
	}
	switch {
	case ce.ExitCode == exitChecksum && len(fields) >= 2:
		a := find(fields[1])
		got := ""
		if len(fields) > 2 {
			got = fields[2]
		}
		url := "(uploaded)"
		if a.dl != nil {
			url = a.dl.URL
		}
		return &ChecksumError{Host: n.host.Name, Artifact: a.name, URL: url, Want: a.sum, Got: got}
	case ce.ExitCode == exitVersion && len(fields) >= 2:
		got := strings.Join(fields[2:], " ")
		return &VersionError{Host: n.host.Name, Artifact: fields[1], Want: wantVersion(k, fields[1]), Got: got}
	}
	return err
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
