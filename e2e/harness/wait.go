package harness

import (
	"testing"
	"time"
)

// WaitFor calls cond, then again every `every`, until it returns "" (done). Once timeout has passed
// since WaitFor was called, the next answer that is not "" fails the test (t.Fatalf naming what, the
// timeout and that answer: why it is not done yet). Keep timeouts generous: e2e checks what
// happens; how fast belongs to `make bench`.
func WaitFor(t *testing.T, what string, timeout, every time.Duration, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		why := cond()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s: %s", what, timeout, why)
		}
		time.Sleep(every)
	}
}
