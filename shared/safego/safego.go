// Package safego starts goroutines that cannot take the process down: a panic is recovered,
// logged with its stack, and reported to an optional callback. Every goroutine Oikos starts
// goes through Go so that no background failure ends a daemon.
package safego

import (
	"fmt"
	"runtime/debug"

	"github.com/rs/zerolog"
)

// Go runs fn on a new goroutine and recovers a panic in it. name says in the log which
// goroutine failed.
func Go(log zerolog.Logger, name string, fn func()) {
	go func() {
		defer Recover(log, name)
		fn()
	}()
}

// Recover is deferred at the top of a goroutine that is not started with Go. It logs a panic
// with its stack instead of letting it end the process.
func Recover(log zerolog.Logger, name string) {
	if r := recover(); r != nil {
		log.Error().Str("goroutine", name).Str("panic", fmt.Sprint(r)).Bytes("stack", debug.Stack()).
			Msg("recovered panic")
	}
}

// PanicError is a recovered panic reported as an error.
type PanicError struct {
	Goroutine string // the name the goroutine was started with
	Value     any    // what it panicked with
	Stack     []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("goroutine %s panicked: %v", e.Goroutine, e.Value)
}

// RecoverReport is Recover that also hands the panic, as a *PanicError, to report (when
// non-nil), for a goroutine whose owner must learn that it failed. Defer it directly.
func RecoverReport(log zerolog.Logger, name string, report func(error)) {
	if r := recover(); r != nil {
		stack := debug.Stack()
		log.Error().Str("goroutine", name).Str("panic", fmt.Sprint(r)).Bytes("stack", stack).
			Msg("recovered panic")
		if report != nil {
			report(&PanicError{Goroutine: name, Value: r, Stack: stack})
		}
	}
}

// Call runs fn and converts a panic into an error, for work whose caller must learn that it
// failed (a check run, a tool call).
func Call(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	return fn()
}
