package exitcode

import (
	"fmt"
	"testing"
)

func TestOf(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want int
	}{
		{nil, OK},
		{fmt.Errorf("ssh: %w", fmt.Errorf("boom")), Failure},
		{fmt.Errorf("spec: %w", &UsageError{Err: fmt.Errorf("bad")}), Invalid},
		{&VerdictError{Err: fmt.Errorf("stale")}, Verdict},
		{fmt.Errorf("plan: %w", &ChangesPendingError{Changes: []string{"member cp-a: create"}}), Changes},
	} {
		if got := Of(tt.err); got != tt.want {
			t.Errorf("Of(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
	if got := (&ChangesPendingError{Changes: []string{"member cp-a: create"}}).Error(); got != "1 change pending: member cp-a: create" {
		t.Errorf("message %q", got)
	}
}
