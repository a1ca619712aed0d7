package remote

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"mvdan.cc/sh/v3/syntax"
)

// probeShellCommand is the exec request that starts a probe shell: the login
// shell replaces itself with a plain POSIX sh (dash on Debian and Proxmox,
// bash in POSIX mode on macOS), which then reads commands from its stdin.
const probeShellCommand = "exec /bin/sh"

// nonceBytes is the size of the random delimiter of one probe command (128
// bits; the command cannot see it, so it cannot print it, but a guess must
// not be possible either).
const nonceBytes = 16

// shellGoneWait bounds how long a failed call waits for the shell's exit
// status once its output ended, to name it in the error.
const shellGoneWait = 2 * time.Second

// errNotSent means the command line could not be written: the shell was
// already gone, so the command never ran and may be retried on a new shell.
var errNotSent = errors.New("probe shell closed before the command was sent")

// Probe runs command on a resolved target like Exec — t.Wrap applied, qm guest
// exec's JSON decoded for VMs, MaxOutputBytes caps, the same Result and errors
// — but as one line of a long-lived shell on the target's pooled connection
// instead of a session of its own, so the target starts no process for it
// beyond what the command itself runs (sshd forks and execs the login shell
// for every session; on a small machine that is most of a check's cost).
//
// It is meant for the scheduler's read-only probes: the shell is shared by
// the commands that run on it one after another, so a command must not
// change the shell's state (cd, variables, set, traps, exec redirections), and
// a command that makes the shell exit (exit, exec, set -e with a failure)
// gets an error wrapping ErrProbeShell and costs a new shell. A command that
// mvdan.cc/sh/v3/syntax cannot parse as POSIX shell, or that uses bash's $'…'
// quoting, is refused before anything is sent (ErrInvalidCommand): a POSIX sh
// aborts on a syntax error, and would read $'…' differently. When ctx ends,
// the output so far is returned with an error wrapping ctx.Err(), and the
// shell is sent SIGKILL (best effort) and closed, never reused; its process
// group is killed through a session of its own (OpenSSH ignores the signal
// for a root login).
func (p *Pool) Probe(ctx context.Context, t Target, command string) (Result, error) {
	return p.execVia(ctx, t, command, nil, "probe", p.probeRun)
}

// probeShell is one long-lived `sh` session. Its requests are served by a
// pool goroutine; dead is closed when the channel has closed.
type probeShell struct {
	ch   ssh.Channel
	dead chan struct{}
	pid  int // the shell's process id on the target, the leader of its process group

	mu       sync.Mutex
	exitCode int // -1 until the server reports an exit status
	signal   string

	closeOnce sync.Once
}

// close kills (best effort) and closes the shell's session.
func (s *probeShell) close(kill bool) {
	s.closeOnce.Do(func() {
		if kill {
			// Best effort: OpenSSH ignores "signal" for root logins (the
			// session runs in its privileged monitor) and before 8.1; the
			// closed channel then ends the shell when it next writes.
			_, _ = s.ch.SendRequest("signal", false, ssh.Marshal(struct{ Signal string }{"KILL"}))
		}
		_ = s.ch.Close()
	})
}

// describeEnd says how the shell ended, as far as the server told.
func (s *probeShell) describeEnd() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.signal != "":
		return "killed by signal " + s.signal
	case s.exitCode >= 0:
		return "exit status " + strconv.Itoa(s.exitCode)
	}
	return "no exit status"
}

