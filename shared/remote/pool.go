package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/crypto/ssh"

	"github.com/oikos-hq/oikos/shared/safego"
)

// Pool defaults.
const (
	DefaultDialTimeout        = 10 * time.Second
	DefaultKeepAlive          = 30 * time.Second
	DefaultMaxSessionsPerConn = 8
	// DefaultProbeShellsPerConn is how many long-lived probe shells (see Probe) a
	// connection keeps. With DefaultMaxSessionsPerConn they make OpenSSH's default
	// MaxSessions of 10.
	DefaultProbeShellsPerConn = 2
)

// sessionCloseGrace is how long a cancelled command's session gets to close
// before its connection is presumed wedged and dropped.
const sessionCloseGrace = 2 * time.Second

// PoolOptions configures a Pool. Zero values mean the documented defaults.
type PoolOptions struct {
	Signer   ssh.Signer   // client key; required
	HostKeys HostKeyStore // pinned host keys; required
	// Dial opens the TCP connection; nil uses a net.Dialer. Tests and the
	// lab simulator substitute their own.
	Dial               func(ctx context.Context, network, addr string) (net.Conn, error)
	DialTimeout        time.Duration // TCP connect plus SSH handshake; default 10s
	KeepAlive          time.Duration // keepalive interval; default 30s
	Logger             zerolog.Logger
	MaxSessionsPerConn int // concurrent sessions per connection; default 8 (OpenSSH allows 10)
	MaxOutputBytes     int // stdout and stderr kept per Result, each; default 1 MiB
	// ProbeShellsPerConn is how many probe shells (each one more session on the
	// connection, outside MaxSessionsPerConn) run Probe commands per connection;
	// default 2.
	ProbeShellsPerConn int
}

// Pool holds one SSH connection per (address, user) and runs many sessions
// on it. Connections are dialled on demand, kept alive with
// keepalive@openssh.com, and dropped when a keepalive fails or the server
// closes them, so the next command reconnects. Safe for concurrent use.
type Pool struct {
	opts   PoolOptions
	log    zerolog.Logger
	ctx    context.Context // cancelled by Close; aborts dials in flight
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool
	conns  map[connKey]*conn
	dials  map[string]int
	// retiring holds the connections Retire took out of conns until they close.
	retiring map[*conn]struct{}

	onDrop func(addr, reason string) // test hook, called after a connection is dropped
}

type connKey struct{ addr, user string }

// conn is one pooled connection. ready is closed (under Pool.mu) once the
// dial finished, after client or err is set.
type conn struct {
	key      connKey
	ready    chan struct{}
	client   *ssh.Client
	err      error
	slots    chan struct{}
	gone     chan struct{} // closed when the connection is dropped
	dropOnce sync.Once

	// shellSlots bounds the probe shells in use; idleShells holds the live
	// ones not in use. A shell is in at most one of the two at a time.
	shellSlots chan struct{}
	idleShells chan *probeShell
}

// NewPool builds a Pool. Nothing is dialled until the first command.
func NewPool(opts PoolOptions) *Pool {
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = DefaultDialTimeout
	}
	if opts.KeepAlive <= 0 {
		opts.KeepAlive = DefaultKeepAlive
	}
	if opts.MaxSessionsPerConn <= 0 {
		opts.MaxSessionsPerConn = DefaultMaxSessionsPerConn
	}
	if opts.MaxOutputBytes <= 0 {
		opts.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if opts.ProbeShellsPerConn <= 0 {
		opts.ProbeShellsPerConn = DefaultProbeShellsPerConn
	}
	if opts.Dial == nil {
		d := &net.Dialer{}
		opts.Dial = d.DialContext
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Pool{
		opts:   opts,
		log:    opts.Logger.With().Str("component", "ssh-pool").Logger(),
		ctx:    ctx,
		cancel: cancel,
		conns:  map[connKey]*conn{},
		dials:  map[string]int{},

		retiring: map[*conn]struct{}{},
	}
}

// Close drops every connection and waits for the pool's goroutines. Commands
// in flight fail. Safe to call more than once.
func (p *Pool) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	var live []*conn
	for _, c := range p.all() {
		if isClosed(c.ready) && c.err == nil {
			live = append(live, c)
		}
	}
	p.mu.Unlock()
	// Dials still in flight see the cancelled context (or p.closed) and
	// clean up after themselves.
	p.cancel()
	for _, c := range live {
		p.drop(c, "pool closed")
	}
	p.wg.Wait()
}

