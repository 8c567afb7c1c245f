package drill

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-multierror"

	"github.com/hactl/hactl/api/v1alpha1"
	"github.com/hactl/hactl/drill/fault"
	"github.com/hactl/hactl/provision"
)

// faulter takes a drill kind's targets down and puts them back: on the host (the fault script over
// SSH, with its marker and deadman; put back by the restore script), or with --method host by the
// commands run here (local). It writes the journal before any fault and removes it once everything
// is back.
type faulter struct {
	*env
	// local: --method host, Options.Down and Options.Up run here.
	local bool
	// text says what the fault does to h, without the host's name, e.g. "SIGKILL of etcd.service,
	// units held stopped".
	text func(h v1alpha1.Host) string
	// of is the on-host fault of h (DrillID and Deadman are filled in by faultFor).
	of func(h v1alpha1.Host) fault.Fault
	// atStart: t0 is the start of the fault script's window (a stop), not its end (faultInstant).
	atStart bool
}

// localFaulter is --method host's faulter: Options.Down takes a host down, Options.Up brings it
// back, both run here.
func localFaulter(e *env) *faulter {
	return &faulter{env: e, local: true, text: func(h v1alpha1.Host) string {
		d, _ := e.o.Down.Render(hostData(h))
		u, _ := e.o.Up.Render(hostData(h))
		return fmt.Sprintf("run `%s` here, after the hold `%s`", d, u)
	}}
}

// killFaulter kills units(h) with SIGKILL and holds them stopped (--method process).
func killFaulter(e *env, units func(h v1alpha1.Host) []string) *faulter {
	return &faulter{env: e,
		text: func(h v1alpha1.Host) string {
			return fmt.Sprintf("SIGKILL of %s, units held stopped", strings.Join(units(h), " and "))
		},
		of: func(h v1alpha1.Host) fault.Fault { return fault.Fault{KillUnits: units(h)} },
	}
}

// faultText says what the fault does to host name, e.g. "cp-b: SIGKILL of etcd.service, units held
// stopped".
func (f *faulter) faultText(name string) string {
	h, _ := f.hosts.host(name)
	return name + ": " + f.text(h)
}

// faultFor returns the on-host fault of host h.
func (f *faulter) faultFor(h v1alpha1.Host) fault.Fault {
	x := f.of(h)
	x.DrillID, x.Deadman = f.report.ID, f.o.Hold+f.o.DeadmanGrace
	return x
}

// holdPlan are the plan's lines of the hold and of the safety net.
func (f *faulter) holdPlan() []string {
	o := f.o
	out := []string{fmt.Sprintf("hold the fault %s, then put everything back; %d iteration(s)", o.Hold, o.Count)}
	if !f.local {
		return append(out, fmt.Sprintf("safety: the fault is recorded in %s and on the host; each host puts itself back after %s even if hactl dies (hactl-drill-restore.timer)", journalPath(f.c.Spec.StateDir), o.Hold+o.DeadmanGrace))
	}
	return append(out, fmt.Sprintf("safety: the fault and its --up-command are recorded in %s; `hactl drill cleanup` runs it if this drill is interrupted", journalPath(f.c.Spec.StateDir)))
}

// applied is one fault applied to one host.
type applied struct {
	host string
	// at is the fault's instant (t0 for this host) and uncertainty how far off it may be.
	at          time.Time
	uncertainty time.Duration
	onHost      bool
}

