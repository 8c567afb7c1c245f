package probe

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hactl/hactl/provision"
)

func TestWatchScriptSyntax(t *testing.T) {
	for _, vip := range []netip.Addr{
		netip.MustParseAddr("172.28.0.100"),
		netip.MustParseAddr("fd00::100"),
		netip.MustParseAddr("::ffff:10.0.0.1"),
		netip.MustParseAddr("fe80::1%eth0"),
		{},
	} {
		script := WatchScript(vip, 0)
		out, err := exec.Command("sh", "-n", "-c", script).CombinedOutput()
		if err != nil {
			t.Errorf("%v: sh -n: %v\n%s\n%s", vip, err, out, script)
		}
	}
	for _, tt := range []struct {
		vip      string
		interval time.Duration
		want     []string
	}{
		{"172.28.0.100", 0, []string{`*' 172.28.0.100/'*) cur=1 ;;`, "sleep 0.020 ", `"$n" -ge 50 `, "ip -o addr show"}},
		{"fd00::100", 0, []string{`*' fd00::100/'*) cur=1 ;;`}},
		{"::ffff:10.0.0.1", 0, []string{`*' 10.0.0.1/'*) cur=1 ;;`}},
		{"fe80::1%eth0", 0, []string{`*' fe80::1/'*) cur=1 ;;`}},
		{"10.0.0.1", 1500 * time.Microsecond, []string{"sleep 0.002 ", `"$n" -ge 500 `}},
		{"10.0.0.1", time.Microsecond, []string{"sleep 0.001 "}},
		{"10.0.0.1", 3 * time.Second, []string{"sleep 3.000 ", `"$n" -ge 1 `}},
	} {
		script := WatchScript(netip.MustParseAddr(tt.vip), tt.interval)
		for _, w := range tt.want {
			if !strings.Contains(script, w) {
				t.Errorf("WatchScript(%s, %v) lacks %q:\n%s", tt.vip, tt.interval, w, script)
			}
		}
	}
}

// fakeIP puts an `ip` on a fresh PATH directory that prints an `ip -o addr show` listing with
// decoy addresses, plus the line in dir/vip when that file exists. It returns the directory.
func fakeIP(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	script := `#!/bin/sh
[ "$*" = "-o addr show" ] || { echo "fake ip: unexpected args $*" >&2; exit 2; }
echo '1: lo    inet 127.0.0.1/8 scope host lo\       valid_lft forever preferred_lft forever'
echo '2: eth0    inet 10.0.0.10/24 brd 10.0.0.255 scope global eth0\       valid_lft forever preferred_lft forever'
echo '2: eth0    inet 110.0.0.1/8 scope global eth0\       valid_lft forever preferred_lft forever'
echo '2: eth0    inet6 fd00::10/64 scope global \       valid_lft forever preferred_lft forever'
echo '2: eth0    inet6 fd00::1:0/64 scope global \       valid_lft forever preferred_lft forever'
[ -e DIR/fail ] && exit 1
[ -e DIR/vip ] && while IFS= read -r l; do echo "$l"; done < DIR/vip
exit 0
`
	script = strings.ReplaceAll(script, "DIR", dir)
	if err := os.WriteFile(filepath.Join(dir, "ip"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

type line struct {
	text string
	at   time.Time
}

// script is a watcher script running locally.
type script struct {
	out    io.ReadCloser // its stdout
	lines  <-chan line   // its stdout lines as they come; closed at EOF
	exited chan error    // receives cmd.Wait's result
}

// startScript runs WatchScript(vip, 0) under sh with dir first on PATH; it is killed at the
// end of the test.
func startScript(t *testing.T, dir string, vip netip.Addr) *script {
	t.Helper()
	cmd := exec.Command("sh", "-c", WatchScript(vip, 0))
	cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan line, 100)
	s := &script{out: out, lines: lines, exited: make(chan error, 1)}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- line{sc.Text(), time.Now()}
		}
	}()
	go func() {
		<-scanned // Wait closes out: read it all first
		s.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = out.Close()
		<-scanned
	})
	return s
}

