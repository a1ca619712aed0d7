package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// syncBuffer is a concurrency-safe writer that can announce the first time
// its contents contain a given string.
type syncBuffer struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	want   string
	notify chan struct{}
	err    error // returned by Write when set
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return 0, b.err
	}
	b.buf.Write(p)
	if b.notify != nil && strings.Contains(b.buf.String(), b.want) {
		close(b.notify)
		b.notify = nil
	}
	return len(p), nil
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type fixture struct {
	client ssh.Signer
	keys   *MemoryHostKeys
	srv    *testServer
	pool   *Pool
}

func newFixture(t *testing.T, answers map[string]canned, tune func(*PoolOptions)) *fixture {
	t.Helper()
	f := &fixture{client: newSigner(t), keys: NewMemoryHostKeys()}
	f.srv = startServer(t, f.client.PublicKey(), answers)
	opts := PoolOptions{Signer: f.client, HostKeys: f.keys, DialTimeout: 5 * time.Second}
	if tune != nil {
		tune(&opts)
	}
	f.pool = NewPool(opts)
	t.Cleanup(f.pool.Close)
	return f
}

func (f *fixture) target() Target {
	return Target{Slug: "host:test", Addr: f.srv.addr, User: "root", Kind: KindMachine, Wrap: directWrap}
}

func within(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("timed out after %s waiting for %s", d, what)
	}
}

func TestPoolOneConnectionUnderConcurrency(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]canned{"echo hi": {stdout: "hi\n"}}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	const n = 50
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := f.pool.Run(ctx, f.target(), "echo hi", nil)
			switch {
			case err != nil:
				errs <- err
			case string(res.Stdout) != "hi\n" || res.ExitCode != 0:
				errs <- fmt.Errorf("got stdout %q exit %d", res.Stdout, res.ExitCode)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := f.pool.DialCount(f.srv.addr); got != 1 {
		t.Errorf("DialCount = %d, want 1", got)
	}
	accepted, maxActive, cmds := f.srv.stats()
	if accepted != 1 {
		t.Errorf("server accepted %d connections, want 1", accepted)
	}
	if len(cmds) != n {
		t.Errorf("server ran %d commands, want %d", len(cmds), n)
	}
	if maxActive > DefaultMaxSessionsPerConn {
		t.Errorf("server saw %d concurrent sessions, limit is %d", maxActive, DefaultMaxSessionsPerConn)
	}
	if got := f.pool.OpenConnections(); got != 1 {
		t.Errorf("OpenConnections = %d, want 1", got)
	}
}

func TestPoolSessionLimitWaitsAndHonoursContext(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	entered := make(chan struct{}, 10)
	f := newFixture(t, map[string]canned{
		"gate": {stdout: "a", gate: gate, stdoutAfter: "b", entered: entered},
	}, func(o *PoolOptions) { o.MaxSessionsPerConn = 2 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	results := make(chan error, 2)
	for i := 0; i < 2; i++ {
		go func() {
			res, err := f.pool.Run(ctx, f.target(), "gate", nil)
			if err == nil && string(res.Stdout) != "ab" {
				err = fmt.Errorf("stdout %q", res.Stdout)
			}
			results <- err
		}()
	}
	within(t, entered, 5*time.Second, "first session")
	within(t, entered, 5*time.Second, "second session")

	// Both slots are taken: a third caller waits, and gives up with its ctx
	// without ever reaching the server.
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelShort()
	_, err := f.pool.Run(short, f.target(), "gate", nil)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "free session") {
		t.Fatalf("third Run: err = %v, want a deadline while waiting for a free session", err)
	}
	if _, _, cmds := f.srv.stats(); len(cmds) != 2 {
		t.Fatalf("server ran %d commands, want 2 (the third must not start)", len(cmds))
	}
	close(gate)
	for i := 0; i < 2; i++ {
		if err := <-results; err != nil {
			t.Errorf("gated Run: %v", err)
		}
	}
}

func TestPoolReconnectsAfterServerDrop(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]canned{"echo hi": {stdout: "hi\n"}}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	if _, err := f.pool.Run(ctx, f.target(), "echo hi", nil); err != nil {
		t.Fatal(err)
	}
	f.srv.dropAll()
	res, err := f.pool.Run(ctx, f.target(), "echo hi", nil)
	if err != nil {
		t.Fatalf("Run after the server dropped the connection: %v", err)
	}
	if string(res.Stdout) != "hi\n" {
		t.Errorf("stdout %q", res.Stdout)
	}
	if got := f.pool.DialCount(f.srv.addr); got != 2 {
		t.Errorf("DialCount = %d, want 2 (one reconnect)", got)
	}
	if _, err := f.pool.Run(ctx, f.target(), "echo hi", nil); err != nil {
		t.Fatal(err)
	}
	if got := f.pool.DialCount(f.srv.addr); got != 2 {
		t.Errorf("DialCount = %d after a third Run, want 2 (reconnected client reused)", got)
	}
}

