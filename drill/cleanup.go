package drill

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/drill/fault"
	"github.com/hactl/hactl/drill/workload"
	"github.com/hactl/hactl/etcd"
	"github.com/hactl/hactl/provision"
	"github.com/hactl/hactl/ui"
)

// CleanupOptions configure Cleanup.
type CleanupOptions struct {
	Cluster *v1alpha1.Cluster
	Dialer  *provision.Dialer
	Printer *ui.Printer
	// Confirm asks whether to put back what was found (nil: go ahead). DryRun stops after the plan.
	Confirm func(question string) (bool, error)
	DryRun  bool
	// EtcdDial routes etcd connections (a bastion tunnel), nil for direct ones. With Dialer nil,
	// Cleanup opens one from the spec (provision.FromSpec, asking Prompt for secrets) and, with a
	// bastion, routes etcd through it.
	EtcdDial etcd.Option
	Prompt   provision.Prompter
}

// CleanupResult is what `hactl drill cleanup` found and did.
type CleanupResult struct {
	// Found lists the leftovers (journal lines, then one line per host leftover).
	Found []string `json:"found"`
	// PutBack lists the hosts the restore script or --up-command ran on.
	PutBack []string `json:"putBack"`
	// Clean: nothing is left (also true when nothing was found).
	Clean bool `json:"clean"`
	// DeletedKeys counts the drill workload keys (under /hactl-drill/) deleted: interrupted drills
	// leave theirs.
	DeletedKeys int64 `json:"deletedKeys"`
	// Healthy: every member healthy afterwards (waited for up to 2 minutes).
	Healthy bool `json:"healthy"`

	// dryRun is CleanupOptions.DryRun, for Print.
	dryRun bool
}

// Print writes the human summary of a cleanup (what was found or put back, the workload keys
// deleted, whether the cluster is healthy); nothing for a cleanup that could not put everything
// back (the error says what is left).
func (r *CleanupResult) Print(w io.Writer) {
	switch {
	case r.dryRun && len(r.Found) > 0:
		fmt.Fprintf(w, "dry run: %d leftover(s) found, nothing done\n", len(r.Found))
	case r.Clean && len(r.Found) == 0:
		fmt.Fprintln(w, "nothing to clean up")
	case r.Clean && len(r.PutBack) == 0:
		fmt.Fprintln(w, "no host needed putting back; the drill journal was removed")
	case r.Clean:
		fmt.Fprintf(w, "put back: %s; no drill leftovers remain\n", strings.Join(r.PutBack, ", "))
	}
	if r.DeletedKeys > 0 {
		fmt.Fprintf(w, "deleted %d workload key(s) left under /hactl-drill/ by interrupted drills\n", r.DeletedKeys)
	}
	if r.Clean && !r.dryRun && !r.Healthy {
		fmt.Fprintln(w, "the cluster is not healthy yet: see `hactl status`")
	}
}

