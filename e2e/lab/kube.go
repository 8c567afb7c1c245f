package lab

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/hactl/hactl/internal/shell"
	"github.com/hactl/hactl/kubeadm"
)

// KubernetesVersion is the Kubernetes release of the lab's nodes: hack/build-kubernetes.sh builds
// it into <repo>/bin from tools/kubernetes/go.mod, and hactl's kubeadm-config defaults to it (a
// test in kubeadm/ checks the two agree).
const KubernetesVersion = kubeadm.DefaultKubernetesVersion

// Files of the Kubernetes side of the lab.
const (
	// kubeletConfigFile (in the lab directory) is the KubeletConfiguration the lab hands to
	// `hactl kubeadm-config --kubelet-config`.
	kubeletConfigFile = "kubelet-config.yaml"
	// adminConfFile (in the lab directory) is kubeadm's admin.conf fetched from the first
	// control-plane node: its server is the VIP.
	adminConfFile = "admin.conf"
	// remoteKubeadmConfig is where the kubeadm configuration is copied on the first node. (Not
	// under /run or /tmp: `docker cp` into a tmpfs mount lands under the mount, invisible.)
	remoteKubeadmConfig = "/root/hactl-lab-kubeadm.yaml"
	// remoteImages is where the images tarball is copied before `ctr images import` (removed after).
	remoteImages = "/root/hactl-lab-kube-images.tar"
	// kubeBootUnit is the oneshot unit giving a Kubernetes node, at every boot, what kubelet needs
	// inside a container and the routes to the other nodes' pod subnets.
	kubeBootUnit = "hactl-lab-kube.service"
	// criSocket is containerd's CRI socket.
	criSocket = "unix:///run/containerd/containerd.sock"
	// cniBinDir is where Debian's containernetworking-plugins installs the plugins.
	cniBinDir = "/usr/lib/cni"
)