func nextLine(t *testing.T, lines <-chan line, within time.Duration) line {
	t.Helper()
	select {
	case l, ok := <-lines:
		if !ok {
			t.Fatal("watcher output ended")
		}
		return l
	case <-time.After(within):
		t.Fatalf("no line within %v", within)
	}
	return line{}
}

func TestWatchScriptRuns(t *testing.T) {
	for _, tt := range []struct{ vip, present string }{
		{"10.0.0.1", "2: eth0    inet 10.0.0.1/32 scope global eth0\\       valid_lft forever preferred_lft forever\n"},
		{"fd00::1", "2: eth0    inet6 fd00::1/128 scope global nodad \\       valid_lft forever preferred_lft forever\n"},
	} {
		t.Run(tt.vip, func(t *testing.T) {
			dir := fakeIP(t)
			vipFile := filepath.Join(dir, "vip")
			if err := os.WriteFile(vipFile, []byte(tt.present), 0o644); err != nil {
				t.Fatal(err)
			}
			lines := startScript(t, dir, netip.MustParseAddr(tt.vip)).lines
			if l := nextLine(t, lines, 2*time.Second); l.text != "vip 1" {
				t.Fatalf("first line %q, want vip 1", l.text)
			}
			time.Sleep(100 * time.Millisecond) // several polls, no change, no line
			removed := time.Now()
			if err := os.Remove(vipFile); err != nil {
				t.Fatal(err)
			}
			l := nextLine(t, lines, 2*time.Second)
			if l.text != "vip 0" {
				t.Fatalf("after removing the VIP: %q, want vip 0 and nothing in between", l.text)
			}
			t.Logf("change seen after %v", l.at.Sub(removed))
			if err := os.WriteFile(vipFile, []byte(tt.present), 0o644); err != nil {
				t.Fatal(err)
			}
			if l := nextLine(t, lines, 2*time.Second); l.text != "vip 1" {
				t.Fatalf("after restoring the VIP: %q, want vip 1", l.text)
			}
		})
	}
}

func TestWatchScriptHeartbeatAndOrphan(t *testing.T) {
	dir := fakeIP(t)
	sc := startScript(t, dir, netip.MustParseAddr("10.0.0.1"))
	lines := sc.lines
	first := nextLine(t, lines, 2*time.Second)
	// The unchanged state is restated about once a second.
	second := nextLine(t, lines, 5*time.Second)
	if first.text != "vip 0" || second.text != "vip 0" || second.at.Sub(first.at) < 900*time.Millisecond {
		t.Errorf("lines %q then %q after %v, want vip 0 restated after about 1 s", first.text, second.text, second.at.Sub(first.at))
	}
	// Its reader gone (as when the SSH session closes), the watcher dies at its next restatement.
	start := time.Now()
	sc.out.Close()
	select {
	case err := <-sc.exited:
		t.Logf("watcher exited %v after its stdout was closed: %v", time.Since(start), err)
	case <-time.After(5 * time.Second):
		t.Fatal("watcher still running 5 s after its stdout was closed")
	}
}

func TestWatchScriptFailures(t *testing.T) {
	dir := fakeIP(t)
	if err := os.WriteFile(filepath.Join(dir, "fail"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	for _, tt := range []struct {
		name, dir string
		vip       netip.Addr // dir is PATH
		code      int
		stderr    string
	}{
		{"ip fails", dir + string(os.PathListSeparator) + os.Getenv("PATH"), netip.MustParseAddr("10.0.0.1"), 1, "ip -o addr show failed"},
		{"no ip", empty, netip.MustParseAddr("10.0.0.1"), 127, "ip (iproute2) not found"},
		{"invalid vip", dir, netip.Addr{}, 2, "invalid VIP"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command("/bin/sh", "-c", WatchScript(tt.vip, 0))
			cmd.Env = []string{"PATH=" + tt.dir}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != tt.code || !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("err %v, stderr %q; want exit %d and %q", err, stderr.String(), tt.code, tt.stderr)
			}
		})
	}
}

