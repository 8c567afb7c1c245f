// Command hactl-lab brings hactl's e2e lab up and down for the Makefile and for people trying hactl
// by hand:
//
//	go run ./e2e/cmd/hactl-lab up [--members 3|5] [--dir DIR] [-v]   start a fresh lab
//	go run ./e2e/cmd/hactl-lab down [-v]                             remove every hactl-lab container, network, volume
//	go run ./e2e/cmd/hactl-lab image [-v]                            build (or reuse) the host image
//	go run ./e2e/cmd/hactl-lab spec [--dir DIR]                      (re)write the lab's cluster specs only
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
	"syscall"
	"time"

	"github.com/hactl/hactl/e2e/lab"
)

const usage = `usage: hactl-lab <command> [flags]

commands:
  up     [--members 3|5] [--dir DIR] [-v]   start a fresh lab (removes any previous one first)
  down   [-v]                              remove every hactl-lab container, network and volume
  image  [-v]                              build the host image unless it is cached
  spec   [--dir DIR]                       write the lab's cluster-3.yaml and cluster-5.yaml
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
	opts := lab.Options{Members: *members, Dir: *dir, Logf: logger.Printf}
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
			fmt.Fprintf(stdout, "  %-7s %-12s %-5s %v\n", h.Name, h.Address, h.Zone, h.Roles)
		}
		fmt.Fprintf(stdout, "lab dir:  %s\nspec:     %s\n\n", l.Dir(), spec)
		h := l.Hosts()[0]
		fmt.Fprintf(stdout, "log in to a host (host key checked):\n")
		fmt.Fprintf(stdout, "  ssh -i %s -o UserKnownHostsFile=%s -o StrictHostKeyChecking=yes root@%s\n",
			l.IdentityFile(), l.KnownHostsFile(), h.Address)
		fmt.Fprintf(stdout, "  bin/hactl plan -f %s        # then bin/hactl bootstrap -f ..., bin/hactl status -f ...\n", spec)
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
	case "spec":
		labDir, binDir, err := specDirs(*dir)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(labDir, 0o755); err != nil {
			return err
		}
		paths, err := lab.WriteSpecs(labDir, binDir)
		if err != nil {
			return err
		}
		for _, p := range paths {
			fmt.Fprintln(stdout, p)
		}
		return nil
	default:
		return usageError{fmt.Errorf("unknown command %q", cmd)}
	}
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
