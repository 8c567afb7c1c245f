package schedule

import (
	"fmt"
	"path"
	"time"

	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/templates"
)

// Units are the rendered unit files of one member; Agent is nil without Config.Deltas.
type Units struct {
	Service, Timer, Agent []byte
}

// unitData is what the unit templates (templates/backup-service.tmpl, backup-timer.tmpl) read.
type unitData struct {
	Cluster, Member string
	Every           string
	OnCalendar      string
	Binary, Spec    string
	Service         string
	Policy          backup.Policy
	Textfile        string
	TextfileDir     string
	TimeoutSec      int
	DeltaEvery      string
}

// RunTimeout bounds one run (TimeoutStartSec): twice the interval, at least 15 minutes (a large DB
// over a slow link); a run still going when its next slot comes makes systemd skip that slot, so a
// hung run costs at most this.
func RunTimeout(every time.Duration) time.Duration {
	return max(2*every, 15*time.Minute)
}

// Render renders the member's units for cfg (whose Every and OnCalendar must be valid: see
// OnCalendar), with the binary at binary (BinaryPath on the members).
func Render(cfg Config, binary string) (Units, error) {
	every, err := cfg.Interval()
	if err != nil {
		return Units{}, fmt.Errorf("schedule: interval %q: %w", cfg.Every, err)
	}
	d := unitData{
		Cluster: cfg.Cluster, Member: cfg.Member, Every: cfg.Every, OnCalendar: cfg.OnCalendar,
		Binary: binary, Spec: SpecPath, Service: ServiceName, Policy: cfg.Policy,
		Textfile: cfg.Textfile, TextfileDir: path.Dir(cfg.Textfile),
		TimeoutSec: int(RunTimeout(every) / time.Second),
		DeltaEvery: cfg.DeltaEvery,
	}
	svc, err := templates.Render("backup-service.tmpl", d)
	if err != nil {
		return Units{}, err
	}
	timer, err := templates.Render("backup-timer.tmpl", d)
	if err != nil {
		return Units{}, err
	}
	u := Units{Service: svc, Timer: timer}
	if cfg.Deltas {
		if u.Agent, err = templates.Render("backup-agent-service.tmpl", d); err != nil {
			return Units{}, err
		}
	}
	return u, nil
}
