package lab

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/internal/shell"
)

// Files of the mirror in the lab directory and on the mirror host.
const (
	// TarballSHA256File (in the lab directory) holds the tarball's sha256: 64 hex digits and a newline.
	TarballSHA256File = "etcd-tarball.sha256"
	// mirrorRoot is the directory the mirror serves (not a tmpfs: docker cp must see it).
	mirrorRoot = "/srv/mirror"
	// mirrorUnit serves mirrorRoot with busybox httpd on MirrorPort.
	mirrorUnit = "hactl-lab-mirror.service"
	// tarballFormat is bumped when the tarball's layout or encoding changes (invalidates the cache).
	tarballFormat = "1"
)

// etcdBinaries are the files of an etcd release tarball the lab packs, in archive order.
var etcdBinaries = [...]string{"etcd", "etcdctl", "etcdutl"}

// TarballName returns the release tarball's file name for version on this machine's architecture,
// e.g. "etcd-v3.6.16-linux-amd64.tar.gz" (the binaries in <repo>/bin are built for it).
func TarballName(version string) string {
	return tarballBase(version) + ".tar.gz"
}

func tarballBase(version string) string {
	return "etcd-" + version + "-linux-" + runtime.GOARCH
}

// EtcdTarball is the etcd release tarball the lab's mirror serves.
type EtcdTarball struct {
	// Name is the file name, e.g. "etcd-v3.6.16-linux-amd64.tar.gz".
	Name string
	// Path is the local copy in the lab directory.
	Path string
	// SHA256 is the tarball's sha256 in lowercase hex.
	SHA256 string
	// URL is the tarball's URL on the lab network (http://172.28.0.32:8080/<Name>).
	URL string
	// InternalURL is its URL on the internal network (hosts behind the bastion), "" without Options.Bastion.
	InternalURL string
	// IPv6URL is its URL on the IPv6 network (http://[fd00:db8:28::32]:8080/<Name>), "" without Options.IPv6.
	IPv6URL string
}

// Download returns the spec's etcd.download for the tarball at url (one of t's URLs).
func (t EtcdTarball) Download(url string) *v1alpha1.EtcdDownload {
	return &v1alpha1.EtcdDownload{URL: url, SHA256: t.SHA256}
}

// MirrorURL returns http://addr:MirrorPort/name (addr bracketed when IPv6), "" when addr is "".
func MirrorURL(addr, name string) string {
	if addr == "" {
		return ""
	}
	return "http://" + net.JoinHostPort(addr, strconv.Itoa(MirrorPort)) + "/" + name
}

// tarballURLs fills t's URLs from the mirror host's attachments.
func tarballURLs(t EtcdTarball, mirror Host) EtcdTarball {
	for _, a := range mirror.Networks {
		switch a.Network {
		case NetworkName:
			t.URL = MirrorURL(a.IPv4, t.Name)
		case InternalNetworkName:
			t.InternalURL = MirrorURL(a.IPv4, t.Name)
		case IPv6NetworkName:
			t.IPv6URL = MirrorURL(a.IPv6, t.Name)
		}
	}
	return t
}