// scripted returns a run function for startWatch that writes chunks with delays, then waits
// for ctx (returning an error wrapping its cause, as provision.Client.Run does) or returns fail.
func scripted(fail error, steps ...any) func(context.Context, io.Writer) error {
	return func(ctx context.Context, w io.Writer) error {
		for _, s := range steps {
			switch s := s.(type) {
			case string:
				if _, err := io.WriteString(w, s); err != nil {
					return err
				}
			case time.Duration:
				select {
				case <-time.After(s):
				case <-ctx.Done():
					return fmt.Errorf("cancelled: %w", context.Cause(ctx))
				}
			}
		}
		if fail != nil {
			return fail
		}
		<-ctx.Done()
		return fmt.Errorf("cancelled: %w", context.Cause(ctx))
	}
}

func heldSeq(events []VIPEvent) string {
	var b strings.Builder
	for _, e := range events {
		fmt.Fprintf(&b, "%s:%v ", e.Host, e.Held)
	}
	return strings.TrimSpace(b.String())
}

func TestWatchLines(t *testing.T) {
	start := time.Now()
	w := startWatch(context.Background(), "lb-a", scripted(nil,
		30*time.Millisecond,
		"vip 0\n", 40*time.Millisecond,
		"v", "ip 1\nvip 1\n", // split across writes, then a restatement
		"garbage\n", 40*time.Millisecond,
		"vip 0\nvip 0\n",
	))
	select {
	case <-w.Ready():
	case <-time.After(2 * time.Second):
		t.Fatal("not ready")
	}
	if evs := w.Events(); len(evs) != 1 || evs[0].Held || evs[0].Host != "lb-a" || evs[0].At.Sub(start) < 30*time.Millisecond {
		t.Errorf("at Ready: %+v", evs)
	}
	time.Sleep(150 * time.Millisecond)
	events, err := w.Stop()
	if err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if got := heldSeq(events); got != "lb-a:false lb-a:true lb-a:false" {
		t.Fatalf("events %s", got)
	}
	for i := 1; i < len(events); i++ {
		if gap := events[i].At.Sub(events[i-1].At); gap < 35*time.Millisecond {
			t.Errorf("event %d %v after the previous one, want about 40 ms (receive time)", i, gap)
		}
	}
	if w.Err() != nil {
		t.Errorf("Err after a clean Stop: %v", w.Err())
	}
	if again, err := w.Stop(); err != nil || len(again) != 3 {
		t.Errorf("second Stop: %v, %v", again, err)
	}
	select {
	case <-w.Done():
	default:
		t.Error("Done not closed after Stop")
	}
}

func TestWatchFails(t *testing.T) {
	lost := errors.New("ssh: connection lost")
	w := startWatch(context.Background(), "lb-b", scripted(lost, "vip 1\n", 20*time.Millisecond))
	select {
	case <-w.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("failed watcher not Done")
	}
	if err := w.Err(); !errors.Is(err, lost) || !strings.Contains(err.Error(), "vip watch on lb-b") {
		t.Errorf("Err = %v", err)
	}
	events, err := w.Stop()
	if !errors.Is(err, lost) || heldSeq(events) != "lb-b:true" {
		t.Errorf("Stop = %v, %v", events, err)
	}

	// Exiting cleanly is a failure too: the watcher never ends by itself.
	w = startWatch(context.Background(), "lb-c", func(context.Context, io.Writer) error { return nil })
	<-w.Done()
	if _, err := w.Stop(); err == nil || !strings.Contains(err.Error(), "exited before it was stopped") {
		t.Errorf("Stop after a clean exit: %v", err)
	}

	// The parent context ending first is a failure as well (the events stop short).
	ctx, cancel := context.WithCancel(context.Background())
	w = startWatch(ctx, "lb-d", scripted(nil, "vip 0\n"))
	<-w.Ready()
	cancel()
	<-w.Done()
	if _, err := w.Stop(); !errors.Is(err, context.Canceled) {
		t.Errorf("Stop after the parent context ended: %v", err)
	}
}

