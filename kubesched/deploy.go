package kubesched

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/internal/shell"
	"github.com/hactl/hactl/kubeadm"
	"github.com/hactl/hactl/kubeadm/images"
	"github.com/hactl/hactl/kubeapi"
	"github.com/hactl/hactl/kubenode"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/ui"
)

// DeployOptions are one `hactl scheduler deploy` over SSH.
type DeployOptions struct {
	Cluster *v1alpha1.Cluster
	// Image and ImageArchive override spec.scheduler's (--image, --image-archive).
	Image, ImageArchive string
	// DryRun prints what would be written and run, and contacts no host.
	DryRun bool
	// Wait bounds the wait for a Lease holder after the manifests are in place (0: 2 minutes).
	Wait    time.Duration
	Out     io.Writer
	Prompt  provision.Prompter
	Printer *ui.Printer
}

// UsageError is invalid input found before any host is contacted (exit 2); Field is the spec field
// or flag to fix.
type UsageError struct{ Field, Msg string }

func (e *UsageError) Error() string { return e.Field + ": " + e.Msg }

// ExitCode is 2.
func (e *UsageError) ExitCode() int { return 2 }

// plan is what Deploy writes: the same files on every control plane.
type plan struct {
	s        *v1alpha1.Scheduler
	image    string
	archive  string
	config   []byte
	manifest []byte
	rbac     []any
}

func newPlan(o DeployOptions) (*plan, error) {
	c := o.Cluster
	s := c.Spec.Scheduler
	if s == nil {
		return nil, &UsageError{"spec.scheduler", "the spec has no scheduler section: add spec.scheduler (see `hactl init` or the README)"}
	}
	if c.Spec.Kubernetes == nil {
		return nil, &UsageError{"spec.kubernetes", "static pods run on the control planes hactl built: add spec.kubernetes, or deploy through a kubeconfig"}
	}
	p := &plan{s: s, image: s.Image, archive: s.ImageArchive}
	if o.ImageArchive != "" {
		p.archive, p.image = o.ImageArchive, ""
	}
	if o.Image != "" {
		p.image = o.Image
	}
	field := "spec.scheduler.imageArchive"
	if o.ImageArchive != "" {
		field = "--image-archive"
	}
	if p.archive != "" {
		refs, err := images.ArchiveImages(p.archive)
		if err != nil {
			return nil, &UsageError{field, fmt.Sprintf("%v (make scheduler-image writes bin/hactl-scheduler-image.tar)", err)}
		}
		switch {
		case p.image == "" && len(refs) == 1:
			p.image = refs[0]
		case p.image == "":
			return nil, &UsageError{field, fmt.Sprintf("the archive holds %d images (%s): name one with spec.scheduler.image or --image", len(refs), strings.Join(refs, ", "))}
		case !slices.Contains(refs, images.Normalize(p.image)) && !slices.Contains(refs, p.image):
			return nil, &UsageError{field, fmt.Sprintf("the archive holds %s, not the image %s", strings.Join(refs, ", "), p.image)}
		}
	}
	if p.image == "" {
		return nil, &UsageError{"spec.scheduler.image", "no image: set spec.scheduler.image (a registry reference) or imageArchive, or pass --image-archive bin/hactl-scheduler-image.tar (make scheduler-image)"}
	}
	var err error
	if p.config, err = ConfigYAML(s, KubeconfigFile); err != nil {
		return nil, err
	}
	if p.manifest, err = StaticPod(s, p.image, p.config); err != nil {
		return nil, err
	}
	p.rbac = RBAC(s, UserSubject())
	return p, nil
}

