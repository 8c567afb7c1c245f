package etcdphases

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hactl/hactl/provision"
)

// failingStartHost fails etcd's start command the way systemctl does and answers the journal
// command with etcd's last words.
type failingStartHost struct {
	mu   sync.Mutex
	cmds []string
}

func (h *failingStartHost) Run(_ context.Context, step, command string, _ ...provision.RunOption) (provision.Result, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cmds = append(h.cmds, command)
	if strings.HasPrefix(command, "journalctl ") {
		return provision.Result{Stdout: []byte("{\"level\":\"fatal\",\"msg\":\"failed to verify flags\",\"error\":\"invalid value \\\"x\\\" for flag -quota-backend-bytes\"}\n")}, nil
	}
	return provision.Result{}, &provision.CommandError{Host: "cp-a", Step: step, Command: command, ExitCode: 1,
		Stderr: `Job for etcd.service failed because the control process exited with error code. See "systemctl status etcd.service" and "journalctl -xeu etcd.service" for details.`,
		Err:    errors.New("exit status 1")}
}
func (h *failingStartHost) Upload(context.Context, string, []provision.File) error { return nil }
func (h *failingStartHost) Commands() int                                          { return len(h.cmds) }
func (h *failingStartHost) Close() error                                           { return nil }

// TestStartFailureCarriesJournal: a failed (re)start of etcd says why in etcd's own words (its last
// journal lines), and the command's error is still there to unwrap.
func TestStartFailureCarriesJournal(t *testing.T) {
	f := newPlanFixture(t, 1, false)
	h := &failingStartHost{}
	f.b.run.SetClient("cp-a", h)
	err := (&Start{G: f.b}).systemctl(context.Background(), f.b.members[0], "restart", true)
	var ce *provision.CommandError
	var uf *provision.UnitFailedError
	if !errors.As(err, &ce) || !errors.As(err, &uf) {
		t.Fatalf("err %v, want a *provision.UnitFailedError around the *provision.CommandError", err)
	}
	if !strings.Contains(err.Error(), "etcd.service's last 1 journal lines (journalctl -u etcd.service -n 20 --no-pager -o cat):") ||
		!strings.Contains(err.Error(), `invalid value \"x\" for flag -quota-backend-bytes`) {
		t.Errorf("message does not carry the journal:\n%v", err)
	}
	if len(h.cmds) != 2 || !strings.HasPrefix(h.cmds[1], "journalctl -u etcd.service") {
		t.Errorf("commands %q", h.cmds)
	}
}

// TestWaitTimeoutCarriesJournal: a member that never became healthy (started without waiting)
// is explained by its journal too.
func TestWaitTimeoutCarriesJournal(t *testing.T) {
	f := newPlanFixture(t, 1, false)
	f.b.opt.WaitTimeout = 300 * time.Millisecond
	f.b.members[0].ClientURL = "https://127.0.0.1:1" // nothing listens
	f.b.run.SetClient("cp-a", &failingStartHost{})
	err := f.b.WaitMember(context.Background(), f.b.members[0], true)
	var uf *provision.UnitFailedError
	if !errors.As(err, &uf) || !strings.Contains(err.Error(), "not healthy after 300ms") || !strings.Contains(err.Error(), "-quota-backend-bytes") {
		t.Errorf("err %v, want the timeout with etcd's journal lines", err)
	}
}
