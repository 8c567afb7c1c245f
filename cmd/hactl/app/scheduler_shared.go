package app

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/ui"
)

// schedulerFlags are the settings of a deploy through a kubeconfig without a spec file.
type schedulerFlags struct {
	kubeFlags
	replicas int
	zones    []string
}

func (f *schedulerFlags) add(cmd *cobra.Command, deploy bool) {
	f.addKube(cmd.Flags(), "reach the cluster through this kubeconfig (the Deployment mode) instead of over SSH")
	if deploy {
		cmd.Flags().IntVar(&f.replicas, "replicas", 0, "with --kubeconfig and no spec file: replicas (default 3)")
		cmd.Flags().StringSliceVar(&f.zones, "preferred-zone", nil, "with --kubeconfig and no spec file: ZONE=WEIGHT (repeatable), e.g. az-a=100")
	}
}

// schedulerTarget resolves spec.scheduler and how the cluster is reached. With --kubeconfig: the
// spec file when it exists or -f names it (spec.scheduler only: no host, binary or SSH check, the
// hosts are not contacted), else the defaults and the flags. Over SSH (hosts: true) the spec with
// its local files and SSH environment, as every command that contacts hosts; without (dry runs) the
// spec only. --replicas and --preferred-zone go with no spec file only (exit 2 otherwise).
func schedulerTarget(cmd *cobra.Command, s Streams, g *globalOptions, f *schedulerFlags, hosts bool) (*ui.Printer, *v1alpha1.Cluster, *v1alpha1.Scheduler, func(), error) {
	p := ui.New(s.Err, g.verbose, false)
	fl := cmd.Flags()
	// A kubeconfig that does not load is bad input (exit 2), found before any plan is shown.
	if err := f.check(); err != nil {
		return nil, nil, nil, nil, err
	}
	// Through a kubeconfig without -f, the flags are the spec when the default spec file is absent
	// or when --replicas/--preferred-zone are given (they say which is meant: a cluster.yaml that
	// happens to be in the working directory, e.g. a CI workspace, is not read then).
	_, statErr := os.Stat(g.file)
	flagged := fl.Lookup("replicas") != nil && (fl.Changed("replicas") || fl.Changed("preferred-zone"))
	if f.kubeconfig != "" && !fl.Changed("file") && (statErr != nil || flagged) {
		if fl.Changed("replicas") && f.replicas < 1 {
			return nil, nil, nil, nil, &UsageError{Err: fmt.Errorf("--replicas %d: at least 1", f.replicas)}
		}
		sch := &v1alpha1.Scheduler{Replicas: f.replicas}
		for _, z := range f.zones {
			name, w, ok := strings.Cut(z, "=")
			n, err := strconv.ParseInt(w, 10, 32)
			if !ok || err != nil || name == "" {
				return nil, nil, nil, nil, &UsageError{Err: fmt.Errorf("--preferred-zone %q: ZONE=WEIGHT with a weight 1-100, e.g. az-a=100", z)}
			}
			sch.PreferredZones = append(sch.PreferredZones, v1alpha1.PreferredZone{Zone: name, Weight: int32(n)})
		}
		v1alpha1.DefaultScheduler(sch)
		if errs := v1alpha1.ValidateStandaloneScheduler(sch, field.NewPath("--")); len(errs) > 0 {
			return nil, nil, nil, nil, &UsageError{Err: errors.New(flagPaths(errs.ToAggregate().Error()))}
		}
		return p, nil, sch, func() {}, nil
	}
	for _, name := range []string{"replicas", "preferred-zone"} {
		if fl.Lookup(name) != nil && fl.Changed(name) {
			return nil, nil, nil, nil, &UsageError{Err: fmt.Errorf("--%s is for --kubeconfig without -f; with the spec %s set spec.scheduler there instead", name, g.file)}
		}
	}
	var c *v1alpha1.Cluster
	closeLog := func() {}
	var err error
	if hosts && f.kubeconfig == "" {
		if p, c, _, closeLog, err = hostRun(s, g); err != nil {
			return nil, nil, nil, nil, err
		}
	} else if c, err = loadSpec(g.file, p, false); err != nil {
		return nil, nil, nil, nil, err
	}
	if c.Spec.Scheduler == nil {
		closeLog()
		return nil, nil, nil, nil, &UsageError{Err: fmt.Errorf("%s: spec.scheduler: the spec has no scheduler section: replace `scheduler: null` with the mapping below it in `hactl init`'s example (uncommented), e.g. scheduler: {imageArchive: bin/hactl-scheduler-image.tar}", g.file)}
	}
	if f.kubeconfig == "" && c.Spec.Kubernetes == nil {
		closeLog()
		return nil, nil, nil, nil, &UsageError{Err: fmt.Errorf("%s: spec.kubernetes: over SSH hactl-scheduler runs as static pods on the control planes hactl built; for another cluster pass --kubeconfig FILE", g.file)}
	}
	return p, c, c.Spec.Scheduler, closeLog, nil
}

var flagPathRE = regexp.MustCompile(`--\.preferredZones\[(\d+)\]\.(zone|weight)|--\.replicas|--\.`)

// flagPaths names the flags in the field paths of a standalone spec.scheduler ("--" root): the N-th
// --preferred-zone, --replicas.
func flagPaths(msg string) string {
	return flagPathRE.ReplaceAllStringFunc(msg, func(m string) string {
		switch sub := flagPathRE.FindStringSubmatch(m); {
		case sub[1] != "":
			n, _ := strconv.Atoi(sub[1])
			return fmt.Sprintf("--preferred-zone #%d (%s)", n+1, sub[2])
		case m == "--.replicas":
			return "--replicas"
		}
		return "spec.scheduler."
	})
}
