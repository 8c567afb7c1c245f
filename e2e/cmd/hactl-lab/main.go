// Command hactl-lab brings hactl's e2e lab up and down for the Makefile and for people trying hactl
// by hand:
//
//	go run ./e2e/cmd/hactl-lab up [--members 3|5] [--bastion] [--ipv6] [--mirror] [--object-store] [--kubernetes] [--workers] [--all] [--dir DIR] [-v]
//	go run ./e2e/cmd/hactl-lab down [-v]      remove every hactl-lab container, network, volume
//	go run ./e2e/cmd/hactl-lab image [-v]     build (or reuse) the host image
//	go run ./e2e/cmd/hactl-lab kind-image [-v]   build (or reuse) the kind node image
//	go run ./e2e/cmd/hactl-lab kind-up [--dir DIR] [-v]   the lab's kind cluster (kubeconfig DIR/kind.kubeconfig)
//	go run ./e2e/cmd/hactl-lab kind-down [-v] delete it
//	go run ./e2e/cmd/hactl-lab spec [--bastion] [--ipv6] [--mirror] [--object-store] [--all] [--dir DIR]
//	                                          (re)write the lab's cluster specs only
//
// -v prints every docker command as it runs. The lab itself lives in package e2e/lab.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/e2e/lab"
)