func TestPoolKeepaliveKeepsHealthyConnection(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]canned{"echo hi": {stdout: "hi\n"}},
		func(o *PoolOptions) { o.KeepAlive = 20 * time.Millisecond })
	ka := make(chan struct{}, 1)
	f.srv.mu.Lock()
	f.srv.keepalives = ka
	f.srv.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	if _, err := f.pool.Run(ctx, f.target(), "echo hi", nil); err != nil {
		t.Fatal(err)
	}
	// The server answers keepalives with a failure reply, like OpenSSH;
	// that is a live connection and must not be dropped.
	for i := 0; i < 3; i++ {
		within(t, ka, 5*time.Second, "a keepalive")
	}
	if _, err := f.pool.Run(ctx, f.target(), "echo hi", nil); err != nil {
		t.Fatal(err)
	}
	if got := f.pool.DialCount(f.srv.addr); got != 1 {
		t.Errorf("DialCount = %d, want 1", got)
	}
}

func TestPoolKeepaliveDropsUnresponsiveConnection(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]canned{"echo hi": {stdout: "hi\n"}},
		func(o *PoolOptions) { o.KeepAlive = 50 * time.Millisecond })
	dropped := make(chan struct{})
	var once sync.Once
	f.pool.onDrop = func(addr, reason string) {
		if addr == f.srv.addr && strings.Contains(reason, "keepalive") {
			once.Do(func() { close(dropped) })
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	if _, err := f.pool.Run(ctx, f.target(), "echo hi", nil); err != nil {
		t.Fatal(err)
	}
	f.srv.freeze()
	within(t, dropped, 5*time.Second, "the keepalive to drop the frozen connection")
	if got := f.pool.OpenConnections(); got != 0 {
		t.Errorf("OpenConnections = %d after drop, want 0", got)
	}
	f.srv.thaw()
	if _, err := f.pool.Run(ctx, f.target(), "echo hi", nil); err != nil {
		t.Fatalf("Run after keepalive drop: %v", err)
	}
	if got := f.pool.DialCount(f.srv.addr); got != 2 {
		t.Errorf("DialCount = %d, want 2", got)
	}
}

func TestPoolDialTimeoutOnSilentListener(t *testing.T) {
	t.Parallel()
	// Accepts TCP, never speaks SSH.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held <- c
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		for {
			select {
			case c := <-held:
				_ = c.Close()
			default:
				return
			}
		}
	})

	p := NewPool(PoolOptions{Signer: newSigner(t), HostKeys: NewMemoryHostKeys(), DialTimeout: 300 * time.Millisecond})
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	addr := ln.Addr().String()
	start := time.Now()
	_, err = p.Run(ctx, Target{Slug: "host:silent", Addr: addr, User: "root"}, "true", nil)
	elapsed := time.Since(start)
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("err = %v, want ErrUnreachable", err)
	}
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		t.Fatalf("caller's context expired; the dial timeout did not fire: %v", err)
	}
	for _, want := range []string{addr, "handshake", "300ms"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if elapsed > 3*time.Second {
		t.Errorf("failed after %s, want about the 300ms dial timeout", elapsed)
	}
	if p.OpenConnections() != 0 {
		t.Errorf("a failed dial left a pooled connection")
	}
}

