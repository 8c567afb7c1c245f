// Package exitcode holds hactl's process exit codes and the errors that choose them, so that the
// packages doing a command's work (backup, status, schedule, drill) can say "invalid input" or "the
// check's verdict failed" without importing the command package. It is a leaf: it imports no other
// hactl package.
package exitcode

import (
	"errors"
	"fmt"
	"strings"
)

// Exit codes (README "Exit codes").
const (
	OK      = 0
	Failure = 1 // runtime failure: names host, step, command
	Invalid = 2 // invalid input or usage, found locally before any host is contacted
	Verdict = 3 // a check's verdict failed
	Changes = 4 // plan --detailed-exitcode: the plan has changes (Terraform's 2, moved to 4: 2 and 3 keep their meaning)
)

// Coder is implemented by errors that choose the process exit code.
type Coder interface {
	ExitCode() int
}

// Of maps an error to the process exit code: nil → OK, a Coder anywhere in the chain (the first
// errors.As finds) → its code, anything else → Failure.
func Of(err error) int {
	if err == nil {
		return OK
	}
	var c Coder
	if errors.As(err, &c) {
		return c.ExitCode()
	}
	return Failure
}

// UsageError is a bad flag, argument or spec value found locally, before any host is contacted
// (exit 2). Err says what and how to fix it.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// ExitCode returns Invalid (2).
func (e *UsageError) ExitCode() int { return Invalid }

// VerdictError is a check whose verdict failed (exit 3). Err names what failed.
type VerdictError struct{ Err error }

func (e *VerdictError) Error() string { return e.Err.Error() }
func (e *VerdictError) Unwrap() error { return e.Err }

// ExitCode returns Verdict (3).
func (e *VerdictError) ExitCode() int { return Verdict }

// ChangesPendingError is a successful plan that would change something, returned only when the
// caller asked for it (plan --detailed-exitcode; exit 4). Changes name each member's or host's
// planned action ("member cp-a: create").
type ChangesPendingError struct{ Changes []string }

func (e *ChangesPendingError) Error() string {
	n := len(e.Changes)
	unit := "changes"
	if n == 1 {
		unit = "change"
	}
	return fmt.Sprintf("%d %s pending: %s", n, unit, strings.Join(e.Changes, ", "))
}

// ExitCode returns Changes (4).
func (e *ChangesPendingError) ExitCode() int { return Changes }

// Notice marks the error as an outcome to report, not a failure: main prints it without "ERROR:".
func (e *ChangesPendingError) Notice() {}
