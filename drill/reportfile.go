package drill

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hactl/hactl/internal/atomicfile"
)

// CheckReportPath checks, before any host is contacted, that the JSON report can be written to
// path (--report): its directory exists and path is not a directory. A drill that ran but could
// not write its report would have to be run again. Errors are *InputError (exit 2).
func CheckReportPath(path string) error {
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || !fi.IsDir() {
		return &InputError{Err: fmt.Errorf("--report %s: its directory does not exist: create it or give another path", path)}
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return &InputError{Err: fmt.Errorf("--report %s is a directory: give a file path, e.g. %s", path, filepath.Join(path, "drill.json"))}
	}
	return nil
}

// WriteFile writes the report as indented JSON with a trailing newline to path (mode 0644),
// atomically (atomicfile). Errors name --report and path.
func (r *Report) WriteFile(path string) error { return WriteJSON(path, r) }

// WriteJSON writes any drill's report v as WriteFile does (the Lease drill's report too).
func WriteJSON(path string, v any) error {
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(path, append(raw, '\n'), 0o644); err != nil {
		return fmt.Errorf("--report %s: %w", path, err)
	}
	return nil
}
