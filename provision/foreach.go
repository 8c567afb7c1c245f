package provision

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/hashicorp/go-multierror"
)

// HostError attributes an error to one host (or, generally, one item of a
// [ForEach]).
type HostError struct {
	Host string
	Err  error
}

// Error returns "<host>: <err>", without repeating the host when err's
// message already starts with "host <host>:" (as provision's errors do).
func (e *HostError) Error() string {
	msg := "<nil>"
	if e.Err != nil {
		msg = e.Err.Error()
	}
	if strings.HasPrefix(msg, "host "+e.Host+":") || strings.HasPrefix(msg, "host "+e.Host+" ") {
		return msg
	}
	return "host " + e.Host + ": " + msg
}

func (e *HostError) Unwrap() error { return e.Err }

// ForEach calls fn for every item, at most limit at a time (limit <= 0 means
// all at once), and waits for all calls to return. name gives the item's name
// (the host name) for errors.
//
// Each non-nil error from fn is wrapped in a [*HostError] with the item's
// name. Once ctx is done no further item is started; each item not started
// gets a *HostError wrapping the context's error. The result is nil or a
// *multierror.Error holding the *HostErrors in item order; errors.Is and
// errors.As see through it to every error.
func ForEach[T any](ctx context.Context, items []T, limit int, name func(T) string, fn func(context.Context, T) error) error {
	if limit <= 0 || limit > len(items) {
		limit = len(items)
	}
	errs := make([]error, len(items))
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i, item := range items {
		started := false
		if ctx.Err() == nil {
			select {
			case sem <- struct{}{}:
				// A slot may free up at the same moment ctx is done:
				// cancellation wins.
				if ctx.Err() != nil {
					<-sem
				} else {
					started = true
				}
			case <-ctx.Done():
			}
		}
		if !started {
			errs[i] = &HostError{Host: name(item), Err: fmt.Errorf("not started: %w", context.Cause(ctx))}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(ctx, item); err != nil {
				errs[i] = &HostError{Host: name(item), Err: err}
			}
		}()
	}
	wg.Wait()
	var result *multierror.Error
	for _, err := range errs {
		if err != nil {
			result = multierror.Append(result, err)
		}
	}
	return result.ErrorOrNil()
}
