package probe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hactl/hactl/provision"
)

// DefaultWatchInterval is the polling interval of [WatchScript] and [WatchVIP] when theirs is
// zero or negative.
const DefaultWatchInterval = 20 * time.Millisecond

// WatchStep is the step name under which [WatchVIP] runs the watcher (in command errors).
const WatchStep = "drill/watch-vip"

// heartbeat is how often the watcher restates an unchanged state.
const heartbeat = time.Second

// WatchScript returns a POSIX sh script that reports whether vip is configured on the host it
// runs on. Every interval (default DefaultWatchInterval; rounded to the millisecond, at least
// 1 ms) it reads `ip -o addr show` and looks for " <vip>/" (the address as ip prints it: dotted
// IPv4 or RFC 5952 IPv6, followed by its prefix length), and prints to stdout
//
//	vip 1     (the address is present)
//	vip 0     (it is not)
//
// once at start, on every change, and again about every second while nothing changes. That
// restatement is a keep-alive: a watcher whose SSH session is gone dies on its next write
// (SIGPIPE or a write error), so an orphan outlives its session by a second at most, even where
// the SSH server or sudo does not pass the kill on.
//
// The script needs ip (iproute2) and a sleep accepting fractional seconds (GNU coreutils and
// busybox do); it exits non-zero with a message on stderr when either fails, or when vip is not
// a valid address. An IPv4-mapped IPv6 vip is watched as IPv4; a zone is ignored. Addresses
// that ip lists as tentative or dadfailed count as present.
func WatchScript(vip netip.Addr, interval time.Duration) string {
	if !vip.IsValid() {
		return "echo 'hactl watch-vip: invalid VIP address' >&2\nexit 2\n"
	}
	vip = vip.Unmap().WithZone("")
	if interval <= 0 {
		interval = DefaultWatchInterval
	}
	interval = max(interval.Round(time.Millisecond), time.Millisecond)
	beats := max(int(heartbeat/interval), 1)
	// The address has no shell or glob metacharacters ([0-9a-f.:] only); single quotes keep the
	// leading space in the case pattern.
	return fmt.Sprintf(`# hactl: report whether %[1]s is on this host (vip 1 / vip 0), every %[2]s
command -v ip >/dev/null 2>&1 || { echo 'hactl watch-vip: ip (iproute2) not found' >&2; exit 127; }
prev=
n=0
while :; do
	out=$(ip -o addr show) || { echo 'hactl watch-vip: ip -o addr show failed' >&2; exit 1; }
	case "$out" in
	*' %[1]s/'*) cur=1 ;;
	*) cur=0 ;;
	esac
	n=$((n + 1))
	if [ "$cur" != "$prev" ] || [ "$n" -ge %[3]d ]; then
		echo "vip $cur" || exit 1
		prev=$cur
		n=0
	fi
	sleep %.3[4]f || exit 1
done
`, vip, interval, beats, interval.Seconds())
}

// Runner runs a command on one host; *provision.Client satisfies it. Run must honour ctx (kill
// the command when it is done) and the [provision.WithStdout] option.
type Runner interface {
	Run(ctx context.Context, step, command string, opts ...provision.RunOption) (provision.Result, error)
}

var _ Runner = (*provision.Client)(nil)

// VIPEvent is one observation of a host gaining (Held) or losing the VIP.
type VIPEvent struct {
	Host string `json:"host"`
	Held bool   `json:"held"`
	// At is the local time the line reporting the state arrived: later than the change itself
	// by up to the watch interval, plus the time `ip` takes, plus the SSH one-way latency.
	At time.Time `json:"at"`
}

// VIPWatch is a running watcher of one host; end it with [VIPWatch.Stop].
type VIPWatch struct {
	host   string
	cancel context.CancelFunc
	ready  chan struct{}
	done   chan struct{}

	readyOnce sync.Once

	mu      sync.Mutex
	partial []byte // the line being received
	events  []VIPEvent
	stopped bool
	err     error
}

// WatchVIP starts watching whether host holds vip: it runs [WatchScript] through r (step
// [WatchStep]) in a goroutine until ctx is done or [VIPWatch.Stop] is called, and records an
// event for the initial state and for every change, timestamped on arrival. It returns at once;
// [VIPWatch.Ready] tells when the initial state is known. With a *provision.Client the
// connection must stay open: closing it ends the watcher with an error.
//
// A watcher that ends by itself before Stop (SSH connection lost, ip missing, ctx done) is a
// failure: [VIPWatch.Done] is closed and Stop returns the error.
func WatchVIP(ctx context.Context, host string, r Runner, vip netip.Addr, interval time.Duration) *VIPWatch {
	if !vip.IsValid() {
		return startWatch(ctx, host, func(context.Context, io.Writer) error {
			return errors.New("invalid VIP address")
		})
	}
	script := WatchScript(vip, interval)
	return startWatch(ctx, host, func(ctx context.Context, w io.Writer) error {
		_, err := r.Run(ctx, WatchStep, script, provision.WithStdout(w))
		return err
	})
}

// startWatch runs run(ctx, w) in a goroutine, parsing the lines it writes to w.
func startWatch(ctx context.Context, host string, run func(context.Context, io.Writer) error) *VIPWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &VIPWatch{host: host, cancel: cancel, ready: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer w.markReady()
		err := run(ctx, lineWriter{w})
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.stopped {
			return
		}
		if err == nil {
			err = errors.New("exited before it was stopped")
		}
		w.err = fmt.Errorf("vip watch on %s: %w", host, err)
	}()
	return w
}

func (w *VIPWatch) markReady() { w.readyOnce.Do(func() { close(w.ready) }) }

// lineWriter receives the watcher's stdout.
type lineWriter struct{ w *VIPWatch }