// Cleanup puts back what an interrupted drill left: it reads the local journal and inspects every
// etcd member and LB host; a host taken down by --method host is brought back with the journal's
// --up-command (run here), every host with a drill marker, iptables chain or deadman runs the
// restore script. The journal is removed once every host is clean. It opens the SSH dialer unless
// o.Dialer is set. It returns a *NotRestoredError naming what could not be put back.
func Cleanup(ctx context.Context, o CleanupOptions) (*CleanupResult, error) {
	p := o.Printer
	d, dial, closeDialer, err := dialers(o.Cluster, o.Dialer, o.EtcdDial, o.Prompt)
	if err != nil {
		return nil, err
	}
	defer closeDialer()
	o.Dialer, o.EtcdDial = d, dial
	unlock, err := lock(o.Cluster.Spec.StateDir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	hs := newHosts(o.Cluster, o.Dialer)
	defer hs.close()
	res := &CleanupResult{dryRun: o.DryRun}
	j, err := readJournal(o.Cluster.Spec.StateDir)
	if err != nil {
		return nil, err
	}
	up := map[string]string{} // host → --up-command of a host taken down from here
	if j != nil {
		for _, t := range j.Targets {
			if !t.OnHost && t.UpCommand != "" {
				up[t.Host] = t.UpCommand
			}
		}
	}
	p.Infof("drill/cleanup: inspecting every etcd member and LB host")
	insp := hs.inspect(ctx, drillHosts(o.Cluster))
	var restore []string
	var unreachable []hostLeftovers
	down := map[string]string{} // hosts to bring back with their --up-command: down and recorded
	for _, hl := range insp {
		switch {
		case hl.Err != nil && up[hl.Host] != "":
			// Down from --method host: the up command brings it back, then it is inspected again.
			down[hl.Host] = up[hl.Host]
		case hl.Err != nil:
			unreachable = append(unreachable, hl)
		case hl.Leftovers.Any():
			restore = append(restore, hl.Host)
		}
	}
	res.Found = leftoverReasons(j, insp)
	if len(res.Found) == 0 {
		res.Clean = true
		p.Infof("drill/cleanup: nothing to put back: no journal, no marker, no iptables chain, no deadman on any host")
		if o.DryRun {
			return res, nil
		}
		return res, finishCleanup(ctx, o, res)
	}
	p.Infof("drill/cleanup: found")
	for _, l := range res.Found {
		p.Infof("  %s", l)
	}
	var plan []string
	for h := range up {
		if _, ok := down[h]; !ok {
			plan = append(plan, fmt.Sprintf("%s: answers SSH again (brought back already): its --up-command is not run", h))
		}
	}
	for h, cmd := range down {
		plan = append(plan, fmt.Sprintf("%s: run `%s` here, wait for SSH, then the restore script", h, cmd))
	}
	for _, h := range restore {
		plan = append(plan, fmt.Sprintf("%s: run the restore script (remove chain %s, start the units the marker lists, stop the deadman, remove the marker)", h, fault.Chain))
	}
	p.Infof("drill/cleanup: plan")
	for _, l := range plan {
		p.Infof("  %s", l)
	}
	if o.DryRun {
		return res, nil
	}
	if o.Confirm != nil {
		ok, err := o.Confirm("Put these back?")
		if err != nil {
			return res, err
		}
		if !ok {
			return res, &InputError{Err: errors.New("not confirmed: nothing was done")}
		}
	}
	return res, putBackLeftovers(ctx, o, hs, res, down, restore, unreachable)
}

// putBackLeftovers brings back the hosts taken down from here (down: host → --up-command, then
// the restore script), runs the restore script on restore, removes the journal once everything is
// back and finishes the cleanup. Errors: a *NotRestoredError naming what is left (unreachable
// hosts too), the journal's, finishCleanup's.
func putBackLeftovers(ctx context.Context, o CleanupOptions, hs *hosts, res *CleanupResult, down map[string]string, restore []string, unreachable []hostLeftovers) error {
	p := o.Printer
	var left []string
	var errs []error
	for h, cmd := range down {
		p.Hostf(h, "[drill/cleanup] running here: %s", cmd)
		cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		out, err := fault.RunLocal(cctx, cmd)
		if err == nil {
			err = hs.waitSSH(cctx, h, 3*time.Minute)
		}
		cancel()
		p.Debugf("%s: --up-command output: %s", h, strings.TrimSpace(out))
		if err != nil {
			left = append(left, fmt.Sprintf("%s: still down: bring it back with `%s`", h, cmd))
			errs = append(errs, err)
			continue
		}
		res.PutBack = append(res.PutBack, h)
		restore = append(restore, h) // the restore script is a no-op on a clean host
	}
	if len(restore) > 0 {
		if err := hs.putBack(restore); err != nil {
			var nr *NotRestoredError
			if errors.As(err, &nr) {
				left = append(left, nr.Left...)
			}
			errs = append(errs, err)
		}
		res.PutBack = append(res.PutBack, restore...)
	}
	for _, hl := range unreachable {
		left = append(left, fmt.Sprintf("%s: unreachable over SSH (%v): bring the host back, then run `hactl drill cleanup` again", hl.Host, hl.Err))
	}
	if len(left) > 0 {
		return &NotRestoredError{Left: left, Err: errors.Join(errs...)}
	}
	if err := removeJournal(o.Cluster.Spec.StateDir); err != nil {
		return err
	}
	res.Clean = true
	return finishCleanup(ctx, o, res)
}

// finishCleanup waits (up to 2 minutes) for every member to be healthy (a member put back is still
// catching up) and deletes the workload keys interrupted drills left under /hactl-drill/.
func finishCleanup(ctx context.Context, o CleanupOptions, res *CleanupResult) error {
	p := o.Printer
	files := etcd.HactlClientTLS(o.Cluster)
	var reasons []string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, rs, err := health(ctx, o.Cluster, files, o.EtcdDial)
		reasons = rs
		if err != nil {
			reasons = append(reasons, err.Error())
		}
		return err == nil && len(rs) == 0, nil
	})
	if err != nil {
		p.Warnf("drill/cleanup: the cluster is not healthy 2m after the put-back: %s (see `hactl status`)", strings.Join(reasons, "; "))
		return nil
	}
	res.Healthy = true
	p.Infof("drill/cleanup: every member is healthy")
	cli, err := etcd.NewClient(ctx, etcd.ClientURLs(mustMembers(o.Cluster)), files, 5*time.Second, o.EtcdDial)
	if err != nil {
		return err
	}
	defer cli.Close()
	n, err := workload.Cleanup(ctx, cli, workloadRoot)
	if err != nil {
		return fmt.Errorf("deleting the drills' workload keys under %s: %w", workloadRoot, err)
	}
	res.DeletedKeys = n
	if n > 0 {
		p.Infof("drill/cleanup: deleted %d workload key(s) interrupted drills left under %s", n, workloadRoot)
	}
	return nil
}
