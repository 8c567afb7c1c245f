package lab

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
)

// The lab's kind (sigs.k8s.io/kind) clusters. No registry is reachable here and --privileged fails
// (LAB.md), so the lab builds kind's node image itself and starts kind with hack/kind/docker first
// on its PATH; docs/kind.md says why each piece is needed.
const (
	// KindVersion is the kind CLI hack/build-kind.sh builds into bin/kind-<version>/, with the
	// containerd and crictl the node image carries.
	KindVersion = "v0.33.0"
	// KindNodeImageRepo is the local repository of the lab's kind node images (never pushed).
	KindNodeImageRepo = "hactl-lab/kind-node"
	// KindCluster is the lab's kind cluster name: its node containers are hactl-lab-kind-*, so the
	// lab's teardown (the hactl-lab prefix) removes them with everything else.
	KindCluster = "hactl-lab-kind"
	// kindRecipeVersion is bumped whenever the build steps change in a way the hashed inputs do
	// not capture.
	kindRecipeVersion = "1"
)

// KindNodePackages are the Debian packages of the node image: those of kind's images/base
// Dockerfile that Debian bookworm has (fuse-overlayfs, nfs-common, open-iscsi and e2fsprogs left out:
// rootless mode and storage drivers the lab does not use), plus runc and the CNI plugins, which
// kind builds from source and Debian ships.
func KindNodePackages() []string {
	return []string{
		"systemd", "systemd-sysv", "conntrack", "iptables", "nftables", "iproute2", "ethtool", "util-linux",
		"mount", "kmod", "libseccomp2", "pigz", "bash", "ca-certificates", "curl", "jq", "procps",
		"runc", "containernetworking-plugins",
	}
}

// KindInputs are the files the node image is built from.
type KindInputs struct {
	// BaseFiles is kind's images/base/files directory (in the module cache).
	BaseFiles string
	// Overlay is hack/kind/node: the lab's entrypoint, CNI loop and its unit.
	Overlay string
	// KindBin is bin/kind-<KindVersion>: containerd, ctr, containerd-shim-runc-v2, crictl.
	KindBin string
	// BinDir holds kubeadm, kubelet, kubectl and etcd.
	BinDir string
	// Images are the image archives preloaded into the node's containerd (KubeImageArchives).
	Images []string
	// ImagesInputs is the file holding the key of what Images were built from
	// (bin/kube-images-<version>.inputs, hack/build-kube-images.sh), or "". When set, it stands for
	// Images in the image's reference: docker's build timestamps make every build's archives
	// differ, so hashing them would rebuild the node image after every fresh clone.
	ImagesInputs string
}

