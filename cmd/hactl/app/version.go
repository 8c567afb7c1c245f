package app

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is stamped by the Makefile with -ldflags "-X .../app.version=...". `go install` builds
// report the module version from the build info instead.
var version = "dev"

// Version returns hactl's version.
func Version() string {
	if version != "dev" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return version
}

type versionOptions struct{ output string }

func newVersionCommand(s Streams) *cobra.Command {
	o := &versionOptions{}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print hactl's version",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.output != "text" && o.output != "json" {
				return &UsageError{Err: fmt.Errorf("--output %q: must be text or json", o.output)}
			}
			if o.output == "json" {
				return json.NewEncoder(s.Out).Encode(map[string]string{
					"version": Version(), "go": runtime.Version(), "platform": runtime.GOOS + "/" + runtime.GOARCH,
				})
			}
			fmt.Fprintf(s.Out, "hactl %s (%s, %s/%s)\n", Version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "text", "output format: text or json")
	return cmd
}
