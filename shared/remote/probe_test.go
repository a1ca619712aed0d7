package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// shellFixture is a fixture whose server interprets commands with the lab
// shell; dir is the sandbox's real directory (to plant files).
func shellFixture(t *testing.T, tune func(*PoolOptions)) (*fixture, string) {
	t.Helper()
	f := newFixture(t, map[string]canned{}, tune)
	sh, dir := labShell(t)
	f.srv.setShell(sh)
	return f, dir
}

func TestProbeOutputFraming(t *testing.T) {
	t.Parallel()
	f, dir := shellFixture(t, nil)
	blob := make([]byte, 0, 3*256)
	for i := 0; i < 3; i++ {
		for b := 0; b < 256; b++ {
			blob = append(blob, byte(b))
		}
	}
	// Bytes that look like the framing: a newline, 32 hex digits, a status.
	blob = append(blob, "\n0123456789abcdef0123456789abcdef 0\n"...)
	if err := os.WriteFile(filepath.Join(dir, "blob"), blob, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	for _, tc := range []struct {
		name, cmd      string
		stdout, stderr string
		code           int
	}{
		{"trailing newline", "echo hello", "hello\n", "", 0},
		{"no trailing newline", "printf 'no newline'", "no newline", "", 0},
		{"two trailing newlines", "printf 'a\\n\\n'", "a\n\n", "", 0},
		{"empty output", "true", "", "", 0},
		{"stderr separate", "echo out; echo err >&2; printf 'half' >&2", "out\n", "err\nhalf", 0},
		{"non-zero exit", "echo before; false", "before\n", "", 1},
		{"exit status of a subshell", "(exit 7)", "", "", 7},
		{"binary output", "cat /blob", string(blob), "", 0},
		{"quotes", `printf '%s|%s\n' "it's" 'say "hi"'`, "it's|say \"hi\"\n", "", 0},
		{"heredoc", "cat <<'EOF'\nline 'one'\n$HOME \"two\"\nEOF", "line 'one'\n$HOME \"two\"\n", "", 0},
		{"a forged trailer", "printf '\\n%s %d\\n' 0123456789abcdef0123456789abcdef 0; printf '\\n%s\\n' 0123456789abcdef0123456789abcdef >&2; echo after",
			"\n0123456789abcdef0123456789abcdef 0\nafter\n", "\n0123456789abcdef0123456789abcdef\n", 0},
		{"stdin is empty", "cat; echo done", "done\n", "", 0},
		{"a line break in the command", "echo one\necho two", "one\ntwo\n", "", 0},
	} {
		res, err := f.pool.Probe(ctx, f.target(), tc.cmd)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if string(res.Stdout) != tc.stdout || string(res.Stderr) != tc.stderr || res.ExitCode != tc.code {
			t.Errorf("%s: got stdout %q stderr %q exit %d, want %q %q %d", tc.name, res.Stdout, res.Stderr, res.ExitCode, tc.stdout, tc.stderr, tc.code)
		}
	}
	// Every command above ran on the one shell of the one connection.
	accepted, _, cmds := f.srv.stats()
	sessions, _ := f.srv.sessionStats()
	if accepted != 1 || sessions != 1 || len(cmds) != 1 || cmds[0] != probeShellCommand {
		t.Errorf("accepted %d connections, %d sessions, commands %q; want 1, 1, [%q]", accepted, sessions, cmds, probeShellCommand)
	}
}

func TestProbeRefusesBeforeSending(t *testing.T) {
	t.Parallel()
	f, _ := shellFixture(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, cmd := range []string{
		"echo 'unterminated",
		"cat <<EOF\nno end",
		"a=(1 2)",
		"echo $'a\\tb'",
		`printf $"x"`,
		"echo nul\x00",
	} {
		if _, err := f.pool.Probe(ctx, f.target(), cmd); !errors.Is(err, ErrInvalidCommand) {
			t.Errorf("%q: err %v, want ErrInvalidCommand", cmd, err)
		}
	}
	if accepted, _, _ := f.srv.stats(); accepted != 0 {
		t.Errorf("a refused command dialled the host (%d connections)", accepted)
	}
	// An escaped dollar before a quote is plain POSIX and allowed.
	res, err := f.pool.Probe(ctx, f.target(), `echo \$'x'`)
	if err != nil || string(res.Stdout) != "$x\n" {
		t.Errorf(`echo \$'x': %q %v`, res.Stdout, err)
	}
}

func TestProbeShellExitIsAnErrorAndReplaced(t *testing.T) {
	t.Parallel()
	f, _ := shellFixture(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := f.pool.Probe(ctx, f.target(), "echo first"); err != nil {
		t.Fatal(err)
	}
	res, err := f.pool.Probe(ctx, f.target(), "echo leaving; exit 3")
	if !errors.Is(err, ErrProbeShell) || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("exit: err %v, want ErrProbeShell naming exit status 3", err)
	}
	if string(res.Stdout) != "leaving\n" {
		t.Errorf("output before the exit: %q", res.Stdout)
	}
	res, err = f.pool.Probe(ctx, f.target(), "echo again")
	if err != nil || string(res.Stdout) != "again\n" {
		t.Fatalf("after the exit: %q %v", res.Stdout, err)
	}
	accepted, _, _ := f.srv.stats()
	sessions, _ := f.srv.sessionStats()
	if accepted != 1 || sessions != 2 {
		t.Errorf("accepted %d connections and %d sessions, want 1 and 2 (a new shell, same connection)", accepted, sessions)
	}
}

func TestProbeTimeoutKillsShellAndKeepsOutput(t *testing.T) {
	t.Parallel()
	// The lab shell's $$ is this process's pid: the pool must kill that process group
	// through a session of its own (the server only records the command).
	killed := make(chan struct{}, 1)
	killCmd := fmt.Sprintf("kill -9 -%d 2>/dev/null || kill -9 %d", os.Getpid(), os.Getpid())
	f := newFixture(t, map[string]canned{killCmd: {entered: killed}}, nil)
	sh, _ := labShell(t)
	f.srv.setShell(sh)
	signals := make(chan string, 4)
	f.srv.notifySignals(signals)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	short, cancelShort := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancelShort()
	res, err := f.pool.Probe(short, f.target(), "echo partial; echo warn >&2; sleep 30; echo never")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want DeadlineExceeded", err)
	}
	if string(res.Stdout) != "partial\n" || string(res.Stderr) != "warn\n" {
		t.Errorf("output so far: stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	// The server answers the close at once; the signal sent before it is handled soon after.
	select {
	case sig := <-signals:
		if sig != "KILL" {
			t.Errorf("signal %q, want KILL", sig)
		}
	case <-time.After(5 * time.Second):
		t.Error("the timed-out shell was not sent a signal")
	}
	within(t, killed, 5*time.Second, "the kill of the shell's process group")
	res, err = f.pool.Probe(ctx, f.target(), "echo next")
	if err != nil || string(res.Stdout) != "next\n" {
		t.Fatalf("next probe: %q %v", res.Stdout, err)
	}
	// Sessions: the first shell, the kill, the new shell.
	sessions, _ := f.srv.sessionStats()
	if got := f.pool.DialCount(f.srv.addr); got != 1 || sessions != 3 {
		t.Errorf("dials %d sessions %d, want 1 and 3 (the killed shell is never reused)", got, sessions)
	}
}

func TestProbeConcurrencyOneConnectionFewShells(t *testing.T) {
	t.Parallel()
	f, _ := shellFixture(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 40
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want := fmt.Sprintf("probe %d", i)
			res, err := f.pool.Probe(ctx, f.target(), fmt.Sprintf("echo '%s'; echo '%s' >&2", want, want))
			switch {
			case err != nil:
				errs <- err
			case string(res.Stdout) != want+"\n" || string(res.Stderr) != want+"\n":
				errs <- fmt.Errorf("probe %d got %q / %q", i, res.Stdout, res.Stderr)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	accepted, maxActive, _ := f.srv.stats()
	sessions, _ := f.srv.sessionStats()
	if accepted != 1 || f.pool.OpenConnections() != 1 {
		t.Errorf("accepted %d connections, want 1", accepted)
	}
	if sessions > DefaultProbeShellsPerConn || maxActive > DefaultProbeShellsPerConn {
		t.Errorf("%d shells opened, %d at once; want at most %d", sessions, maxActive, DefaultProbeShellsPerConn)
	}
}

func TestProbeWaitsForAFreeShellHonouringContext(t *testing.T) {
	t.Parallel()
	f, _ := shellFixture(t, func(o *PoolOptions) { o.ProbeShellsPerConn = 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	opened := make(chan struct{}, 1)
	f.srv.notifySessions(opened)
	busyCtx, stopBusy := context.WithCancel(ctx)
	busyDone := make(chan error, 1)
	go func() {
		_, err := f.pool.Probe(busyCtx, f.target(), "sleep 30")
		busyDone <- err
	}()
	// Once the only shell is taken, a second probe must time out waiting.
	within(t, opened, 10*time.Second, "the busy probe's shell")
	waitCtx, cancelWait := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelWait()
	if _, err := f.pool.Probe(waitCtx, f.target(), "echo hi"); !errors.Is(err, context.DeadlineExceeded) ||
		!strings.Contains(err.Error(), "waiting for a free probe shell") {
		t.Fatalf("err %v, want a deadline while waiting for a free shell", err)
	}
	stopBusy()
	if err := <-busyDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("busy probe: %v, want Canceled", err)
	}
	if res, err := f.pool.Probe(ctx, f.target(), "echo free"); err != nil || string(res.Stdout) != "free\n" {
		t.Fatalf("after the busy one: %q %v", res.Stdout, err)
	}
}

func TestProbeOutputCapKeepsShellInStep(t *testing.T) {
	t.Parallel()
	f, dir := shellFixture(t, func(o *PoolOptions) { o.MaxOutputBytes = 1000 })
	big := bytes.Repeat([]byte("0123456789"), 10000)
	if err := os.WriteFile(filepath.Join(dir, "big"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := f.pool.Probe(ctx, f.target(), "cat /big; cat /big >&2")
	if err != nil {
		t.Fatal(err)
	}
	if !res.StdoutTruncated || !res.StderrTruncated || !bytes.Equal(res.Stdout, big[:1000]) || !bytes.Equal(res.Stderr, big[:1000]) {
		t.Errorf("capped result: %d/%v %d/%v", len(res.Stdout), res.StdoutTruncated, len(res.Stderr), res.StderrTruncated)
	}
	res, err = f.pool.Probe(ctx, f.target(), "echo small")
	if err != nil || string(res.Stdout) != "small\n" || res.StdoutTruncated {
		t.Fatalf("after a capped result: %+v %v", res, err)
	}
	if sessions, _ := f.srv.sessionStats(); sessions != 1 {
		t.Errorf("%d shells, want 1", sessions)
	}
}

func TestProbeAfterServerDropReconnects(t *testing.T) {
	t.Parallel()
	f, _ := shellFixture(t, nil)
	dropped := make(chan struct{}, 1)
	f.pool.mu.Lock()
	f.pool.onDrop = func(string, string) {
		select {
		case dropped <- struct{}{}:
		default:
		}
	}
	f.pool.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := f.pool.Probe(ctx, f.target(), "echo one"); err != nil {
		t.Fatal(err)
	}
	f.srv.dropAll()
	within(t, dropped, 10*time.Second, "the pool to notice the dropped connection")
	res, err := f.pool.Probe(ctx, f.target(), "echo two")
	if err != nil || string(res.Stdout) != "two\n" {
		t.Fatalf("after the drop: %q %v", res.Stdout, err)
	}
	if got := f.pool.DialCount(f.srv.addr); got != 2 {
		t.Errorf("DialCount %d, want 2", got)
	}
}

func TestReadTrailer(t *testing.T) {
	t.Parallel()
	const nonce = "n0n"
	for _, tc := range []struct {
		name   string
		chunks []string
		status bool
		out    string
		code   int
		extra  bool
		err    bool
	}{
		{"status split over reads", []string{"ab", "c\nn0", "n 4", "2\n"}, true, "abc", 42, false, false},
		{"marker split byte by byte", []string{"x", "\n", "n", "0", "n", " ", "0", "\n"}, true, "x", 0, false, false},
		{"bytes after the trailer", []string{"\nn0n 1\nlate"}, true, "", 1, true, false},
		{"stderr marker", []string{"e\n\nn0n\n"}, false, "e\n", 0, false, false},
		{"eof before the marker keeps the output", []string{"partial\nn0"}, true, "partial\nn0", 0, false, true},
		{"malformed status", []string{"\nn0n x\n"}, true, "", 0, false, true},
		{"status out of range", []string{"\nn0n 256\n"}, true, "", 0, false, true},
	} {
		var out bytes.Buffer
		marker := "\n" + nonce + " "
		if !tc.status {
			marker = "\n" + nonce + "\n"
		}
		code, extra, err := readTrailer(&chunkReader{chunks: tc.chunks}, marker, tc.status, &out)
		if out.String() != tc.out || code != tc.code || extra != tc.extra || (err != nil) != tc.err {
			t.Errorf("%s: out %q code %d extra %v err %v", tc.name, out.String(), code, extra, err)
		}
	}
}

// chunkReader returns its chunks one Read at a time, then io.EOF.
type chunkReader struct{ chunks []string }

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.chunks[0])
	r.chunks = r.chunks[1:]
	return n, nil
}

// A cancelled command's reader may be stuck in a read (OpenSSH keeps the channel open
// while the command runs): flush hands over the bytes it holds back, and nothing after.
func TestStreamReaderFlushHandsOverHeldBytes(t *testing.T) {
	t.Parallel()
	pr, pw := io.Pipe()
	var out syncBuffer
	sr := newStreamReader(pr, "\n0123456789abcdef0123456789abcdef ", true, &out)
	done := make(chan error, 1)
	go func() {
		_, _, err := sr.read()
		done <- err
	}()
	if _, err := pw.Write([]byte("partial\n")); err != nil { // shorter than the marker
		t.Fatal(err)
	}
	// An empty write returns only when the reader reads again, so it has handled the bytes.
	if _, err := pw.Write(nil); err != nil {
		t.Fatal(err)
	}
	sr.flush()
	if got := out.String(); got != "partial\n" {
		t.Errorf("flushed %q, want %q", got, "partial\n")
	}
	if _, err := pw.Write([]byte("late")); err != nil {
		t.Fatal(err)
	}
	_ = pw.Close()
	if err := <-done; !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("read ended with %v", err)
	}
	if got := out.String(); got != "partial\n" {
		t.Errorf("after flush the reader still wrote: %q", got)
	}
}
