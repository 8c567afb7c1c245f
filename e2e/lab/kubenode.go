package lab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/kubeadm"
)

// Host preparation of the lab's Kubernetes nodes: what a real machine has and a container lacks.
// None of it is Kubernetes: containerd, kubelet, the CNI and kubeadm are installed by hactl.

// kubeNodeInitFile (in the lab directory) is the PID-1 wrapper of Kubernetes nodes, bind-mounted
// read-only at kubeNodeInitPath.
const (
	kubeNodeInitFile = "kube-node-init"
	kubeNodeInitPath = "/hactl-lab-init"
)

// kubeNodeInit gives a node its own cgroup hierarchy (docs/design.md, issue 12 findings). The node
// runs with --cgroupns=private and without the machine's /sys/fs/cgroup: docker mounts the
// container's own subtree of each hierarchy read-only. Before systemd starts, the wrapper makes
// the cgroup tmpfs writable, mounts every hierarchy again read-write (a fresh mount inside a
// private cgroup namespace shows only the container's subtree), drops any hierarchy whose fresh
// mount is the machine's real root (cgroup.sane_behavior exists only there: hierarchies docker
// gives no cgroup of their own, shared by every container), mounts the cgroup v2 "unified"
// hierarchy, and makes the tmpfs read-only again so that systemd cannot mount the dropped
// hierarchies (hugetlb, perf_event, net_cls,net_prio on this machine) at their shared root. Then
// kubelet's cgroupfs driver on one node sees that node's pods only.
const kubeNodeInit = `#!/bin/sh
# hactl lab: a private cgroup hierarchy for this Kubernetes node, then systemd.
set -e
mount -o remount,rw /sys/fs/cgroup
for d in /sys/fs/cgroup/*; do
  [ -L "$d" ] && continue
  fstype=$(awk -v m="$d" '$2 == m { print $3 }' /proc/mounts)
  [ -n "$fstype" ] || continue
  opts=$(awk -v m="$d" '$2 == m { print $4 }' /proc/mounts | tr ',' '\n' | grep -vE '^(ro|rw|nosuid|nodev|noexec|relatime)$' | paste -sd, -)
  umount "$d"
  if [ "$fstype" = cgroup2 ]; then mount -t cgroup2 -o rw,nosuid,nodev,noexec cgroup2 "$d"; else mount -t cgroup -o "rw,nosuid,nodev,noexec,$opts" cgroup "$d"; fi
  if [ -e "$d/cgroup.sane_behavior" ]; then
    umount "$d"; rmdir "$d"
    for l in /sys/fs/cgroup/*; do [ -L "$l" ] && [ "$(readlink "$l")" = "${d##*/}" ] && rm -f "$l"; done
  fi
done
mkdir -p /sys/fs/cgroup/unified
mount -t cgroup2 -o rw,nosuid,nodev,noexec cgroup2 /sys/fs/cgroup/unified
if [ ! -e /sys/fs/cgroup/unified/cgroup.type ]; then umount /sys/fs/cgroup/unified; rmdir /sys/fs/cgroup/unified; fi
mount -o remount,ro /sys/fs/cgroup
exec /lib/systemd/systemd
`

// writeKubeNodeInit writes kubeNodeInit into dir (mode 0755) and returns its path.
func writeKubeNodeInit(dir string) (string, error) {
	p := filepath.Join(dir, kubeNodeInitFile)
	if err := writeFileAtomic(p, []byte(kubeNodeInit), 0o755); err != nil {
		return "", fmt.Errorf("write %s: %w", p, err)
	}
	return p, os.Chmod(p, 0o755)
}

