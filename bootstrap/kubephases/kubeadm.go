package kubephases

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/pki"

	"github.com/hactl/hactl/internal/shell"
	"github.com/hactl/hactl/kubeadm"
	"github.com/hactl/hactl/kubenode"
	"github.com/hactl/hactl/provision"
)

// kubeadmTimeout bounds one kubeadm init or join (kubeadm itself waits up to 4 min for the control
// plane or the kubelet).
const kubeadmTimeout = 10 * time.Minute

// backupDir keeps /etc/kubernetes as it was before hactl ran `kubeadm reset` on a node.
const backupDir = "/var/lib/hactl/backup"

// adminConf is kubeadm's admin kubeconfig on control-plane hosts (its server: the endpoint).
const adminConf = kubenode.AdminConf

// Init runs `kubeadm init` on the first control-plane host when no control-plane host has joined
// yet (none has hactl's marker): with hactl's configuration (kubeadm.InitConfig) in a 0600 file,
// --upload-certs with this run's certificate key and this run's bootstrap token, then the marker.
// A host with kubeadm's files but no marker (an interrupted init) is reset first.
type Init struct{ g *Group }

// Title is PhaseInit.
func (*Init) Title() string { return PhaseInit }

// Mutates: the phase changes hosts.
func (*Init) Mutates() bool { return true }

// ShouldRun: no control plane has joined.
func (ph *Init) ShouldRun() bool { return ph.g.planned() && ph.g.source == "" }

// Run does the phase's work.
func (ph *Init) Run(ctx context.Context) error {
	g := ph.g
	n := g.cps()[0]
	p := g.plan(n.host.Name)
	if err := g.creds.ensure(); err != nil {
		return err
	}
	cfg, err := kubeadm.InitConfig(g.run.Spec, n.host.Name, g.params, *g.creds.secrets)
	if err != nil {
		return err
	}
	kctx, cancel := context.WithTimeout(ctx, kubeadmTimeout)
	defer cancel()
	if len(p.reset) > 0 {
		if err := g.reset(kctx, n, p.reset); err != nil {
			return err
		}
	}
	start := time.Now()
	res, err := g.kubeadm(kctx, n, PhaseInit, "init.yaml", cfg, "kubeadm init --config \"$cfg\" --upload-certs >/dev/null\ncat /etc/kubernetes/pki/ca.crt")
	if err != nil {
		return err
	}
	if g.creds.caHash, err = kubeadm.CACertHash(res.Stdout); err != nil {
		return fmt.Errorf("host %s: step %s: %w", n.host.Name, PhaseInit, err)
	}
	g.mu.Lock()
	g.source, g.joined[n.host.Name], g.changed = n.host.Name, true, true
	p.kubeadm = "init"
	g.mu.Unlock()
	g.networkSoon(ctx, n)
	g.run.Printer.Hostf(n.host.Name, "kubeadm init done in %s: control plane up behind %s", time.Since(start).Round(100*time.Millisecond), g.endpoint)
	return nil
}

// credentials are this run's join credentials: the bootstrap token and certificate key (made once,
// by kube/init or else by kube/join's first step, and redacted from kubeadm's errors) and the
// cluster CA's discovery hash.
type credentials struct {
	mu      sync.Mutex
	secrets *kubeadm.Secrets // nil until needed
	caHash  string           // "" until kube/init or kube/join learned it
}

// ensure makes this run's secrets once. Errors: kubeadm.NewSecrets's, wrapped.
func (c *credentials) ensure() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.secrets != nil {
		return nil
	}
	s, err := kubeadm.NewSecrets()
	if err != nil {
		return fmt.Errorf("join credentials: %w", err)
	}
	c.secrets = &s
	return nil
}

// redact removes the run's secrets from a command error's output (err itself when it is no
// *provision.CommandError or no secrets were made).
func (c *credentials) redact(err error) error {
	var ce *provision.CommandError
	if c.secrets == nil || !errors.As(err, &ce) {
		return err
	}
	out := *ce
	out.Stderr = c.secrets.Redact(out.Stderr)
	out.Command = c.secrets.Redact(out.Command)
	return &out
}

// kubeadm uploads cfg (0600) into kubenode.ConfigDir/name on node n and runs script with $cfg set
// to it; the file is removed whatever happens, and the marker is written when script succeeds.
// Secrets in the command's error are redacted.
//
// An interrupted run (ctx done: a timeout, Ctrl-C) must not leave kubeadm running on the host, to
// finish or not after hactl has gone: script runs as its own process group, and a watcher reading
// the command's standard input — held open by hactl until ctx is done or the command ends — kills
// that group when it reaches end of file (the SSH session closed or hactl stopped). The marker is
// then not written, and the next run resets the node and joins it again.
func (g *Group) kubeadm(ctx context.Context, n node, step, name string, cfg []byte, script string) (provision.Result, error) {
	remote := path.Join(kubenode.ConfigDir, name)
	if err := g.run.Upload(ctx, n.host.Name, step, []provision.File{{Path: remote, Mode: 0o600, Content: cfg}}); err != nil {
		return provision.Result{}, err
	}
	marker := fmt.Sprintf("role=%s\nversion=%s\njoined=%s\n", n.role(), g.run.Spec.Spec.Kubernetes.Version, time.Now().UTC().Format(time.RFC3339))
	cmd := guardedScript(remote, script, kubenode.MarkerPath, marker)
	hold, release := holdOpen(ctx)
	res, err := g.run.Exec(ctx, n.host.Name, step, cmd, provision.WithStdin(hold))
	release()
	if err != nil {
		return res, g.creds.redact(err)
	}
	return res, nil
}

