package remote

import (
	"io"
	"sync"
	"time"
)

// DefaultMaxOutputBytes caps the stdout and stderr kept in a Result (each).
// Streaming to the caller's writer is not capped; only what is held in memory.
const DefaultMaxOutputBytes = 1 << 20

// Result is the outcome of one command. ExitCode is the command's own status
// (for VMs the guest command's, read from qm's JSON, never qm's own 0).
type Result struct {
	ExitCode        int
	Stdout          []byte
	Stderr          []byte
	StdoutTruncated bool // more stdout arrived than the cap kept
	StderrTruncated bool // more stderr arrived than the cap kept
	Duration        time.Duration
}

// capture collects a session's stdout and stderr, each capped, and forwards
// every chunk to the caller's writer as it arrives. The SSH library copies
// stdout and stderr from two goroutines, so one mutex serialises both into
// the single writer. After close, late chunks (from a session that would not
// die after a timeout) are dropped so nothing writes to the caller's writer
// once Run has returned.
type capture struct {
	mu     sync.Mutex
	out    io.Writer
	outErr error
	closed bool
	limit  int
	stdout cappedBuf
	stderr cappedBuf
}

type cappedBuf struct {
	buf       []byte
	truncated bool
}

func newCapture(out io.Writer, limit int) *capture {
	return &capture{out: out, limit: limit}
}

func (c *capture) write(b *cappedBuf, p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return len(p), nil
	}
	room := c.limit - len(b.buf)
	switch {
	case room >= len(p):
		b.buf = append(b.buf, p...)
	default:
		if room > 0 {
			b.buf = append(b.buf, p[:room]...)
		}
		b.truncated = true
	}
	// A failing sink must not kill the command (the caller may only be
	// logging), but it must not be silent either: the first error is kept
	// and returned by Run, and streaming stops.
	if c.out != nil && c.outErr == nil {
		var err error
		if se, ok := c.out.(StderrWriter); ok && b == &c.stderr {
			_, err = se.WriteStderr(p)
		} else {
			_, err = c.out.Write(p)
		}
		if err != nil {
			c.outErr = err
		}
	}
	return len(p), nil
}

// result snapshots what was captured so far and stops all further writes.
func (c *capture) finish() (Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return Result{
		Stdout:          append([]byte(nil), c.stdout.buf...),
		Stderr:          append([]byte(nil), c.stderr.buf...),
		StdoutTruncated: c.stdout.truncated,
		StderrTruncated: c.stderr.truncated,
	}, c.outErr
}

// StderrWriter is an output sink that keeps the streams apart: when the out given to Run,
// Exec or Probe implements it, stderr chunks go to WriteStderr and only stdout chunks to
// Write (the executor's log stores each chunk under its stream). Any other io.Writer gets
// both, interleaved as they arrive.
type StderrWriter interface {
	io.Writer
	WriteStderr(p []byte) (int, error)
}

type streamWriter struct {
	c *capture
	b *cappedBuf
}

// Write captures p and forwards it to the caller's writer.
func (w streamWriter) Write(p []byte) (int, error) { return w.c.write(w.b, p) }

func (c *capture) stdoutWriter() io.Writer { return streamWriter{c, &c.stdout} }
func (c *capture) stderrWriter() io.Writer { return streamWriter{c, &c.stderr} }

// capBytes trims b to limit and reports whether it had to.
func capBytes(b []byte, limit int) ([]byte, bool) {
	if len(b) <= limit {
		return b, false
	}
	return b[:limit], true
}
