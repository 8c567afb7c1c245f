// Command apt-repo builds the hactl lab's apt repository (e2e/lab.EnsureAptRepo) into
// <repo>/bin/apt-<key>/ unless it is already there, and prints the directory as the last line of
// its standard output (progress goes to standard error). The lab's mirror host serves it at
// http://<mirror>:8080/apt/. It needs root, apt-get, dpkg-scanpackages (dpkg-dev) and Debian's
// archive (the mirror of the machine's apt sources); it fails with the reason otherwise.
//
// With -sources URL it builds nothing and prints e2e/lab.AptSourcesScript(URL) instead: the sh
// snippet that points a host's apt at the repository served under URL (e.g. http://172.28.0.32:8080).
//
// Usage: go run ./e2e/cmd/apt-repo [-bin DIR] [-v]
//
//	go run ./e2e/cmd/apt-repo -sources URL
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/hactl/hactl/e2e/lab"
)

func main() {
	bin := flag.String("bin", "", "directory of the repository (default <repo>/bin)")
	verbose := flag.Bool("v", false, "print every command")
	sources := flag.String("sources", "", "print the apt sources snippet for the mirror at this URL instead")
	flag.Parse()
	if *sources != "" {
		fmt.Print(lab.AptSourcesScript(*sources))
		return
	}
	logger := log.New(os.Stderr, "apt-repo: ", 0)
	if *bin == "" {
		root, err := lab.FindRepoRoot(".")
		if err != nil {
			logger.Fatalf("FAILED: %v", err)
		}
		*bin = filepath.Join(root, "bin")
	}
	var debugf lab.LogFunc
	if *verbose {
		debugf = logger.Printf
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r, err := lab.EnsureAptRepo(ctx, *bin, logger.Printf, debugf)
	if err != nil {
		logger.Fatalf("FAILED: %v", err)
	}
	logger.Printf("%s: %d packages, %.1f MB", r.Dir, len(r.Packages), float64(r.Bytes)/1e6)
	fmt.Println(r.Dir)
}