// guardedScript is the command of Group.kubeadm: script (with $cfg = cfgPath, removed on exit) in a
// session of its own (setsid: its own process group, so kubeadm and its children go with it), killed
// when standard input reaches end of file, then the marker written.
func guardedScript(cfgPath, script, markerPath, marker string) string {
	return fmt.Sprintf(`set -e
exec 3<&0 </dev/null
cfg=%s
export cfg
trap 'rm -f "$cfg"' EXIT
setsid sh -ec %s &
job=$!
( while read -r _ <&3; do :; done; kill -TERM -$job && sleep 2 && kill -KILL -$job ) >/dev/null 2>&1 &
watch=$!
exec 3<&-
rc=0; wait $job || rc=$?
kill $watch 2>/dev/null || true
[ $rc -eq 0 ] || exit $rc
mkdir -p %s
printf '%%s' %s > %s.tmp
mv -f %s.tmp %s
`, shell.Quote(cfgPath), shell.Quote(script), shell.Quote(path.Dir(markerPath)), shell.Quote(marker),
		shell.Quote(markerPath), shell.Quote(markerPath), shell.Quote(markerPath))
}

// holdOpen returns a reader that blocks until ctx is done or release is called, then reports end
// of file: a remote command's standard input that closes when the step is abandoned.
func holdOpen(ctx context.Context) (io.Reader, func()) {
	pr, pw := io.Pipe()
	done := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(done) }) }
	go func() {
		select {
		case <-ctx.Done():
		case <-done:
		}
		pw.Close()
	}()
	return pr, release
}

// reset runs `kubeadm reset` on node n after an interrupted init or join (leftovers: kubeadm's
// files found), saving /etc/kubernetes aside first, and puts kube-apiserver's etcd credentials back
// on a control plane (reset empties /etc/kubernetes/pki). The node's etcd member is not touched
// (external etcd).
func (g *Group) reset(ctx context.Context, n node, leftovers []string) error {
	g.run.Printer.Hostf(n.host.Name, "kubeadm files without hactl's marker (%s): an interrupted join; saving /etc/kubernetes under %s, then kubeadm reset",
		strings.Join(leftovers, ", "), backupDir)
	cmd := fmt.Sprintf(`set -e
mkdir -p %[1]s && chmod 0700 %[1]s
tar -czf %[1]s/etc-kubernetes-$(date +%%Y%%m%%dT%%H%%M%%S).tgz -C / etc/kubernetes
kubeadm reset -f --cri-socket %[2]s >/dev/null 2>&1 || kubeadm reset -f --cri-socket %[2]s
rm -f %[3]s
`, backupDir, kubenode.CRISocket, shell.Quote(kubenode.MarkerPath))
	if _, err := g.run.Exec(ctx, n.host.Name, "kube/reset", cmd); err != nil {
		return err
	}
	if n.cp {
		files, err := etcdCredentials(g.run.Spec)
		if err != nil {
			return err
		}
		if err := g.run.Upload(ctx, n.host.Name, "kube/reset", files); err != nil {
			return err
		}
	}
	return nil
}

// Join joins every node without hactl's marker: control planes one at a time (each `kubeadm join
// --control-plane` brings up a new apiserver and the load balancer's backends change), then the
// workers in parallel within maxParallel. Before the first join it makes this run's credentials on
// a joined control plane: a bootstrap token (`kubeadm token create --config`) and, when a control
// plane joins, the control-plane certificates uploaded again under a fresh certificate key
// (`kubeadm init phase upload-certs --upload-certs --config`); both only in 0600 files.
type Join struct{ g *Group }

// Title is PhaseJoin.
func (*Join) Title() string { return PhaseJoin }

// Mutates: the phase changes hosts.
func (*Join) Mutates() bool { return true }

// toJoin returns the nodes still to join, control planes first.
func (ph *Join) toJoin() (cps, workers []node) {
	g := ph.g
	for _, n := range g.nodes {
		g.mu.Lock()
		done := g.joined[n.host.Name]
		g.mu.Unlock()
		if done || g.plan(n.host.Name).kubeadm != "join" {
			continue
		}
		if n.cp {
			cps = append(cps, n)
		} else {
			workers = append(workers, n)
		}
	}
	return cps, workers
}

