package provision_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hactl/hactl/provision"
)

// chunkRecorder is a WithStdout writer that records every chunk and signals
// when its output first contains want.
type chunkRecorder struct {
	want string
	seen chan struct{}

	mu     sync.Mutex
	chunks [][]byte
	buf    bytes.Buffer
	once   sync.Once
}

func newChunkRecorder(want string) *chunkRecorder {
	return &chunkRecorder{want: want, seen: make(chan struct{})}
}

func (r *chunkRecorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.chunks = append(r.chunks, bytes.Clone(p))
	r.buf.Write(p)
	if r.want != "" && strings.Contains(r.buf.String(), r.want) {
		r.once.Do(func() { close(r.seen) })
	}
	return len(p), nil
}

func (r *chunkRecorder) output() (string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.String(), len(r.chunks)
}

func TestRunWithStdoutStreams(t *testing.T) {
	c := newEnv(t).dial()
	w := newChunkRecorder("a\n")
	type ran struct {
		res provision.Result
		err error
	}
	done := make(chan ran, 1)
	go func() {
		res, err := c.Run(ctxTimeout(t, 10*time.Second), "test/stream", "echo a; sleep 0.3; echo b; echo err >&2", provision.WithStdout(w))
		done <- ran{res, err}
	}()
	select {
	case <-w.seen:
	case r := <-done:
		t.Fatalf("Run returned (%v) before its first line reached the writer", r.err)
	case <-time.After(5 * time.Second):
		t.Fatal("first line never reached the writer")
	}
	select {
	case r := <-done:
		t.Fatalf("Run already returned (%v) when the first line arrived: not streamed", r.err)
	default:
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if string(r.res.Stdout) != "a\nb\n" || string(r.res.Stderr) != "err\n" {
		t.Errorf("Result stdout %q stderr %q", r.res.Stdout, r.res.Stderr)
	}
	got, n := w.output()
	if got != "a\nb\n" {
		t.Errorf("writer got %q, want %q (stdout only)", got, "a\nb\n")
	}
	if n < 2 {
		t.Errorf("writer got %d chunks, want at least 2 (one per echo, 0.3 s apart)", n)
	}
}

// failingWriter fails its second call.
type failingWriter struct {
	mu    sync.Mutex
	calls int
}

func (f *failingWriter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.calls > 1 {
		return 0, errors.New("writer broke")
	}
	return len(p), nil
}

func TestRunWithStdoutWriterErrorIgnored(t *testing.T) {
	c := newEnv(t).dial()
	w := &failingWriter{}
	res, err := c.Run(ctxTimeout(t, 10*time.Second), "test/stream", "for i in 1 2 3 4; do echo $i; sleep 0.05; done", provision.WithStdout(w))
	if err != nil {
		t.Fatalf("a failing writer failed the command: %v", err)
	}
	if string(res.Stdout) != "1\n2\n3\n4\n" {
		t.Errorf("Result stdout %q", res.Stdout)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.calls != 2 {
		t.Errorf("writer called %d times, want 2 (not again after its error)", w.calls)
	}
}

func TestRunWithStdoutCancelled(t *testing.T) {
	c := newEnv(t).dial()
	w := newChunkRecorder("tick\ntick\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-w.seen:
		case <-time.After(5 * time.Second):
		}
		cancel()
	}()
	res, err := c.Run(ctx, "test/stream", "while :; do echo tick; sleep 0.01; done", provision.WithStdout(w))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	got, n := w.output()
	if !strings.HasPrefix(got, "tick\ntick\n") || !strings.HasPrefix(string(res.Stdout), got) {
		t.Errorf("writer got %q, Result stdout %q", got, res.Stdout)
	}
	time.Sleep(100 * time.Millisecond)
	if _, n2 := w.output(); n2 != n {
		t.Errorf("writer called %d more times after Run returned", n2-n)
	}
}
