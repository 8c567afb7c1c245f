package provision

import (
	"context"
	"errors"
	"sync"
)

// Conn is a host's connection as a Pool keeps it: commands run on it and it closes. *Client is
// one; tests keep fakes.
type Conn interface {
	Runner
	Close() error
}

// Pool keeps one connection per host name, dialled on first use (Client) and kept until Forget or
// Close: the SSH side of one run of bootstrap, of a drill, of one heal of the operator. It is safe
// for concurrent use; two first uses of the same host at once both dial and the later connection is
// closed. The zero Pool is not usable: build it with NewPool or NewPoolFunc.
type Pool[C Conn] struct {
	dial  func(ctx context.Context, t Target) (C, error)
	mu    sync.Mutex
	conns map[string]C
}

// NewPool returns a pool whose connections d dials (Dialer.Dial). Closing the pool does not close
// d.
func NewPool(d *Dialer) *Pool[*Client] { return NewPoolFunc(d.Dial) }

// NewPoolFunc returns a pool whose connections dial opens, e.g. with the Dialer chosen at first use
// or with Dial's one-off configuration. dial's errors are returned by Client as they are.
func NewPoolFunc[C Conn](dial func(ctx context.Context, t Target) (C, error)) *Pool[C] {
	return &Pool[C]{dial: dial, conns: map[string]C{}}
}

// Get returns the connection kept for host (no dial); false when there is none.
func (p *Pool[C]) Get(host string) (C, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.conns[host]
	return c, ok
}

// Set keeps c as host's connection (a connection made elsewhere; tests set fakes). A connection it
// replaces is not closed.
func (p *Pool[C]) Set(host string, c C) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns[host] = c
}

// Client returns the connection of t.Name, dialling t when there is none. Errors: the dial's, as
// they are (Dialer.Dial's are prefixed with the host).
func (p *Pool[C]) Client(ctx context.Context, t Target) (C, error) {
	if c, ok := p.Get(t.Name); ok {
		return c, nil
	}
	c, err := p.dial(ctx, t)
	if err != nil {
		var zero C
		return zero, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.conns[t.Name]; ok {
		_ = c.Close() // another first use won
		return old, nil
	}
	p.conns[t.Name] = c
	return c, nil
}

// Forget closes and drops host's connection, if any (the host went down: the next Client dials
// again).
func (p *Pool[C]) Forget(host string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.conns[host]; ok {
		_ = c.Close()
		delete(p.conns, host)
	}
}

// Run runs command on t (Client, then Runner.Run with step and opts). A command that fails because
// the connection died (isDeadConnection) while ctx is still live is run once more on a new
// connection: the host was down and came back. Errors: Client's, or the command's
// (*CommandError).
func (p *Pool[C]) Run(ctx context.Context, t Target, step, command string, opts ...RunOption) (Result, error) {
	for attempt := 0; ; attempt++ {
		c, err := p.Client(ctx, t)
		if err != nil {
			return Result{}, err
		}
		res, err := c.Run(ctx, step, command, opts...)
		if err != nil && attempt == 0 && ctx.Err() == nil && isDeadConnection(err) {
			p.Forget(t.Name)
			continue
		}
		return res, err
	}
}

// Close closes every connection and empties the pool (it can be used again). Errors: the
// connections' Close errors, joined.
func (p *Pool[C]) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for name, c := range p.conns {
		errs = append(errs, c.Close())
		delete(p.conns, name)
	}
	return errors.Join(errs...)
}

// isDeadConnection reports whether err is a command that failed for want of its connection (a
// *CommandError with ExitCode -1: the session could not be opened or started, or the connection
// dropped before an exit status came), as opposed to one that ran and failed.
func isDeadConnection(err error) bool {
	var ce *CommandError
	return errors.As(err, &ce) && ce.ExitCode == -1
}
