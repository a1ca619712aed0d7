package shell_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oikos-hq/oikos/testkit/labsim/coreutils"
	"github.com/oikos-hq/oikos/testkit/labsim/sandbox"
	"github.com/oikos-hq/oikos/testkit/labsim/shell"
)

func newShell(t *testing.T) (*shell.Shell, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "m")
	fsys, err := sandbox.New(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fsys.Close() })
	if err := fsys.MkdirAll("/root", 0o755); err != nil {
		t.Fatal(err)
	}
	reg := shell.Registry{}
	coreutils.Register(reg)
	return &shell.Shell{FS: fsys, Programs: reg, Home: "/root", Env: []string{"HOSTNAME=box"}}, dir
}

func runScript(t *testing.T, sh *shell.Shell, script string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	code := sh.Run(ctx, script, shell.Stdio{Stdout: &out, Stderr: &errb})
	return out.String(), errb.String(), code
}

// TestNoHostBinaryRuns sends commands that exist on any build machine but are not simulated:
// each must be "command not found", never the host's program.
func TestNoHostBinaryRuns(t *testing.T) {
	t.Parallel()
	sh, _ := newShell(t)
	for _, cmd := range []string{
		"python3 -c 'print(12345)'",
		"perl -e 'print 12345'",
		"/usr/bin/perl -e 'print 12345'",
		"exec perl -e 'print 12345'",
		"command perl -e 'print 12345'",
		"env perl -e 'print 12345'",
		"xargs perl -e 'print 12345' </dev/null",
		"getconf ARG_MAX",
	} {
		out, errOut, code := runScript(t, sh, cmd)
		if strings.Contains(out, "12345") || code != 127 {
			t.Errorf("%s: out %q err %q exit %d, want 127 and no output", cmd, out, errOut, code)
		}
	}
	out, _, code := runScript(t, sh, "perl -e 1")
	if out != "" || code != 127 {
		t.Fatalf("perl: %q %d", out, code)
	}
	if _, errOut, _ := runScript(t, sh, "perl -e 1"); errOut != "bash: perl: command not found\n" {
		t.Fatalf("message: %q", errOut)
	}
}

func TestBuiltinsDoNotLookAtTheHost(t *testing.T) {
	t.Parallel()
	sh, dir := newShell(t)
	for _, tc := range []struct{ script, want string }{
		{"command -v perl || echo none", "none\n"},
		{"type -P ls", "/usr/bin/ls\n"},
		{"type echo", "echo is a shell builtin\n"},
		{"cd /root && pwd -P", "/root\n"},
		{"echo $HOME $HOSTNAME $PATH", "/root box /sbin:/bin:/usr/sbin:/usr/bin\n"},
		{"test -d /root && test ! -e /etc/passwd && echo inside", "inside\n"},
		{"cd ../../../../ && pwd", "/\n"},
		{"echo $TMPDIR", "\n"},
	} {
		out, errOut, _ := runScript(t, sh, tc.script)
		if out != tc.want {
			t.Errorf("%s: got %q (stderr %q), want %q", tc.script, out, errOut, tc.want)
		}
	}
	// Process substitution would need a FIFO on the host: it fails instead.
	if out, _, _ := runScript(t, sh, "cat <(echo leaked)"); strings.Contains(out, "leaked") {
		t.Fatalf("process substitution ran: %q", out)
	}
	// Redirections land in the sandbox.
	if _, _, code := runScript(t, sh, "echo data > /root/out.txt"); code != 0 {
		t.Fatal("redirect failed")
	}
	if data, err := os.ReadFile(filepath.Join(dir, "root", "out.txt")); err != nil || string(data) != "data\n" {
		t.Fatalf("redirect target: %q %v", data, err)
	}
}

func TestRunArgvDoesNotExpand(t *testing.T) {
	t.Parallel()
	sh, _ := newShell(t)
	var out bytes.Buffer
	code := sh.RunArgv(context.Background(), []string{"echo", "$HOME", "*", "a;b", "it's"}, shell.Stdio{Stdout: &out})
	if out.String() != "$HOME * a;b it's\n" || code != 0 {
		t.Fatalf("got %q %d", out.String(), code)
	}
	out.Reset()
	code = sh.RunArgv(context.Background(), []string{"cat"}, shell.Stdio{Stdin: strings.NewReader("from stdin"), Stdout: &out})
	if out.String() != "from stdin" || code != 0 {
		t.Fatalf("stdin: %q %d", out.String(), code)
	}
	if code := sh.RunArgv(context.Background(), []string{"nope"}, shell.Stdio{}); code != 127 {
		t.Fatalf("unknown: %d", code)
	}
}

func TestSyntaxError(t *testing.T) {
	t.Parallel()
	sh, _ := newShell(t)
	if _, errOut, code := runScript(t, sh, "echo 'unterminated"); code != 2 || errOut == "" {
		t.Fatalf("syntax error: %q %d", errOut, code)
	}
}