// KindInputsFor returns the inputs under repo root (kind's module downloaded with `go mod
// download` when it is not in the module cache).
func KindInputsFor(ctx context.Context, root string) (KindInputs, error) {
	out, err := runCmd(ctx, nil, nil, "go", "mod", "download", "-json", "sigs.k8s.io/kind@"+KindVersion)
	if err != nil {
		return KindInputs{}, fmt.Errorf("kind module: %w", err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal([]byte(out), &mod); err != nil || mod.Dir == "" {
		return KindInputs{}, fmt.Errorf("kind module: go mod download -json printed %q: %v", out, err)
	}
	bin := filepath.Join(root, "bin")
	images, err := KubeImageArchives(bin)
	if err != nil {
		return KindInputs{}, err
	}
	in := KindInputs{BaseFiles: filepath.Join(mod.Dir, "images", "base", "files"), Overlay: filepath.Join(root, "hack", "kind", "node"),
		KindBin: filepath.Join(bin, "kind-"+KindVersion), BinDir: bin, Images: images}
	if p := filepath.Join(bin, "kube-images-"+KubernetesVersion+".inputs"); regularFile(p) {
		in.ImagesInputs = p
	}
	return in, nil
}

func (in KindInputs) binaries() []string {
	var out []string
	for _, b := range []string{"containerd", "ctr", "containerd-shim-runc-v2", "crictl"} {
		out = append(out, filepath.Join(in.KindBin, b))
	}
	for _, b := range []string{"kubeadm", "kubelet", "kubectl", "etcd"} {
		out = append(out, filepath.Join(in.BinDir, b))
	}
	return out
}

// KindNodeImageRef is "hactl-lab/kind-node:<Kubernetes version>-<12 hex digits>": a SHA-256 over the
// recipe version, the package list and the content of every input file (of in.ImagesInputs instead
// of the image archives when it is set). Errors: an input missing.
func KindNodeImageRef(in KindInputs) (string, error) {
	h := sha256.New()
	pk := slices.Sorted(slices.Values(KindNodePackages()))
	fmt.Fprintf(h, "recipe=%s\nsuite=%s\nkind=%s\npackages=%s\n", kindRecipeVersion, Suite, KindVersion, strings.Join(pk, ","))
	var files []string
	for _, dir := range []string{in.BaseFiles, in.Overlay} {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				files = append(files, p)
			}
			return err
		})
		if err != nil {
			return "", fmt.Errorf("kind node image inputs: %w", err)
		}
	}
	files = append(files, in.binaries()...)
	if in.ImagesInputs != "" {
		files = append(files, in.ImagesInputs)
	} else {
		files = append(files, in.Images...)
	}
	for _, p := range files {
		f, err := os.Open(p)
		if err != nil {
			return "", fmt.Errorf("kind node image inputs: %w", err)
		}
		fmt.Fprintf(h, "file=%s\n", filepath.Base(p))
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", fmt.Errorf("kind node image inputs: %s: %w", p, err)
		}
	}
	return KindNodeImageRepo + ":" + KubernetesVersion + "-" + hex.EncodeToString(h.Sum(nil))[:12], nil
}

// EnsureKindNodeImage returns the node image's reference, building it first when docker does not
// have it: debootstrap (KindNodePackages) into a temporary rootfs; kind's images/base steps
// (its files, units enabled and pruned as its Dockerfile does); containerd, ctr, the shim and crictl
// from in.KindBin, runc and the CNI plugins from Debian; kubeadm, kubelet, kubectl and /kind/version;
// the lab's overlay (entrypoint, CNI loop); every image of in.Images and an etcd image (bin/etcd,
// FROM scratch) imported into the rootfs's containerd content store by a containerd run here (as
// kind's node-image build does in a privileged container: `ctr images import --no-unpack` with the
// pinned label); then `docker import` with the lab's entrypoint, and the repository's other tags
// removed. About 1 minute; needs root.
func EnsureKindNodeImage(ctx context.Context, opts Options, in KindInputs) (string, error) {
	d := docker{debugf: opts.Debugf}
	ref, err := KindNodeImageRef(in)
	if err != nil {
		return "", err
	}
	if _, err := d.run(ctx, nil, "image", "inspect", "--format", "{{.Id}}", ref); err == nil {
		opts.Logf.printf("kind node image %s is cached", ref)
		return ref, nil
	}
	mirror, err := FindMirror("/etc/apt", Suite)
	if err != nil {
		return "", fmt.Errorf("build kind node image %s: %w", ref, err)
	}
	tmp, err := os.MkdirTemp("", "hactl-lab-kind-rootfs-")
	if err != nil {
		return "", fmt.Errorf("build kind node image %s: %w", ref, err)
	}
	defer func() {
		if err := removeRootfs(tmp); err != nil {
			opts.Logf.printf("warning: %v", err)
		}
	}()
	rootfs := filepath.Join(tmp, "rootfs")
	start := time.Now()
	opts.Logf.printf("building kind node image %s: debootstrap %s from %s", ref, Suite, mirror)
	if _, err := runCmd(ctx, opts.Debugf, nil, "debootstrap", "--variant=minbase",
		"--include="+strings.Join(KindNodePackages(), ","), Suite, rootfs, mirror); err != nil {
		return "", fmt.Errorf("build kind node image %s: debootstrap: %w", ref, err)
	}
	steps := []struct {
		name string
		fn   func() error
	}{
		{"kind's base files and units", func() error { return kindBase(ctx, opts.Debugf, rootfs, in) }},
		{"binaries", func() error { return kindBinaries(ctx, rootfs, in) }},
		{"the lab's overlay", func() error { return kindOverlay(ctx, opts.Debugf, rootfs, in) }},
		{"images", func() error { return kindPreload(ctx, opts, d, tmp, rootfs, in) }},
		{"docker import", func() error {
			return importRootfsAs(ctx, d, rootfs, ref, []string{"ENV container=docker", `ENTRYPOINT ["/usr/local/bin/hactl-lab-entrypoint", "/sbin/init"]`},
				"hactl lab kind node: debootstrap "+Suite+", kind "+KindVersion+" images/base, Kubernetes "+KubernetesVersion)
		}},
	}
	for _, s := range steps {
		if err := s.fn(); err != nil {
			return "", fmt.Errorf("build kind node image %s: %s: %w", ref, s.name, err)
		}
	}
	opts.Logf.printf("kind node image %s built in %s", ref, time.Since(start).Round(time.Second))
	removeOldImages(ctx, d, KindNodeImageRepo, ref, opts.Logf) // 1.2 GB each
	return ref, nil
}