// probeRun runs an already wrapped command on a probe shell of t.Addr's
// connection. It is Pool.run's counterpart and has the same contract.
func (p *Pool) probeRun(ctx context.Context, t Target, command string, out io.Writer, limit int) (Result, error) {
	start := time.Now()
	if t.Addr == "" {
		return Result{}, fmt.Errorf("probe on %s: target has no address (not resolved?)", t.Slug)
	}
	if err := checkProbeCommand(command); err != nil {
		return Result{}, fmt.Errorf("probe on %s: %w", t.Slug, err)
	}
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("probe on %s: not started: %w", t.Slug, err)
	}
	user := t.User
	if user == "" {
		user = "root"
	}
	key := connKey{addr: t.Addr, user: user}
	capt := newCapture(out, limit)
	finish := func(code int, runErr error) (Result, error) {
		res, sinkErr := capt.finish()
		res.ExitCode = code
		res.Duration = time.Since(start)
		if runErr != nil {
			runErr = fmt.Errorf("probe on %s (%s): %w", t.Slug, t.Addr, runErr)
		}
		if sinkErr != nil {
			runErr = errors.Join(runErr, fmt.Errorf("stream output of %s: %w", t.Slug, sinkErr))
		}
		return res, runErr
	}

	// As in run: one retry, and only when the command provably never
	// started (the pooled connection or an idle shell had died meanwhile).
	retried := false
	for {
		c, err := p.getConn(ctx, key)
		if err != nil {
			return finish(0, err)
		}
		select {
		case c.shellSlots <- struct{}{}:
		case <-c.gone:
			if !retried {
				retried = true
				continue
			}
			return finish(0, errors.New("connection lost while waiting for a probe shell"))
		case <-ctx.Done():
			return finish(0, fmt.Errorf("waiting for a free probe shell: %w", ctx.Err()))
		}
		sh, fresh, err := p.takeShell(ctx, c)
		if err != nil {
			<-c.shellSlots
			var oce *ssh.OpenChannelError
			switch {
			case errors.Is(err, ErrPoolClosed), ctx.Err() != nil, errors.As(err, &oce), errors.Is(err, ErrProbeShell):
				// Closed, cancelled, or the server is alive and said no (or its
				// shell did not start as it should).
				return finish(0, err)
			}
			p.drop(c, "open probe shell: "+err.Error())
			if !retried {
				retried = true
				continue
			}
			return finish(0, err)
		}
		code, reusable, err := p.probeOn(ctx, c, sh, command, capt)
		if reusable {
			c.idleShells <- sh // never blocks: it holds at most shellSlots shells
		} else {
			sh.close(false)
		}
		<-c.shellSlots
		if errors.Is(err, errNotSent) && !fresh && !retried && ctx.Err() == nil {
			retried = true
			continue
		}
		return finish(code, err)
	}
}

// takeShell returns an idle live shell of c or starts a new one; fresh says
// which. The caller holds one of c's shell slots.
func (p *Pool) takeShell(ctx context.Context, c *conn) (*probeShell, bool, error) {
	for {
		select {
		case sh := <-c.idleShells:
			if isClosed(sh.dead) {
				sh.close(false)
				continue
			}
			return sh, false, nil
		default:
		}
		sh, err := p.openShell(ctx, c)
		return sh, true, err
	}
}

// openShell starts a probe shell on c.
func (p *Pool) openShell(ctx context.Context, c *conn) (*probeShell, error) {
	ch, reqs, err := c.client.OpenChannel("session", nil)
	if err != nil {
		return nil, fmt.Errorf("open probe shell session: %w", err)
	}
	sh := &probeShell{ch: ch, dead: make(chan struct{}), exitCode: -1}
	if !p.goTracked("ssh-probe-shell-requests", func() { sh.serveRequests(reqs) }) {
		_ = ch.Close()
		return nil, ErrPoolClosed
	}
	// The exec request has no context of its own; closing the channel ends
	// the wait if the server never answers.
	stop := context.AfterFunc(ctx, func() { _ = ch.Close() })
	ok, err := ch.SendRequest("exec", true, ssh.Marshal(struct{ Command string }{probeShellCommand}))
	stop()
	switch {
	case ctx.Err() != nil:
		sh.close(false)
		return nil, fmt.Errorf("start probe shell: %w", ctx.Err())
	case err != nil:
		sh.close(false)
		return nil, fmt.Errorf("start probe shell: %w", err)
	case !ok:
		sh.close(false)
		// Not a transport failure: the server refused, so keep the connection.
		return nil, &ssh.OpenChannelError{Reason: ssh.Prohibited, Message: "server refused to start " + probeShellCommand}
	}
	// The shell's pid, to kill its process group if a command must be stopped.
	// Its last line: anything a login script printed comes before it.
	capt := newCapture(nil, 4<<10)
	code, reusable, err := p.probeOn(ctx, c, sh, "echo $$", capt)
	res, _ := capt.finish()
	lines := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n")
	pid, perr := strconv.Atoi(strings.TrimSpace(lines[len(lines)-1]))
	switch {
	case err != nil:
		sh.close(false)
		return nil, fmt.Errorf("start probe shell: %w", err)
	case code != 0 || !reusable || perr != nil:
		sh.close(false)
		return nil, fmt.Errorf("%w: the new shell answered `echo $$` with %q (exit %d)", ErrProbeShell, res.Stdout, code)
	}
	sh.pid = pid
	return sh, nil
}