func TestPoolRefusedPortIsUnreachable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	p := NewPool(PoolOptions{Signer: newSigner(t), HostKeys: NewMemoryHostKeys(), DialTimeout: 2 * time.Second})
	defer p.Close()
	_, err = p.Run(context.Background(), Target{Slug: "host:down", Addr: addr}, "true", nil)
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), addr) {
		t.Fatalf("err = %v, want ErrUnreachable naming %s", err, addr)
	}
	// A failed dial is not cached: the next call dials again.
	_, _ = p.Run(context.Background(), Target{Slug: "host:down", Addr: addr}, "true", nil)
	if got := p.DialCount(addr); got != 2 {
		t.Errorf("DialCount = %d, want 2", got)
	}
}

func TestPoolCommandTimeoutKeepsPartialOutput(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]canned{
		"partial": {stdout: "line 1\n", stderr: "warn\n", hang: true},
		"echo hi": {stdout: "hi\n"},
	}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	out := &syncBuffer{}
	res, err := f.pool.Run(ctx, f.target(), "partial", out)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	if !strings.Contains(err.Error(), "timed out") {
		t.Errorf("error %q does not say it timed out", err)
	}
	if string(res.Stdout) != "line 1\n" || string(res.Stderr) != "warn\n" {
		t.Errorf("partial output lost: stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	if got := out.String(); !strings.Contains(got, "line 1\n") || !strings.Contains(got, "warn\n") {
		t.Errorf("streamed output %q lacks the partial output", got)
	}
	if res.Duration < 600*time.Millisecond {
		t.Errorf("Duration %s shorter than the time waited", res.Duration)
	}
	// The connection survives a timed-out command.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	if _, err := f.pool.Run(ctx2, f.target(), "echo hi", nil); err != nil {
		t.Fatal(err)
	}
	if got := f.pool.DialCount(f.srv.addr); got != 1 {
		t.Errorf("DialCount = %d, want 1", got)
	}
}

