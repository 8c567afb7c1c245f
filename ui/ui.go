// Package ui prints progress the way kind and k0sctl do: one line per phase, every remote line prefixed
// with its host, ✓/✗ when a phase ends. Output is plain lines (no cursor tricks) so CI logs stay readable.
package ui

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"text/tabwriter"
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

// Quiet returns a Printer for a step whose details matter only when it fails: it writes warnings
// to p's writer and every line to p's debug log, nothing else.
func (p *Printer) Quiet() *Printer {
	p.mu.Lock()
	defer p.mu.Unlock()
	return &Printer{w: p.w, log: p.log, verbose: p.verbose, quiet: true}
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
	p.progress(fmt.Sprintf(format, args...))
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

// NewHostKey prints that the host key of host (at hostPort, with its SHA256 fingerprint) was added
// to known_hosts (provision.SpecOptions.OnNewHostKey; --accept-new-host-keys). Never suppressed: the
// user should see what was trusted. A nil Printer prints nothing.
func (p *Printer) NewHostKey(host, hostPort, fingerprint string) {
	if p == nil {
		return
	}
	p.line(fmt.Sprintf("  %-10s added its host key %s (%s) to known_hosts (--accept-new-host-keys)", host+":", fingerprint, hostPort))
}

// Hostf prints a line prefixed with the host name.
func (p *Printer) Hostf(host, format string, args ...any) {
	p.progress(fmt.Sprintf("  %-10s %s", host+":", fmt.Sprintf(format, args...)))
}

// PhaseStarted implements phase.Reporter.
func (p *Printer) PhaseStarted(title string) {
	p.progress(fmt.Sprintf("[%s]", title))
}

// PhaseDone implements phase.Reporter.
func (p *Printer) PhaseDone(title string, d time.Duration, err error, skipped string) {
	switch {
	case skipped != "":
		p.progress(fmt.Sprintf("[%s] - skipped: %s", title, skipped))
	case err != nil:
		p.progress(fmt.Sprintf("[%s] ✗ failed after %s", title, round(d)))
	default:
		p.progress(fmt.Sprintf("[%s] ✓ %s", title, round(d)))
	}
}

// progress prints a progress line; a quiet printer writes it to the log file only.
func (p *Printer) progress(s string) {
	switch {
	case p == nil:
	case p.quiet:
		p.logOnly(s)
	default:
		p.line(s)
	}
}

func round(d time.Duration) time.Duration {
	if d > time.Second {
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}

// Table writes header and rows to w as left-aligned columns (text/tabwriter): every column as
// wide as its widest cell, counted in runes, plus two spaces; the last cell of a line unpadded and
// no trailing blanks. A row shorter than the widest one leaves its last columns empty. Cells are
// written as they are: a tab in a cell is text, not a column break (only a 0xff byte, never valid
// UTF-8, would end that). Write errors are not reported, as with fmt.Fprintln.
func Table(w io.Writer, header []string, rows [][]string) {
	cols := len(header)
	for _, r := range rows {
		cols = max(cols, len(r))
	}
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.StripEscape)
	esc := string([]byte{tabwriter.Escape})
	write := func(cells []string) {
		var line strings.Builder
		for i := range cols {
			if i > 0 {
				line.WriteByte('\t')
			}
			if i < len(cells) {
				line.WriteString(esc + cells[i] + esc)
			}
		}
		line.WriteByte('\n')
		_, _ = io.WriteString(tw, line.String())
	}
	write(header)
	for _, r := range rows {
		write(r)
	}
	_ = tw.Flush()
	var out strings.Builder
	for line := range strings.Lines(b.String()) {
		out.WriteString(strings.TrimRight(line, " \n"))
		out.WriteByte('\n')
	}
	_, _ = io.WriteString(w, out.String())
}

// Size renders a byte count with a binary unit: "512 B", "1.5 MiB", "2.0 GiB".
func Size(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for v := n / unit; v >= unit; v /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
