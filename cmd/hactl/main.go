// Command hactl stands up and keeps alive a highly available Kubernetes control plane on machines
// reached over SSH. See README.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/hactl/hactl/cmd/hactl/app"
)

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		fmt.Fprintln(os.Stderr, "\ninterrupted: stopping cleanly (press Ctrl-C again to exit now)")
		cancel()
		<-sigs
		fmt.Fprintln(os.Stderr, "interrupted again: exiting now without finishing (a drill's hosts put themselves back when their deadman timer fires; `hactl drill cleanup --yes` does it now)")
		os.Exit(130)
	}()
	err := app.NewRootCommand(app.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}).ExecuteContext(ctx)
	code := app.ExitCode(err)
	var notice interface{ Notice() }
	switch {
	case errors.As(err, &notice): // an outcome, not a failure (plan --detailed-exitcode)
		fmt.Fprintf(os.Stderr, "%s\n", strings.TrimRight(err.Error(), "\n"))
	case err != nil:
		fmt.Fprintf(os.Stderr, "ERROR: %s\n", strings.TrimRight(err.Error(), "\n"))
	}
	cancel()
	os.Exit(code)
}