// sleepCtx waits d or until ctx is done (it reports whether the whole d passed).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// apply records the targets in the journal, then applies the fault to every target
// concurrently. If any fault fails, everything applied is put back and the error returned.
func (f *faulter) apply(ctx context.Context, targets []v1alpha1.Host) ([]applied, error) {
	j := &Journal{ID: f.report.ID, PID: os.Getpid(), Kind: f.o.Kind, Method: f.report.Method, Started: time.Now().UTC()}
	for _, h := range targets {
		jt := JournalTarget{Host: h.Name, Address: h.Address, Port: h.Port, Zone: h.Zone, Fault: f.faultText(h.Name), OnHost: !f.local}
		if jt.OnHost {
			jt.Deadline = time.Now().Add(f.o.Hold + f.o.DeadmanGrace).UTC()
		} else {
			jt.UpCommand, _ = f.o.Up.Render(hostData(h))
		}
		j.Targets = append(j.Targets, jt)
	}
	if err := writeJournal(f.c.Spec.StateDir, j); err != nil {
		return nil, err
	}
	out := make([]applied, len(targets))
	err := provision.ForEach(ctx, targets, f.c.Spec.SSH.MaxParallel, func(h v1alpha1.Host) string { return h.Name }, func(ctx context.Context, h v1alpha1.Host) error {
		i := slices.IndexFunc(targets, func(t v1alpha1.Host) bool { return t.Name == h.Name })
		var err error
		out[i], err = f.applyOne(ctx, h)
		return err
	})
	if err == nil {
		return out, nil
	}
	// A host that refused because another drill's fault is on it is left alone; every other target
	// may carry (part of) this drill's fault and is put back.
	var ours []v1alpha1.Host
	for _, h := range targets {
		if !refusedAsNotClean(err, h.Name) {
			ours = append(ours, h)
		}
	}
	f.p.Warnf("drill/fault: failed; putting back what this drill did")
	if len(ours) == 0 {
		return nil, fmt.Errorf("drill/fault: %w (another drill's fault is on the host: it is left alone)", errors.Join(err, removeJournal(f.c.Spec.StateDir)))
	}
	if perr := f.putBack(ours); perr != nil {
		return nil, errors.Join(fmt.Errorf("drill/fault: %w", err), perr)
	}
	return nil, fmt.Errorf("drill/fault: %w", err)
}

// refusedAsNotClean reports whether err (from provision.ForEach) holds host's fault script refusing
// because the host still carries a drill (fault.ExitNotClean).
func refusedAsNotClean(err error, host string) bool {
	var me *multierror.Error
	if !errors.As(err, &me) {
		return false
	}
	for _, e := range me.Errors {
		var he *provision.HostError
		var ce *provision.CommandError
		if errors.As(e, &he) && he.Host == host && errors.As(e, &ce) && ce.ExitCode == fault.ExitNotClean {
			return true
		}
	}
	return false
}

// applyOne applies the fault to h and returns its instant.
func (f *faulter) applyOne(ctx context.Context, h v1alpha1.Host) (applied, error) {
	a := applied{host: h.Name, onHost: !f.local}
	if !a.onHost {
		cmd, err := f.o.Down.Render(hostData(h))
		if err != nil {
			return a, err
		}
		f.p.Hostf(h.Name, "[drill/fault] running here: %s", cmd)
		sent := time.Now()
		out, err := fault.RunLocal(ctx, cmd)
		done := time.Now()
		if err != nil {
			return a, fmt.Errorf("--down-command: %w", err)
		}
		f.p.Debugf("%s: --down-command output: %s", h.Name, strings.TrimSpace(out))
		f.hosts.forget(h.Name)
		// The host went down somewhere inside the command (a kill/destroy command returns once the
		// machine is down): t0 is its end, since writes sent before it may still have been served;
		// the command's duration is the uncertainty.
		a.at, a.uncertainty = done, done.Sub(sent)
		return a, nil
	}
	script, err := fault.ApplyScript(f.faultFor(h))
	if err != nil {
		return a, err
	}
	cli, err := f.hosts.client(ctx, h.Name)
	if err != nil {
		return a, err
	}
	sctx, cancel := context.WithTimeout(ctx, sshTimeout)
	defer cancel()
	sent := time.Now()
	res, err := cli.Run(sctx, "drill/fault", script)
	done := time.Now()
	if err != nil {
		return a, err
	}
	ar, err := fault.ParseApply(string(res.Stdout))
	if err != nil {
		return a, fmt.Errorf("the fault was not applied: %w", err)
	}
	a.at, a.uncertainty = faultInstant(sent, done, ar, f.atStart)
	f.p.Hostf(h.Name, "[drill/fault] %s", strings.TrimPrefix(f.faultText(h.Name), h.Name+": "))
	return a, nil
}