func TestPoolStreamsOutputAsItArrives(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	f := newFixture(t, map[string]canned{
		"stream": {stdout: "line 1\n", gate: gate, stdoutAfter: "line 2\n"},
	}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	first := make(chan struct{})
	out := &syncBuffer{want: "line 1\n", notify: first}
	done := make(chan struct{})
	var res Result
	var err error
	go func() {
		defer close(done)
		res, err = f.pool.Run(ctx, f.target(), "stream", out)
	}()
	// The first line must reach the writer while the command still runs.
	within(t, first, 5*time.Second, "the first line to be streamed before the command ends")
	close(gate)
	within(t, done, 5*time.Second, "the command to finish")
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "line 1\nline 2\n" || out.String() != "line 1\nline 2\n" {
		t.Errorf("stdout %q streamed %q", res.Stdout, out.String())
	}
}

func TestPoolExitCodes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]canned{
		"echo hi": {stdout: "hi\n"},
		"exit3":   {stderr: "boom\n", code: 3},
		"noexit":  {stdout: "x", noExitStatus: true},
	}, nil)
	tests := []struct {
		cmd        string
		wantCode   int
		wantStdout string
		wantStderr string
		wantErr    bool
	}{
		{cmd: "echo hi", wantCode: 0, wantStdout: "hi\n"},
		{cmd: "exit3", wantCode: 3, wantStderr: "boom\n"},
		{cmd: "nope", wantCode: 127, wantStderr: "sh: 1: nope: not found\n"},
		{cmd: "noexit", wantStdout: "x", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.cmd, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			res, err := f.pool.Run(ctx, f.target(), tt.cmd, nil)
			if tt.wantErr {
				var missing *ssh.ExitMissingError
				if !errors.As(err, &missing) {
					t.Fatalf("err = %v, want an ExitMissingError", err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != tt.wantCode || string(res.Stdout) != tt.wantStdout || string(res.Stderr) != tt.wantStderr {
				t.Errorf("got exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
			}
		})
	}
}

func TestPoolOutputCapAndSinkError(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("0123456789", 10)
	f := newFixture(t, map[string]canned{"big": {stdout: big}}, func(o *PoolOptions) { o.MaxOutputBytes = 10 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	out := &syncBuffer{}
	res, err := f.pool.Run(ctx, f.target(), "big", out)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != big[:10] || !res.StdoutTruncated || res.StderrTruncated {
		t.Errorf("stdout %q truncated %v/%v", res.Stdout, res.StdoutTruncated, res.StderrTruncated)
	}
	if out.String() != big {
		t.Errorf("streaming is capped too: got %d bytes", len(out.String()))
	}

	broken := &syncBuffer{err: errors.New("disk full")}
	res, err = f.pool.Run(ctx, f.target(), "big", broken)
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("a failing output sink was silent: err = %v", err)
	}
	if string(res.Stdout) != big[:10] || res.ExitCode != 0 {
		t.Errorf("result lost with a failing sink: %q exit %d", res.Stdout, res.ExitCode)
	}
}

func TestPoolHostKeyTOFU(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]canned{"echo hi": {stdout: "hi\n"}}, nil)
	var signalled []string
	var mu sync.Mutex
	f.keys.OnMismatch = func(_ context.Context, addr, want, got string) {
		mu.Lock()
		defer mu.Unlock()
		signalled = append(signalled, addr+" "+want+" "+got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	if _, err := f.pool.Run(ctx, f.target(), "echo hi", nil); err != nil {
		t.Fatal(err)
	}
	f.srv.mu.Lock()
	original := f.srv.hostKey.PublicKey().Marshal()
	f.srv.mu.Unlock()
	pinned, ok, _ := f.keys.Get(ctx, f.srv.addr)
	if !ok || !bytes.Equal(pinned, original) {
		t.Fatalf("first use did not pin the server's key")
	}

	// Same key again after a reconnect: accepted.
	f.srv.dropAll()
	if _, err := f.pool.Run(ctx, f.target(), "echo hi", nil); err != nil {
		t.Fatalf("reconnect with the pinned key: %v", err)
	}

	// The host now presents another key: refused, signalled, pin unchanged.
	impostor := newSigner(t)
	f.srv.setHostKey(impostor, f.client.PublicKey())
	f.srv.dropAll()
	_, err := f.pool.Run(ctx, f.target(), "echo hi", nil)
	if !errors.Is(err, ErrHostKeyChanged) {
		t.Fatalf("err = %v, want ErrHostKeyChanged", err)
	}
	if errors.Is(err, ErrUnreachable) {
		t.Errorf("a changed key must not look like an outage: %v", err)
	}
	wantFP, gotFP := Fingerprint(original), Fingerprint(impostor.PublicKey().Marshal())
	for _, s := range []string{f.srv.addr, wantFP, gotFP} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not name %q", err, s)
		}
	}
	mm := f.keys.Mismatches()
	if len(mm) != 1 || mm[0].Addr != f.srv.addr || !bytes.Equal(mm[0].Want, original) {
		t.Errorf("Mismatch not reported once with the pinned key: %+v", mm)
	}
	mu.Lock()
	if len(signalled) != 1 || signalled[0] != f.srv.addr+" "+wantFP+" "+gotFP {
		t.Errorf("OnMismatch calls = %q", signalled)
	}
	mu.Unlock()
	if pinned, _, _ := f.keys.Get(ctx, f.srv.addr); !bytes.Equal(pinned, original) {
		t.Errorf("the changed key replaced the pin")
	}
	if f.pool.OpenConnections() != 0 {
		t.Errorf("a refused host left a pooled connection")
	}
}

func TestPoolAuthFailure(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, func(o *PoolOptions) { o.Signer = newSigner(t) }) // not the key the server accepts
	_, err := f.pool.Run(context.Background(), f.target(), "true", nil)
	if !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("err = %v, want ErrAuthFailed", err)
	}
}

func TestPoolCloseAndInvalidInput(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]canned{"echo hi": {stdout: "hi\n"}}, nil)
	ctx := context.Background()
	if _, err := f.pool.Run(ctx, f.target(), "echo\x00hi", nil); !errors.Is(err, ErrInvalidCommand) {
		t.Errorf("NUL byte: err = %v, want ErrInvalidCommand", err)
	}
	if _, err := f.pool.Run(ctx, Target{Slug: "lxc:x"}, "true", nil); err == nil || !strings.Contains(err.Error(), "no address") {
		t.Errorf("empty address: err = %v", err)
	}
	if _, err := f.pool.Run(ctx, f.target(), "echo hi", nil); err != nil {
		t.Fatal(err)
	}
	f.pool.Close()
	f.pool.Close()
	if _, err := f.pool.Run(ctx, f.target(), "echo hi", nil); !errors.Is(err, ErrPoolClosed) {
		t.Errorf("after Close: err = %v, want ErrPoolClosed", err)
	}
	if f.pool.OpenConnections() != 0 {
		t.Errorf("Close left connections open")
	}
}