// ShouldRun: some node has not joined.
func (ph *Join) ShouldRun() bool {
	if !ph.g.planned() {
		return false
	}
	cps, workers := ph.toJoin()
	return len(cps)+len(workers) > 0
}

// Run does the phase's work. Errors: the credentials cannot be made; per host, a join's failure.
// A control plane that fails to join stops the phase (the workers are not joined).
func (ph *Join) Run(ctx context.Context) error {
	g := ph.g
	cps, workers := ph.toJoin()
	if g.source == "" {
		return errors.New("kube/join: no control-plane host has joined (kube/init did not run or failed)")
	}
	if err := ph.joinCredentials(ctx, len(cps) > 0); err != nil {
		return err
	}
	for _, n := range cps {
		if err := ph.joinNode(ctx, n); err != nil {
			return err
		}
	}
	return g.forEach(ctx, workers, ph.joinNode)
}

// joinCredentials makes the run's token (and, for control planes, uploads the certificates under a
// fresh key) on the source control plane, unless kube/init made them in this run.
func (ph *Join) joinCredentials(ctx context.Context, controlPlanes bool) error {
	g := ph.g
	src := g.nodeNamed(g.source)
	if g.creds.caHash == "" {
		ca := g.facts[src.host.Name].CA
		if ca == nil {
			return stepf(src, PhaseJoin, "no /etc/kubernetes/pki/ca.crt on the control plane")
		}
		h, err := kubeadm.CACertHash(ca)
		if err != nil {
			return stepf(src, PhaseJoin, "%v", err)
		}
		g.creds.caHash = h
	}
	if g.creds.secrets != nil {
		return nil // kube/init made them
	}
	if err := g.creds.ensure(); err != nil {
		return err
	}
	cfg, err := kubeadm.InitConfig(g.run.Spec, src.host.Name, g.params, *g.creds.secrets)
	if err != nil {
		return err
	}
	script := "kubeadm token create --config \"$cfg\" >/dev/null"
	if controlPlanes {
		script += "\nkubeadm init phase upload-certs --upload-certs --config \"$cfg\" >/dev/null"
	}
	sctx, cancel := g.run.StepCtx(ctx)
	defer cancel()
	// The marker is rewritten on the source (it has joined): same content but the time.
	if _, err := g.kubeadm(sctx, src, PhaseJoin, "credentials.yaml", cfg, script); err != nil {
		return err
	}
	what := "a bootstrap token (ttl " + kubeadm.TokenTTL + ")"
	if controlPlanes {
		what += " and the control-plane certificates under a fresh certificate key (expires in 2h)"
	}
	g.run.Printer.Hostf(src.host.Name, "made %s for this run's joins", what)
	return nil
}

// joinNode resets node n when its last join was interrupted, then joins it (a worker once its
// images are imported).
func (ph *Join) joinNode(ctx context.Context, n node) error {
	g := ph.g
	p := g.plan(n.host.Name)
	if err := g.waitImport(ctx, n); err != nil {
		return err
	}
	cfg, err := kubeadm.JoinConfig(g.run.Spec, n.host.Name, g.params, *g.creds.secrets, g.creds.caHash)
	if err != nil {
		return err
	}
	kctx, cancel := context.WithTimeout(ctx, kubeadmTimeout)
	defer cancel()
	if len(p.reset) > 0 {
		if err := g.reset(kctx, n, p.reset); err != nil {
			return err
		}
	}
	start := time.Now()
	if _, err := g.kubeadm(kctx, n, PhaseJoin, "join.yaml", cfg, "kubeadm join --config \"$cfg\" >/dev/null"); err != nil {
		return err
	}
	g.mu.Lock()
	g.joined[n.host.Name], g.changed = true, true
	g.mu.Unlock()
	g.networkSoon(ctx, n)
	what := "worker"
	if n.cp {
		what = "control plane"
	}
	g.run.Printer.Hostf(n.host.Name, "joined as %s in %s", what, time.Since(start).Round(100*time.Millisecond))
	return nil
}

// etcdCredentials are kube-apiserver's etcd client files from the state dir, at kubeadm's paths
// (what kube/etcd-certs installs), put back after `kubeadm reset` emptied /etc/kubernetes/pki.
func etcdCredentials(c *v1alpha1.Cluster) ([]provision.File, error) {
	dir := filepath.Join(c.Spec.StateDir, "pki")
	var out []provision.File
	for _, f := range []struct {
		remote, local string
		mode          os.FileMode
	}{
		{kubeadm.EtcdCAFile, pki.CertPath(dir, "ca"), 0o644},
		{kubeadm.EtcdClientCertFile, pki.CertPath(dir, pki.APIServerClient), 0o644},
		{kubeadm.EtcdClientKeyFile, pki.KeyPath(dir, pki.APIServerClient), 0o600},
	} {
		data, err := os.ReadFile(f.local)
		if err != nil {
			return nil, fmt.Errorf("kube-apiserver's etcd credentials: %w", err)
		}
		out = append(out, provision.File{Path: f.remote, Mode: f.mode, Content: data})
	}
	return out, nil
}