// faultInstant places the fault on this machine's monotonic clock. The fault script prints the
// host's time just before its first action and just after its last (fault.ApplyResult FaultStart
// and FaultEnd): the fault happened in that window, whose length is the uncertainty. It is mapped
// onto the local clock when it lies within [sent, done] (the host's clock agrees with this one, NTP);
// with a skewed clock, t0 is done (atStart: sent) and the uncertainty the whole round trip.
//
// Which end: a kill or an iptables rule takes effect at once and the window is short, but writes
// sent in the few ms before `systemctl kill` runs are still acknowledged and would fake a near-zero
// RTO: t0 is the END, every write sent after it met the fault (figures may understate by at most
// the uncertainty). A `systemctl stop` (lb-failover) takes effect when it starts (keepalived sends
// its priority-0 advertisement, HAProxy closes its listeners) but returns only once the service has
// exited, often after the VIP already moved: t0 is the START (atStart).
func faultInstant(sent, done time.Time, ar fault.ApplyResult, atStart bool) (time.Time, time.Duration) {
	ws, wd := sent.Round(0), done.Round(0)
	if ar.FaultStart.IsZero() || ar.FaultEnd.Before(ar.FaultStart) || ar.FaultStart.Before(ws) || ar.FaultEnd.After(wd) {
		if atStart {
			return sent, done.Sub(sent)
		}
		return done, done.Sub(sent)
	}
	at := ar.FaultEnd
	if atStart {
		at = ar.FaultStart
	}
	return sent.Add(at.Sub(ws)), ar.FaultEnd.Sub(ar.FaultStart)
}

// putBack puts every target back with a fresh context (also after Ctrl-C): the restore script over
// SSH, or --up-command here and SSH waited for. It removes the journal when all is back; otherwise
// it returns a *NotRestoredError.
func (f *faulter) putBack(targets []v1alpha1.Host) error {
	var names []string
	for _, h := range targets {
		names = append(names, h.Name)
	}
	f.p.Infof("drill/put-back: %s", strings.Join(names, ", "))
	var err error
	if !f.local {
		err = f.hosts.putBack(names)
	} else {
		err = f.upAll(targets)
	}
	if err != nil {
		return err
	}
	return removeJournal(f.c.Spec.StateDir)
}

// upAll runs --up-command for every target here, then waits for SSH on each.
func (f *faulter) upAll(targets []v1alpha1.Host) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var mu sync.Mutex
	var left []string
	err := provision.ForEach(ctx, targets, 0, func(h v1alpha1.Host) string { return h.Name }, func(ctx context.Context, h v1alpha1.Host) error {
		cmd, err := f.o.Up.Render(hostData(h))
		if err == nil {
			f.p.Hostf(h.Name, "[drill/put-back] running here: %s", cmd)
			var out string
			out, err = fault.RunLocal(ctx, cmd)
			f.p.Debugf("%s: --up-command output: %s", h.Name, strings.TrimSpace(out))
		}
		if err == nil {
			err = f.hosts.waitSSH(ctx, h.Name, 3*time.Minute)
		}
		if err != nil {
			mu.Lock()
			defer mu.Unlock()
			left = append(left, fmt.Sprintf("%s: may still be down: bring it back with `%s`", h.Name, cmd))
		}
		return err
	})
	if err != nil {
		return &NotRestoredError{Left: left, Err: err}
	}
	return nil
}

// hold runs one iteration's fault on h after the warm-up: applied (what says what, for the
// progress line), held for --hold from its instant t0, then put back from tPut. It records the fault's
// instant and the put-back's duration in it. err is the apply's error (nothing is held then);
// putErr the put-back's.
func (f *faulter) hold(ctx context.Context, it *Iteration, h v1alpha1.Host, what string) (t0, tPut time.Time, putErr, err error) {
	sleepCtx(ctx, warmup)
	f.p.Infof("drill/fault: %s", what)
	app, err := f.apply(ctx, []v1alpha1.Host{h})
	if err != nil {
		return t0, tPut, nil, err
	}
	t0 = app[0].at
	it.FaultAt, it.FaultUncertaintyMs = wallOf(t0), ms(app[0].uncertainty)
	f.p.Infof("drill/hold: %s", f.o.Hold)
	sleepCtx(ctx, time.Until(t0.Add(f.o.Hold)))
	tPut = time.Now()
	putErr = f.putBack([]v1alpha1.Host{h})
	it.PutBackMs = ms(time.Since(t0))
	return t0, tPut, putErr, nil
}
