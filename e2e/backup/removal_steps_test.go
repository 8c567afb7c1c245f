//go:build e2e

package backupe2e

// Steps of issue 37's item 4 ("removal leaves nothing stuck") for `hactl backup schedule
// --disable`, for the lead to call from TestSchedule (schedule_test.go).

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hactl/hactl/backup/schedule"
)

// afterScheduleDisable follows `backup schedule --disable` (TestSchedule, right after its check
// that the timer is inactive and the files are gone, before the second --disable): on every
// member no unit of the schedule is left loaded or installed, and neither textfile the runs write
// (the backup's nor the certificates') is left in the textfile directory — node_exporter would
// export their frozen values for ever. The second --disable that follows in TestSchedule is the
// user's run again.
func afterScheduleDisable(t *testing.T) {
	t.Helper()
	for _, h := range members {
		out, err := suite.Lab.Exec(context.Background(), h, "sh", "-c",
			"systemctl list-units --all --no-legend 'hactl-backup*'; systemctl list-unit-files --no-legend 'hactl-backup*'; ls -A "+schedule.DefaultTextfileDir+" 2>/dev/null | grep '^hactl_' || true")
		if err != nil {
			t.Fatalf("%s: %v\n%s", h, err, out)
		}
		if s := strings.TrimSpace(out); s != "" {
			t.Errorf("%s after --disable: left\n%s", h, s)
		}
	}
}

// disableDuringRun installs the schedule again (install), waits (up to 3 intervals) until a run is
// in progress on some member, disables at once and checks that nothing is left: --disable waits
// for that run, which wrote its textfiles after they were removed before. Call it in TestSchedule
// after the second --disable and its --status check (the listing comparison after it still holds:
// this leaves no timer either). A run not caught in progress is logged: the check still holds.
func disableDuringRun(t *testing.T, spec string, install func()) {
	t.Helper()
	install()
	ctx := context.Background()
	caught := ""
	deadline := time.Now().Add(3 * scheduleEvery)
	for caught == "" && time.Now().Before(deadline) {
		for _, h := range members {
			out, _ := suite.Lab.Exec(ctx, h, "systemctl", "show", "-p", "ActiveState", "--value", schedule.ServiceName)
			if strings.TrimSpace(out) == "activating" {
				caught = h
				break
			}
		}
	}
	start := time.Now()
	suite.MustHactl(t, "backup", "schedule", "-f", spec, "--disable")
	if caught == "" {
		t.Logf("no run caught in progress within %s: --disable between runs", 3*scheduleEvery)
	} else {
		t.Logf("--disable during %s's run took %s", caught, time.Since(start).Round(100*time.Millisecond))
	}
	afterScheduleDisable(t)
}
