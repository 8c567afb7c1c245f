package fault

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestParseHostCommandErrors(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"syntax", "docker kill hactl-lab-{{.Host", "unclosed action"},
		{"unknown field", "docker kill hactl-lab-{{.Hostname}}", "can't evaluate field Hostname"},
		{"no field", "docker kill hactl-lab-cp-a", "names no host field"},
		{"empty", "  ", "empty command"},
		{"function", "docker kill {{lower .Host}}", `function "lower" not defined`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseHostCommand("--down", tc.text)
			if err == nil {
				t.Fatalf("ParseHostCommand(%q) = %v, want an error", tc.text, c)
			}
			msg := err.Error()
			for _, want := range []string{"--down", tc.want, "{{.Host}}", "{{.Address}}", "{{.Zone}}"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q lacks %q", msg, want)
				}
			}
		})
	}
}

func TestHostCommandRender(t *testing.T) {
	c, err := ParseHostCommand("--up", "docker start hactl-lab-{{.Host}} # {{.Address}} {{.Zone}}")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		d    HostData
		want string
	}{
		{HostData{Host: "cp-a", Address: "172.28.0.11", Zone: "az-a"}, "docker start hactl-lab-cp-a # 172.28.0.11 az-a"},
		{HostData{Host: "cp b", Address: "fd00:db8:28::11", Zone: ""}, "docker start hactl-lab-'cp b' # fd00:db8:28::11 ''"},
		{HostData{Host: "x;rm -rf /", Address: "it's", Zone: "$(id)"}, `docker start hactl-lab-'x;rm -rf /' # 'it'\''s' '$(id)'`},
	} {
		got, err := c.Render(tc.d)
		if err != nil || got != tc.want {
			t.Errorf("Render(%+v) = %q, %v; want %q", tc.d, got, err, tc.want)
		}
	}
	if c.String() != "docker start hactl-lab-{{.Host}} # {{.Address}} {{.Zone}}" {
		t.Errorf("String() = %q", c.String())
	}
	// The rendered command is what the shell sees: the host name stays one word.
	c, err = ParseHostCommand("--down", "printf '[%s]' hactl-lab-{{.Host}}")
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := c.Render(HostData{Host: "a b'c"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := RunLocal(context.Background(), cmd)
	if err != nil || out != "[hactl-lab-a b'c]" {
		t.Errorf("RunLocal(%q) = %q, %v", cmd, out, err)
	}
}

func TestRunLocal(t *testing.T) {
	out, err := RunLocal(context.Background(), "echo hello; echo oops >&2")
	if err != nil || out != "hello\noops\n" {
		t.Errorf("RunLocal = %q, %v", out, err)
	}
	out, err = RunLocal(context.Background(), "echo partial; exit 3")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 || out != "partial\n" {
		t.Fatalf("RunLocal = %q, %v", out, err)
	}
	if msg := err.Error(); !strings.Contains(msg, `local command "echo partial; exit 3"`) || !strings.Contains(msg, "exit status 3") || !strings.Contains(msg, "partial") {
		t.Errorf("error %q", msg)
	}

	// Cancellation kills the shell and what it started, at once.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = RunLocal(ctx, "sleep 30; echo done")
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "sleep 30") {
		t.Errorf("RunLocal after the deadline: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("RunLocal took %v after the deadline: the group was not killed", d)
	}
	// A background child holding the output open does not keep RunLocal waiting (WaitDelay) once
	// the group is killed.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel2()
	start = time.Now()
	_, err = RunLocal(ctx2, "sleep 30 & sleep 30")
	if err == nil || time.Since(start) > 3*time.Second {
		t.Errorf("RunLocal with a background child: %v after %v", err, time.Since(start))
	}
}
