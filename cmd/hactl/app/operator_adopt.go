package app

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/hactl/hactl/operator/deploy"
	"github.com/hactl/hactl/state"
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
			st, err := deploy.ReadStatus(cmd.Context(), api.Config, ns, c.Metadata.Name)
			if err != nil {
				return api.Wrap(err)
			}
			cur, err := state.Load(c.Spec.StateDir)
			if err != nil {
				return err
			}
			if cur == nil {
				return &UsageError{Err: fmt.Errorf("spec.stateDir %s holds no cluster.json: nothing to adopt into (hactl bootstrap recovers a lost state dir from the hosts)", c.Spec.StateDir)}
			}
			changes, err := deploy.Adopt(cur, st.Heals)
			if err != nil {
				return err
			}
			rep := adoptReport{Changes: changes, Drift: deploy.Drift(c, st.Heals), DryRun: dryRun}
			if len(changes) > 0 && !dryRun {
				if err := state.Save(c.Spec.StateDir, cur); err != nil {
					return err
				}
				p.Infof("operator/adopt: %s updated", filepath.Join(c.Spec.StateDir, state.FileName))
			}
			return writeReport(s.Out, output, rep, func(w io.Writer) {
				verb := "recorded"
				if dryRun {
					verb = "would record (dry run)"
				}
				if len(changes) == 0 {
					fmt.Fprintf(w, "state dir: nothing to adopt (%d heal(s) in EtcdCluster %s/%s)\n", len(st.Heals), ns, c.Metadata.Name)
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
