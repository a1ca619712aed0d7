package labsim

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// shellSession is a session running `exec /bin/sh`, fed one line at a time.
type shellSession struct {
	t      *testing.T
	sess   *ssh.Session
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr *bufio.Reader
}

func startShell(t *testing.T, c *ssh.Client) *shellSession {
	t.Helper()
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	stdin, err := sess.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := sess.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errp, err := sess.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.Start("exec /bin/sh"); err != nil {
		t.Fatal(err)
	}
	return &shellSession{t: t, sess: sess, stdin: stdin, stdout: bufio.NewReader(out), stderr: bufio.NewReader(errp)}
}

// send writes one line and reads one line of stdout: the answer must come
// while the shell's stdin is still open, before anything else is sent.
func (s *shellSession) send(line string) string {
	s.t.Helper()
	if _, err := io.WriteString(s.stdin, line+"\n"); err != nil {
		s.t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() {
		l, _ := s.stdout.ReadString('\n')
		got <- l
	}()
	select {
	case l := <-got:
		return l
	case <-time.After(10 * time.Second):
		s.t.Fatalf("no answer to %q while the shell waits for more input", line)
		return ""
	}
}

func TestShellSessionRunsEachLineAsItArrives(t *testing.T) {
	t.Parallel()
	sim := startSim(t, testFleet(), nil)

	t.Run("plain host keeps state between lines and exits with exit", func(t *testing.T) {
		sh := startShell(t, dialHost(t, sim, "hermes"))
		if got := sh.send("x=41; echo ready"); got != "ready\n" {
			t.Fatalf("first line: %q", got)
		}
		if got := sh.send("echo $((x + 1)); echo to-stderr >&2"); got != "42\n" {
			t.Fatalf("second line: %q", got)
		}
		if l, _ := sh.stderr.ReadString('\n'); l != "to-stderr\n" {
			t.Fatalf("stderr: %q", l)
		}
		// A quoted word spanning lines is one statement: nothing runs before it is complete.
		if got := sh.send("printf '%s|' 'a\nb'; echo"); got != "a\n" {
			t.Fatalf("multi-line word, first line of output: %q", got)
		}
		if l, _ := sh.stdout.ReadString('\n'); l != "b|\n" {
			t.Fatalf("multi-line word, second line: %q", l)
		}
		if _, err := io.WriteString(sh.stdin, "exit 5\n"); err != nil {
			t.Fatal(err)
		}
		var ee *ssh.ExitError
		if err := sh.sess.Wait(); err == nil || !errors.As(err, &ee) || ee.ExitStatus() != 5 {
			t.Fatalf("exit: %v", err)
		}
	})
	t.Run("proxmox host runs pct exec from the shell", func(t *testing.T) {
		sh := startShell(t, dialHost(t, sim, "atlas"))
		if got := sh.send("pct exec 101 -- sh -c 'cat /etc/hostname' </dev/null"); got != "web\n" {
			t.Fatalf("pct exec: %q", got)
		}
		if got := sh.send("pct exec 102 -- true </dev/null; echo status $?"); !strings.HasPrefix(got, "status ") || got == "status 0\n" {
			t.Fatalf("stopped guest: %q", got)
		}
	})
	t.Run("macOS workstation", func(t *testing.T) {
		sh := startShell(t, dialHost(t, sim, "studio"))
		if got := sh.send("sysctl -n hw.ncpu"); strings.TrimSpace(got) == "" {
			t.Fatalf("sysctl: %q", got)
		}
	})
	t.Run("a syntax error ends the shell with status 2", func(t *testing.T) {
		sh := startShell(t, dialHost(t, sim, "hermes"))
		if _, err := io.WriteString(sh.stdin, "echo 'unterminated\n"); err != nil {
			t.Fatal(err)
		}
		if err := sh.stdin.Close(); err != nil {
			t.Fatal(err)
		}
		var ee *ssh.ExitError
		if err := sh.sess.Wait(); err == nil || !errors.As(err, &ee) || ee.ExitStatus() != 2 {
			t.Fatalf("syntax error: %v", err)
		}
	})
}