// kubeNodeFlags are the docker run flags of a Kubernetes node: containerFlags with a private
// cgroup namespace instead of the machine's hierarchy, the init wrapper, containerd's data on a
// named volume (its overlay snapshotter fails on docker's overlay) and the kernel modules
// read-only (LAB.md).
func kubeNodeFlags(volume, initPath string) []string {
	var f []string
	for i := 0; i < len(containerFlags); i++ {
		switch containerFlags[i] {
		case "--cgroupns=host":
			f = append(f, "--cgroupns=private")
		case "-v":
			i++ // the machine's /sys/fs/cgroup
		default:
			f = append(f, containerFlags[i])
		}
	}
	// A real machine's root devices cgroup allows every device; docker's default for a container
	// does not, and runc then cannot start privileged pods (kube-proxy: "failed to write a *:* rwm
	// ... devices.allow: operation not permitted").
	f = append(f, "--device-cgroup-rule", "a *:* rwm")
	return append(f, "-v", initPath+":"+kubeNodeInitPath+":ro", "-v", volume+":/var/lib/containerd", "-v", "/lib/modules:/lib/modules:ro")
}

// kubeNodePrepUnit prepares a Kubernetes node at every boot, before systemd applies sysctl.d and
// before containerd and kubelet start: /dev/kmsg (kubelet's OOM watcher reads it; a container has
// none) points at /dev/null, and /proc/sys (read-only in a container) is remounted read-write so
// kubelet and sysctl.d files can set kernel parameters of the node's namespaces.
const kubeNodePrepUnit = "hactl-lab-node-prep.service"

const kubeNodePrepUnitText = `[Unit]
Description=hactl lab: what a container lacks for a Kubernetes node (/dev/kmsg, a writable /proc/sys)
DefaultDependencies=no
After=local-fs.target
Before=systemd-sysctl.service containerd.service kubelet.service sysinit.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -ec "ln -sf /dev/null /dev/kmsg; mount -o remount,rw /proc/sys"

[Install]
WantedBy=sysinit.target
`

// kubeNodeSetup is the part of hostSetupScript for a Kubernetes node: the prep unit, enabled and
// run now (systemd-sysctl ran before it at this first boot: it runs again), and the apt sources.
func kubeNodeSetup(aptSources string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "cat > /etc/systemd/system/%s <<'EOF'\n%sEOF\n", kubeNodePrepUnit, kubeNodePrepUnitText)
	fmt.Fprintf(&b, "systemctl daemon-reload\nsystemctl enable --now %s >/dev/null 2>&1\nsystemctl restart systemd-sysctl\n", kubeNodePrepUnit)
	b.WriteString(resolvConfScript())
	b.WriteString(aptSources)
	return b.String()
}

// aptSources is the shell snippet pointing a Kubernetes node's apt at the mirror's repository (as
// a site's machines use its package mirror): hactl installs containerd and the other runtime
// packages from there.
func (l starter) aptSources() string {
	if !l.opts.Mirror {
		return ""
	}
	return AptSourcesScript(MirrorURL(MirrorAddress, ""))
}

// Node DNS. A lab host's /etc/resolv.conf names docker's embedded resolver 127.0.0.11, which a pod
// cannot reach: CoreDNS would forward to itself and stop (plugin/loop). Hosts running a local
// resolver (systemd-resolved's 127.0.0.53) have the same problem, and their users point kubelet at
// a resolv.conf with real upstreams (KubeletConfiguration resolvConf) — so does the lab.
const (
	// nodeResolvConf is where the lab writes a node's upstream resolvers.
	nodeResolvConf = "/etc/hactl-lab/resolv.conf"
	// kubeletConfigFile (in the lab directory) is the KubeletConfiguration the Kubernetes specs name
	// (spec.kubernetes.kubeletConfigurationFile).
	kubeletConfigFile = "kubelet-config.yaml"
)

// kubeletConfig is the lab's KubeletConfiguration: kubelet's resolvConf on the nodes, and no
// disk-pressure image garbage collection or eviction. The nodes are containers on this machine's
// disk (as kind's are, and kind's node config turns both off the same way): kubelet sees the
// machine's usage, and above imageGCHighThresholdPercent (85) it deletes unused images, the
// imported pause image among them (containerd 1.6 cannot pin it); an offline node then starts no
// pod sandbox again ("failed to pull registry.k8s.io/pause"). Seen in e2e/kube: operator pods stuck
// in ContainerCreating late in the package.
const kubeletConfig = `# The lab's nodes: pods resolve through the machine's upstream resolvers (see e2e/lab/kubenode.go).
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
resolvConf: ` + nodeResolvConf + `
# The nodes share this machine's disk: no image garbage collection or eviction by its usage.
imageGCHighThresholdPercent: 100
evictionHard:
  nodefs.available: "0%"
  nodefs.inodesFree: "0%"
  imagefs.available: "0%"
`

