//go:build e2e

package backupe2e

// Steps of issue 37's item 4 ("removal leaves nothing stuck") for `hactl backup schedule
// --disable`, for the lead to call from TestSchedule (schedule_test.go).

import (
	"context"
	"strings"
	"testing"

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