// kubeletConfig is the KubeletConfiguration of the lab's nodes (LAB.md): the cgroupfs driver (the
// machine runs cgroup v1 hybrid; the systemd driver fails), no refusal of swap or of cgroup v1.
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
failSwapOn: false
failCgroupV1: false
`

// kubeBinaries are installed into /usr/local/bin on every Kubernetes node.
var kubeBinaries = [...]string{"kubelet", "kubeadm", "kubectl"}

// KubeImages returns the images tarball hack/build-kube-images.sh wrote into binDir for
// KubernetesVersion and the image references it holds (exactly as kubeadm expects them).
func KubeImages(binDir string) (tarball string, refs []string, err error) {
	tarball = filepath.Join(binDir, "kube-images-"+KubernetesVersion+".tar")
	list := strings.TrimSuffix(tarball, ".tar") + ".list"
	b, err := os.ReadFile(list)
	if err == nil {
		_, err = os.Stat(tarball)
	}
	if err != nil {
		return "", nil, fmt.Errorf("kubernetes images for %s: %w (run hack/build-kube-images.sh, make kube-images)", KubernetesVersion, err)
	}
	refs = strings.Fields(string(b))
	if len(refs) == 0 {
		return "", nil, fmt.Errorf("kubernetes images: %s lists no image", list)
	}
	return tarball, refs, nil
}

// pauseImage returns the pause (sandbox) image among refs.
func pauseImage(refs []string) (string, error) {
	for _, r := range refs {
		name, _, _ := strings.Cut(r[strings.LastIndex(r, "/")+1:], ":")
		if name == "pause" {
			return r, nil
		}
	}
	return "", fmt.Errorf("kubernetes images %v hold no pause image", refs)
}

// KubeNodes returns the lab's Kubernetes nodes (cp-a, cp-b, cp-c), in spec order.
func (l *Lab) KubeNodes() []Host {
	var out []Host
	for _, h := range l.Hosts() {
		if h.KubeNode() {
			out = append(out, h)
		}
	}
	return out
}

// Kubeconfig returns the path of <dir>/admin.conf, kubeadm's admin kubeconfig fetched by KubeUp;
// its server is https://VIP:6443, through the load balancers.
func (l *Lab) Kubeconfig() string { return filepath.Join(l.opts.Dir, adminConfFile) }

// KubeletConfigFile returns the path of <dir>/kubelet-config.yaml, the KubeletConfiguration KubeUp
// passes to `hactl kubeadm-config --kubelet-config` (written by KubeUp).
func (l *Lab) KubeletConfigFile() string { return filepath.Join(l.opts.Dir, kubeletConfigFile) }

// Kubectl runs <BinDir>/kubectl --kubeconfig Kubeconfig() args... on this machine (so through the
// VIP) and returns its standard output; a failure is a *CommandError with the standard error.
func (l *Lab) Kubectl(ctx context.Context, args ...string) (string, error) {
	return l.kubectl(ctx, l.opts.Debugf, args...)
}

// kubectl is Kubectl logging to debugf.
func (l *Lab) kubectl(ctx context.Context, debugf LogFunc, args ...string) (string, error) {
	full := append([]string{"--kubeconfig", l.Kubeconfig()}, args...)
	return runCmd(ctx, debugf, nil, filepath.Join(l.opts.BinDir, "kubectl"), full...)
}

// PrepareKubeNodes turns cp-a/b/c into machines ready for kubeadm, the way a user's provisioning
// would (hactl has no part in it), in parallel and idempotently (a second run changes nothing):
//   - kubelet, kubeadm and kubectl from BinDir into /usr/local/bin (copied when their sha256 differs);
//   - kubelet.service with kubeadm's usual 10-kubeadm.conf drop-in, enabled (it waits, restarting,
//     until kubeadm writes its configuration);
//   - kubeBootUnit, run at every boot (also after `docker restart` or `docker kill` + start):
//     /dev/kmsg -> /dev/null and /proc/sys remounted read-write (kubelet needs both), IPv4
//     forwarding on, and a route to every other node's pod subnet via that node;
//   - containerd's configuration (LAB.md step 4: cgroupfs, the pause image of KubeImages as sandbox
//     image, restrict_oom_score_adj, CNI plugins in /usr/lib/cni), containerd enabled and restarted
//     when its configuration changed;
//   - the images of KubeImages imported into containerd's k8s.io namespace (when one is missing);
//   - a CNI configuration: bridge cni0 + host-local IPAM on the node's own pod subnet + portmap, and
//     loopback.
func (l *Lab) PrepareKubeNodes(ctx context.Context) error {
	start := time.Now()
	nodes := l.KubeNodes()
	if len(nodes) == 0 {
		return errors.New("prepare kubernetes nodes: the lab has none")
	}
	tarball, refs, err := KubeImages(l.opts.BinDir)
	if err != nil {
		return fmt.Errorf("prepare kubernetes nodes: %w", err)
	}
	pause, err := pauseImage(refs)
	if err != nil {
		return fmt.Errorf("prepare kubernetes nodes: %w", err)
	}
	sums := map[string]string{}
	for _, b := range kubeBinaries {
		if sums[b], err = fileSHA256(filepath.Join(l.opts.BinDir, b)); err != nil {
			return fmt.Errorf("prepare kubernetes nodes: %w (run hack/build-kubernetes.sh, make kubernetes-bins)", err)
		}
	}
	err = forEach(nodes, func(h Host) error {
		hstart := time.Now()
		changed, err := l.prepareKubeNode(ctx, h, nodes, sums, tarball, refs, pause)
		if err != nil {
			return fmt.Errorf("prepare kubernetes node %s: %w", h.Name, err)
		}
		what := "unchanged"
		if len(changed) > 0 {
			what = "changed: " + strings.Join(changed, ", ")
		}
		l.opts.Logf.printf("lab: kubernetes node %s prepared in %s (%s)", h.Name, time.Since(hstart).Round(100*time.Millisecond), what)
		return nil
	})
	if err != nil {
		return err
	}
	l.opts.Logf.printf("lab: %d kubernetes nodes prepared in %s", len(nodes), time.Since(start).Round(100*time.Millisecond))
	return nil
}

// prepareKubeNode is PrepareKubeNodes on h (nodes: every node, for the routes); it returns what
// changed.
func (l *Lab) prepareKubeNode(ctx context.Context, h Host, nodes []Host, sums map[string]string, tarball string, refs []string, pause string) ([]string, error) {
	var changed []string
	// Binaries: copy the ones whose sha256 differs (docker cp to a temporary name, then rename).
	paths := make([]string, 0, len(kubeBinaries))
	for _, b := range kubeBinaries {
		paths = append(paths, "/usr/local/bin/"+b)
	}
	out, _ := l.d.run(ctx, nil, append([]string{"exec", h.Container, "sha256sum"}, paths...)...) // missing files: non-zero exit
	have := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			have[f[1]] = f[0]
		}
	}
	for i, b := range kubeBinaries {
		if have[paths[i]] == sums[b] {
			continue
		}
		if _, err := l.d.run(ctx, nil, "cp", filepath.Join(l.opts.BinDir, b), h.Container+":"+paths[i]+".hactl-lab-new"); err != nil {
			return nil, err
		}
		if _, err := l.d.run(ctx, nil, "exec", h.Container, "mv", "-f", paths[i]+".hactl-lab-new", paths[i]); err != nil {
			return nil, err
		}
		changed = append(changed, b)
	}
	// Units, containerd and CNI configuration.
	script, err := kubeNodeScript(h, nodes, pause)
	if err != nil {
		return nil, err
	}
	out, err = l.d.run(ctx, nil, "exec", h.Container, "sh", "-c", script)
	if err != nil {
		return nil, fmt.Errorf("configure: %w", err)
	}
	changed = append(changed, strings.Fields(out)...)
	// Images: import the tarball unless containerd already has every image.
	out, err = l.d.run(ctx, nil, "exec", h.Container, "ctr", "-n", "k8s.io", "images", "ls", "-q")
	if err != nil {
		return nil, fmt.Errorf("list containerd images: %w", err)
	}
	present := strings.Fields(out)
	missing := slices.ContainsFunc(refs, func(r string) bool { return !slices.Contains(present, r) })
	if missing {
		if _, err := l.d.run(ctx, nil, "cp", tarball, h.Container+":"+remoteImages); err != nil {
			return nil, err
		}
		_, err := l.d.run(ctx, nil, "exec", h.Container, "ctr", "-n", "k8s.io", "images", "import", remoteImages)
		_, rmErr := l.d.run(ctx, nil, "exec", h.Container, "rm", "-f", remoteImages)
		if err != nil {
			return nil, fmt.Errorf("import images: %w", err)
		}
		if rmErr != nil {
			return nil, rmErr
		}
		changed = append(changed, "images")
	}
	return changed, nil
}

// kubeletUnit is the kubelet.service of Kubernetes' deb/rpm packages, with the binary in
// /usr/local/bin.
const kubeletUnit = `[Unit]
Description=kubelet: The Kubernetes Node Agent
Documentation=https://kubernetes.io/docs/
Wants=network-online.target
After=network-online.target

