package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/storage"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/safego"
)

// Log streams.
const (
	streamOutput = "stdout" // the command's standard output
	streamError  = "stderr" // the command's standard error (remote.StderrWriter)
	streamSystem = "system" // what the executor itself says about the run
)

// maxPending bounds output held in memory while the database refuses writes; beyond it the
// oldest unstored bytes are dropped and the loss is said in the log.
const maxPending = 8 << 20

type chunk struct {
	stream string
	data   []byte
}

// sink receives a run's output as it arrives and stores it in execution_logs in batches (a
// row per FlushEvery or FlushBytes, whichever comes first), each announced with NOTIFY
// oikos_exec_log, so a tail sees a running command's output and a timed-out or killed
// command leaves what it printed. It also keeps the tail of the output for
// executions.output. Writes never block on the database.
type sink struct {
	db         *storage.Store
	id         string
	every      time.Duration
	flushBytes int
	limit      int
	log        zerolog.Logger
	ctx        context.Context // outlives the run's deadline: partial output must still be stored
	red        *outRedactor    // nil stores output as it came (tests of the sink alone)

	mu      sync.Mutex
	pending []chunk
	size    int
	armed   bool
	dropped int
	tail    []byte
	total   int64
	closed  bool

	flushMu sync.Mutex // one flush at a time, so seq order is row order
	seq     int

	kick chan struct{}
	done chan struct{}
	wg   sync.WaitGroup
}

func newSink(ctx context.Context, db *storage.Pool, id string, every time.Duration, flushBytes, limit int, red *outRedactor, log zerolog.Logger) *sink {
	s := &sink{
		db: storage.New(db), id: id, every: every, flushBytes: flushBytes, limit: limit, log: log, ctx: ctx, red: red,
		kick: make(chan struct{}, 1), done: make(chan struct{}),
	}
	s.wg.Add(1)
	safego.Go(log, "execution-log-flusher", func() {
		defer s.wg.Done()
		for {
			select {
			case <-s.done:
				return
			case <-s.kick:
			}
			s.flush()
		}
	})
	return s
}

// Write takes a chunk of the command's standard output.
func (s *sink) Write(p []byte) (int, error) { return s.output(streamOutput, p) }

// WriteStderr takes a chunk of the command's standard error (remote.StderrWriter): it is
// logged under its own stream, and is part of the output tail like stdout, as the operator
// saw it interleaved.
func (s *sink) WriteStderr(p []byte) (int, error) { return s.output(streamError, p) }

func (s *sink) output(stream string, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return len(p), nil
	}
	n := len(p)
	if s.red != nil {
		p = s.red.take(stream, p)
	}
	s.keep(stream, p)
	return n, nil
}

// keep adds redacted output to the tail and the pending chunks. Called with mu held.
func (s *sink) keep(stream string, p []byte) {
	if len(p) == 0 {
		return
	}
	s.total += int64(len(p))
	s.tail = append(s.tail, p...)
	if len(s.tail) > 2*s.limit {
		s.tail = append([]byte(nil), s.tail[len(s.tail)-s.limit:]...)
	}
	s.enqueue(stream, p)
}

// EndOutput stores the output held back for redaction (a last line with no line break) and
// says in the log what was redacted, if anything. Called once the command has ended, before
// the executor's own last words; Close calls it too.
func (s *sink) EndOutput() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endOutputLocked()
}

func (s *sink) endOutputLocked() {
	if s.closed || s.red == nil {
		return
	}
	s.keep(streamOutput, s.red.rest(streamOutput))
	s.keep(streamError, s.red.rest(streamError))
	if note := s.red.note(); note != "" {
		s.enqueue(streamSystem, []byte("[oikos] redacted from the output: "+note+"\n"))
		s.red.found = map[string]int{}
	}
}

