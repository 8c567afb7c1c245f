package app

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/drill"
	"github.com/hactl/hactl/drill/fault"
)

// drillOptions are the flags every drill shares, plus each drill's own.
type drillOptions struct {
	method       string
	component    string
	backend      string
	zone         string
	expectOutage bool
	down, up     string
	hold         time.Duration
	count        int
	maxRTO       time.Duration
	rate         int
	reqTimeout   time.Duration
	caFile       string
	report       string
	force        bool
	yes          bool
	dryRun       bool
	output       string
	// kind is the drill; kindFlags parses the flags only it takes into do (parseMethod,
	// parseComponent).
	kind      drill.Kind
	kindFlags func(o *drillOptions, do *drill.Options) error
	// kill-leader --target lease/...: the Lease drill.
	kubeFlags
	target, schedulerName, podImage string
	podRate                         int
}

// addMethodFlags adds the etcd drills' --method (default def; methods for the help, extra
// completions beyond drill.Methods), --method host's commands and the workload's flags.
func addMethodFlags(cmd *cobra.Command, o *drillOptions, def drill.Method, methods string, extra ...string) {
	f := cmd.Flags()
	f.StringVar(&o.method, "method", string(def), "how to take hosts down: "+methods)
	ms := []string{}
	for _, m := range drill.Methods {
		ms = append(ms, string(m))
	}
	ms = append(ms, extra...)
	_ = cmd.RegisterFlagCompletionFunc("method", cobra.FixedCompletions(ms, cobra.ShellCompDirectiveNoFileComp))
	f.StringVar(&o.down, "down-command", "", "--method host: command run here to take a host down (Go template: {{.Host}} {{.Address}} {{.Zone}})")
	f.StringVar(&o.up, "up-command", "", "--method host: command run here to bring the host back (same template fields)")
	f.IntVar(&o.rate, "rate", drill.DefaultRate, "workload puts per second (the RTO's resolution is 1/rate)")
	f.DurationVar(&o.reqTimeout, "request-timeout", drill.DefaultRequestTimeout, "deadline of each workload request")
}

// addCAFileFlag adds --ca-file (az-outage, lb-failover).
func addCAFileFlag(cmd *cobra.Command, o *drillOptions) {
	cmd.Flags().StringVar(&o.caFile, "ca-file", "", "kube-apiserver CA for readyz through the VIP or your load balancer (default spec.loadBalancer.healthCheck.caFile)")
}

// addDrillFlags adds the flags every fault drill shares: the hold, the iterations, the verdict,
// the report, the confirmation and the output.
func addDrillFlags(cmd *cobra.Command, o *drillOptions) {
	f := cmd.Flags()
	f.DurationVar(&o.hold, "hold", drill.DefaultHold, "how long the fault is held before everything is put back")
	f.IntVar(&o.count, "count", 1, "iterations; the report gives min/median/max")
	f.DurationVar(&o.maxRTO, "max-rto", 0, "fail (exit 3) when any iteration's RTO exceeds this (e.g. 5s; default none, with --target 30s)")
	f.StringVar(&o.report, "report", "", "also write the JSON report to this file")
	f.BoolVar(&o.force, "force", false, "run although preflight found the cluster unhealthy (never with an earlier drill's leftovers)")
	f.BoolVar(&o.yes, "yes", false, "do not ask for confirmation (scripts, CI)")
	f.BoolVar(&o.dryRun, "dry-run", false, "show the plan (after the read-only preflight) and stop")
	outputFlag(cmd, &o.output, "report", " on stdout (progress goes to stderr)")
}

// parseMethod is the etcd drills' kindFlags: --method.
func parseMethod(o *drillOptions, do *drill.Options) (err error) {
	do.Method, err = drill.ParseMethod("--method", o.method)
	return err
}

// parseComponent is lb-failover's kindFlags: --component.
func parseComponent(o *drillOptions, do *drill.Options) (err error) {
	do.Component, err = drill.ParseComponent("--component", o.component)
	return err
}

func runDrill(cmd *cobra.Command, s Streams, g *globalOptions, o *drillOptions) error {
	if err := outputFormat(o.output); err != nil {
		return err
	}
	if cmd.Flags().Changed("max-rto") && o.maxRTO == 0 {
		// The libraries read 0 as "no bound" (the etcd drills) or 30s (the Lease drill).
		return &UsageError{Err: fmt.Errorf("--max-rto %s: must be a positive duration, e.g. 5s; leave the flag out for no bound (30s with --target)", o.maxRTO)}
	}
	if o.target != "" {
		return runLeaseDrill(cmd, s, g, o)
	}
	for _, name := range []string{"kubeconfig", "context", "scheduler-name", "pod-image", "pod-rate"} {
		if fl := cmd.Flags().Lookup(name); fl != nil && fl.Changed {
			return &UsageError{Err: fmt.Errorf("--%s is for --target lease/NAMESPACE/NAME (the Lease drill); the etcd drills reach the members over SSH and write to etcd themselves", name)}
		}
	}
	p, c, logPath, closeLog, err := hostRun(s, g)
	if err != nil {
		return err
	}
	defer closeLog()
	do := &drill.Options{Cluster: c, Kind: o.kind, Zone: o.zone, ExpectOutage: o.expectOutage, Hold: o.hold, Count: o.count,
		MaxRTO: o.maxRTO, Rate: o.rate, RequestTimeout: o.reqTimeout, CAFile: o.caFile, Force: o.force, DryRun: o.dryRun,
		Report: o.report, Printer: p, Prompt: terminalPrompter(s.In, s.Err)}
	if err := o.kindFlags(o, do); err != nil {
		return err
	}
	do.Backend = o.backend
	if o.down != "" {
		if do.Down, err = fault.ParseHostCommand("--down-command", o.down); err != nil {
			return &UsageError{Err: err}
		}
	}
	if o.up != "" {
		if do.Up, err = fault.ParseHostCommand("--up-command", o.up); err != nil {
			return &UsageError{Err: err}
		}
	}
	f := cmd.Flags()
	if f.Changed("hold") && o.hold <= 0 {
		return &UsageError{Err: fmt.Errorf("--hold %s: must be a positive duration, e.g. 10s", o.hold)}
	}
	if f.Changed("rate") && o.rate <= 0 {
		return &UsageError{Err: fmt.Errorf("--rate %d: must be between 1 and 1000 puts per second", o.rate)}
	}
	if f.Changed("request-timeout") && o.reqTimeout <= 0 {
		return &UsageError{Err: fmt.Errorf("--request-timeout %s: must be positive, e.g. 100ms", o.reqTimeout)}
	}
	return validateAndRun(cmd, s, do, o.yes, o.output, logPath)
}

// validateAndRun is how every drill command but the Lease drill ends: do validated (exit 2),
// confirmed unless do.DryRun (yes: without asking), run, its report written as output says, and
// the debug log named when the run failed.
func validateAndRun(cmd *cobra.Command, s Streams, do *drill.Options, yes bool, output, logPath string) (err error) {
	if err := do.Validate(); err != nil {
		return err
	}
	if !do.DryRun {
		if do.Confirm, err = confirmer(s, yes, ", or --dry-run to only see the plan"); err != nil {
			return err
		}
	}
	rep, runErr := drill.Run(cmd.Context(), do)
	if rep != nil {
		if err := writeReport(s.Out, output, rep, rep.Print); err != nil {
			return err
		}
	}
	if runErr != nil && logPath != "" {
		fmt.Fprintf(s.Err, "debug log: %s\n", logPath)
	}
	return runErr
}
