package app

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/etcd/maintenance"
)

func newEtcdCompactCommand(s Streams, g *globalOptions) *cobra.Command {
	var retain int64
	var yes, dryRun bool
	var output string
	cmd := &cobra.Command{
		Use:   "compact",
		Short: "Compact the keyspace's history, keeping the --retain most recent revisions",
		Long: `Compacts etcd's history to the current revision minus --retain: every older revision of every key
is dropped (watchers and reads of those revisions get "required revision has been compacted").
Physical: it returns once the backend dropped them; 'hactl etcd defrag' then gives the space back.
kube-apiserver compacts every 5 minutes itself; this is for a cluster without it or a NOSPACE
recovery (hactl etcd alarm disarm runs it).

  hactl etcd compact -f cluster.yaml --retain 1000 --yes`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(output); err != nil {
				return err
			}
			if !cmd.Flags().Changed("retain") {
				return &UsageError{Err: errors.New("--retain N is required: the number of most recent revisions to keep (--retain 0 drops every older revision of every key)")}
			}
			if err := maintenance.ValidateRetain(retain); err != nil {
				return err
			}
			if dryRun {
				fmt.Fprintf(s.Out, "plan (dry run, nothing changed): compact etcd's history to the current revision minus %d; every older revision of every key is dropped\n", retain)
				return nil
			}
			ask, err := confirmer(s, yes, ", or --dry-run to see the plan only")
			if err != nil {
				return err
			}
			if ask != nil {
				ok, err := ask(fmt.Sprintf("Compact etcd's history, keeping the %d most recent revisions?", retain))
				if err != nil {
					return err
				}
				if !ok {
					return maintenance.ErrNotConfirmed
				}
			}
			_, cl, closeFn, err := etcdAccess(s, g)
			if err != nil {
				return err
			}
			defer closeFn()
			res, err := maintenance.Compact(cmd.Context(), cl, retain)
			if res != nil {
				if werr := writeReport(s.Out, output, res, func(w io.Writer) {
					if res.Skipped != "" {
						fmt.Fprintf(w, "nothing compacted: %s\n", res.Skipped)
						return
					}
					fmt.Fprintf(w, "compacted to revision %d (current %d, %d retained)\n", res.CompactedTo, res.Revision, res.Retained)
				}); werr != nil {
					return werr
				}
			}
			return err
		},
	}
	cmd.Flags().Int64Var(&retain, "retain", 0, "most recent revisions to keep (required; 0 keeps only the current one)")
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "show what would be compacted, change nothing")
	outputFlag(cmd, &output, "output", "")
	return cmd
}