// Deploy runs hactl-scheduler as a static pod on every control-plane host: the image (imported from
// the archive when the host lacks it), Dir with a kubeconfig for User made on the host by `kubeadm
// kubeconfig user` (the CA key never leaves it; made once, valid a year), the configuration checked
// by `hactl-scheduler validate` in the image on the host before it replaces the running one, then
// the manifest; the RBAC once, server-side applied; then it waits until a replica holds the Lease.
// A re-run with the same spec changes nothing and restarts nothing. Errors: *UsageError before any
// host is contacted; per host, the step and command that failed (aggregated); a Lease without a
// holder after the wait.
func Deploy(ctx context.Context, o DeployOptions) error {
	p, err := newPlan(o)
	if err != nil {
		return err
	}
	c := o.Cluster
	cps := c.ControlPlaneHosts()
	if o.DryRun {
		return p.print(o.Out, cps)
	}
	d, err := provision.FromSpec(c, provision.SpecOptions{Prompt: o.Prompt})
	if err != nil {
		return fmt.Errorf("ssh: %w", err)
	}
	defer d.Close()
	api, err := kubeapi.FromSpec(ctx, c, o.Prompt)
	if err != nil {
		return err
	}
	defer api.Close()

	// RBAC first, so the scheduler starts with its permissions.
	if err := Apply(ctx, api, p.rbac); err != nil {
		return err
	}
	o.Printer.Infof("scheduler/rbac: applied (user %s: system:kube-scheduler, system:volume-scheduler, Lease %s/%s)", User, p.s.LeaderElection.ResourceNamespace, p.s.LeaderElection.ResourceName)
	err = provision.ForEach(ctx, cps, c.Spec.SSH.MaxParallel, func(h v1alpha1.Host) string { return h.Name }, func(ctx context.Context, h v1alpha1.Host) error {
		changed, err := p.install(ctx, d, c, h)
		if err != nil {
			return err
		}
		o.Printer.Hostf(h.Name, "scheduler/install: %s", changed)
		return nil
	})
	if err != nil {
		return err
	}
	wait := o.Wait
	if wait == 0 {
		wait = 2 * time.Minute
	}
	st, err := WaitReady(ctx, api, p.s, wait, sum(p.config), len(cps))
	if err != nil {
		return err
	}
	o.Printer.Infof("scheduler/wait: Lease %s/%s held by %s", p.s.LeaderElection.ResourceNamespace, p.s.LeaderElection.ResourceName, st.Lease.Holder)
	return nil
}

func (p *plan) print(w io.Writer, cps []v1alpha1.Host) error {
	rbac, err := YAML(p.rbac)
	if err != nil {
		return err
	}
	var b strings.Builder
	names := make([]string, len(cps))
	for i, h := range cps {
		names[i] = h.Name
	}
	fmt.Fprintf(&b, "# hactl scheduler deploy --dry-run: on %s\n", strings.Join(names, ", "))
	if p.archive != "" {
		fmt.Fprintf(&b, "# image %s imported from %s where containerd lacks it\n", p.image, p.archive)
	} else {
		fmt.Fprintf(&b, "# image %s pulled by kubelet\n", p.image)
	}
	fmt.Fprintf(&b, "# %s: kubeadm kubeconfig user --client-name %s (made on each host when missing)\n", KubeconfigFile, User)
	fmt.Fprintf(&b, "# %s:\n%s# %s:\n%s# RBAC (server-side applied):\n%s", ConfigFile, p.config, ManifestFile, p.manifest, rbac)
	_, err = io.WriteString(w, b.String())
	return err
}