// copyTree copies the regular files under src into dst (same relative paths), each with mode.
func copyTree(src, dst string, mode func(rel string) os.FileMode) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		return copyFile(p, filepath.Join(dst, rel), mode(rel))
	})
}

func copyFile(src, dst string, mode os.FileMode) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(dst, b, mode); err != nil {
		return err
	}
	return os.Chmod(dst, mode) // umask-proof
}

// kindBase does what kind's images/base Dockerfile does to its base stage: its files (scripts
// 0755, the rest 0644), the units systemd would start in a container removed, journald off
// /dev/kmsg, kubelet, containerd and undo-mount-hacks enabled, binfmt masked.
func kindBase(ctx context.Context, debugf LogFunc, rootfs string, in KindInputs) error {
	err := copyTree(in.BaseFiles, rootfs, func(rel string) os.FileMode {
		if strings.HasPrefix(rel, "usr/local/bin/") || strings.HasPrefix(rel, "kind/bin/") {
			return 0o755
		}
		return 0o644
	})
	if err != nil {
		return err
	}
	for _, glob := range []string{"lib/systemd/system/sysinit.target.wants/systemd-tmpfiles-setup.service",
		"lib/systemd/system/multi-user.target.wants/*", "etc/systemd/system/*.wants/*", "lib/systemd/system/local-fs.target.wants/*",
		"lib/systemd/system/sockets.target.wants/*udev*", "lib/systemd/system/sockets.target.wants/*initctl*", "lib/systemd/system/basic.target.wants/*"} {
		matches, _ := filepath.Glob(filepath.Join(rootfs, glob))
		for _, m := range matches {
			if err := os.Remove(m); err != nil {
				return err
			}
		}
	}
	f, err := os.OpenFile(filepath.Join(rootfs, "etc/systemd/journald.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString("ReadKMsg=no\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if _, err := runCmd(ctx, debugf, nil, "chroot", rootfs, "systemctl", "enable", "kubelet.service", "containerd.service", "undo-mount-hacks.service"); err != nil {
		return err
	}
	if _, err := runCmd(ctx, debugf, nil, "chroot", rootfs, "systemctl", "mask", "systemd-binfmt.service"); err != nil {
		return err
	}
	return os.MkdirAll(filepath.Join(rootfs, "etc/kubernetes/manifests"), 0o755)
}

// kindBinaries installs containerd, ctr, the shim and crictl into /usr/local/bin, runc (Debian's)
// where kind's is, the CNI plugins kind ships into /opt/cni/bin (Debian's, plus bridge for the
// lab's CNI loop), kubeadm, kubelet and kubectl into /usr/bin, /kind/version, and containerd's
// base runtime spec (`ctr oci spec` with kind's mount-product-files hook, without rlimits).
func kindBinaries(ctx context.Context, rootfs string, in KindInputs) error {
	for _, b := range in.binaries() {
		dst := filepath.Join(rootfs, "usr/local/bin", filepath.Base(b))
		switch filepath.Base(b) {
		case "etcd":
			continue // only in the etcd image
		case "kubeadm", "kubelet", "kubectl":
			dst = filepath.Join(rootfs, "usr/bin", filepath.Base(b))
		}
		if err := copyFile(b, dst, 0o755); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Join(rootfs, "usr/local/sbin"), 0o755); err != nil {
		return err
	}
	if err := os.Symlink("/usr/sbin/runc", filepath.Join(rootfs, "usr/local/sbin/runc")); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	for _, p := range []string{"host-local", "loopback", "ptp", "portmap", "bridge"} {
		if err := copyFile(filepath.Join(rootfs, "usr/lib/cni", p), filepath.Join(rootfs, "opt/cni/bin", p), 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(rootfs, "kind/version"), []byte(KubernetesVersion), 0o644); err != nil {
		return err
	}
	spec, err := exec.CommandContext(ctx, filepath.Join(in.KindBin, "ctr"), "oci", "spec").Output()
	if err != nil {
		return fmt.Errorf("ctr oci spec: %w", err)
	}
	base, err := criBaseSpec(spec)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(rootfs, "etc/containerd/cri-base.json"), base, 0o644)
}

// criBaseSpec is kind's /etc/containerd/cri-base.json from `ctr oci spec`: its createContainer
// hook /kind/bin/mount-product-files.sh appended, process.rlimits removed.
func criBaseSpec(spec []byte) ([]byte, error) {
	var s map[string]any
	if err := json.Unmarshal(spec, &s); err != nil {
		return nil, fmt.Errorf("ctr oci spec: %w", err)
	}
	hooks, _ := s["hooks"].(map[string]any)
	if hooks == nil {
		hooks = map[string]any{}
	}
	create, _ := hooks["createContainer"].([]any)
	hooks["createContainer"] = append(create, map[string]any{"path": "/kind/bin/mount-product-files.sh"})
	s["hooks"] = hooks
	if p, ok := s["process"].(map[string]any); ok {
		delete(p, "rlimits")
	}
	return json.MarshalIndent(s, "", "  ")
}

// kindOverlay installs hack/kind/node: hactl-lab-entrypoint and hactl-lab-cni (0755) into
// /usr/local/bin, hactl-lab-cni.service (enabled), and default-cni.yaml as kind's CNI manifest (the
// loop's read access to the nodes).
func kindOverlay(ctx context.Context, debugf LogFunc, rootfs string, in KindInputs) error {
	for name, dst := range map[string]string{
		"hactl-lab-entrypoint":  "usr/local/bin/hactl-lab-entrypoint",
		"hactl-lab-cni":         "usr/local/bin/hactl-lab-cni",
		"hactl-lab-cni.service": "etc/systemd/system/hactl-lab-cni.service",
		"default-cni.yaml":      "kind/manifests/default-cni.yaml",
	} {
		mode := os.FileMode(0o755)
		if strings.HasSuffix(name, ".service") || strings.HasSuffix(name, ".yaml") {
			mode = 0o644
		}
		if err := copyFile(filepath.Join(in.Overlay, name), filepath.Join(rootfs, dst), mode); err != nil {
			return err
		}
	}
	_, err := runCmd(ctx, debugf, nil, "chroot", rootfs, "systemctl", "enable", "hactl-lab-cni.service")
	return err
}

// KindEtcdImage is the etcd image the node carries for kubeadm's stacked etcd: bin/etcd FROM
// scratch, tagged as kubeadm names it with the binary's version (the kind config points kubeadm at
// this tag: the pinned etcd is not the one kubeadm defaults to).
func KindEtcdImage(etcdVersion string) string { return "registry.k8s.io/etcd:" + etcdVersion + "-0" }

// kindPreload builds the etcd image, then runs containerd here on the rootfs's
// /var/lib/containerd (no CRI, its own socket under tmp) and imports every archive into namespace
// k8s.io as kind's node-image build does: --no-unpack (the node unpacks on its own snapshotter),
// --label io.cri-containerd.pinned=pinned (kubelet's image GC leaves them).
func kindPreload(ctx context.Context, opts Options, d docker, tmp, rootfs string, in KindInputs) error {
	v, err := etcdVersionOf(ctx, opts.Debugf, filepath.Join(in.BinDir, "etcd"))
	if err != nil {
		return err
	}
	etcdRef := KindEtcdImage(v)
	bctx := filepath.Join(tmp, "etcd-image")
	if err := copyFile(filepath.Join(in.BinDir, "etcd"), filepath.Join(bctx, "etcd"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(bctx, "Dockerfile"), []byte("FROM scratch\nCOPY etcd /usr/local/bin/etcd\nENV PATH=/usr/local/bin\nENTRYPOINT [\"/usr/local/bin/etcd\"]\n"), 0o644); err != nil {
		return err
	}
	if _, err := runCmd(ctx, opts.Debugf, nil, "env", "DOCKER_BUILDKIT=0", "docker", "build", "-q", "-t", etcdRef, bctx); err != nil {
		return err
	}
	etcdArchive := filepath.Join(tmp, "etcd-image.tar")
	if _, err := d.run(ctx, nil, "save", "-o", etcdArchive, etcdRef); err != nil {
		return err
	}
	sock := filepath.Join(tmp, "containerd.sock")
	config := fmt.Sprintf("version = 3\nroot = %q\nstate = %q\ndisabled_plugins = [\"io.containerd.grpc.v1.cri\", \"io.containerd.cri.v1.images\", \"io.containerd.cri.v1.runtime\"]\n[grpc]\n  address = %q\n",
		filepath.Join(rootfs, "var/lib/containerd"), filepath.Join(tmp, "containerd-state"), sock)
	if err := os.WriteFile(filepath.Join(tmp, "containerd.toml"), []byte(config), 0o644); err != nil {
		return err
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	daemon := exec.CommandContext(cctx, filepath.Join(in.KindBin, "containerd"), "--config", filepath.Join(tmp, "containerd.toml"))
	var daemonLog strings.Builder
	daemon.Stdout, daemon.Stderr = &daemonLog, &daemonLog
	if err := daemon.Start(); err != nil {
		return fmt.Errorf("containerd: %w", err)
	}
	defer func() {
		cancel()
		daemon.Wait()
	}()
	ctr := filepath.Join(in.KindBin, "ctr")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := runCmd(ctx, opts.Debugf, nil, ctr, "-a", sock, "version"); err == nil {
			break
		} else if time.Now().After(deadline) {
			return fmt.Errorf("containerd did not answer on %s within 30s: %w\n%s", sock, err, daemonLog.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, a := range append(slices.Clone(in.Images), etcdArchive) {
		if _, err := runCmd(ctx, opts.Debugf, nil, ctr, "-a", sock, "-n", "k8s.io", "images", "import",
			"--label=io.cri-containerd.pinned=pinned", "--all-platforms", "--no-unpack", "--digests", a); err != nil {
			return fmt.Errorf("import %s: %w", a, err)
		}
	}
	out, err := runCmd(ctx, opts.Debugf, nil, ctr, "-a", sock, "-n", "k8s.io", "images", "ls", "-q")
	if err != nil {
		return err
	}
	opts.Logf.printf("kind node image: %d images preloaded (%s among them)", strings.Count(out, "registry.k8s.io/"), etcdRef)
	return nil
}

// KindConfig is the lab's kind cluster configuration: one control plane (kind's HA mode needs an
// envoy image that cannot be built here) and three workers labelled with the zones az-a/b/c;
// kindnetd replaced by the node image's CNI loop (kind applies the image's default-cni.yaml, which
// holds the loop's RBAC); containerd and kubelet set
// for this machine as the lab's own nodes are (LAB.md: the pause image that is there,
// restrict_oom_score_adj without CAP_SYS_RESOURCE, cgroup v1 accepted, no disk-pressure image GC
// or eviction on a shared disk); kubeadm's etcd at etcdImageTag (KindEtcdImage's tag).
func KindConfig(etcdImageTag, pauseImage string) string {
	return `kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
- role: control-plane
- role: worker
  labels: {topology.kubernetes.io/zone: az-a}
- role: worker
  labels: {topology.kubernetes.io/zone: az-b}
- role: worker
  labels: {topology.kubernetes.io/zone: az-c}
containerdConfigPatches:
- |-
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "` + pauseImage + `"
    restrict_oom_score_adj = true
kubeadmConfigPatches:
- |
  kind: ClusterConfiguration
  etcd:
    local:
      imageTag: ` + etcdImageTag + `
- |
  kind: KubeletConfiguration
  failCgroupV1: false
  failSwapOn: false
  imageGCHighThresholdPercent: 100
  evictionHard: {memory.available: "0%", nodefs.available: "0%", nodefs.inodesFree: "0%", imagefs.available: "0%"}
`
}

// WriteKindConfig writes KindConfig for in (its etcd's version, the pinned Kubernetes' pause image)
// to <dir>/kind.yaml and returns that path. Errors: etcd --version's, I/O.
func WriteKindConfig(ctx context.Context, opts Options, in KindInputs, dir string) (string, error) {
	etcdVersion, err := etcdVersionOf(ctx, opts.Debugf, filepath.Join(in.BinDir, "etcd"))
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	config := filepath.Join(dir, "kind.yaml")
	pause := (&v1alpha1.Kubernetes{Version: KubernetesVersion}).PauseImage()
	if err := writeFileAtomic(config, []byte(KindConfig(etcdVersion+"-0", pause)), 0o644); err != nil {
		return "", err
	}
	return config, nil
}

// KindEnviron is what kind needs here besides this process's environment: PATH with root's
// hack/kind first (the docker wrapper that rewrites --privileged) and the lab network as kind's
// (KIND_EXPERIMENTAL_DOCKER_NETWORK), as NAME=value entries.
func KindEnviron(root string) []string {
	return []string{"PATH=" + filepath.Join(root, "hack", "kind") + string(os.PathListSeparator) + os.Getenv("PATH"),
		"KIND_EXPERIMENTAL_DOCKER_NETWORK=" + NetworkName}
}

// KindKubeconfig is where KindUp writes the cluster's kubeconfig: <dir>/kind.kubeconfig.
func KindKubeconfig(dir string) string { return filepath.Join(dir, "kind.kubeconfig") }

// KindUp creates the lab's kind cluster KindCluster from image ref on the lab network (created
// when missing, as `hactl-lab up` creates it: kind's nodes then reach the lab's hosts, and
// get addresses from its ip-range), with root's hack/kind first on kind's PATH (the --privileged
// rewrite). The config is written to <dir>/kind.yaml and the kubeconfig to KindKubeconfig(dir). A
// cluster of that name is deleted first; KindUp returns once every node is Ready. Errors: kind's,
// with its output; nodes not Ready within 3 minutes.
func KindUp(ctx context.Context, opts Options, in KindInputs, root, dir, ref string) error {
	d := docker{debugf: opts.Debugf}
	if err := ensureNetworks(ctx, d, networksFor(Options{})); err != nil {
		return err
	}
	if !strings.HasPrefix(ref, KindNodeImageRepo+":") {
		return fmt.Errorf("kind up: %s is not a %s image", ref, KindNodeImageRepo)
	}
	config, err := WriteKindConfig(ctx, opts, in, dir)
	if err != nil {
		return err
	}
	kind := filepath.Join(in.KindBin, "kind")
	env := KindEnviron(root)
	if _, err := runEnv(ctx, opts.Debugf, env, kind, "delete", "cluster", "--name", KindCluster); err != nil {
		return err
	}
	start := time.Now()
	opts.Logf.printf("kind create cluster --name %s --image %s (1 control plane, 3 workers in az-a/b/c) on network %s", KindCluster, ref, NetworkName)
	if _, err := runEnv(ctx, opts.Debugf, env, kind, "create", "cluster", "--name", KindCluster, "--image", ref,
		"--config", config, "--kubeconfig", KindKubeconfig(dir), "--wait", "3m"); err != nil {
		return fmt.Errorf("kind create cluster: %w", err)
	}
	// kind's --wait covers the control plane; the workers' CNI loop needs a few more seconds.
	if _, err := runCmd(ctx, opts.Debugf, nil, filepath.Join(in.BinDir, "kubectl"), "--kubeconfig", KindKubeconfig(dir),
		"wait", "--for=condition=Ready", "nodes", "--all", "--timeout=3m"); err != nil {
		return fmt.Errorf("kind cluster %s: nodes not Ready: %w", KindCluster, err)
	}
	opts.Logf.printf("kind cluster %s up in %s; kubeconfig %s", KindCluster, time.Since(start).Round(100*time.Millisecond), KindKubeconfig(dir))
	return nil
}

// KindDown deletes the lab's kind cluster, its config and kubeconfig in dir, and the lab network
// when nothing else uses it (the lab's hosts keep it). Errors: kind's.
func KindDown(ctx context.Context, opts Options, root, dir string) error {
	kind := filepath.Join(root, "bin", "kind-"+KindVersion, "kind")
	if _, err := os.Stat(kind); err == nil {
		if _, err := runEnv(ctx, opts.Debugf, nil, kind, "delete", "cluster", "--name", KindCluster); err != nil {
			return err
		}
	}
	for _, f := range []string{KindKubeconfig(dir), filepath.Join(dir, "kind.yaml")} {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	d := docker{debugf: opts.Debugf}
	if out, err := d.run(ctx, nil, "network", "inspect", "--format", "{{len .Containers}}", NetworkName); err == nil && strings.TrimSpace(out) == "0" {
		if _, err := d.run(ctx, nil, "network", "rm", NetworkName); err != nil {
			opts.Logf.printf("warning: %v", err)
		}
	}
	opts.Logf.printf("kind cluster %s deleted", KindCluster)
	return nil
}

// runEnv is runCmd with env added to this process's environment.
func runEnv(ctx context.Context, debugf LogFunc, env []string, name string, args ...string) (string, error) {
	full := append(append([]string{}, env...), name)
	return runCmd(ctx, debugf, nil, "env", append(full, args...)...)
}

// etcdVersionOf is the version the etcd binary at path reports ("3.6.16").
func etcdVersionOf(ctx context.Context, debugf LogFunc, path string) (string, error) {
	out, err := runCmd(ctx, debugf, nil, path, "--version")
	if err != nil {
		return "", err
	}
	v, ok := strings.CutPrefix(strings.SplitN(out, "\n", 2)[0], "etcd Version: ")
	if !ok {
		return "", fmt.Errorf("%s --version printed %q", path, out)
	}
	return v, nil
}

// regularFile reports whether p is a regular file.
func regularFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}
