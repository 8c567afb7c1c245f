package restore

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/go-multierror"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/bootstrap/etcdphases"
	"github.com/hactl/hactl/bootstrap/frontphases"
	"github.com/hactl/hactl/bootstrap/runctx"
	"github.com/hactl/hactl/internal/sumcache"
	"github.com/hactl/hactl/phase"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/report"
	"github.com/hactl/hactl/ui"
)

// Config configures `hactl restore`.
type Config struct {
	// Cluster is the loaded, defaulted and validated spec.
	Cluster *v1alpha1.Cluster
	// Printer receives progress lines.
	Printer *ui.Printer
	// Prompt asks for a key passphrase or the sudo password (nil: nothing is asked).
	Prompt provision.Prompter
	// Options are the snapshot and the refusal and confirmation rules.
	Options Options
}

// Run restores the whole cluster from the snapshot (RestorePhases) and returns the run's report:
// every member restored, the new cluster ID, the revision reached. The report is returned, partly
// filled, even when err is not nil. Errors: a phase's, wrapped with its title (*RefusedError when
// the restore was refused or not confirmed: nothing changed).
func Run(ctx context.Context, cfg Config) (*report.Cluster, error) {
	started := time.Now()
	run := runctx.New(cfg.Cluster, cfg.Printer, false, provision.SpecOptions{Prompt: cfg.Prompt})
	defer run.Close()
	eg, err := etcdphases.New(run, etcdphases.Options{SumCache: sumcache.Default()})
	if err != nil {
		return nil, err
	}
	r, err := NewGroup(eg, cfg.Options, false)
	if err != nil {
		return nil, err
	}
	phases, err := r.RestorePhases()
	if err != nil {
		return nil, err
	}
	runner := &phase.Runner{Phases: phases, Reporter: cfg.Printer}
	runErr := runner.Run(ctx)
	if runErr != nil { // nothing is left stopped: a control plane held by restore/hold is released
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		if err := r.releaseControlPlane(rctx); err != nil {
			runErr = multierror.Append(runErr, fmt.Errorf("%s: %w", PhaseRelease, err))
		}
		cancel()
	}
	return &report.Cluster{
		Cluster: cfg.Cluster.Metadata.Name, ClusterID: eg.ClusterID(), Members: eg.Report(), Hosts: frontphases.Untouched(run),
		Duration: time.Since(started).Round(time.Millisecond).String(), RestoredRevision: r.Revision(),
	}, runErr
}