// serveRequests records the shell's exit status and closes dead when the
// channel is gone. The requests must be read or the connection stalls.
func (s *probeShell) serveRequests(reqs <-chan *ssh.Request) {
	defer close(s.dead)
	for r := range reqs {
		switch r.Type {
		case "exit-status":
			var st struct{ Status uint32 }
			if ssh.Unmarshal(r.Payload, &st) == nil {
				s.mu.Lock()
				s.exitCode = int(st.Status)
				s.mu.Unlock()
			}
		case "exit-signal":
			var sig struct{ Signal string }
			if ssh.Unmarshal(r.Payload, &sig) == nil {
				s.mu.Lock()
				s.signal = sig.Signal
				s.mu.Unlock()
			}
		}
		if r.WantReply {
			_ = r.Reply(false, nil)
		}
	}
}

// probeOutcome is what one stream reader of a probe command found.
type probeOutcome struct {
	code  int  // the command's exit status (stdout only)
	extra bool // bytes after the trailer: the stream is out of step
	err   error
}

// probeOn sends one framed command to sh and reads its output and status.
// reusable says whether sh is still in step and may run the next command.
func (p *Pool) probeOn(ctx context.Context, c *conn, sh *probeShell, command string, capt *capture) (code int, reusable bool, err error) {
	nonce, err := newNonce()
	if err != nil {
		return 0, true, err
	}
	line := frameCommand(command, nonce)
	outDone := make(chan probeOutcome, 1)
	errDone := make(chan probeOutcome, 1)
	outR := newStreamReader(sh.ch, "\n"+nonce+" ", true, capt.stdoutWriter())
	errR := newStreamReader(sh.ch.Stderr(), "\n"+nonce+"\n", false, capt.stderrWriter())
	if !p.goTracked("ssh-probe-stdout", func() {
		o := probeOutcome{err: errors.New("probe stdout reader panicked")}
		defer func() { outDone <- o }()
		if _, werr := sh.ch.Write(line); werr != nil {
			o = probeOutcome{err: fmt.Errorf("%w: %w", errNotSent, werr)}
			return
		}
		o.code, o.extra, o.err = outR.read()
	}) {
		return 0, false, ErrPoolClosed
	}
	if !p.goTracked("ssh-probe-stderr", func() {
		o := probeOutcome{err: errors.New("probe stderr reader panicked")}
		defer func() { errDone <- o }()
		_, o.extra, o.err = errR.read()
	}) {
		sh.close(true)
		<-outDone
		return 0, false, ErrPoolClosed
	}

	began := time.Now()
	var outRes, errRes probeOutcome
	gotOut, gotErr := false, false
	for !gotOut || !gotErr {
		select {
		case outRes = <-outDone:
			gotOut = true
			stopIfOutOfStep(sh, outRes.err)
		case errRes = <-errDone:
			gotErr = true
			stopIfOutOfStep(sh, errRes.err)
		case <-ctx.Done():
			// Timed out or cancelled: stop the command, keep what arrived.
			elapsed := time.Since(began).Round(time.Millisecond)
			sh.close(true)
			killed := p.killGroup(c, sh)
			if !awaitReaders(outDone, errDone, &gotOut, &gotErr, sessionCloseGrace) {
				// Return what arrived; the readers end once the kill has run, or
				// the connection is wedged.
				outR.flush()
				errR.flush()
				p.reapLater(c, outDone, errDone, gotOut, gotErr, killed)
			}
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return 0, false, fmt.Errorf("command timed out after %s (output so far kept): %w", elapsed, ctx.Err())
			}
			return 0, false, fmt.Errorf("command cancelled after %s (output so far kept): %w", elapsed, ctx.Err())
		}
	}
	switch {
	case errors.Is(outRes.err, errNotSent):
		return 0, false, outRes.err
	case outRes.err != nil:
		return 0, false, p.shellFailure(ctx, c, sh, "stdout", outRes.err)
	case errRes.err != nil:
		return 0, false, p.shellFailure(ctx, c, sh, "stderr", errRes.err)
	}
	return outRes.code, !outRes.extra && !errRes.extra, nil
}

// stopIfOutOfStep closes a shell whose stream broke the framing, so the other
// stream's reader stops waiting for a trailer that will not come. At the end
// of a stream (the shell exited) it leaves the channel to the server, which
// sends the exit status before closing it: closing first would lose it.
func stopIfOutOfStep(sh *probeShell, err error) {
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		sh.close(false)
	}
}

// awaitReaders waits up to d for the stream readers not yet done and reports
// whether both are.
func awaitReaders(outDone, errDone <-chan probeOutcome, gotOut, gotErr *bool, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for !*gotOut || !*gotErr {
		select {
		case <-outDone:
			*gotOut = true
		case <-errDone:
			*gotErr = true
		case <-timer.C:
			return false
		}
	}
	return true
}