[Service]
ExecStart=/usr/local/bin/kubelet
Restart=always
StartLimitInterval=0
RestartSec=10

[Install]
WantedBy=multi-user.target
`

// kubeadmDropIn is kubeadm's usual 10-kubeadm.conf: kubelet runs with the bootstrap kubeconfig and
// kubeconfig kubeadm writes, its KubeletConfiguration, and the flags kubeadm puts in
// kubeadm-flags.env.
const kubeadmDropIn = `# Note: This dropin only works with kubeadm and kubelet v1.11+
[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
# This is a file that "kubeadm init" and "kubeadm join" generates at runtime, populating the KUBELET_KUBEADM_ARGS variable dynamically
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
# This is a file that the user can use for overrides of the kubelet args as a last resort. Preferably, the user should use
# the .NodeRegistration.KubeletExtraArgs object in the configuration files instead. KUBELET_EXTRA_ARGS should be sourced from this file.
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/local/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
`

// kubeBootCommands returns what kubeBootUnit runs on h at every boot.
func kubeBootCommands(h Host, nodes []Host) []string {
	cmds := []string{
		"ln -sf /dev/null /dev/kmsg",             // kubelet: "open /dev/kmsg: no such file"
		"mount -o remount,rw /proc/sys",          // kubelet writes vm.overcommit_memory, kernel.panic
		"echo 1 > /proc/sys/net/ipv4/ip_forward", // pods on other nodes and the bridge's gateway
	}
	for _, n := range nodes {
		if n.Name != h.Name {
			cmds = append(cmds, fmt.Sprintf("ip route replace %s via %s", n.PodSubnet, n.Address))
		}
	}
	return cmds
}

// kubeBootUnitText returns kubeBootUnit's text for h.
func kubeBootUnitText(h Host, nodes []Host) string {
	return bootUnitText("hactl lab: what kubelet needs inside a container, routes to the other nodes' pod subnets",
		"After=network.target\nBefore=containerd.service kubelet.service", kubeBootCommands(h, nodes))
}

// cniConfig returns the node's CNI network: a bridge (cni0, the pods' gateway, masquerading what
// leaves the pod network) with host-local addresses from podSubnet, and portmap for hostPorts.
func cniConfig(podSubnet string) (string, error) {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "hactl-lab",
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
				"ipam": map[string]any{
					"type":   "host-local",
					"ranges": [][]map[string]string{{{"subnet": podSubnet}}},
					"routes": []map[string]string{{"dst": "0.0.0.0/0"}},
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	b, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return "", err
	}
	return string(b) + "\n", nil
}

// loopbackConfig is the loopback CNI network.
const loopbackConfig = `{
  "cniVersion": "1.0.0",
  "name": "lo",
  "type": "loopback"
}
`

// containerdEdits are the sed expressions turning `containerd config default` (containerd 1.6,
// config version 2) into LAB.md step 4's configuration; pause is the sandbox image. Each must
// match: kubeNodeScript checks the result holds every line of containerdChecks.
func containerdEdits(pause string) []string {
	return []string{
		`s|^\( *\)SystemdCgroup = .*|\1SystemdCgroup = false|`,
		`s|^\( *\)sandbox_image = .*|\1sandbox_image = "` + pause + `"|`,
		`s|^\( *\)restrict_oom_score_adj = .*|\1restrict_oom_score_adj = true|`,
		`s|^\( *\)bin_dir = .*|\1bin_dir = "` + cniBinDir + `"|`,
	}
}

// containerdChecks are lines the edited containerd configuration must hold.
func containerdChecks(pause string) []string {
	return []string{"SystemdCgroup = false", `sandbox_image = "` + pause + `"`, "restrict_oom_score_adj = true",
		`bin_dir = "` + cniBinDir + `"`}
}

// kubeNodeScript returns the shell script (run with sh -c in h) that writes h's units, containerd
// and CNI configuration when they differ, starts what must run, and prints one word per thing it
// changed (nothing when everything was in place).
func kubeNodeScript(h Host, nodes []Host, pause string) (string, error) {
	cni, err := cniConfig(h.PodSubnet)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(`set -eu
umask 022
# put PATH WORD: standard input becomes PATH when it differs; WORD is printed when it changed.
put() {
	mkdir -p "$(dirname "$1")"
	cat > "$1.hactl-lab-new"
	if cmp -s "$1.hactl-lab-new" "$1"; then rm -f "$1.hactl-lab-new"; else mv -f "$1.hactl-lab-new" "$1"; echo "$2"; fi
}
units=$( {
`)
	heredoc := func(path, word, content string) {
		fmt.Fprintf(&b, "put %s %s <<'HACTL_LAB_EOF'\n%sHACTL_LAB_EOF\n", shell.Quote(path), word, content)
	}
	heredoc("/etc/systemd/system/kubelet.service", "kubelet.service", kubeletUnit)
	heredoc("/etc/systemd/system/kubelet.service.d/10-kubeadm.conf", "10-kubeadm.conf", kubeadmDropIn)
	heredoc("/etc/systemd/system/"+kubeBootUnit, kubeBootUnit, kubeBootUnitText(h, nodes))
	b.WriteString("} )\n")
	b.WriteString(`if [ -n "$units" ]; then echo $units; systemctl daemon-reload; fi
# The boot unit runs again when it changed (new routes); otherwise it already ran at boot.
case "$units" in *` + kubeBootUnit + `*) systemctl enable ` + kubeBootUnit + ` >/dev/null 2>&1; systemctl restart ` + kubeBootUnit + ` ;; esac
systemctl enable ` + kubeBootUnit + ` >/dev/null 2>&1
systemctl start ` + kubeBootUnit + `
`)
	fmt.Fprintf(&b, "containerd config default | sed")
	for _, e := range containerdEdits(pause) {
		fmt.Fprintf(&b, " -e %s", shell.Quote(e))
	}
	b.WriteString(" > /etc/containerd/config.toml.hactl-lab-gen\n")
	for _, c := range containerdChecks(pause) {
		fmt.Fprintf(&b, "grep -qF %s /etc/containerd/config.toml.hactl-lab-gen || { echo %s >&2; exit 1; }\n",
			shell.Quote(c), shell.Quote("containerd config default: cannot set "+c))
	}
	b.WriteString(`ctd=$(put /etc/containerd/config.toml config.toml < /etc/containerd/config.toml.hactl-lab-gen)
rm -f /etc/containerd/config.toml.hactl-lab-gen
if [ -n "$ctd" ]; then echo containerd.toml; fi
systemctl enable containerd >/dev/null 2>&1
if [ -n "$ctd" ]; then systemctl restart containerd; else systemctl start containerd; fi
`)
	heredoc("/etc/cni/net.d/10-hactl-lab.conflist", "cni", cni)
	heredoc("/etc/cni/net.d/99-loopback.conf", "cni-loopback", loopbackConfig)
	b.WriteString(`if ! systemctl is-enabled kubelet >/dev/null 2>&1; then systemctl enable kubelet >/dev/null 2>&1; echo kubelet-enabled; fi
# containerd answers on its socket before the images can be listed or imported.
i=0
until ctr version >/dev/null 2>&1; do i=$((i+1)); [ $i -lt 100 ] || { echo 'containerd does not answer' >&2; exit 1; }; sleep 0.1; done
`)
	return b.String(), nil
}

// KubeUp makes the lab's control-plane hosts a kubeadm control plane on the etcd cluster and VIP
// that `hactl bootstrap -f specPath` built (run that first), using the real hactl and kubeadm:
//  1. PrepareKubeNodes;
//  2. writes KubeletConfigFile and runs `hactlBin kubeadm-config -f specPath --image-pull-policy
//     Never --ignore-preflight-errors all --kubelet-config KubeletConfigFile` into
//     <dir>/kubeadm-<cluster name>.yaml, and checks it with `<BinDir>/kubeadm config validate`;
//  3. on the first control-plane host of the spec (unless it has /etc/kubernetes/admin.conf
//     already): `kubeadm init --config ... --upload-certs --skip-phases=addon/coredns,addon/kube-proxy`;
//  4. fetches its admin.conf to Kubeconfig() (the server must be the controlPlaneEndpoint, the VIP);
//  5. on each other control-plane host, one at a time (unless it has /etc/kubernetes/kubelet.conf):
//     `kubeadm join <controlPlaneEndpoint> --control-plane` with a new token, the CA's public key
//     hash, a certificate key from `kubeadm init phase upload-certs --upload-certs`, its own
//     advertise address, all preflight errors ignored, containerd's socket;
//  6. waits (up to readyTimeout, polling through the VIP) until every control-plane node is Ready.
//
// A second run skips what is done and only waits for Ready. Commands go to Options.Debugf; steps
// and their durations to Options.Logf.
func (l *Lab) KubeUp(ctx context.Context, hactlBin, specPath string) error {
	start := time.Now()
	if err := l.PrepareKubeNodes(ctx); err != nil {
		return fmt.Errorf("kube up: %w", err)
	}
	cfg, err := l.KubeadmConfig(ctx, hactlBin, specPath)
	if err != nil {
		return fmt.Errorf("kube up: %w", err)
	}
	nodes, err := l.controlPlaneNodes(cfg)
	if err != nil {
		return fmt.Errorf("kube up: %w", err)
	}
	if err := l.kubeadmInit(ctx, nodes[0], cfg); err != nil {
		return fmt.Errorf("kube up: %w", err)
	}
	if err := l.fetchAdminConf(ctx, nodes[0], cfg.Endpoint); err != nil {
		return fmt.Errorf("kube up: %w", err)
	}
	if err := l.kubeadmJoin(ctx, nodes[0], nodes[1:], cfg); err != nil {
		return fmt.Errorf("kube up: %w", err)
	}
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Name
	}
	if err := l.WaitNodesReady(ctx, 5*time.Minute, names...); err != nil {
		return fmt.Errorf("kube up: %w", err)
	}
	l.opts.Logf.printf("lab: kubernetes control plane %s Ready through %s in %s", strings.Join(names, ", "), cfg.Endpoint,
		time.Since(start).Round(100*time.Millisecond))
	return nil
}

// KubeadmSetup is the kubeadm configuration KubeUp generated with hactl.
type KubeadmSetup struct {
	// Path is the configuration file (<dir>/kubeadm-<cluster name>.yaml).
	Path string
	// Endpoint is its controlPlaneEndpoint (VIP:port).
	Endpoint string
	// Nodes are the node names of the control-plane hosts, the first is kubeadm init's
	// (InitConfiguration.nodeRegistration.name).
	Nodes []string
	// ClusterName is the spec's metadata.name.
	ClusterName string
}

// KubeadmConfig writes KubeletConfigFile, runs `hactlBin kubeadm-config` for specPath (see KubeUp)
// into <dir>/kubeadm-<cluster name>.yaml, validates it with `<BinDir>/kubeadm config validate`
// and returns what KubeUp needs of it.
func (l *Lab) KubeadmConfig(ctx context.Context, hactlBin, specPath string) (KubeadmSetup, error) {
	spec, err := readSpecHosts(specPath)
	if err != nil {
		return KubeadmSetup{}, err
	}
	if err := writeFileAtomic(l.KubeletConfigFile(), []byte(kubeletConfig), 0o644); err != nil {
		return KubeadmSetup{}, fmt.Errorf("write kubelet config: %w", err)
	}
	out, err := runCmd(ctx, l.opts.Debugf, nil, hactlBin, "kubeadm-config", "-f", specPath,
		"--image-pull-policy", "Never", "--ignore-preflight-errors", "all", "--kubelet-config", l.KubeletConfigFile())
	if err != nil {
		return KubeadmSetup{}, fmt.Errorf("hactl kubeadm-config: %w", err)
	}
	s := KubeadmSetup{Path: filepath.Join(l.opts.Dir, "kubeadm-"+spec.Name+".yaml"), ClusterName: spec.Name, Nodes: spec.ControlPlane}
	if err := writeFileAtomic(s.Path, []byte(out), 0o644); err != nil {
		return KubeadmSetup{}, fmt.Errorf("write kubeadm config: %w", err)
	}
	if _, err := runCmd(ctx, l.opts.Debugf, nil, filepath.Join(l.opts.BinDir, "kubeadm"), "config", "validate", "--config", s.Path); err != nil {
		return KubeadmSetup{}, fmt.Errorf("hactl's kubeadm config %s: %w", s.Path, err)
	}
	if s.Endpoint, err = controlPlaneEndpoint([]byte(out)); err != nil {
		return KubeadmSetup{}, fmt.Errorf("hactl's kubeadm config %s: %w", s.Path, err)
	}
	l.opts.Logf.printf("lab: kubeadm config %s (from hactl kubeadm-config, kubeadm config validate passed): controlPlaneEndpoint %s", s.Path, s.Endpoint)
	return s, nil
}

// specHosts is what KubeUp reads of a cluster spec.
type specHosts struct {
	Name         string
	ControlPlane []string
}

// readSpecHosts reads the cluster name and the control-plane hosts (in order) of the spec at path.
func readSpecHosts(path string) (specHosts, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return specHosts{}, fmt.Errorf("read spec: %w", err)
	}
	var doc struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Hosts []struct {
				Name  string   `json:"name"`
				Roles []string `json:"roles"`
			} `json:"hosts"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return specHosts{}, fmt.Errorf("read spec %s: %w", path, err)
	}
	s := specHosts{Name: doc.Metadata.Name}
	for _, h := range doc.Spec.Hosts {
		if slices.Contains(h.Roles, "control-plane") {
			s.ControlPlane = append(s.ControlPlane, h.Name)
		}
	}
	if s.Name == "" || len(s.ControlPlane) == 0 {
		return specHosts{}, fmt.Errorf("read spec %s: need metadata.name and hosts with role control-plane", path)
	}
	return s, nil
}

// controlPlaneEndpoint returns ClusterConfiguration.controlPlaneEndpoint from a multi-document
// kubeadm configuration.
func controlPlaneEndpoint(cfg []byte) (string, error) {
	for _, doc := range strings.Split(string(cfg), "\n---") {
		var d struct {
			Kind                 string `json:"kind"`
			ControlPlaneEndpoint string `json:"controlPlaneEndpoint"`
		}
		if err := yaml.Unmarshal([]byte(doc), &d); err != nil {
			return "", err
		}
		if d.Kind == "ClusterConfiguration" {
			if d.ControlPlaneEndpoint == "" {
				return "", errors.New("ClusterConfiguration has no controlPlaneEndpoint")
			}
			return d.ControlPlaneEndpoint, nil
		}
	}
	return "", errors.New("no ClusterConfiguration document")
}

// controlPlaneNodes returns the lab hosts named in cfg.Nodes, which must be Kubernetes nodes.
func (l *Lab) controlPlaneNodes(cfg KubeadmSetup) ([]Host, error) {
	var out []Host
	for _, n := range cfg.Nodes {
		h, err := l.Host(n)
		if err != nil {
			return nil, err
		}
		if !h.KubeNode() {
			return nil, fmt.Errorf("control-plane host %s is not one of the lab's kubernetes nodes", n)
		}
		out = append(out, h)
	}
	return out, nil
}

// hasFile reports whether path exists on h.
func (l *Lab) hasFile(ctx context.Context, h Host, path string) (bool, error) {
	_, err := l.d.run(ctx, nil, "exec", h.Container, "test", "-e", path)
	if err == nil {
		return true, nil
	}
	if ce := (*CommandError)(nil); errors.As(err, &ce) && ctx.Err() == nil {
		return false, nil
	}
	return false, err
}

// kubeadmInit runs kubeadm init on first unless it has admin.conf already.
func (l *Lab) kubeadmInit(ctx context.Context, first Host, cfg KubeadmSetup) error {
	if done, err := l.hasFile(ctx, first, "/etc/kubernetes/admin.conf"); err != nil {
		return err
	} else if done {
		l.opts.Logf.printf("lab: %s: kubeadm init already done (/etc/kubernetes/admin.conf exists); skipped", first.Name)
		return nil
	}
	if _, err := l.d.run(ctx, nil, "cp", cfg.Path, first.Container+":"+remoteKubeadmConfig); err != nil {
		return err
	}
	start := time.Now()
	l.opts.Logf.printf("lab: %s: kubeadm init", first.Name)
	_, err := l.d.run(ctx, nil, "exec", first.Container, "kubeadm", "init", "--config", remoteKubeadmConfig,
		"--upload-certs", "--skip-phases=addon/coredns,addon/kube-proxy")
	if err != nil {
		return fmt.Errorf("kubeadm init on %s: %w%s", first.Name, err, l.kubeletTail(ctx, first))
	}
	l.opts.Logf.printf("lab: %s: kubeadm init done in %s", first.Name, time.Since(start).Round(100*time.Millisecond))
	return nil
}

// kubeletTail returns the last lines of kubelet's journal on h, for error messages.
func (l *Lab) kubeletTail(ctx context.Context, h Host) string {
	out, _ := docker{}.run(context.WithoutCancel(ctx), nil, "exec", h.Container, "journalctl", "-u", "kubelet", "--no-pager", "-n", "15")
	if strings.TrimSpace(out) == "" {
		return ""
	}
	return "\nlast kubelet log lines on " + h.Name + ":\n" + out
}

// fetchAdminConf copies first's /etc/kubernetes/admin.conf to Kubeconfig() (mode 0600) and checks
// that its server is https://endpoint.
func (l *Lab) fetchAdminConf(ctx context.Context, first Host, endpoint string) error {
	out, err := l.d.run(ctx, nil, "exec", first.Container, "cat", "/etc/kubernetes/admin.conf")
	if err != nil {
		return fmt.Errorf("fetch admin.conf: %w", err)
	}
	var kc struct {
		Clusters []struct {
			Cluster struct {
				Server string `json:"server"`
			} `json:"cluster"`
		} `json:"clusters"`
	}
	if err := yaml.Unmarshal([]byte(out), &kc); err != nil {
		return fmt.Errorf("fetch admin.conf: %w", err)
	}
	if want := "https://" + endpoint; len(kc.Clusters) != 1 || kc.Clusters[0].Cluster.Server != want {
		return fmt.Errorf("admin.conf of %s: clusters %+v, want one with server %s", first.Name, kc.Clusters, want)
	}
	if err := writeFileAtomic(l.Kubeconfig(), []byte(out), 0o600); err != nil {
		return fmt.Errorf("fetch admin.conf: %w", err)
	}
	return nil
}

// kubeadmJoin joins every host of others as a control-plane node, one at a time, skipping hosts
// that have /etc/kubernetes/kubelet.conf already.
func (l *Lab) kubeadmJoin(ctx context.Context, first Host, others []Host, cfg KubeadmSetup) error {
	var token, hash, certKey string
	for _, h := range others {
		if done, err := l.hasFile(ctx, h, "/etc/kubernetes/kubelet.conf"); err != nil {
			return err
		} else if done {
			l.opts.Logf.printf("lab: %s: kubeadm join already done (/etc/kubernetes/kubelet.conf exists); skipped", h.Name)
			continue
		}
		if token == "" {
			var err error
			if token, hash, certKey, err = l.joinSecrets(ctx, first, cfg); err != nil {
				return err
			}
		}
		start := time.Now()
		l.opts.Logf.printf("lab: %s: kubeadm join %s --control-plane", h.Name, cfg.Endpoint)
		args := func(token, certKey string) []string {
			return []string{"exec", h.Container, "kubeadm", "join", cfg.Endpoint, "--control-plane",
				"--token", token, "--discovery-token-ca-cert-hash", hash, "--certificate-key", certKey,
				"--apiserver-advertise-address", h.Address, "--ignore-preflight-errors", "all", "--cri-socket", criSocket}
		}
		// The token and certificate key are secrets: logged as placeholders, run unlogged.
		l.opts.Debugf.printf("$ docker %s", shell.Join(args("<token>", "<certificate-key>")...))
		if _, err := (docker{}).run(ctx, nil, args(token, certKey)...); err != nil {
			return fmt.Errorf("kubeadm join on %s: %w%s", h.Name, redact(err, token, certKey), l.kubeletTail(ctx, h))
		}
		l.opts.Logf.printf("lab: %s: kubeadm join done in %s", h.Name, time.Since(start).Round(100*time.Millisecond))
	}
	return nil
}

// redact replaces the secrets in err's message (a CommandError lists the command line).
func redact(err error, secrets ...string) error {
	msg := err.Error()
	for _, s := range secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, "<redacted>")
		}
	}
	return errors.New(msg)
}

// joinSecrets creates what `kubeadm join --control-plane` needs, on first: a bootstrap token
// (valid 1 h), the discovery hash of the cluster CA's public key, and a certificate key after
// uploading the control-plane certificates again (the uploaded ones expire after 2 h).
func (l *Lab) joinSecrets(ctx context.Context, first Host, cfg KubeadmSetup) (token, hash, certKey string, err error) {
	quiet := docker{} // secrets in the output
	out, err := quiet.run(ctx, nil, "exec", first.Container, "kubeadm", "token", "create", "--ttl", "1h")
	if err != nil {
		return "", "", "", fmt.Errorf("kubeadm token create on %s: %w", first.Name, err)
	}
	token = strings.TrimSpace(out)
	ca, err := l.d.run(ctx, nil, "exec", first.Container, "cat", "/etc/kubernetes/pki/ca.crt")
	if err != nil {
		return "", "", "", fmt.Errorf("read the cluster CA: %w", err)
	}
	if hash, err = caCertHash([]byte(ca)); err != nil {
		return "", "", "", err
	}
	if _, err := l.d.run(ctx, nil, "cp", cfg.Path, first.Container+":"+remoteKubeadmConfig); err != nil {
		return "", "", "", err
	}
	out, err = quiet.run(ctx, nil, "exec", first.Container, "kubeadm", "init", "phase", "upload-certs", "--upload-certs",
		"--config", remoteKubeadmConfig)
	if err != nil {
		return "", "", "", fmt.Errorf("kubeadm init phase upload-certs on %s: %w", first.Name, err)
	}
	if certKey = lastLine(out); len(certKey) != 64 {
		return "", "", "", fmt.Errorf("kubeadm init phase upload-certs on %s printed no certificate key (last line %d characters)", first.Name, len(certKey))
	}
	return token, hash, certKey, nil
}

// lastLine returns the last non-empty line of s, trimmed.
func lastLine(s string) string {
	last := ""
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if t := strings.TrimSpace(sc.Text()); t != "" {
			last = t
		}
	}
	return last
}

// caCertHash returns kubeadm's discovery hash of a PEM CA certificate: "sha256:" + the hex SHA-256
// of its DER SubjectPublicKeyInfo.
func caCertHash(caPEM []byte) (string, error) {
	block, _ := pem.Decode(caPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return "", errors.New("cluster CA: no PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return "", fmt.Errorf("cluster CA: %w", err)
	}
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// WaitNodesReady polls `kubectl get nodes` (through the VIP) every 2 s until every named node
// reports condition Ready=True, or timeout passes.
func (l *Lab) WaitNodesReady(ctx context.Context, timeout time.Duration, names ...string) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	l.opts.Debugf.printf("$ %s --kubeconfig %s get nodes -o json  # polled (not logged again) until %s are Ready",
		filepath.Join(l.opts.BinDir, "kubectl"), l.Kubeconfig(), strings.Join(names, ", "))
	var last string
	for {
		out, err := l.kubectl(ctx, nil, "get", "nodes", "-o", "json", "--request-timeout", "10s")
		if err == nil {
			ready, perr := readyNodes([]byte(out))
			if perr == nil && !slices.ContainsFunc(names, func(n string) bool { return !ready[n] }) {
				l.opts.Logf.printf("lab: nodes %s Ready after %s", strings.Join(names, ", "), time.Since(start).Round(100*time.Millisecond))
				return nil
			}
			last = fmt.Sprintf("ready: %v %v", ready, perr)
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("nodes %s not all Ready within %s (last: %s): %w", strings.Join(names, ", "), timeout, last, ctx.Err())
		case <-time.After(2 * time.Second):
		}
	}
}

// readyNodes maps node name to whether its Ready condition is True, from `kubectl get nodes -o json`.
func readyNodes(list []byte) (map[string]bool, error) {
	type condition struct {
		Type   string `json:"type"`
		Status string `json:"status"`
	}
	var nl struct {
		Items []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Status struct {
				Conditions []condition `json:"conditions"`
			} `json:"status"`
		} `json:"items"`
	}
	if err := json.Unmarshal(list, &nl); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, n := range nl.Items {
		out[n.Metadata.Name] = slices.Contains(n.Status.Conditions, condition{Type: "Ready", Status: "True"})
	}
	return out, nil
}