const usage = `usage: hactl-lab <command> [flags]

commands:
  up     [--members 3|5] [FEATURES] [--dir DIR] [-v]   start a fresh lab (removes any previous one first)
  down   [-v]                                         remove every hactl-lab container, network and volume
  image  [-v]                                         build the host image unless it is cached
  kind-image [-v]                                     build the kind node image unless it is cached (docs/kind.md)
  kind-up    [--dir DIR] [-v]                         (re)create the kind cluster hactl-lab-kind on the lab network:
                                                      1 control plane, 3 workers in az-a/b/c; DIR/kind.kubeconfig
  kind-down  [--dir DIR] [-v]                         delete the kind cluster, DIR/kind.kubeconfig, and the lab
                                                      network unless the lab's hosts use it
  spec   [FEATURES] [--dir DIR]                       write the lab's specs (cluster-3, -5, -sudo, -sudopw
                                                      and those of FEATURES) without starting anything

FEATURES (extra hosts and specs; none by default):
  --bastion   bastion 172.28.0.40 + in-a/b/c on the internal network 172.29.0.0/24 (cluster-bastion.yaml)
  --ipv6      v6-a/b/c, IPv6-only on fd00:db8:28::/64 (cluster-ipv6.yaml)
  --mirror    mirror 172.28.0.32 serving the etcd tarball built from bin/ on :8080 (cluster-download.yaml)
  --object-store
              objstore 172.28.0.31 running MinIO (bin/minio, make minio-bin) on :9000 with the bucket
              hactl-backups; every spec gets spec.backup, its access key in DIR/objstore.env
  --kubernetes
              cp-a/b/c become Kubernetes nodes (own cgroup namespace, containerd volume, /dev/kmsg and a
              writable /proc/sys at boot; containerd and the rest from the mirror's apt repository, so
              implies --mirror) and cluster-3/-5 get spec.kubernetes: hactl bootstrap builds the cluster
  --workers   also the workers w-a/b/c (172.28.0.51-53, zones az-a/b/c); implies --kubernetes
  --all       all of the above
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	var ue usageError
	switch {
	case err == nil:
	case errors.As(err, &ue):
		fmt.Fprintf(os.Stderr, "hactl-lab: %v\n\n%s", err, usage)
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "hactl-lab: %v\n", err)
		os.Exit(1)
	}
}

type usageError struct{ error }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{errors.New("missing command")}
	}
	cmd, args := args[0], args[1:]
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	members := fs.Int("members", 3, "etcd members: 3 or 5 (up)")
	dir := fs.String("dir", "", "lab directory (default <repo>/.lab)")
	verbose := fs.Bool("v", false, "print every docker command")
	bastion := fs.Bool("bastion", false, "add the bastion and the hosts behind it")
	ipv6 := fs.Bool("ipv6", false, "add the IPv6-only hosts")
	mirror := fs.Bool("mirror", false, "add the HTTP mirror of the etcd tarball")
	objStore := fs.Bool("object-store", false, "add the object store (MinIO) and spec.backup")
	kube := fs.Bool("kubernetes", false, "make cp-a/b/c Kubernetes nodes and give the specs spec.kubernetes")
	workers := fs.Bool("workers", false, "add the workers w-a/b/c (implies --kubernetes)")
	all := fs.Bool("all", false, "--bastion --ipv6 --mirror --object-store --kubernetes --workers")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("%s: unexpected arguments %v", cmd, fs.Args())}
	}
	if *members != 3 && *members != 5 {
		return usageError{fmt.Errorf("--members must be 3 or 5, got %d", *members)}
	}
	logger := log.New(stderr, "", log.Ltime)
	if *all {
		*bastion, *ipv6, *mirror, *objStore, *kube, *workers = true, true, true, true, true, true
	}
	opts := lab.Options{Members: *members, Dir: *dir, Logf: logger.Printf, Bastion: *bastion, IPv6: *ipv6, Mirror: *mirror, ObjectStore: *objStore,
		Kubernetes: *kube, Workers: *workers}
	if *verbose {
		opts.Debugf = logger.Printf
	}

	switch cmd {
	case "up":
		start := time.Now()
		l, err := lab.Up(ctx, opts)
		if err != nil {
			return err
		}
		spec := l.SpecPath(*members)
		fmt.Fprintf(stdout, "lab up in %s: %d hosts\n", time.Since(start).Round(100*time.Millisecond), len(l.Hosts()))
		for _, h := range l.Hosts() {
			extra := ""
			if h.Jump != "" {
				extra = " (through " + h.Jump + ")"
			}
			for _, a := range h.Networks {
				if a.IPv4 != h.Address && a.IPv6 != h.Address && !h.IPv6Only {
					extra += " " + a.Network + ":" + strings.TrimSpace(a.IPv4+" "+a.IPv6)
				}
			}
			roles := fmt.Sprint(h.Roles)
			if len(h.Roles) == 0 {
				roles = "-"
			}
			fmt.Fprintf(stdout, "  %-7s %-16s %-5s %s%s\n", h.Name, h.Address, h.Zone, roles, extra)
		}
		fmt.Fprintf(stdout, "lab dir:  %s\nspec:     %s\n", l.Dir(), spec)
		for _, v := range lab.Variants() {
			if p := l.VariantSpecPath(v); fileExists(p) {
				fmt.Fprintf(stdout, "          %s\n", p)
			}
		}
		fmt.Fprintf(stdout, "users:    root, %s (passwordless sudo), %s (sudo password in %s; export %s=\"$(cat %s)\")\n",
			lab.SudoUser, lab.SudoPasswordUser, l.SudoPasswordFile(), lab.SudoPasswordEnv, l.SudoPasswordFile())
		if t, err := l.EtcdTarball(); err == nil {
			fmt.Fprintf(stdout, "mirror:   %s\n          sha256 %s\n", t.URL, t.SHA256)
		}
		if o, err := l.ObjectStore(); err == nil {
			fmt.Fprintf(stdout, "objects:  MinIO http://%s, bucket %s (spec.backup in every spec); its access key: . %s\n", o.Endpoint, o.Bucket, o.EnvFile)
		}
		fmt.Fprintln(stdout)
		h := l.Hosts()[0]
		fmt.Fprintf(stdout, "log in to a host (host key checked):\n")
		fmt.Fprintf(stdout, "  ssh -i %s -o UserKnownHostsFile=%s -o StrictHostKeyChecking=yes root@%s\n",
			l.IdentityFile(), l.KnownHostsFile(), h.Address)
		if b, err := l.Host(lab.BastionHost); err == nil {
			fmt.Fprintf(stdout, "  through the bastion (OpenSSH's -J does not pass -i/-o on to the jump host):\n")
			sshOpts := fmt.Sprintf("-i %s -o UserKnownHostsFile=%s -o StrictHostKeyChecking=yes", l.IdentityFile(), l.KnownHostsFile())
			fmt.Fprintf(stdout, "  ssh %s -o ProxyCommand='ssh %s -W %%h:%%p %s@%s' root@172.29.0.11\n", sshOpts, sshOpts, lab.SudoUser, b.Address)
		}
		fmt.Fprintf(stdout, "  bin/hactl plan -f %s        # then bin/hactl bootstrap -f ..., bin/hactl status -f ...\n", spec)
		if opts.Kubernetes {
			fmt.Fprintf(stdout, "  bin/hactl kubeconfig -f %s --out %s/admin.conf   # after bootstrap: kubectl through the VIP %s\n", spec, l.Dir(), lab.VIP)
		}
		fmt.Fprintf(stdout, "remove the lab: make lab-down\n\n")
		return nil
	case "down":
		start := time.Now()
		if err := lab.DownWithLog(ctx, opts.Debugf); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "lab down in %s\n", time.Since(start).Round(100*time.Millisecond))
		return nil
	case "image":
		start := time.Now()
		ref, err := lab.EnsureImage(ctx, opts)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s (%s)\n", ref, time.Since(start).Round(100*time.Millisecond))
		return nil
	case "kind-image", "kind-up":
		labDir, binDir, err := specDirs(*dir)
		if err != nil {
			return err
		}
		root := filepath.Dir(binDir)
		in, err := lab.KindInputsFor(ctx, root)
		if err != nil {
			return err
		}
		start := time.Now()
		ref, err := lab.EnsureKindNodeImage(ctx, opts, in)
		if err != nil {
			return err
		}
		if cmd == "kind-image" {
			fmt.Fprintf(stdout, "%s (%s)\n", ref, time.Since(start).Round(100*time.Millisecond))
			return nil
		}
		if err := lab.KindUp(ctx, opts, in, root, labDir, ref); err != nil {
			return err
		}
		kc := lab.KindKubeconfig(labDir)
		fmt.Fprintf(stdout, "kind cluster %s is up (%s): 1 control plane, 3 workers in az-a/b/c, on the lab network %s\n", lab.KindCluster, time.Since(start).Round(100*time.Millisecond), lab.NetworkName)
		fmt.Fprintf(stdout, "  bin/kubectl --kubeconfig %s get nodes -L topology.kubernetes.io/zone\n", kc)
		fmt.Fprintf(stdout, "  PATH=$PWD/hack/kind:$PWD/bin/kind-%s:$PATH bin/hactl scheduler deploy --kubeconfig %s --image-archive bin/hactl-scheduler-image.tar --kind-cluster %s --replicas 3\n", lab.KindVersion, kc, lab.KindCluster)
		fmt.Fprintf(stdout, "remove it: make kind-down\n")
		return nil
	case "kind-down":
		labDir, binDir, err := specDirs(*dir)
		if err != nil {
			return err
		}
		return lab.KindDown(ctx, opts, filepath.Dir(binDir), labDir)
	case "spec":
		labDir, binDir, err := specDirs(*dir)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(labDir, 0o755); err != nil {
			return err
		}
		write := lab.WriteSpecs
		if *objStore {
			write = lab.WriteObjectStoreSpecs
		}
		paths, err := write(labDir, binDir)
		if err != nil {
			return err
		}
		var variants []lab.Variant
		if *bastion {
			variants = append(variants, lab.VariantBastion)
		}
		if *ipv6 {
			variants = append(variants, lab.VariantIPv6)
		}
		for _, v := range variants {
			p, err := lab.WriteVariantSpec(v, labDir, binDir, nil)
			if err != nil {
				return err
			}
			paths = append(paths, p)
		}
		if *mirror {
			tarball, sum, err := lab.BuildEtcdTarball(binDir, labDir)
			if err != nil {
				return err
			}
			url := lab.MirrorURL(lab.MirrorAddress, filepath.Base(tarball))
			p, err := lab.WriteVariantSpec(lab.VariantDownload, labDir, binDir, &v1alpha1.EtcdDownload{URL: url, SHA256: sum})
			if err != nil {
				return err
			}
			paths = append(paths, p)
		}
		for _, p := range paths {
			fmt.Fprintln(stdout, p)
		}
		return nil
	default:
		return usageError{fmt.Errorf("unknown command %q", cmd)}
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// specDirs resolves the lab and bin directories the way lab.Options does.
func specDirs(dir string) (labDir, binDir string, err error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", "", err
	}
	root, err := lab.FindRepoRoot(wd)
	if err != nil {
		return "", "", err
	}
	if dir == "" {
		dir = filepath.Join(root, ".lab")
	}
	if labDir, err = filepath.Abs(dir); err != nil {
		return "", "", err
	}
	return labDir, filepath.Join(root, "bin"), nil
}
