package app

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/state"
)

type initOptions struct {
	force  bool
	stdout bool
}

func newInitCommand(s Streams, g *globalOptions) *cobra.Command {
	o := &initOptions{}
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Write a commented example cluster spec",
		Long: `Writes a commented example cluster spec (3 etcd members in 3 zones) to the file given with -f
(default cluster.yaml). Edit hosts, addresses, zones, the SSH key and the etcd binaries, then run
'hactl plan'. An existing file is never overwritten unless --force.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			example := v1alpha1.ExampleSpec()
			if o.stdout {
				_, err := s.Out.Write(example)
				return err
			}
			if fi, err := os.Stat(g.file); err == nil && fi.IsDir() {
				return &UsageError{Err: fmt.Errorf("%s is a directory: give -f the path of the spec file to write, e.g. -f %s", g.file, filepath.Join(g.file, "cluster.yaml"))}
			} else if err == nil && !o.force {
				return &UsageError{Err: fmt.Errorf("%s already exists: choose another file with -f, or overwrite it with --force", g.file)}
			} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			if err := state.WriteFileAtomic(g.file, example, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(s.Out, "wrote %s: edit it, then run 'hactl plan -f %s'\n", g.file, g.file)
			return nil
		},
	}
	cmd.Flags().BoolVar(&o.force, "force", false, "overwrite an existing file")
	cmd.Flags().BoolVar(&o.stdout, "stdout", false, "print the example instead of writing a file")
	return cmd
}
