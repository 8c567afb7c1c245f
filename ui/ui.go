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
	log     io.Writer // every line, debug included, time-stamped (nil: none)
	verbose bool
	quiet   bool
}

// New returns a Printer writing to w. verbose also prints Debugf lines; quiet drops everything but
// warnings (for -o json, where stdout carries the document and progress goes to stderr anyway).
func New(w io.Writer, verbose, quiet bool) *Printer {
	return &Printer{w: w, verbose: verbose, quiet: quiet}
}

// SetLog makes p also write every line, debug lines included, with a timestamp to w (the debug log
// file that is always written, as k0sctl does).
func (p *Printer) SetLog(w io.Writer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log = w
}

func (p *Printer) line(s string) {
	if p == nil || p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintln(p.w, s)
	p.logLine(s)
}

func (p *Printer) logLine(s string) {
	if p.log != nil {
		fmt.Fprintf(p.log, "%s %s\n", time.Now().UTC().Format("2006-01-02T15:04:05.000Z"), s)
	}
}

// logOnly writes a line to the log file only.
func (p *Printer) logOnly(s string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.logLine(s)
}

// Infof prints a plain line.
func (p *Printer) Infof(format string, args ...any) {
	if p == nil {
		return
	}
	if p.quiet {
		p.logOnly(fmt.Sprintf(format, args...))
		return
	}
	p.line(fmt.Sprintf(format, args...))
}

// Debugf prints a line in verbose mode; it always goes to the log file.
func (p *Printer) Debugf(format string, args ...any) {
	if p == nil {
		return
	}
	s := "  debug: " + fmt.Sprintf(format, args...)
	if p.verbose {
		p.line(s)
		return
	}
	p.logOnly(s)
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