// fakeRunner is a Runner whose command ends when ctx is done, or at once with err.
type fakeRunner struct {
	err error

	mu            sync.Mutex
	step, command string
	opts          int
}

func (f *fakeRunner) Run(ctx context.Context, step, command string, opts ...provision.RunOption) (provision.Result, error) {
	f.mu.Lock()
	f.step, f.command, f.opts = step, command, len(opts)
	f.mu.Unlock()
	if f.err != nil {
		return provision.Result{ExitCode: 255}, &provision.CommandError{Host: "lb-a", Step: step, Command: command, ExitCode: -1, Err: f.err}
	}
	<-ctx.Done()
	return provision.Result{ExitCode: -1}, &provision.CommandError{Host: "lb-a", Step: step, Command: command, ExitCode: -1, Err: ctx.Err()}
}

func TestWatchVIPRunner(t *testing.T) {
	vip := netip.MustParseAddr("172.28.0.100")
	r := &fakeRunner{}
	w := WatchVIP(context.Background(), "lb-a", r, vip, 50*time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	if _, err := w.Stop(); err != nil {
		t.Errorf("Stop: %v (the cancellation Stop causes is not an error)", err)
	}
	r.mu.Lock()
	if r.step != WatchStep || r.command != WatchScript(vip, 50*time.Millisecond) || r.opts != 1 {
		t.Errorf("ran step %q, %d options, command\n%s", r.step, r.opts, r.command)
	}
	r.mu.Unlock()

	r = &fakeRunner{err: errors.New("ssh: unexpected EOF")}
	w = WatchVIP(context.Background(), "lb-a", r, vip, 0)
	<-w.Done()
	_, err := w.Stop()
	var ce *provision.CommandError
	if !errors.As(err, &ce) || ce.Step != WatchStep {
		t.Errorf("Stop = %v, want a wrapped *provision.CommandError", err)
	}

	w = WatchVIP(context.Background(), "lb-a", &fakeRunner{}, netip.Addr{}, 0)
	<-w.Done()
	if _, err := w.Stop(); err == nil || !strings.Contains(err.Error(), "invalid VIP") {
		t.Errorf("invalid VIP: %v", err)
	}
}

func TestHolders(t *testing.T) {
	ev := func(host string, held bool, ms float64) VIPEvent { return VIPEvent{Host: host, Held: held, At: at(ms)} }
	events := []VIPEvent{
		ev("lb-b", false, -500),
		ev("lb-a", true, -500),
		ev("lb-c", false, -400),
		ev("lb-b", true, 3000),  // split brain from 3000 ...
		ev("lb-a", false, 3100), // ... to 3100
	}
	slices.Reverse(events) // any order
	// Two lines in one chunk have the same receive time: the later event (in the slice) wins.
	events = append(events, ev("lb-c", true, 5000), ev("lb-c", false, 5000))
	tests := []struct {
		at   float64
		want []string
	}{
		{-600, nil},
		{-500, []string{"lb-a"}},
		{0, []string{"lb-a"}},
		{3000, []string{"lb-a", "lb-b"}},
		{3050, []string{"lb-a", "lb-b"}},
		{3100, []string{"lb-b"}},
		{6000, []string{"lb-b"}},
	}
	for _, tt := range tests {
		if got := Holders(events, at(tt.at)); !slices.Equal(got, tt.want) {
			t.Errorf("Holders at %v ms = %v, want %v", tt.at, got, tt.want)
		}
	}
}

func TestFirstMove(t *testing.T) {
	ev := func(host string, held bool, ms float64) VIPEvent { return VIPEvent{Host: host, Held: held, At: at(ms)} }
	base := []VIPEvent{ev("lb-a", true, -500), ev("lb-b", false, -500), ev("lb-c", false, -450)}
	tests := []struct {
		name   string
		events []VIPEvent
		from   string
		to     string
		at     float64
		ok     bool
	}{
		{name: "no move", events: base, from: "lb-a"},
		{name: "only from changes", events: append(slices.Clone(base), ev("lb-a", false, 100), ev("lb-a", true, 5000)), from: "lb-a"},
		{
			name:   "move",
			events: append(slices.Clone(base), ev("lb-a", false, 2900), ev("lb-c", true, 3000), ev("lb-b", true, 3200)),
			from:   "lb-a", to: "lb-c", at: 3000, ok: true,
		},
		{
			name:   "move before release",
			events: append(slices.Clone(base), ev("lb-b", true, 3000), ev("lb-a", false, 3100)),
			from:   "lb-a", to: "lb-b", at: 3000, ok: true,
		},
		{
			name:   "gained and lost, still a move",
			events: append(slices.Clone(base), ev("lb-b", true, 1000), ev("lb-b", false, 1010)),
			from:   "lb-a", to: "lb-b", at: 1000, ok: true,
		},
		{
			name:   "event at t0 counts as held at t0",
			events: append(slices.Clone(base), ev("lb-b", true, 0)),
			from:   "lb-a", to: "lb-b", at: 0, ok: true,
		},
		{
			name:   "already elsewhere at t0",
			events: append(slices.Clone(base), ev("lb-c", true, -300), ev("lb-b", true, -200), ev("lb-b", true, 50)),
			from:   "lb-a", to: "lb-c", at: -300, ok: true,
		},
		{
			name:   "held before t0 but released",
			events: append(slices.Clone(base), ev("lb-c", true, -300), ev("lb-c", false, -250), ev("lb-b", true, 700)),
			from:   "lb-a", to: "lb-b", at: 700, ok: true,
		},
		{
			name:   "from is not the holder",
			events: base,
			from:   "lb-b", to: "lb-a", at: -500, ok: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events := slices.Clone(tt.events)
			slices.Reverse(events)
			to, when, ok := FirstMove(events, tt.from, testT0)
			var want time.Time
			if tt.ok {
				want = at(tt.at)
			}
			if to != tt.to || ok != tt.ok || !when.Equal(want) {
				t.Errorf("FirstMove = %q, %v, %v; want %q, %v, %v", to, when.Sub(testT0), ok, tt.to, tt.at, tt.ok)
			}
		})
	}
}

