package app

import (
	"github.com/spf13/cobra"

	"github.com/hactl/hactl/api/v1alpha1"
)

func newSchemaCommand(s Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the cluster spec's JSON Schema (for editors)",
		Long: `Print the JSON Schema (draft 2020-12) of cluster.yaml, generated from the API types and their
doc comments: field names, types and descriptions, unknown fields refused. Editors complete and
check the spec with it, e.g. with the YAML language server (VS Code, Neovim):

  hactl schema > cluster.schema.json
  # first line of cluster.yaml:
  # yaml-language-server: $schema=./cluster.schema.json

The schema holds shapes only: value rules (quorum sizes, ranges, one field excluding another) are
hactl's validation, which plan and bootstrap run with the field path and the fix.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(_ *cobra.Command, _ []string) error {
			_, err := s.Out.Write(v1alpha1.JSONSchema)
			return err
		},
	}
}