// upstreamResolvers returns the non-loopback nameservers of this machine's resolv.conf (the ones
// docker's embedded resolver forwards to), or the lab network's gateway when there are none (no
// loop, queries for outside names just fail).
func upstreamResolvers() []string {
	var out []string
	if b, err := os.ReadFile("/etc/resolv.conf"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) == 2 && f[0] == "nameserver" && !strings.HasPrefix(f[1], "127.") && f[1] != "::1" {
				out = append(out, f[1])
			}
		}
	}
	if len(out) == 0 {
		out = []string{strings.TrimSuffix(Subnet, "0/24") + "1"}
	}
	return out
}

// resolvConfScript writes nodeResolvConf on a node.
func resolvConfScript() string {
	var b strings.Builder
	fmt.Fprintf(&b, "mkdir -p %s\n{\n", filepath.Dir(nodeResolvConf))
	for _, ns := range upstreamResolvers() {
		fmt.Fprintf(&b, "echo 'nameserver %s'\n", ns)
	}
	fmt.Fprintf(&b, "} > %s\n", nodeResolvConf)
	return b.String()
}

// KubernetesVersion is the Kubernetes release of the lab's nodes: hack/build-kubernetes.sh builds
// it into <repo>/bin from tools/kubernetes/go.mod (a test in kubeadm/ checks hactl's default agrees).
const KubernetesVersion = kubeadm.DefaultKubernetesVersion

// kubeconfigFile (in the lab directory) is where tests and `make demo` write the kubeconfig `hactl
// kubeconfig` makes (server: the VIP).
const kubeconfigFile = "admin.conf"

// Kubeconfig returns <dir>/admin.conf, the kubeconfig path the lab's users write with `hactl
// kubeconfig -f SPEC > PATH` (the lab writes none itself).
func (l *Lab) Kubeconfig() string { return filepath.Join(l.opts.Dir, kubeconfigFile) }

// Kubectl runs <BinDir>/kubectl --kubeconfig Kubeconfig() args... on this machine (so through the
// VIP) and returns its standard output; a failure is a *CommandError with the standard error.
func (l *Lab) Kubectl(ctx context.Context, args ...string) (string, error) {
	return l.KubectlWith(ctx, l.Kubeconfig(), args...)
}

// KubectlWith runs the lab's kubectl (as Kubectl) with the kubeconfig file kubeconfig.
func (l *Lab) KubectlWith(ctx context.Context, kubeconfig string, args ...string) (string, error) {
	full := append([]string{"--kubeconfig", kubeconfig}, args...)
	return runCmd(ctx, l.opts.Debugf, nil, filepath.Join(l.opts.BinDir, "kubectl"), full...)
}

// KubeImageArchives returns the image archives hack/build-kube-images.sh wrote into binDir for
// KubernetesVersion: one per image (<binDir>/kube-images-<version>/*.tar) when present, else the
// combined tarball.
func KubeImageArchives(binDir string) ([]string, error) {
	per, err := filepath.Glob(filepath.Join(binDir, "kube-images-"+KubernetesVersion, "*.tar"))
	if err != nil {
		return nil, err
	}
	if len(per) > 0 {
		return per, nil
	}
	all := filepath.Join(binDir, "kube-images-"+KubernetesVersion+".tar")
	if _, err := os.Stat(all); err != nil {
		return nil, fmt.Errorf("kubernetes images for %s: %w (run hack/build-kube-images.sh, make kube-images)", KubernetesVersion, err)
	}
	return []string{all}, nil
}

