// Package ui prints progress the way kind and k0sctl do: one line per phase, every remote line prefixed
// with its host, ✓/✗ when a phase ends. Output is plain lines (no cursor tricks) so CI logs stay readable.
package ui

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Printer writes progress lines. It is safe for concurrent use by per-host goroutines.
type Printer struct {
	mu      sync.Mutex
	w       io.Writer
	verbose bool
	quiet   bool
}

// New returns a Printer writing to w. verbose also prints Debugf lines; quiet drops everything but
// warnings (for -o json, where stdout carries the document and progress goes to stderr anyway).
func New(w io.Writer, verbose, quiet bool) *Printer {
	return &Printer{w: w, verbose: verbose, quiet: quiet}
}

func (p *Printer) line(s string) {
	if p == nil || p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintln(p.w, s)
}

// Infof prints a plain line.
func (p *Printer) Infof(format string, args ...any) {
	if p != nil && !p.quiet {
		p.line(fmt.Sprintf(format, args...))
	}
}

// Debugf prints a line only in verbose mode.
func (p *Printer) Debugf(format string, args ...any) {
	if p != nil && p.verbose {
		p.line("  debug: " + fmt.Sprintf(format, args...))
	}
}

// Warnf prints a warning line; warnings are never suppressed.
func (p *Printer) Warnf(format string, args ...any) {
	p.line("WARNING: " + fmt.Sprintf(format, args...))
}

// Hostf prints a line prefixed with the host name.
func (p *Printer) Hostf(host, format string, args ...any) {
	if p != nil && !p.quiet {
		p.line(fmt.Sprintf("  %-10s %s", host+":", fmt.Sprintf(format, args...)))
	}
}

// PhaseStarted implements phase.Reporter.
func (p *Printer) PhaseStarted(title string) {
	if p != nil && !p.quiet {
		p.line(fmt.Sprintf("[%s]", title))
	}
}

// PhaseDone implements phase.Reporter.
func (p *Printer) PhaseDone(title string, d time.Duration, err error, skipped string) {
	if p == nil || p.quiet {
		return
	}
	switch {
	case skipped != "":
		p.line(fmt.Sprintf("[%s] - skipped: %s", title, skipped))
	case err != nil:
		p.line(fmt.Sprintf("[%s] ✗ failed after %s", title, round(d)))
	default:
		p.line(fmt.Sprintf("[%s] ✓ %s", title, round(d)))
	}
}

func round(d time.Duration) time.Duration {
	if d > time.Second {
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}

// Table renders rows as aligned columns with a header, separated by two spaces.
func Table(w io.Writer, header []string, rows [][]string) {
	widths := make([]int, len(header))
	for i, h := range header {
		widths[i] = len(h)
	}
	for _, r := range rows {
		for i, c := range r {
			if i < len(widths) && len([]rune(c)) > widths[i] {
				widths[i] = len([]rune(c))
			}
		}
	}
	write := func(cells []string) {
		var b strings.Builder
		for i, c := range cells {
			if i == len(cells)-1 {
				b.WriteString(c)
				break
			}
			b.WriteString(c)
			b.WriteString(strings.Repeat(" ", widths[i]-len([]rune(c))+2))
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	write(header)
	for _, r := range rows {
		write(r)
	}
}
