package app

import (
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

// commit and buildDate may be stamped with -ldflags -X (a release build); otherwise they come from
// the build info Go records for a build in a git checkout (vcs.revision, vcs.time).
var commit, buildDate = "", ""

// BuildInfo is what `hactl version -o json` prints.
type BuildInfo struct {
	Version string `json:"version"`
	// Commit is the git commit built ("unknown": a `go install …@version` build, which has no VCS
	// information); Modified says the work tree had uncommitted changes.
	Commit   string `json:"commit"`
	Modified bool   `json:"modified,omitempty"`
	// Date is the commit's time (RFC 3339, UTC), "unknown" without VCS information: builds of the same
	// commit report the same date.
	Date     string `json:"date"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

// Build returns hactl's version, commit and build date.
func Build() BuildInfo {
	b := BuildInfo{Version: Version(), Commit: commit, Date: buildDate, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if b.Commit == "" {
					b.Commit = s.Value
				}
			case "vcs.time":
				if b.Date == "" {
					b.Date = s.Value
				}
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
	}
	if b.Commit == "" {
		b.Commit = "unknown"
	}
	if b.Date == "" {
		b.Date = "unknown"
	}
	return b
}

type versionOptions struct{ output string }

func newVersionCommand(s Streams) *cobra.Command {
	o := &versionOptions{}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print hactl's version",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(o.output); err != nil {
				return err
			}
			b := Build()
			if machineOutput(o.output) {
				return writeReport(s.Out, o.output, b, nil)
			}
			c := b.Commit
			if len(c) > 12 {
				c = c[:12]
			}
			if b.Modified {
				c += "+modified"
			}
			fmt.Fprintf(s.Out, "hactl %s (commit %s, %s; %s, %s)\n", b.Version, c, b.Date, b.Go, b.Platform)
			return nil
		},
	}
	outputFlag(cmd, &o.output, "output", "")
	return cmd
}