// reapLater waits in the background for the readers of a cancelled probe's
// shell. Once the kill has run (or could not), they get a grace period; if
// the channel still has not closed, the connection is presumed wedged and
// dropped, which ends them.
func (p *Pool) reapLater(c *conn, outDone, errDone <-chan probeOutcome, gotOut, gotErr bool, killed <-chan struct{}) {
	p.goTracked("ssh-probe-reap", func() {
		select {
		case <-killed:
		case <-c.gone:
			return
		}
		if !awaitReaders(outDone, errDone, &gotOut, &gotErr, sessionCloseGrace) {
			p.drop(c, "probe shell did not close after its command was cancelled")
		}
	})
}

// killGroup kills a cancelled probe's shell and everything it started, in the
// background through a session of its own, and closes the returned channel
// when that is done. OpenSSH ignores the signal request for a root login and
// keeps the channel open until the shell's output closes, so without this a
// command that keeps running would hold the shell and its session (and, after
// the grace period, cost the whole connection, with the executor's sessions on
// it). sshd makes each session's process a session and process group leader,
// and `exec /bin/sh` keeps that process, so the group is the shell and
// whatever it runs.
func (p *Pool) killGroup(c *conn, sh *probeShell) <-chan struct{} {
	done := make(chan struct{})
	if sh.pid <= 1 {
		close(done)
		return done
	}
	t := Target{Slug: "probe shell of " + c.key.addr, Addr: c.key.addr, User: c.key.user}
	cmd := fmt.Sprintf("kill -9 -%d 2>/dev/null || kill -9 %d", sh.pid, sh.pid)
	if !p.goTracked("ssh-probe-kill", func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(p.ctx, p.opts.DialTimeout)
		defer cancel()
		if _, err := p.run(ctx, t, cmd, nil, 4<<10); err != nil {
			p.log.Debug().Err(err).Str("addr", c.key.addr).Int("pid", sh.pid).Msg("could not kill a cancelled probe shell")
		}
	}) {
		close(done)
	}
	return done
}

// shellFailure explains a shell that ended or broke the framing.
func (p *Pool) shellFailure(ctx context.Context, c *conn, sh *probeShell, stream string, err error) error {
	if isClosed(c.gone) {
		return fmt.Errorf("%w: connection lost before the command's status was reported: %w", ErrProbeShell, err)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		// The exit status, if any, arrives just before the channel closes.
		wait := time.NewTimer(shellGoneWait)
		defer wait.Stop()
		select {
		case <-sh.dead:
		case <-ctx.Done():
		case <-wait.C:
		}
		return fmt.Errorf("%w: the shell ended before the command's status was reported (%s; did the command exit the shell?)",
			ErrProbeShell, sh.describeEnd())
	}
	return fmt.Errorf("%w: reading %s: %w", ErrProbeShell, stream, err)
}