func TestWaitMove(t *testing.T) {
	a := startWatch(context.Background(), "lb-a", scripted(nil, "vip 1\n", 60*time.Millisecond, "vip 0\n"))
	b := startWatch(context.Background(), "lb-b", scripted(nil, "vip 0\n", 80*time.Millisecond, "vip 1\n"))
	defer a.Stop()
	defer b.Stop()
	<-a.Ready()
	<-b.Ready()
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	to, when, err := WaitMove(ctx, []*VIPWatch{a, b}, "lb-a", t0)
	if err != nil {
		t.Fatal(err)
	}
	bev := b.Events()
	if to != "lb-b" || len(bev) != 2 || !when.Equal(bev[1].At) {
		t.Errorf("WaitMove = %s at %v; lb-b's events %+v", to, when, bev)
	}
	if got := Holders(Merge(a, b), time.Now()); !slices.Equal(got, []string{"lb-b"}) {
		t.Errorf("Holders now = %v", got)
	}

	// A failing watcher ends the wait.
	lost := errors.New("ssh: connection lost")
	c := startWatch(context.Background(), "lb-c", scripted(lost, "vip 0\n", 30*time.Millisecond))
	if _, _, err := WaitMove(ctx, []*VIPWatch{a, c}, "lb-b", time.Now().Add(time.Hour)); !errors.Is(err, lost) {
		t.Errorf("WaitMove with a failed watcher: %v", err)
	}
	// So does ctx.
	short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelShort()
	if _, _, err := WaitMove(short, []*VIPWatch{a, b}, "lb-b", time.Now().Add(time.Hour)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitMove past its deadline: %v", err)
	}
}