// OpenConnections is the number of established connections, retiring ones included.
func (p *Pool) OpenConnections() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.all() {
		if isClosed(c.ready) && c.err == nil {
			n++
		}
	}
	return n
}

// DialCount is how many times addr has been dialled (attempts, successful
// or not) since the pool was created.
func (p *Pool) DialCount(addr string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dials[addr]
}

// goTracked starts fn as a pool goroutine, recovered and waited for by
// Close. It refuses once the pool is closed, so Close's Wait never races a
// new Add.
func (p *Pool) goTracked(label string, fn func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer safego.Recover(p.log, label)
		fn()
	}()
	return true
}

// Run runs command verbatim on t.Addr as t.User (no host-hop wrapping; see
// Exec). stdout and stderr chunks are written to out as they arrive (stderr to
// WriteStderr when out is a StderrWriter). When ctx
// ends first, the output received so far is returned with an error wrapping
// ctx.Err() — output is never thrown away. A non-zero exit is not an error:
// it is Result.ExitCode.
func (p *Pool) Run(ctx context.Context, t Target, command string, out io.Writer) (Result, error) {
	return p.run(ctx, t, command, out, p.opts.MaxOutputBytes)
}

func (p *Pool) run(ctx context.Context, t Target, command string, out io.Writer, limit int) (Result, error) {
	start := time.Now()
	if t.Addr == "" {
		return Result{}, fmt.Errorf("run on %s: target has no address (not resolved?)", t.Slug)
	}
	if strings.IndexByte(command, 0) >= 0 {
		return Result{}, fmt.Errorf("run on %s: %w: command contains a NUL byte", t.Slug, ErrInvalidCommand)
	}
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("run on %s: not started: %w", t.Slug, err)
	}
	user := t.User
	if user == "" {
		user = "root"
	}
	key := connKey{addr: t.Addr, user: user}
	capt := newCapture(out, limit)
	finish := func(runErr error) (Result, error) {
		res, sinkErr := capt.finish()
		res.Duration = time.Since(start)
		if sinkErr != nil {
			runErr = errors.Join(runErr, fmt.Errorf("stream output of %s: %w", t.Slug, sinkErr))
		}
		return res, runErr
	}

	// One retry, and only when the command provably never started: a
	// connection that died since it was pooled fails NewSession.
	for attempt := 0; ; attempt++ {
		c, err := p.getConn(ctx, key)
		if err != nil {
			return finish(fmt.Errorf("run on %s (%s): %w", t.Slug, t.Addr, err))
		}
		select {
		case c.slots <- struct{}{}:
		case <-c.gone:
			if attempt == 0 {
				continue
			}
			return finish(fmt.Errorf("run on %s (%s): connection lost while waiting for a session", t.Slug, t.Addr))
		case <-ctx.Done():
			return finish(fmt.Errorf("run on %s (%s): waiting for a free session: %w", t.Slug, t.Addr, ctx.Err()))
		}
		sess, err := c.client.NewSession()
		if err != nil {
			<-c.slots
			var oce *ssh.OpenChannelError
			if errors.As(err, &oce) {
				// The server is alive and said no (e.g. its MaxSessions).
				return finish(fmt.Errorf("run on %s (%s): open session: %w", t.Slug, t.Addr, err))
			}
			p.drop(c, "open session: "+err.Error())
			if attempt == 0 {
				continue
			}
			return finish(fmt.Errorf("run on %s (%s): open session: %w", t.Slug, t.Addr, err))
		}
		code, runErr := p.runSession(ctx, c, sess, command, capt)
		<-c.slots
		if runErr != nil {
			runErr = fmt.Errorf("run on %s (%s): %w", t.Slug, t.Addr, runErr)
		}
		res, err := finish(runErr)
		res.ExitCode = code
		return res, err
	}
}

