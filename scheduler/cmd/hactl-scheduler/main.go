// Command hactl-scheduler is kube-scheduler (k8s.io/kubernetes v1.37) with hactl's out-of-tree
// plugins registered — ZonePreference (score), MaintenanceGuard (filter) and RecordingBinder (bind) —
// and their typed args in its configuration scheme. It takes every kube-scheduler flag, plus the
// subcommand `validate --config FILE`, which loads and checks a configuration as a run would and
// exits 1 with the error when it is invalid.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	_ "github.com/hactl/hactl/scheduler/apis/config/scheme"
	"github.com/hactl/hactl/scheduler/plugins"
	"github.com/hactl/hactl/scheduler/validate"
)

var registry = plugins.Registry()

func main() {
	var opts []app.Option
	for name, factory := range registry {
		opts = append(opts, app.WithPlugin(name, factory))
	}
	cmd := app.NewSchedulerCommand(opts...)
	cmd.Use = "hactl-scheduler"
	cmd.Short = "kube-scheduler with hactl's ZonePreference, MaintenanceGuard and RecordingBinder plugins"
	cmd.AddCommand(validateCommand())
	os.Exit(cli.Run(cmd))
}

func validateCommand() *cobra.Command {
	var file string
	c := &cobra.Command{
		Use:   "validate --config FILE",
		Short: "load a KubeSchedulerConfiguration as a run would and check it (exit 1 with the error when invalid)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return fmt.Errorf("--config is required")
			}
			cfg, err := validate.File(cmd.Context(), file, registry)
			if err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			return validate.Report(cmd.OutOrStdout(), cfg)
		},
	}
	c.Flags().StringVar(&file, "config", "", "the KubeSchedulerConfiguration file")
	return c
}