// System records a line the executor itself writes into the log (never into output).
func (s *sink) System(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	msg := fmt.Sprintf(format, args...)
	if s.red != nil {
		// The executor's words may quote the command's output (an error, a parse failure).
		msg, _ = s.red.r.String(msg)
	}
	s.enqueue(streamSystem, []byte("[oikos] "+msg+"\n"))
}

// enqueue appends to the pending chunks (merging with the last one of the same stream) and
// schedules a flush. Called with mu held.
func (s *sink) enqueue(stream string, p []byte) {
	if n := len(s.pending); n > 0 && s.pending[n-1].stream == stream {
		s.pending[n-1].data = append(s.pending[n-1].data, p...)
	} else {
		s.pending = append(s.pending, chunk{stream: stream, data: append([]byte(nil), p...)})
	}
	s.size += len(p)
	for s.size > maxPending && len(s.pending) > 1 {
		s.size -= len(s.pending[0].data)
		s.dropped += len(s.pending[0].data)
		s.pending = s.pending[1:]
	}
	switch {
	case s.size >= s.flushBytes:
		s.poke()
	case !s.armed:
		s.armed = true
		time.AfterFunc(s.every, s.poke)
	}
}

func (s *sink) poke() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// flush stores the pending chunks as execution_logs rows and NOTIFYs once, all in one
// implicit transaction. On failure the chunks go back to the front of the queue.
func (s *sink) flush() {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.mu.Lock()
	chunks, dropped := s.pending, s.dropped
	s.pending, s.size, s.armed, s.dropped = nil, 0, false, 0
	s.mu.Unlock()
	if dropped > 0 {
		chunks = append([]chunk{{stream: streamSystem,
			data: fmt.Appendf(nil, "[oikos] %d bytes of output could not be stored (database unavailable)\n", dropped)}}, chunks...)
	}
	if len(chunks) == 0 {
		return
	}
	rows := make([]storage.LogChunk, 0, len(chunks))
	seq := s.seq
	for _, c := range chunks {
		seq++
		rows = append(rows, storage.LogChunk{Seq: seq, Stream: c.stream, Data: c.data})
	}
	note, err := json.Marshal(struct {
		ExecutionID string `json:"execution_id"`
		Seq         int    `json:"seq"`
	}{s.id, seq})
	if err == nil {
		ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
		err = s.db.WriteExecutionLogs(ctx, s.id, rows, eventbus.ChannelExecLog, string(note))
		cancel()
	}
	if err != nil {
		s.mu.Lock()
		s.pending = append(chunks, s.pending...)
		for _, c := range chunks {
			s.size += len(c.data)
		}
		closed := s.closed
		s.mu.Unlock()
		s.log.Error().Err(err).Str("execution_id", s.id).Msg("store output chunk; will retry")
		if !closed {
			time.AfterFunc(s.every*4, s.poke)
		}
		return
	}
	s.seq = seq
}

// Close stops accepting output, stores what is pending (a few attempts) and returns the
// output tail for executions.output and whether it was cut.
func (s *sink) Close() (tail []byte, truncated bool) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return s.tailLocked()
	}
	s.endOutputLocked()
	s.closed = true
	s.mu.Unlock()
	close(s.done)
	s.wg.Wait()
	for attempt := 0; attempt < 3; attempt++ {
		s.flush()
		s.mu.Lock()
		left := len(s.pending)
		s.mu.Unlock()
		if left == 0 || s.ctx.Err() != nil {
			break
		}
		select {
		case <-s.ctx.Done():
		case <-time.After(time.Duration(attempt+1) * time.Second):
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) > 0 {
		s.log.Error().Str("execution_id", s.id).Msg("output chunks could not be stored; executions.output keeps the tail")
	}
	return s.tailLocked()
}

func (s *sink) tailLocked() ([]byte, bool) {
	t := s.tail
	if len(t) > s.limit {
		t = t[len(t)-s.limit:]
	}
	return append([]byte(nil), t...), s.total > int64(len(t))
}