// runSession starts command and waits for it or for ctx, returning the
// command's exit code.
func (p *Pool) runSession(ctx context.Context, c *conn, sess *ssh.Session, command string, capt *capture) (int, error) {
	sess.Stdout = capt.stdoutWriter()
	sess.Stderr = capt.stderrWriter()
	if err := sess.Start(command); err != nil {
		_ = sess.Close()
		return 0, fmt.Errorf("start command: %w", err)
	}
	began := time.Now()
	done := make(chan error, 1)
	started := p.goTracked("ssh-session-wait", func() {
		// If Wait panics, the recover in goTracked logs it; the deferred send
		// makes sure the select below is unblocked instead of waiting out
		// the whole timeout.
		err := errors.New("session wait panicked")
		defer func() { done <- err }()
		err = sess.Wait()
	})
	if !started {
		_ = sess.Close()
		return 0, ErrPoolClosed
	}
	select {
	case err := <-done:
		_ = sess.Close()
		return exitCode(err)
	case <-ctx.Done():
	}
	// Timed out or cancelled: stop the command, keep what arrived.
	_ = sess.Signal(ssh.SIGKILL)
	_ = sess.Close()
	grace := time.NewTimer(sessionCloseGrace)
	defer grace.Stop()
	select {
	case <-done:
	case <-grace.C:
		p.drop(c, "session did not close after its command was cancelled")
	}
	elapsed := time.Since(began).Round(time.Millisecond)
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return 0, fmt.Errorf("command timed out after %s (output so far kept): %w", elapsed, ctx.Err())
	}
	return 0, fmt.Errorf("command cancelled after %s (output so far kept): %w", elapsed, ctx.Err())
}

// exitCode maps a session's Wait error: an exit status is a result, not an
// error; a missing exit status is an error (the command's fate is unknown).
func exitCode(err error) (int, error) {
	if err == nil {
		return 0, nil
	}
	var ee *ssh.ExitError
	if errors.As(err, &ee) {
		return ee.ExitStatus(), nil
	}
	var missing *ssh.ExitMissingError
	if errors.As(err, &missing) {
		return 0, fmt.Errorf("command ended without reporting an exit status (connection lost or killed?): %w", err)
	}
	return 0, fmt.Errorf("command: %w", err)
}

// getConn returns the pooled connection for key, dialling it if needed.
// Concurrent callers share one dial.
func (p *Pool) getConn(ctx context.Context, key connKey) (*conn, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrPoolClosed
	}
	c := p.conns[key]
	if c == nil {
		c = &conn{
			key:        key,
			ready:      make(chan struct{}),
			slots:      make(chan struct{}, p.opts.MaxSessionsPerConn),
			gone:       make(chan struct{}),
			shellSlots: make(chan struct{}, p.opts.ProbeShellsPerConn),
			idleShells: make(chan *probeShell, p.opts.ProbeShellsPerConn),
		}
		p.conns[key] = c
		p.dials[key.addr]++
		p.wg.Add(1)
		go p.dial(c)
	}
	p.mu.Unlock()
	select {
	case <-c.ready:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for ssh connection: %w", ctx.Err())
	}
	if c.err != nil {
		return nil, c.err
	}
	return c, nil
}

