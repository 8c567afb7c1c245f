package app

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/operator/deploy"
)

// adoptReport is what `hactl operator adopt` did (-o json).
type adoptReport struct {
	// Changes are the state dir's changes, in words; Drift what cluster.yaml must still change.
	Changes []string `json:"changes"`
	Drift   []string `json:"drift"`
	DryRun  bool     `json:"dryRun,omitempty"`
}

func newOperatorAdoptCommand(s Streams, g *globalOptions) *cobra.Command {
	var dryRun bool
	var output string
	f := &operatorFlags{}
	cmd := &cobra.Command{
		Use:   "adopt",
		Short: "Record in hactl's state dir the members hactl-operator's heals made, and say what cluster.yaml must change",
		Long: `After hactl-operator replaced a lost member onto a spare, hactl's state dir still records the lost
member and cluster.yaml still lists it. adopt reads the EtcdCluster's status.heals and, for each heal
that succeeded, drops the lost member's record from the state dir (cluster.json) and records the new
one (its ID, URLs and the --initial-cluster it was started with), written atomically. It does not
edit cluster.yaml: it says which spare to move from spec.etcd.spares into the etcd hosts in place of
which member. Until both are done, hactl status reports the drift and hactl bootstrap would be
working on a cluster that no longer exists.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(output); err != nil {
				return err
			}
			p, c, closeLog, err := operatorTarget(s, g, f, false)
			if err != nil {
				return err
			}
			defer closeLog()
			api, ns, err := locatedOperator(cmd, s, c, f)
			if err != nil {
				return err
			}
			defer api.Close()
			a, err := deploy.AdoptHeals(cmd.Context(), api, ns, c, dryRun, p)
			if err != nil {
				return err
			}
			changes := a.Changes
			rep := adoptReport{Changes: changes, Drift: a.Drift, DryRun: dryRun}
			return writeReport(s.Out, output, rep, func(w io.Writer) {
				verb := "recorded"
				if dryRun {
					verb = "would record (dry run)"
				}
				if len(changes) == 0 {
					fmt.Fprintf(w, "state dir: nothing to adopt (%d heal(s) in EtcdCluster %s/%s)\n", a.Heals, ns, c.Metadata.Name)
				}
				for _, ch := range changes {
					fmt.Fprintf(w, "state dir %s: %s\n", verb, ch)
				}
				for _, d := range rep.Drift {
					fmt.Fprintf(w, "cluster.yaml: %s\n", d)
				}
			})
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "say what would be recorded and change nothing")
	outputFlag(cmd, &output, "output", "")
	f.add(cmd)
	return cmd
}
