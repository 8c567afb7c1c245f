package app

import (
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/api/v1alpha1/explain"
)

func newExplainCommand(s Streams) *cobra.Command {
	var (
		output    string
		recursive bool
	)
	cmd := &cobra.Command{
		Use:   "explain [PATH]",
		Short: "Describe a field of the cluster spec: its type, documentation and fields",
		Long: `Describe a field of cluster.yaml by its dotted path, the way kubectl explain does: its type, its
documentation (the API types' doc comments) and its fields. Without PATH, the whole document.
Lists are stepped into: spec.hosts.ssh is the ssh field of each host. A path that names no field
exits 2 and names the nearest fields.

  hactl explain spec.etcd
  hactl explain spec.loadBalancer --recursive
  hactl explain spec.hosts.roles -o json

hactl schema prints the same information as a JSON Schema for editors.`,
		Args: usageArgs(cobra.MaximumNArgs(1)),
		ValidArgsFunction: func(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return completeSpecPath(toComplete), cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
		},
		RunE: func(_ *cobra.Command, args []string) error {
			if err := outputFormat(output); err != nil {
				return err
			}
			d, err := explain.Parse(v1alpha1.JSONSchema)
			if err != nil {
				return err
			}
			path := ""
			if len(args) == 1 {
				path = args[0]
			}
			depth := 1
			if recursive {
				depth = -1
			}
			f, err := d.Explain(path, depth) // its path errors choose exit 2 themselves (ExitCode)
			if err != nil {
				return err
			}
			return writeReport(s.Out, output, f, func(w io.Writer) { explain.Print(w, v1alpha1.Kind, v1alpha1.APIVersion, f) })
		},
	}
	cmd.Flags().BoolVar(&recursive, "recursive", false, "list every nested field, not only the field's own")
	outputFlag(cmd, &output, "output", "")
	return cmd
}

// completeSpecPath completes a dotted spec path from the schema: the fields of the object the
// path's complete segments name, each offered with a trailing "." when it has fields of its own.
func completeSpecPath(toComplete string) []string {
	d, err := explain.Parse(v1alpha1.JSONSchema)
	if err != nil {
		return nil
	}
	parent, prefix := "", toComplete
	if i := strings.LastIndexByte(toComplete, '.'); i >= 0 {
		parent, prefix = toComplete[:i], toComplete[i+1:]
	}
	f, err := d.Explain(parent, 2)
	if err != nil {
		return nil
	}
	var out []string
	for _, c := range f.Fields {
		name := c.Path[strings.LastIndexByte(c.Path, '.')+1:]
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		full := name
		if parent != "" {
			full = parent + "." + name
		}
		if len(c.Fields) > 0 {
			full += "."
		}
		out = append(out, full)
	}
	return out
}