// dial connects c. The dial is shared by every caller waiting on c, so it
// runs under the pool's context with the dial timeout, not under the first
// caller's context.
func (p *Pool) dial(c *conn) {
	defer p.wg.Done()
	var (
		client *ssh.Client
		err    error
	)
	defer func() {
		if r := recover(); r != nil {
			p.log.Error().Interface("panic", r).Str("addr", c.key.addr).Msg("recovered panic while dialling")
			client, err = nil, fmt.Errorf("dial %s: internal error: %v", c.key.addr, r)
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if err == nil && p.closed {
			_ = client.Close()
			client, err = nil, ErrPoolClosed
		}
		if err != nil {
			c.err = err
			if p.conns[c.key] == c {
				delete(p.conns, c.key)
			}
			close(c.ready)
			return
		}
		c.client = client
		close(c.ready)
		// Started under p.mu while not closed, so Close has not begun
		// waiting; wg.Add directly rather than via goTracked (which locks).
		p.wg.Add(2)
		go p.watch(c)
		go p.keepalive(c)
	}()
	ctx, cancel := context.WithTimeout(p.ctx, p.opts.DialTimeout)
	defer cancel()
	client, err = p.connect(ctx, c.key)
	if err != nil {
		p.log.Warn().Err(err).Str("addr", c.key.addr).Msg("ssh dial failed")
	}
}

func (p *Pool) connect(ctx context.Context, key connKey) (*ssh.Client, error) {
	if p.opts.Signer == nil {
		return nil, errors.New("ssh pool has no client key (Signer)")
	}
	if p.opts.HostKeys == nil {
		return nil, errors.New("ssh pool has no host key store; refusing to connect unverified")
	}
	raw, err := p.opts.Dial(ctx, "tcp", key.addr)
	if err != nil {
		if p.ctx.Err() != nil {
			return nil, ErrPoolClosed
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w: dial %s: no TCP connection within %s: %w", ErrUnreachable, key.addr, p.opts.DialTimeout, err)
		}
		return nil, fmt.Errorf("%w: dial %s: %w", ErrUnreachable, key.addr, err)
	}
	// The SSH handshake has no context: bound it with a deadline on the
	// socket, and close the socket if the pool closes meanwhile.
	if dl, ok := ctx.Deadline(); ok {
		_ = raw.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = raw.Close() })

	var (
		hkMu       sync.Mutex
		hostKeyErr error
	)
	cfg := &ssh.ClientConfig{
		User: key.user,
		Auth: []ssh.AuthMethod{ssh.PublicKeys(p.opts.Signer)},
		// Called again on every re-key for the connection's whole life, so
		// it uses the pool's context, not the dial's.
		HostKeyCallback: func(_ string, _ net.Addr, pub ssh.PublicKey) error {
			cbCtx, cancel := context.WithTimeout(p.ctx, p.opts.DialTimeout)
			defer cancel()
			err := verifyHostKey(cbCtx, p.opts.HostKeys, key.addr, pub, p.log)
			hkMu.Lock()
			hostKeyErr = err
			hkMu.Unlock()
			return err
		},
	}
	cc, chans, reqs, err := ssh.NewClientConn(raw, key.addr, cfg)
	hkMu.Lock()
	hkErr := hostKeyErr
	hkMu.Unlock()
	if !stop() {
		// The context ended during or right after the handshake; the
		// socket is (being) closed.
		if err == nil {
			_ = cc.Close()
			err = ctx.Err()
		}
	}
	if err != nil {
		_ = raw.Close()
		switch {
		case hkErr != nil:
			return nil, hkErr
		case p.ctx.Err() != nil:
			return nil, ErrPoolClosed
		case ctx.Err() != nil || isTimeout(err):
			return nil, fmt.Errorf("%w: ssh handshake with %s did not complete within %s (is it an SSH server?): %w",
				ErrUnreachable, key.addr, p.opts.DialTimeout, err)
		case strings.Contains(err.Error(), "unable to authenticate"):
			// x/crypto/ssh has no typed error for this.
			return nil, fmt.Errorf("%w: %s as %s: %w", ErrAuthFailed, key.addr, key.user, err)
		default:
			return nil, fmt.Errorf("%w: ssh handshake with %s: %w", ErrUnreachable, key.addr, err)
		}
	}
	_ = raw.SetDeadline(time.Time{})
	p.log.Debug().Str("addr", key.addr).Str("user", key.user).Msg("ssh connection established")
	return ssh.NewClient(cc, chans, reqs), nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// watch drops c as soon as the server closes the connection, so the next
// command dials afresh instead of failing on a dead client.
func (p *Pool) watch(c *conn) {
	defer p.wg.Done()
	defer func() {
		if r := recover(); r != nil {
			p.log.Error().Interface("panic", r).Msg("recovered panic in ssh connection watcher")
		}
	}()
	err := c.client.Wait()
	reason := "connection closed"
	if err != nil {
		reason = "connection closed: " + err.Error()
	}
	p.drop(c, reason)
}

// keepalive pings the server every KeepAlive; a failed or unanswered ping
// drops the connection (a half-open TCP connection otherwise looks alive
// until a command hangs on it).
func (p *Pool) keepalive(c *conn) {
	defer p.wg.Done()
	defer func() {
		if r := recover(); r != nil {
			p.log.Error().Interface("panic", r).Msg("recovered panic in ssh keepalive")
		}
	}()
	tick := time.NewTicker(p.opts.KeepAlive)
	defer tick.Stop()
	for {
		select {
		case <-c.gone:
			return
		case <-p.ctx.Done():
			return
		case <-tick.C:
		}
		if err := p.ping(c); err != nil {
			p.drop(c, "keepalive failed: "+err.Error())
			return
		}
	}
}

func (p *Pool) ping(c *conn) error {
	res := make(chan error, 1)
	started := p.goTracked("ssh-keepalive-request", func() {
		err := errors.New("keepalive request panicked")
		defer func() { res <- err }()
		// OpenSSH answers this with a failure reply; any reply proves the
		// connection is alive, so only a transport error counts.
		_, _, err = c.client.SendRequest("keepalive@openssh.com", true, nil)
	})
	if !started {
		return nil
	}
	timer := time.NewTimer(p.opts.KeepAlive)
	defer timer.Stop()
	select {
	case err := <-res:
		return err
	case <-timer.C:
		return fmt.Errorf("no reply within %s", p.opts.KeepAlive)
	case <-c.gone:
		return nil
	}
}

// drop removes c from the pool and closes it. Idempotent.
func (p *Pool) drop(c *conn, reason string) {
	c.dropOnce.Do(func() {
		p.mu.Lock()
		if p.conns[c.key] == c {
			delete(p.conns, c.key)
		}
		delete(p.retiring, c)
		hook := p.onDrop
		p.mu.Unlock()
		close(c.gone)
		if c.client != nil {
			_ = c.client.Close()
		}
		p.log.Info().Str("addr", c.key.addr).Str("reason", reason).Msg("ssh connection dropped")
		if hook != nil {
			hook(c.key.addr, reason)
		}
	})
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Exec runs command on a resolved target: it wraps the command for the hop
// (t.Wrap), runs it on t.Addr as t.User in a session of its own and, for VMs,
// decodes qm guest exec's JSON so the Result carries the guest command's own
// exit code and output. qm prints nothing until the guest command ends, so
// for VMs out receives the decoded stdout and stderr at the end rather than
// streamed.
func (p *Pool) Exec(ctx context.Context, t Target, command string, out io.Writer) (Result, error) {
	return p.execVia(ctx, t, command, out, "exec", p.run)
}

// runner runs an already wrapped command on t.Addr: Pool.run (a session per
// command) or Pool.probeRun (a line on a probe shell).
type runner func(ctx context.Context, t Target, command string, out io.Writer, limit int) (Result, error)

// execVia is Exec's contract over either way of running the wrapped command.
func (p *Pool) execVia(ctx context.Context, t Target, command string, out io.Writer, verb string, run runner) (Result, error) {
	if t.Wrap == nil {
		return Result{}, fmt.Errorf("%s on %s: target has no Wrap (not resolved?)", verb, t.Slug)
	}
	wrapped, err := t.Wrap(command)
	if err != nil {
		return Result{}, fmt.Errorf("%s on %s: %w", verb, t.Slug, err)
	}
	if t.Kind != KindVM {
		return run(ctx, t, wrapped, out, p.opts.MaxOutputBytes)
	}
	// JSON escaping can grow output up to six-fold (\u00XX); keep enough of
	// the raw answer to decode a capped result.
	raw, err := run(ctx, t, wrapped, nil, 6*p.opts.MaxOutputBytes+64<<10)
	if err != nil {
		return raw, err
	}
	if raw.ExitCode != 0 {
		return raw, guestExecFailure(t, raw)
	}
	if raw.StdoutTruncated {
		return raw, fmt.Errorf("%s on %s: %w: answer larger than %d bytes", verb, t.Slug, ErrGuestExec, len(raw.Stdout))
	}
	res, err := ParseGuestExec(raw.Stdout)
	res.Duration = raw.Duration
	if err != nil {
		return raw, fmt.Errorf("%s on %s: %w", verb, t.Slug, err)
	}
	var outTrunc, errTrunc bool
	res.Stdout, outTrunc = capBytes(res.Stdout, p.opts.MaxOutputBytes)
	res.Stderr, errTrunc = capBytes(res.Stderr, p.opts.MaxOutputBytes)
	res.StdoutTruncated = res.StdoutTruncated || outTrunc
	res.StderrTruncated = res.StderrTruncated || errTrunc
	if out != nil {
		for _, b := range [][]byte{res.Stdout, res.Stderr} {
			if len(b) == 0 {
				continue
			}
			if _, werr := out.Write(b); werr != nil {
				return res, fmt.Errorf("%s on %s: stream output: %w", verb, t.Slug, werr)
			}
		}
	}
	return res, nil
}

// guestExecFailure explains a non-zero exit of qm itself (not of the guest
// command), recognising the guest-agent refusals Proxmox prints.
func guestExecFailure(t Target, raw Result) error {
	msg := strings.TrimSpace(string(raw.Stderr))
	if msg == "" {
		msg = strings.TrimSpace(string(raw.Stdout))
	}
	sentinel := ErrGuestExec
	if bytes.Contains(raw.Stderr, []byte("QEMU guest agent is not running")) ||
		bytes.Contains(raw.Stderr, []byte("No QEMU guest agent configured")) {
		sentinel = ErrNoGuestAgent
	}
	return fmt.Errorf("exec on %s: %w: qm exited %d: %s", t.Slug, sentinel, raw.ExitCode, msg)
}

// Retire hands the connections to addr over: they take no new command (the next one to
// addr dials afresh) and close as soon as the commands and probes in flight on them end. The
// scheduler retires a host's connection when the host passes to another scheduler, which
// holds its one connection from then on; a long execution still running here keeps the old
// one until it ends.
func (p *Pool) Retire(addr string) {
	p.mu.Lock()
	var out []*conn
	for k, c := range p.conns {
		if k.addr == addr {
			delete(p.conns, k)
			p.retiring[c] = struct{}{}
			out = append(out, c)
		}
	}
	p.mu.Unlock()
	for _, c := range out {
		if !p.goTracked("ssh-retire", func() { p.closeWhenIdle(c) }) {
			p.drop(c, "pool closed")
		}
	}
}

// closeWhenIdle drops c once no session or probe shell of it is in use.
func (p *Pool) closeWhenIdle(c *conn) {
	select {
	case <-c.ready: // a dial in flight ends first
	case <-p.ctx.Done():
		return
	}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		if claimAll(c.slots) {
			if claimAll(c.shellSlots) {
				// Every slot is ours: a command that picked c up before it was retired
				// waits on one until c is gone, then dials afresh.
				p.drop(c, "handed over to another scheduler")
				return
			}
			releaseAll(c.slots)
		}
		select {
		case <-c.gone:
			return
		case <-p.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// claimAll takes every free slot of sem, and keeps them only if none was in use.
func claimAll(sem chan struct{}) bool {
	for n := 0; n < cap(sem); n++ {
		select {
		case sem <- struct{}{}:
		default:
			for ; n > 0; n-- {
				<-sem
			}
			return false
		}
	}
	return true
}

// releaseAll gives back the slots claimAll took.
func releaseAll(sem chan struct{}) {
	for range cap(sem) {
		<-sem
	}
}

// OpenTo counts the open connections to addr, retiring ones included.
func (p *Pool) OpenTo(addr string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.all() {
		if c.key.addr == addr && isClosed(c.ready) && c.client != nil {
			n++
		}
	}
	return n
}

// all lists the pooled and the retiring connections (under p.mu).
func (p *Pool) all() []*conn {
	out := make([]*conn, 0, len(p.conns)+len(p.retiring))
	for _, c := range p.conns {
		out = append(out, c)
	}
	for c := range p.retiring {
		out = append(out, c)
	}
	return out
}