// Retire takes a host's connection out of the pool at once but closes it only when the
// command running on it ends (its output intact); the next command dials afresh. An idle
// connection closes promptly; an address never dialled is a no-op.
func TestPoolRetireWaitsForWorkInFlight(t *testing.T) {
	t.Parallel()
	gate, entered := make(chan struct{}), make(chan struct{}, 1)
	f := newFixture(t, map[string]canned{
		"long":    {stdout: "begun\n", gate: gate, stdoutAfter: "ended\n", entered: entered},
		"echo hi": {stdout: "hi\n"},
	}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	addr := f.srv.addr
	f.pool.Retire("127.0.0.1:1") // nothing open there
	if _, err := f.pool.Run(ctx, f.target(), "echo hi", nil); err != nil {
		t.Fatal(err)
	}

	done := make(chan struct{})
	var res Result
	var err error
	go func() {
		defer close(done)
		res, err = f.pool.Run(ctx, f.target(), "long", nil)
	}()
	within(t, entered, 5*time.Second, "the long command to start")
	f.pool.Retire(addr)
	time.Sleep(300 * time.Millisecond) // several of the retirer's looks
	if n := f.pool.OpenTo(addr); n != 1 {
		t.Fatalf("%d connections open to %s while a command runs on the retired one, want it kept (1)", n, addr)
	}
	close(gate)
	within(t, done, 5*time.Second, "the long command to finish")
	if err != nil || string(res.Stdout) != "begun\nended\n" {
		t.Fatalf("the command on the retired connection: %q, %v", res.Stdout, err)
	}
	waitClosed := func(what string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for f.pool.OpenTo(addr) != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d connections still open to %s 5 s after %s", f.pool.OpenTo(addr), addr, what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitClosed("its command ended")
	if got := f.pool.DialCount(addr); got != 1 {
		t.Fatalf("DialCount = %d before the next command, want 1", got)
	}

	// The next command dials afresh; retired while idle, that connection closes at once.
	if _, err := f.pool.Run(ctx, f.target(), "echo hi", nil); err != nil {
		t.Fatal(err)
	}
	if got, n := f.pool.DialCount(addr), f.pool.OpenTo(addr); got != 2 || n != 1 {
		t.Fatalf("after the retirement: %d dials, %d open, want 2 and 1", got, n)
	}
	f.pool.Retire(addr)
	waitClosed("an idle connection was retired")
}

// Retire(addr) retires every connection to addr (each user's) and no other address's. An idle
// one closes promptly, on the client and on the server; one with a command running stays open
// until the command ends (its output intact), while the next command to addr already dials
// a new connection beside it, which the retirement leaves in the pool.
func TestPoolRetireDrainsOldConnectionWhileTheNextDialsAfresh(t *testing.T) {
	t.Parallel()
	gate, entered := make(chan struct{}), make(chan struct{}, 1)
	f := newFixture(t, map[string]canned{
		"long":    {stdout: "begun\n", gate: gate, stdoutAfter: "ended\n", entered: entered},
		"echo hi": {stdout: "hi\n"},
	}, nil)
	other := startServer(t, f.client.PublicKey(), map[string]canned{"echo hi": {stdout: "hi\n"}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	addr := f.srv.addr
	root, deploy := f.target(), f.target()
	deploy.User = "deploy"
	elsewhere := Target{Slug: "host:other", Addr: other.addr, User: "root", Kind: KindMachine, Wrap: directWrap}
	run := func(tgt Target, cmd string) {
		t.Helper()
		res, err := f.pool.Run(ctx, tgt, cmd, nil)
		if err != nil || res.ExitCode != 0 || string(res.Stdout) != "hi\n" {
			t.Fatalf("%s as %s on %s: stdout %q exit %d err %v", cmd, tgt.User, tgt.Addr, res.Stdout, res.ExitCode, err)
		}
	}
	serverConns := func(s *testServer) int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.conns)
	}
	eventually := func(d time.Duration, what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(d)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("not within %s: %s (pool: %d open to %s, %d in all; server: %d connections)",
					d, what, f.pool.OpenTo(addr), addr, f.pool.OpenConnections(), serverConns(f.srv))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	f.pool.Retire(addr) // nothing dialled yet
	run(root, "echo hi")
	run(deploy, "echo hi")
	run(elsewhere, "echo hi")
	if n, all := f.pool.OpenTo(addr), f.pool.OpenConnections(); n != 2 || all != 3 {
		t.Fatalf("%d open to %s, %d in all; want 2 (root, deploy) and 3", n, addr, all)
	}

	done := make(chan struct{})
	var res Result
	var err error
	go func() {
		defer close(done)
		res, err = f.pool.Run(ctx, root, "long", nil)
	}()
	within(t, entered, 5*time.Second, "the long command to start")

	// An address with no connection: nothing changes, root's connection still takes commands.
	f.pool.Retire("127.0.0.1:1")
	run(root, "echo hi")
	if d, n, all := f.pool.DialCount(addr), f.pool.OpenTo(addr), f.pool.OpenConnections(); d != 2 || n != 2 || all != 3 {
		t.Fatalf("after retiring an unknown address: %d dials, %d open to %s, %d in all; want 2, 2, 3", d, n, addr, all)
	}

	f.pool.Retire(addr)
	// deploy's connection is idle: it closes, on both ends; root's runs "long" and stays.
	eventually(2*time.Second, "the idle retired connection to close", func() bool {
		if f.pool.OpenTo(addr) == 0 {
			t.Fatalf("the retired connection running a command was closed before the command ended")
		}
		return f.pool.OpenTo(addr) == 1 && serverConns(f.srv) == 1
	})
	time.Sleep(300 * time.Millisecond) // several of the retirer's looks
	if n, all, s := f.pool.OpenTo(addr), f.pool.OpenConnections(), serverConns(f.srv); n != 1 || all != 2 || s != 1 {
		t.Fatalf("while a command runs on the retired connection: %d open to %s, %d in all, server holds %d; want 1, 2, 1", n, addr, all, s)
	}
	select {
	case <-done:
		t.Fatalf("the long command ended before it was released: %q, %v", res.Stdout, err)
	default:
	}

	// The next command does not use the retired connection: it dials one beside it.
	run(root, "echo hi")
	accepted, _, _ := f.srv.stats()
	if d, n := f.pool.DialCount(addr), f.pool.OpenTo(addr); d != 3 || n != 2 || accepted != 3 || serverConns(f.srv) != 2 {
		t.Fatalf("next command during the retirement: %d dials, %d open, server accepted %d and holds %d; want 3, 2, 3, 2",
			d, n, accepted, serverConns(f.srv))
	}

	close(gate)
	within(t, done, 5*time.Second, "the long command to finish")
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != "begun\nended\n" {
		t.Fatalf("the command on the retired connection: stdout %q exit %d err %v", res.Stdout, res.ExitCode, err)
	}
	eventually(3*time.Second, "the retired connection to close once its command ended", func() bool {
		return f.pool.OpenTo(addr) == 1 && serverConns(f.srv) == 1
	})
	// What is left is the new connection, kept in the pool and reused.
	time.Sleep(150 * time.Millisecond)
	run(root, "echo hi")
	accepted, _, _ = f.srv.stats()
	if d, n := f.pool.DialCount(addr), f.pool.OpenTo(addr); d != 3 || n != 1 || accepted != 3 {
		t.Fatalf("after the retired connection closed: %d dials, %d open, server accepted %d; want 3, 1, 3", d, n, accepted)
	}
	// The other address was never touched.
	run(elsewhere, "echo hi")
	otherAccepted, _, _ := other.stats()
	if d, n, all := f.pool.DialCount(other.addr), f.pool.OpenTo(other.addr), f.pool.OpenConnections(); d != 1 || n != 1 || otherAccepted != 1 || all != 2 {
		t.Fatalf("the other address: %d dials, %d open, server accepted %d, %d in all; want 1, 1, 1, 2", d, n, otherAccepted, all)
	}
}