func (lw lineWriter) Write(p []byte) (int, error) {
	now := time.Now()
	w := lw.w
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		line := strings.TrimSpace(string(w.partial[:i]))
		w.partial = w.partial[i+1:]
		var held bool
		switch line {
		case "vip 1":
			held = true
		case "vip 0":
		default:
			continue // not ours
		}
		if n := len(w.events); n == 0 || w.events[n-1].Held != held {
			w.events = append(w.events, VIPEvent{Host: w.host, Held: held, At: now})
		}
		w.markReady()
	}
	if len(w.partial) > 4096 { // no newline in sight: not a line of ours
		w.partial = w.partial[:0]
	}
	return len(p), nil
}

// Host returns the host name given to WatchVIP.
func (w *VIPWatch) Host() string { return w.host }

// Ready is closed when the first state line has arrived, or when the watcher has ended (see
// Done). Wait for it on every host before injecting the fault.
func (w *VIPWatch) Ready() <-chan struct{} { return w.ready }

// Done is closed when the watcher has ended: stopped, or failed (see Err).
func (w *VIPWatch) Done() <-chan struct{} { return w.done }

// Err returns the watcher's failure: nil while it runs and after a clean Stop.
func (w *VIPWatch) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Events returns a copy of the events recorded so far, oldest first (one per change of state;
// the keep-alive restatements are not events).
func (w *VIPWatch) Events() []VIPEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.events)
}

// Stop cancels the watcher (the remote script is killed), waits for it to end, and returns its
// events, oldest first. The error is non-nil if the watcher failed before Stop; it wraps the
// runner's error (a *provision.CommandError with a *provision.Client). Stop may be called more
// than once.
func (w *VIPWatch) Stop() ([]VIPEvent, error) {
	w.mu.Lock()
	select {
	case <-w.done:
	default:
		w.stopped = true
	}
	w.mu.Unlock()
	w.cancel()
	<-w.done
	return w.Events(), w.Err()
}

// Merge returns the events of all watches so far, ordered by At.
func Merge(watches ...*VIPWatch) []VIPEvent {
	var all []VIPEvent
	for _, w := range watches {
		all = append(all, w.Events()...)
	}
	sortEvents(all)
	return all
}

func sortEvents(events []VIPEvent) {
	slices.SortStableFunc(events, func(a, b VIPEvent) int { return a.At.Compare(b.At) })
}

// Holders returns, sorted, the hosts holding the VIP at time at according to events (of any
// number of hosts, in any order): those whose latest event at or before at has Held set (of two
// events of one host with the same At, the later in events counts, as [VIPWatch.Events] orders
// lines received together). A host with no event by then does not count. Two holders mean a moment of split brain, which VRRP
// allows while a new master's first advertisement is on its way (RFC 5798 §6.4.3).
func Holders(events []VIPEvent, at time.Time) []string {
	last := map[string]VIPEvent{}
	for _, e := range events {
		if e.At.After(at) {
			continue
		}
		if cur, ok := last[e.Host]; !ok || !e.At.Before(cur.At) {
			last[e.Host] = e
		}
	}
	var hosts []string
	for h, e := range last {
		if e.Held {
			hosts = append(hosts, h)
		}
	}
	slices.Sort(hosts)
	return hosts
}

// FirstMove returns the first host other than from to hold the VIP after t0, and when it got
// it, according to events (of any number of hosts, in any order). If another host already holds
// it at t0 (see [Holders]), that host is returned with the time of its event, at or before t0 —
// the move preceded the fault, which a drill should treat as a bad baseline. ok is false if no
// other host holds the VIP at any time from t0 on. Whether from released the VIP is not
// considered.
func FirstMove(events []VIPEvent, from string, t0 time.Time) (to string, at time.Time, ok bool) {
	sorted := slices.Clone(events)
	sortEvents(sorted)
	held := map[string]int{} // hosts holding the VIP at t0: index of their latest Held event
	for i, e := range sorted {
		if e.At.After(t0) {
			break
		}
		if e.Held {
			held[e.Host] = i
		} else {
			delete(held, e.Host)
		}
	}
	first := -1
	for h, i := range held {
		if h != from && (first < 0 || i < first) {
			first = i
		}
	}
	if first >= 0 {
		return sorted[first].Host, sorted[first].At, true
	}
	for _, e := range sorted {
		if e.At.After(t0) && e.Held && e.Host != from {
			return e.Host, e.At, true
		}
	}
	return "", time.Time{}, false
}

// watchPoll is how often WaitMove looks at the events. The time it returns comes from the
// events, so polling does not make it less precise.
const watchPoll = 5 * time.Millisecond

// WaitMove waits until [FirstMove] over the events of watches finds a host other than from
// holding the VIP after t0, and returns it. It returns an error wrapping ctx's cause when ctx
// is done first, and the watcher's error when one of watches fails first (the move could go
// unseen). It does not stop the watches.
func WaitMove(ctx context.Context, watches []*VIPWatch, from string, t0 time.Time) (to string, at time.Time, err error) {
	tick := time.NewTicker(watchPoll)
	defer tick.Stop()
	for {
		if to, at, ok := FirstMove(Merge(watches...), from, t0); ok {
			return to, at, nil
		}
		for _, w := range watches {
			select {
			case <-w.Done():
				if err := w.Err(); err != nil {
					return "", time.Time{}, err
				}
				return "", time.Time{}, fmt.Errorf("vip watch on %s stopped before the VIP moved", w.Host())
			default:
			}
		}
		select {
		case <-ctx.Done():
			return "", time.Time{}, fmt.Errorf("waiting for the VIP to leave %s: %w", from, context.Cause(ctx))
		case <-tick.C:
		}
	}
}
