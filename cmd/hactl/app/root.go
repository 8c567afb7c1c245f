// Package app holds hactl's cobra commands: one file per command, each with an options struct and
// RunE; nothing here calls os.Exit.
package app

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/internal/exitcode"
)

// Streams are the command's standard streams (tests pass buffers).
type Streams struct {
	In       io.Reader
	Out, Err io.Writer
}

// Exit codes (README "Exit codes"; exitcode holds them for the packages commands call).
const (
	ExitOK      = exitcode.OK
	ExitFailure = exitcode.Failure // runtime failure: names host, step, command
	ExitInvalid = exitcode.Invalid // invalid input or usage, found locally before any host is contacted
	ExitVerdict = exitcode.Verdict // a check's verdict failed
)

// ExitCoder is implemented by errors that choose the process exit code.
type ExitCoder = exitcode.Coder

// ExitCode maps an error to the process exit code: nil → 0, an ExitCoder anywhere in the chain →
// its code, anything else → 1.
func ExitCode(err error) int { return exitcode.Of(err) }

// UsageError is a bad flag or argument (exit 2).
type UsageError = exitcode.UsageError

// VerdictError is a check whose verdict failed (exit 3).
type VerdictError = exitcode.VerdictError

// globalOptions are flags shared by every command.
type globalOptions struct {
	file    string
	verbose bool
	logFile string
}

// NewRootCommand builds the hactl command tree.
func NewRootCommand(s Streams) *cobra.Command {
	g := &globalOptions{}
	root := &cobra.Command{
		Use:   "hactl",
		Short: "Stand up and keep alive a highly available control plane over SSH",
		Long: `hactl builds a TLS etcd cluster across availability zones on machines reached over SSH,
the kube-apiserver load balancer (HAProxy + a Keepalived VIP) and, with spec.kubernetes, the
Kubernetes control planes and workers on them (containerd, kubelet, kubeadm init/join), and keeps
it all converged: re-running changes nothing.

  hactl init -f cluster.yaml         write a commented example spec
  hactl plan -f cluster.yaml         show what bootstrap would change
  hactl bootstrap -f cluster.yaml    converge the hosts into a healthy cluster
  hactl status -f cluster.yaml       members, leader, raft, DB size, alarms, health, certificates; VIP; nodes
  hactl kubeconfig -f cluster.yaml --out admin.conf   a kubeconfig through the VIP
  hactl pki check -f cluster.yaml    every certificate on every host and in the state dir: SANs, expiry, issuer
  hactl drill kill-leader --yes      kill the etcd leader: measured RTO, no acknowledged write lost`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
	root.SetIn(s.In)
	root.SetOut(s.Out)
	root.SetErr(s.Err)
	root.PersistentFlags().StringVarP(&g.file, "file", "f", "cluster.yaml", "cluster spec file")
	root.PersistentFlags().BoolVarP(&g.verbose, "verbose", "v", false, "verbose output (every remote command with its duration)")
	root.PersistentFlags().StringVar(&g.logFile, "log-file", defaultLogFile(), "debug log appended on every run (\"\" disables it)")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &UsageError{Err: err} })
	root.AddCommand(
		newVersionCommand(s),
		newInitCommand(s, g),
		newPlanCommand(s, g),
		newBootstrapCommand(s, g),
		newStatusCommand(s, g),
		newKubeconfigCommand(s, g),
		newResetCommand(s, g),
		newPKICommand(s, g),
		newKubeadmConfigCommand(s, g),
		newBackupCommand(s, g),
		newRestoreCommand(s, g),
		newDrillCommand(s, g),
		newSchedulerCommand(s, g),
		newOperatorCommand(s, g),
		newMaintenanceCommand(s, g),
		newEtcdCommand(s, g),
	)
	usageCompletion(root)
	return root
}

// usageCompletion adds cobra's default completion command now (instead of at Execute) so that its
// argument errors are usage errors (exit 2) like every other command's: "completion bash extra"
// and "completion nosuchshell" exit 2 instead of 1 and 0.
func usageCompletion(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() != "completion" {
			continue
		}
		c.Args = usageArgs(cobra.NoArgs)
		c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
		for _, sub := range c.Commands() {
			if sub.Args != nil {
				sub.Args = usageArgs(sub.Args)
			}
		}
	}
}

// usageArgs turns an argument validator's error into a UsageError (exit 2).
func usageArgs(v cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := v(cmd, args); err != nil {
			if len(args) > 0 && (strings.HasSuffix(args[0], ".yaml") || strings.HasSuffix(args[0], ".yml")) {
				return &UsageError{Err: fmt.Errorf("%s takes no arguments; did you mean -f %s?", cmd.CommandPath(), args[0])}
			}
			return &UsageError{Err: fmt.Errorf("%w (see '%s --help')", err, cmd.CommandPath())}
		}
		return nil
	}
}

// outputFormat validates -o.
func outputFormat(o string) error {
	switch o {
	case "table", "json":
		return nil
	}
	return &UsageError{Err: fmt.Errorf("--output %q: must be table or json", o)}
}

// writeReport writes a listing: indented JSON for -o json, else the table printer's output.
func writeReport(w io.Writer, output string, v any, table func(io.Writer)) error {
	if output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	table(w)
	return nil
}
