package drill

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/hactl/hactl/internal/atomicfile"
)

// Journal is the local write-ahead record of a running drill, <stateDir>/drill/active.json: what
// is about to be taken down and how to bring it back, written (atomically) before any fault is
// applied and removed once everything is put back. A journal left behind (hactl killed, a put-back
// that failed) makes the next drill refuse and `hactl drill cleanup` put back what it lists.
type Journal struct {
	ID      string    `json:"id"`
	PID     int       `json:"pid"`
	Kind    Kind      `json:"kind"`
	Method  Method    `json:"method,omitempty"`
	Started time.Time `json:"started"`
	// Targets are the hosts a fault was (or is about to be) applied to.
	Targets []JournalTarget `json:"targets"`
}

// JournalTarget is one host taken down by a drill.
type JournalTarget struct {
	Host    string `json:"host"`
	Address string `json:"address"`
	Port    int    `json:"port,omitempty"`
	Zone    string `json:"zone"`
	// Fault says what was done, e.g. "SIGKILL etcd.service, held stopped".
	Fault string `json:"fault"`
	// OnHost: the fault is on the host (marker, iptables chain, stopped units, deadman), put back by
	// the restore script over SSH. Otherwise it was done from here (--method host) and UpCommand, the
	// rendered --up-command, brings the host back.
	OnHost    bool   `json:"onHost"`
	UpCommand string `json:"upCommand,omitempty"`
	// Deadline is when the on-host deadman puts the host back by itself (OnHost only).
	Deadline time.Time `json:"deadline,omitzero"`
}

// journalPath is the journal's file in the state dir.
func journalPath(stateDir string) string { return filepath.Join(stateDir, "drill", "active.json") }

// readJournal returns the journal in stateDir, or nil when there is none.
func readJournal(stateDir string) (*Journal, error) {
	raw, err := os.ReadFile(journalPath(stateDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("drill journal: %w", err)
	}
	j := &Journal{}
	if err := json.Unmarshal(raw, j); err != nil {
		return nil, fmt.Errorf("drill journal %s: %w", journalPath(stateDir), err)
	}
	return j, nil
}

// writeJournal writes j atomically (temp + rename), mode 0600.
func writeJournal(stateDir string, j *Journal) error {
	p := journalPath(stateDir)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("drill journal: %w", err)
	}
	raw, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(p, append(raw, '\n'), 0o600); err != nil {
		return fmt.Errorf("drill journal: %w", err)
	}
	return nil
}

// removeJournal deletes the journal (no error when it is gone).
func removeJournal(stateDir string) error {
	if err := os.Remove(journalPath(stateDir)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("drill journal: %w", err)
	}
	return nil
}

// describe returns the journal as lines for a refusal or a cleanup plan.
func (j *Journal) describe() []string {
	out := []string{fmt.Sprintf("drill %s (%s, pid %d, started %s) did not finish", j.ID, j.Kind, j.PID, j.Started.Format(time.RFC3339))}
	for _, t := range j.Targets {
		how := "put back over SSH by the restore script"
		if !t.OnHost {
			how = "brought back by running: " + t.UpCommand
		}
		out = append(out, fmt.Sprintf("%s; %s", t.Fault, how)) // Fault starts with the host's name
	}
	return out
}