func sum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// install puts the image, the kubeconfig, the configuration and the manifest on h and says what it
// changed ("unchanged" when nothing).
func (p *plan) install(ctx context.Context, d *provision.Dialer, c *v1alpha1.Cluster, h v1alpha1.Host) (string, error) {
	cli, err := d.Dial(ctx, provision.TargetOf(h))
	if err != nil {
		return "", err
	}
	defer cli.Close()
	var changed []string
	// What is there: the image, the kubeconfig, the sums of the config and the manifest.
	probe := fmt.Sprintf(`install -d -m 0700 -o %[1]d -g %[1]d %[2]s; `, UID, Dir) + fmt.Sprintf(`ctr -n k8s.io images ls -q name==%s | grep -qxF %s && echo image; [ -s %[3]s ] && echo kubeconfig && sed -n 's/^ *client-certificate-data: */cert /p' %[3]s; sha256sum %[4]s %[5]s 2>/dev/null; true`,
		shell.Quote(p.image), shell.Quote(p.image), KubeconfigFile, ConfigFile, ManifestFile)
	res, err := cli.Run(ctx, "scheduler/inspect", probe)
	if err != nil {
		return "", err
	}
	have := string(res.Stdout)
	if !strings.Contains(have, "image\n") {
		if p.archive == "" {
			if _, err := cli.Run(ctx, "scheduler/image", "ctr -n k8s.io images pull --hosts-dir /etc/containerd/certs.d "+shell.Quote(p.image)+" >/dev/null"); err != nil {
				return "", err
			}
			changed = append(changed, "image pulled")
		} else {
			if err := images.Import(ctx, cli, "scheduler/image", p.archive); err != nil {
				return "", err
			}
			changed = append(changed, "image imported")
		}
	}
	if err := cli.Upload(ctx, "scheduler/files", []provision.File{{Path: ConfigFile + ".new", Mode: 0o600, Owner: fmt.Sprint(UID), Group: fmt.Sprint(UID), Content: p.config}}); err != nil {
		return "", err
	}
	// The client certificate (public; the key stays on the host) is renewed within RenewBefore of its end.
	if renew, why := kubeconfigDue(have, time.Now()); renew {
		if err := makeKubeconfig(ctx, cli, c); err != nil {
			return "", err
		}
		changed = append(changed, "kubeconfig "+why)
	}
	// The scheduler's own validation, with the image that will run it, before the swap.
	validate := fmt.Sprintf("ctr -n k8s.io run --rm --mount type=bind,src=%[1]s,dst=%[1]s,options=rbind:ro %[2]s hactl-scheduler-validate-$$ /usr/local/bin/hactl-scheduler validate --config %[3]s.new 2>&1",
		Dir, shell.Quote(p.image), ConfigFile)
	if _, err := cli.Run(ctx, "scheduler/validate", validate); err != nil {
		return "", fmt.Errorf("hactl-scheduler validate refused the rendered configuration (nothing was swapped in): %w", err)
	}
	if !strings.Contains(have, sum(p.config)+"  "+ConfigFile) {
		changed = append(changed, "configuration")
	}
	if _, err := cli.Run(ctx, "scheduler/files", fmt.Sprintf("mv -f %[1]s.new %[1]s", ConfigFile)); err != nil {
		return "", err
	}
	if !strings.Contains(have, sum(p.manifest)+"  "+ManifestFile) {
		if err := cli.Upload(ctx, "scheduler/manifest", []provision.File{{Path: ManifestFile, Mode: 0o600, Content: p.manifest}}); err != nil {
			return "", err
		}
		changed = append(changed, "static pod")
	}
	if len(changed) == 0 {
		return "unchanged", nil
	}
	return strings.Join(changed, ", "), nil
}

// RenewBefore is how long before its client certificate expires the scheduler's kubeconfig is made
// again (it is valid a year).
const RenewBefore = 30 * 24 * time.Hour

// kubeconfigDue reads the probe's output: "kubeconfig" when the file exists, "cert <base64 PEM>" its
// client certificate. It says whether to make the kubeconfig and why ("made", "renewed").
func kubeconfigDue(probe string, now time.Time) (bool, string) {
	if !strings.Contains(probe, "kubeconfig\n") {
		return true, "made"
	}
	for _, line := range strings.Split(probe, "\n") {
		b64, ok := strings.CutPrefix(line, "cert ")
		if !ok {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
		if err != nil {
			return true, "renewed (unreadable certificate)"
		}
		block, _ := pem.Decode(raw)
		if block == nil {
			return true, "renewed (unreadable certificate)"
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return true, "renewed (unreadable certificate)"
		}
		if cert.NotAfter.Sub(now) < RenewBefore {
			return true, "renewed (certificate expires " + cert.NotAfter.UTC().Format(time.RFC3339) + ")"
		}
		return false, ""
	}
	return true, "renewed (no client certificate in it)"
}

// makeKubeconfig runs kubeadm kubeconfig user on the host with the cluster's ClusterConfiguration
// (server: the endpoint) and writes its output to KubeconfigFile, owned by UID, mode 0600.
func makeKubeconfig(ctx context.Context, cli *provision.Client, c *v1alpha1.Cluster) error {
	cfg, err := kubeadm.ClusterConfig(c)
	if err != nil {
		return err
	}
	remote := kubenode.ConfigDir + "/kubeconfig-hactl-scheduler.yaml"
	if err := cli.Upload(ctx, "scheduler/kubeconfig", []provision.File{{Path: remote, Mode: 0o600, Content: cfg}}); err != nil {
		return err
	}
	cmd := fmt.Sprintf(`set -e; trap 'rm -f %[1]s %[2]s.tmp' EXIT; umask 077
kubeadm kubeconfig user --config %[1]s --client-name %[3]s --validity-period 8760h > %[2]s.tmp
chown %[4]d:%[4]d %[2]s.tmp; mv -f %[2]s.tmp %[2]s`, remote, KubeconfigFile, User, UID)
	_, err = cli.Run(ctx, "scheduler/kubeconfig", cmd)
	return err
}