// WithKubernetes gives spec c spec.kubernetes the way a user of the lab's machines writes it:
// kubelet, kubeadm and kubectl from binDir, the images from the archives (air-gapped: no registry is
// reachable), the bridge CNI on the lab network, and kubeadm's SystemVerification check ignored
// (it refuses the machine's cgroup v1, which kubelet accepts with failCgroupV1: false, set by hactl
// from the hosts' facts), and kubelet's resolvConf in dir/kubelet-config.yaml (written here; see
// nodeResolvConf). With workers, the worker hosts w-a/b/c join the spec. appArchives are more image
// archives to import (a site's own application images; the lab's probe workload).
func WithKubernetes(c *v1alpha1.Cluster, dir, binDir string, workers bool, appArchives ...string) error {
	archives, err := KubeImageArchives(binDir)
	if err != nil {
		return err
	}
	archives = append(archives, appArchives...)
	c.Spec.Kubernetes = &v1alpha1.Kubernetes{
		Version: KubernetesVersion,
		Binaries: v1alpha1.KubeBinaries{
			Kubelet: filepath.Join(binDir, "kubelet"),
			Kubeadm: filepath.Join(binDir, "kubeadm"),
			Kubectl: filepath.Join(binDir, "kubectl"),
		},
		ImageArchives:            archives,
		PodSubnet:                v1alpha1.DefaultPodSubnet,
		ServiceSubnet:            v1alpha1.DefaultServiceSubnet,
		CNI:                      v1alpha1.CNIBridge,
		NodeSubnet:               Subnet,
		IgnorePreflightErrors:    []string{"SystemVerification"},
		KubeletConfigurationFile: filepath.Join(dir, kubeletConfigFile),
	}
	if err := writeFileAtomic(c.Spec.Kubernetes.KubeletConfigurationFile, []byte(kubeletConfig), 0o644); err != nil {
		return err
	}
	if workers {
		for _, h := range workerHosts() {
			c.Spec.Hosts = append(c.Spec.Hosts, v1alpha1.Host{Name: h.Name, Address: h.Address, Zone: h.Zone, Roles: slices.Clone(h.Roles)})
		}
	}
	return nil
}

// KubeNodes returns the lab's Kubernetes nodes (Host.Kube), in spec order.
func (l *Lab) KubeNodes() []Host {
	var out []Host
	for _, h := range l.Hosts() {
		if h.KubeNode() {
			out = append(out, h)
		}
	}
	return out
}

// procInotifyDir holds the kernel's inotify limits.
const procInotifyDir = "/proc/sys/fs/inotify"

// Inotify limits a Kubernetes lab needs (hack/ensure-docker.sh raises them; kind's "too many open
// files" known issue gives the same advice). Every node's systemd, containerd, kubelet, kube-proxy
// and control-plane components take inotify instances, all counted against this machine's root.
const (
	minInotifyInstances = 1024
	minInotifyWatches   = 524288
)

// checkInotify returns an error naming the fix when the inotify limits under dir are below what a
// Kubernetes lab needs: at Debian's default of 128 instances, a lab of six nodes runs out and
// kube-proxy, a scheduler or an operator pod fails with "fsnotify watcher init: too many open files".
func checkInotify(dir string) error {
	for _, l := range []struct {
		file string
		min  int
	}{{"max_user_instances", minInotifyInstances}, {"max_user_watches", minInotifyWatches}} {
		b, err := os.ReadFile(filepath.Join(dir, l.file))
		if err != nil {
			return fmt.Errorf("reading the inotify limit: %w", err)
		}
		have, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			return fmt.Errorf("fs.inotify.%s: %q: %w", l.file, strings.TrimSpace(string(b)), err)
		}
		if have < l.min {
			return fmt.Errorf("fs.inotify.%s is %d, below the %d a Kubernetes lab needs (its nodes' processes fail with \"too many open files\"): run `make host-deps` or `sysctl -w fs.inotify.%s=%d`", l.file, have, l.min, l.file, l.min)
		}
	}
	return nil
}
