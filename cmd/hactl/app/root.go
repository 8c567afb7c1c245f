// Package app holds hactl's cobra commands: one file per command, each with an options struct and
// RunE; nothing here calls os.Exit.
package app

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	sigsyaml "sigs.k8s.io/yaml"

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
	// Every command: a flag given an empty value is refused before anything else runs.
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error { return emptyFlag(cmd) }
	root.AddCommand(
		newVersionCommand(s),
		newExplainCommand(s),
		newSchemaCommand(s),
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
	strictGroups(root)
	root.SetHelpCommand(newHelpCommand(root))
	return root
}

// strictGroups makes every command that groups others (etcd, etcd member, backup …) refuse an
// unknown subcommand with exit 2 and cobra's nearest match ("did you mean"), like the root: cobra
// itself prints the group's help and exits 0 for "hactl etcd member rmove", and suggests only at
// the root.
func strictGroups(c *cobra.Command) {
	for _, sub := range c.Commands() {
		strictGroups(sub)
	}
	if !c.HasSubCommands() {
		return
	}
	c.SuggestionsMinimumDistance = 2 // cobra's default, which only its root lookup sets
	if c.Args == nil {
		c.Args = usageArgs(cobra.NoArgs)
	}
	if !c.Runnable() {
		c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	}
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
			if cmd.HasAvailableSubCommands() && len(args) > 0 && strings.TrimSpace(args[0]) == "" {
				return &UsageError{Err: fmt.Errorf("an empty command name for %q (an unset shell variable?): give one of its commands (see '%s --help')", cmd.CommandPath(), cmd.CommandPath())}
			}
			if cmd.HasAvailableSubCommands() && len(args) > 0 {
				if sugg := cmd.SuggestionsFor(args[0]); len(sugg) > 0 {
					return &UsageError{Err: fmt.Errorf("%w; did you mean %q? (see '%s --help')", err, sugg[0], cmd.CommandPath())}
				}
			}
			return &UsageError{Err: fmt.Errorf("%w (see '%s --help')", err, cmd.CommandPath())}
		}
		return nil
	}
}

// Output formats: every command that prints a report takes -o table|json|yaml (outputFlag).
const (
	outputTable = "table"
	outputJSON  = "json"
	outputYAML  = "yaml"
)

// outputFormats are -o's values, in the order help and completion list them.
var outputFormats = []string{outputTable, outputJSON, outputYAML}

// outputFlag registers -o/--output on fs (default table) with help "<what> format: table, json or
// yaml<note>" and completion of its values. what is e.g. "report", note e.g. " (progress goes to
// stderr)".
func outputFlag(cmd *cobra.Command, p *string, what, note string) {
	cmd.Flags().StringVarP(p, "output", "o", outputTable, what+" format: table, json or yaml"+note)
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(outputFormats, cobra.ShellCompDirectiveNoFileComp))
}

// outputFormat validates -o: a usage error (exit 2) naming the formats otherwise.
func outputFormat(o string) error {
	if slices.Contains(outputFormats, o) {
		return nil
	}
	return &UsageError{Err: fmt.Errorf("--output %q: must be table, json or yaml", o)}
}

// machineOutput reports whether -o o is for programs (json, yaml): the report alone goes to stdout,
// progress to stderr.
// emptyMeaningful are the flags where an empty value means something of its own (--log-file ""
// disables the debug log) or is refused with a message of their own (-f "", -o "").
var emptyMeaningful = []string{"log-file", "file", "output"}

// emptyFlag refuses, as exit 2, a string or string-list flag of cmd given an empty value (or a list
// given an empty entry), but those of emptyMeaningful: the commands and the libraries below read ""
// as "not given, use the default" (spec.scheduler.image, the operator's namespace, kubeadm's pod
// subnet, the SSH mode instead of --kubeconfig, …), which a value given on the command line must
// never silently become. The message names the flag and its default when the flag has one.
func emptyFlag(cmd *cobra.Command) error {
	var err error
	cmd.Flags().Visit(func(fl *pflag.Flag) {
		if err != nil || slices.Contains(emptyMeaningful, fl.Name) {
			return
		}
		var empty bool
		switch v := fl.Value.(type) {
		case pflag.SliceValue:
			empty = fl.Value.Type() != "boolSlice" && (len(v.GetSlice()) == 0 || slices.Contains(v.GetSlice(), ""))
		default:
			empty = fl.Value.Type() == "string" && fl.Value.String() == ""
		}
		if !empty {
			return
		}
		def := "its default, as hactl " + strings.TrimPrefix(cmd.CommandPath(), "hactl ") + " --help says"
		if fl.DefValue != "" && fl.DefValue != "[]" {
			def = "the default, " + fl.DefValue
		}
		err = &UsageError{Err: fmt.Errorf("--%s \"\": an empty value; give one, or leave the flag out for %s", fl.Name, def)}
	})
	return err
}

func machineOutput(o string) bool { return o == outputJSON || o == outputYAML }

// writeReport writes a report: indented JSON for -o json, YAML for -o yaml (the same fields, through
// sigs.k8s.io/yaml), else the table printer's output.
func writeReport(w io.Writer, output string, v any, table func(io.Writer)) error {
	switch output {
	case outputJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false) // "<Etcd>", not "\u003cEtcd\u003e": reports are for programs and people, not HTML
		return enc.Encode(v)
	case outputYAML:
		b, err := sigsyaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	table(w)
	return nil
}