// BuildEtcdTarball writes the etcd release tarball (TarballName(EtcdVersion)) into outDir from
// binDir's etcd, etcdctl and etcdutl, in the release layout: one top-level directory
// etcd-<version>-linux-<arch>/ holding the three binaries (0755, root-owned, fixed mtime), gzip.
// The archive is deterministic: the same binaries give the same bytes and sha256. It is rebuilt
// only when the binaries' sizes or modification times changed (recorded in <name>.src). It also
// writes outDir/TarballSHA256File. Returns the tarball's path and sha256 (hex).
func BuildEtcdTarball(binDir, outDir string) (path, sum string, err error) {
	name := TarballName(EtcdVersion)
	path = filepath.Join(outDir, name)
	srcFile := path + ".src"
	fp, err := binFingerprint(binDir)
	if err != nil {
		return "", "", fmt.Errorf("etcd tarball: %w (build the binaries with hack/build-etcd.sh)", err)
	}
	if old, err := os.ReadFile(srcFile); err == nil && string(old) == fp {
		if sum, err = fileSHA256(path); err == nil {
			return path, sum, writeFileAtomic(filepath.Join(outDir, TarballSHA256File), []byte(sum+"\n"), 0o644)
		}
	}
	f, err := os.CreateTemp(outDir, "."+name+".tmp-*")
	if err != nil {
		return "", "", fmt.Errorf("etcd tarball: %w", err)
	}
	defer os.Remove(f.Name()) // no-op after the rename
	h := sha256.New()
	if err := writeTarball(io.MultiWriter(f, h), binDir, tarballBase(EtcdVersion)); err != nil {
		f.Close()
		return "", "", fmt.Errorf("etcd tarball: %w", err)
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return "", "", fmt.Errorf("etcd tarball: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", "", fmt.Errorf("etcd tarball: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return "", "", fmt.Errorf("etcd tarball: %w", err)
	}
	sum = hex.EncodeToString(h.Sum(nil))
	if err := writeFileAtomic(filepath.Join(outDir, TarballSHA256File), []byte(sum+"\n"), 0o644); err != nil {
		return "", "", fmt.Errorf("etcd tarball: %w", err)
	}
	if err := writeFileAtomic(srcFile, []byte(fp), 0o644); err != nil {
		return "", "", fmt.Errorf("etcd tarball: %w", err)
	}
	return path, sum, nil
}

// tarballMTime is the modification time of every tarball entry (deterministic output).
var tarballMTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// writeTarball writes the gzip'd tar of binDir's etcd binaries under top/ to w.
func writeTarball(w io.Writer, binDir, top string) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	hdr := func(name string, mode int64, typ byte, size int64) *tar.Header {
		return &tar.Header{Typeflag: typ, Name: name, Mode: mode, Size: size, ModTime: tarballMTime,
			Uname: "root", Gname: "root", Format: tar.FormatPAX}
	}
	if err := tw.WriteHeader(hdr(top+"/", 0o755, tar.TypeDir, 0)); err != nil {
		return err
	}
	for _, b := range etcdBinaries {
		if err := addFile(tw, filepath.Join(binDir, b), hdr(top+"/"+b, 0o755, tar.TypeReg, 0)); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

func addFile(tw *tar.Writer, src string, h *tar.Header) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", src)
	}
	h.Size = st.Size()
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	if n, err := io.Copy(tw, f); err != nil {
		return err
	} else if n != h.Size {
		return fmt.Errorf("%s changed while being archived", src)
	}
	return nil
}

// binFingerprint describes binDir's etcd binaries (size and mtime each) and the tarball format.
func binFingerprint(binDir string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "format=%s version=%s arch=%s\n", tarballFormat, EtcdVersion, runtime.GOARCH)
	for _, n := range etcdBinaries {
		st, err := os.Stat(filepath.Join(binDir, n))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%s %d %d\n", n, st.Size(), st.ModTime().UnixNano())
	}
	return b.String(), nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// mirrorUnitText is the systemd unit serving mirrorRoot over HTTP on every address of the host.
func mirrorUnitText() string {
	return fmt.Sprintf(`[Unit]
Description=hactl lab: HTTP mirror of %[1]s on port %[2]d
After=network.target

[Service]
ExecStart=/bin/busybox httpd -f -v -p %[2]d -h %[1]s
Restart=always

[Install]
WantedBy=multi-user.target
`, mirrorRoot, MirrorPort)
}

// setupMirror copies the tarball (and a SHA256SUMS file) and the lab's apt repository (EnsureAptRepo,
// built first when missing, into mirrorRoot/AptRepoPath) into the mirror host and starts mirrorUnit,
// returning once both are served on 127.0.0.1.
func (l starter) setupMirror(ctx context.Context, h Host) error {
	t, err := l.EtcdTarball()
	if err != nil {
		return err
	}
	repo, err := EnsureAptRepo(ctx, l.opts.BinDir, l.opts.Logf, l.opts.Debugf)
	if err != nil {
		return fmt.Errorf("mirror: %w", err)
	}
	sums := fmt.Sprintf("%s  %s\n", t.SHA256, t.Name)
	script := fmt.Sprintf(`set -e
mkdir -p %[1]s
printf '%%s' %[2]s > %[1]s/SHA256SUMS
cat > /etc/systemd/system/%[3]s <<'EOF'
%[4]sEOF
`, mirrorRoot, shell.Quote(sums), mirrorUnit, mirrorUnitText())
	if _, err := l.d.run(ctx, nil, "exec", h.Container, "sh", "-c", script); err != nil {
		return fmt.Errorf("mirror: %w", err)
	}
	if _, err := l.d.run(ctx, nil, "cp", t.Path, h.Container+":"+mirrorRoot+"/"+t.Name); err != nil {
		return fmt.Errorf("mirror: copy tarball: %w", err)
	}
	// "DIR/." copies the directory's content into mirrorRoot/AptRepoPath (created by docker cp).
	if _, err := l.d.run(ctx, nil, "cp", repo.Dir+"/.", h.Container+":"+mirrorRoot+"/"+AptRepoPath); err != nil {
		return fmt.Errorf("mirror: copy apt repository: %w", err)
	}
	if l.opts.Kubernetes {
		// kubelet, kubeadm and kubectl as dl.k8s.io lays them out, for spec.kubernetes.download.
		dir := mirrorRoot + "/" + path.Dir(kubeBinaryPath("kubelet"))
		if _, err := l.d.run(ctx, nil, "exec", h.Container, "mkdir", "-p", dir); err != nil {
			return fmt.Errorf("mirror: %w", err)
		}
		for _, b := range []string{"kubelet", "kubeadm", "kubectl"} {
			if _, err := l.d.run(ctx, nil, "cp", filepath.Join(l.opts.BinDir, b), h.Container+":"+dir+"/"+b); err != nil {
				return fmt.Errorf("mirror: copy %s: %w", b, err)
			}
		}
	}
	probe := MirrorURL("127.0.0.1", t.Name)
	probeApt := MirrorURL("127.0.0.1", AptRepoPath+"/Packages.gz")
	if _, err := l.d.run(ctx, nil, "exec", h.Container, "sh", "-c",
		"systemctl daemon-reload && systemctl enable --now "+mirrorUnit+
			" && for i in $(seq 50); do curl -fsS -o /dev/null -r 0-0 "+probe+" && curl -fsS -o /dev/null "+probeApt+
			" && exit 0; sleep 0.1; done; exit 1"); err != nil {
		status, _ := l.d.run(context.WithoutCancel(ctx), nil, "exec", h.Container, "systemctl", "status", "--no-pager", mirrorUnit)
		return fmt.Errorf("mirror: start %s: %w\n%s", mirrorUnit, err, status)
	}
	l.opts.Logf.printf("lab: mirror serves %s (sha256 %s) and the apt repository %s (%d packages)",
		t.URL, t.SHA256, AptRepoURL(MirrorAddress), len(repo.Packages))
	return nil
}

// AptRepoURL returns the URL of the lab's apt repository on the mirror at addr,
// http://addr:MirrorPort/apt/ (addr bracketed when IPv6), "" when addr is "". Its base,
// MirrorURL(addr, ""), is what AptSourcesScript takes.
func AptRepoURL(addr string) string {
	return MirrorURL(addr, AptRepoPath+"/")
}

// kubeBinaryPath is where the mirror serves Kubernetes binary name (dl.k8s.io's layout).
func kubeBinaryPath(name string) string {
	return "kubernetes/" + KubernetesVersion + "/bin/linux/amd64/" + name
}

// KubeDownload returns spec.kubernetes.download's entry for Kubernetes binary name (kubelet,
// kubeadm, kubectl) served by the lab's mirror (Options.Kubernetes), with its sha256 from BinDir.
func (l *Lab) KubeDownload(name string) (*v1alpha1.Download, error) {
	sum, err := fileSHA256(filepath.Join(l.opts.BinDir, name))
	if err != nil {
		return nil, err
	}
	return &v1alpha1.Download{URL: MirrorURL(MirrorAddress, kubeBinaryPath(name)), SHA256: sum}, nil
}
