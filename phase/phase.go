// Package phase runs a command as an ordered list of named phases, the way k0sctl's phase manager and
// kubeadm's workflow runner do: each phase has a hierarchical title ("etcd/install"), may be skipped
// (--skip-phases, or ShouldRun reporting nothing to do), and a dry run stops before the first phase
// that changes anything.
package phase

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Phase is one step of a command.
type Phase interface {
	// Title is the hierarchical phase name, e.g. "etcd/install".
	Title() string
	// Run does the phase's work. Errors are returned wrapped with %w.
	Run(ctx context.Context) error
}

// ShouldRunner is implemented by phases that can tell there is nothing to do (idempotency).
type ShouldRunner interface {
	ShouldRun() bool
}

// Mutator is implemented by phases that change hosts; a dry run stops before the first of them.
type Mutator interface {
	Mutates() bool
}

// Reporter receives progress events. Implementations must be safe for concurrent use.
type Reporter interface {
	PhaseStarted(title string)
	PhaseDone(title string, d time.Duration, err error, skipped string)
}

// Runner runs phases in order.
type Runner struct {
	Phases []Phase
	// Skip lists phase titles (or title prefixes ending in "/") to skip.
	Skip []string
	// DryRun stops before the first Mutator phase that returns true.
	DryRun   bool
	Reporter Reporter
}

// Run runs every phase in order and stops at the first error, which it returns wrapped with the
// phase title. It returns ctx.Err() (wrapped) if ctx is cancelled between phases.
func (r *Runner) Run(ctx context.Context) error {
	for _, p := range r.Phases {
		title := p.Title()
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("before phase %s: %w", title, err)
		}
		if r.DryRun {
			if m, ok := p.(Mutator); ok && m.Mutates() {
				return nil
			}
		}
		if r.skipped(title) {
			r.done(title, 0, nil, "skipped by --skip-phases")
			continue
		}
		if s, ok := p.(ShouldRunner); ok && !s.ShouldRun() {
			r.done(title, 0, nil, "nothing to do")
			continue
		}
		if r.Reporter != nil {
			r.Reporter.PhaseStarted(title)
		}
		start := time.Now()
		err := p.Run(ctx)
		r.done(title, time.Since(start), err, "")
		if err != nil {
			return fmt.Errorf("phase %s: %w", title, err)
		}
	}
	return nil
}

func (r *Runner) done(title string, d time.Duration, err error, skipped string) {
	if r.Reporter != nil {
		r.Reporter.PhaseDone(title, d, err, skipped)
	}
}

func (r *Runner) skipped(title string) bool {
	for _, s := range r.Skip {
		if s == title || (strings.HasSuffix(s, "/") && strings.HasPrefix(title, s)) {
			return true
		}
	}
	return false
}

// Titles lists the titles of phases, for --skip-phases help and validation.
func Titles(phases []Phase) []string {
	titles := make([]string, len(phases))
	for i, p := range phases {
		titles[i] = p.Title()
	}
	return titles
}

// Func adapts a function into a Phase.
type Func struct {
	Name      string
	Fn        func(ctx context.Context) error
	Changes   bool
	Condition func() bool
}

// Title returns f.Name.
func (f Func) Title() string { return f.Name }

// Run calls f.Fn.
func (f Func) Run(ctx context.Context) error { return f.Fn(ctx) }

// Mutates reports f.Changes.
func (f Func) Mutates() bool { return f.Changes }

// ShouldRun calls f.Condition when set.
func (f Func) ShouldRun() bool { return f.Condition == nil || f.Condition() }