// newNonce returns a fresh random delimiter, hex encoded.
func newNonce() (string, error) {
	var b [nonceBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("probe nonce: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// frameCommand builds the line sent to the probe shell. The command travels
// as one single-quoted word (every byte but the quote itself is literal in
// single quotes, newlines included), so nothing in it can end the line early
// or be read as a second command: eval parses it only once the line is
// complete. Its stdin is /dev/null so it can never read the lines that follow
// it. The trailer prints, on stdout, a newline, the nonce and the status, and
// on stderr a newline and the nonce; the leading newlines let the reader find
// the nonce at a line start even after output with no final newline, and are
// stripped again (exactly one each).
func frameCommand(command, nonce string) []byte {
	var b bytes.Buffer
	b.Grow(len(command) + 2*len(nonce) + 96)
	b.WriteString("{ eval ")
	b.WriteString(singleQuote(command))
	b.WriteString(" </dev/null; }; printf '\\n%s %d\\n' ")
	b.WriteString(nonce)
	b.WriteString(` "$?"; printf '\n%s\n' `)
	b.WriteString(nonce)
	b.WriteString(" >&2\n")
	return b.Bytes()
}

// singleQuote quotes s as one POSIX shell word: single quotes keep every byte
// literally, and a quote inside is closed, escaped and reopened.
func singleQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// checkProbeCommand refuses what the probe shell must not be sent: a NUL
// byte (no shell word can carry it), a command a POSIX shell cannot parse (a
// non-interactive sh exits on a syntax error in eval), and bash's $'…' / $"…"
// quoting, which a POSIX sh reads as a literal $ before a quoted string — the
// host-hop's QuoteArg writes $'…' for commands with control characters.
func checkProbeCommand(command string) error {
	if strings.IndexByte(command, 0) >= 0 {
		return fmt.Errorf("%w: command contains a NUL byte", ErrInvalidCommand)
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangPOSIX)).Parse(strings.NewReader(command), "")
	if err != nil {
		return fmt.Errorf("%w: not a POSIX shell command: %w", ErrInvalidCommand, err)
	}
	var bad string
	syntax.Walk(f, func(n syntax.Node) bool {
		w, ok := n.(*syntax.Word)
		if !ok || bad != "" {
			return bad == ""
		}
		for i := 0; i+1 < len(w.Parts); i++ {
			lit, ok := w.Parts[i].(*syntax.Lit)
			if !ok || !strings.HasSuffix(lit.Value, "$") || strings.HasSuffix(lit.Value, `\$`) {
				continue
			}
			switch w.Parts[i+1].(type) {
			case *syntax.SglQuoted, *syntax.DblQuoted:
				bad = lit.Value
			}
		}
		return true
	})
	if bad != "" {
		return fmt.Errorf("%w: bash $'…' or $\"…\" quoting, which the probe shell (POSIX sh) does not read the same way", ErrInvalidCommand)
	}
	return nil
}

// readBufs recycles the read buffers of the probe readers.
var readBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// streamReader reads one stream of a probe command up to its trailer: with
// status, the marker, the decimal exit status and a newline; without, just the
// marker (which ends in the newline). Output before the marker is passed to w
// as it arrives, except the last len(marker)-1 bytes, held back until it is
// clear they do not start the marker. flush hands the held bytes over and
// detaches the reader from w, for a cancelled command whose reader cannot be
// waited for.
type streamReader struct {
	r      io.Reader
	marker []byte
	status bool

	mu       sync.Mutex
	w        io.Writer
	held     []byte
	detached bool
}

func newStreamReader(r io.Reader, marker string, status bool, w io.Writer) *streamReader {
	return &streamReader{r: r, marker: []byte(marker), status: status, w: w}
}

// emit passes out to w and remembers hold as the held-back tail.
func (s *streamReader) emit(out, hold []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.detached {
		return
	}
	if len(out) > 0 {
		_, _ = s.w.Write(out)
	}
	s.held = append(s.held[:0], hold...)
}

// flush writes the held-back tail and stops all further writes.
func (s *streamReader) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.detached && len(s.held) > 0 {
		_, _ = s.w.Write(s.held)
	}
	s.detached = true
}

// read consumes the stream up to the end of the trailer. extra reports bytes
// after it (the stream is out of step). On a read error before the trailer,
// the held-back bytes are passed on and the error returned (io.EOF as
// io.ErrUnexpectedEOF).
func (s *streamReader) read() (code int, extra bool, err error) {
	bp := readBufs.Get().(*[]byte)
	defer readBufs.Put(bp)
	buf := *bp
	m := s.marker
	var pending []byte
	for {
		n, rerr := s.r.Read(buf)
		pending = append(pending, buf[:n]...)
		if i := bytes.Index(pending, m); i >= 0 {
			s.emit(pending[:i], nil)
			pending = pending[i+len(m):]
			break
		}
		cut := max(len(pending)-(len(m)-1), 0)
		s.emit(pending[:cut], pending[cut:])
		pending = append(pending[:0], pending[cut:]...)
		if rerr != nil {
			s.emit(pending, nil)
			return 0, false, eofIsUnexpected(rerr)
		}
	}
	if !s.status {
		return 0, len(pending) > 0, nil
	}
	for {
		if i := bytes.IndexByte(pending, '\n'); i >= 0 {
			v, perr := strconv.Atoi(string(pending[:i]))
			if perr != nil || v < 0 || v > 255 {
				return 0, false, fmt.Errorf("malformed status %q after the delimiter", pending[:i])
			}
			return v, len(pending) > i+1, nil
		}
		if len(pending) > len("255") {
			return 0, false, fmt.Errorf("malformed status %q after the delimiter", pending)
		}
		n, rerr := s.r.Read(buf)
		pending = append(pending, buf[:n]...)
		if rerr != nil && bytes.IndexByte(pending, '\n') < 0 {
			return 0, false, eofIsUnexpected(rerr)
		}
	}
}

// readTrailer reads r with a streamReader (see there).
func readTrailer(r io.Reader, marker string, status bool, w io.Writer) (code int, extra bool, err error) {
	return newStreamReader(r, marker, status, w).read()
}

// eofIsUnexpected turns a clean end of stream before the trailer into
// io.ErrUnexpectedEOF.
func eofIsUnexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
