package coreutils_test

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

var fixedNow = time.Date(2026, 7, 13, 10, 0, 0, 0, time.UTC)

func newShell(t *testing.T) (*shell.Shell, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "m")
	fsys, err := sandbox.New(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fsys.Close() })
	for _, d := range []string{"/root", "/tmp", "/etc"} {
		if err := fsys.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	reg := shell.Registry{}
	coreutils.Register(reg)
	return &shell.Shell{FS: fsys, Programs: reg, Home: "/root", Clock: func() time.Time { return fixedNow }}, dir
}

func runIn(t *testing.T, sh *shell.Shell, script, stdin string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	code := sh.Run(ctx, script, shell.Stdio{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb})
	return out.String(), errb.String(), code
}

func TestUtilities(t *testing.T) {
	t.Parallel()
	setup := `mkdir -p /data/sub && printf 'b 2\na 1\nc 3\na 1\n' > /data/list && printf 'x\ny\nz\n' > /data/sub/three.txt`
	for _, tc := range []struct {
		name, script, stdin, want string
		code                      int
	}{
		{"echo", `echo hello world`, "", "hello world\n", 0},
		{"cat stdin", `cat`, "piped\n", "piped\n", 0},
		{"cat missing", `cat /nope`, "", "", 1},
		{"head", `head -n 2 /data/list`, "", "b 2\na 1\n", 0},
		{"head legacy", `head -1 /data/list`, "", "b 2\n", 0},
		{"tail", `tail -n 1 /data/list`, "", "a 1\n", 0},
		{"tail plus", `tail -n +3 /data/list`, "", "c 3\na 1\n", 0},
		{"sort", `sort /data/list`, "", "a 1\na 1\nb 2\nc 3\n", 0},
		{"sort numeric key reverse", `sort -k2 -n -r /data/list`, "", "c 3\nb 2\na 1\na 1\n", 0},
		{"sort unique", `sort -u /data/list`, "", "a 1\nb 2\nc 3\n", 0},
		{"uniq count", `sort /data/list | uniq -c`, "", "      2 a 1\n      1 b 2\n      1 c 3\n", 0},
		{"cut", `cut -d' ' -f2 /data/list`, "", "2\n1\n3\n1\n", 0},
		{"tr", `echo Hello | tr a-z A-Z`, "", "HELLO\n", 0},
		{"tr delete", `echo a-b-c | tr -d -`, "", "abc\n", 0},
		{"wc lines", `wc -l < /data/list`, "", "4\n", 0},
		{"wc file", `wc -l /data/list`, "", "4 /data/list\n", 0},
		{"grep", `grep '^a' /data/list`, "", "a 1\na 1\n", 0},
		{"grep count", `grep -c a /data/list`, "", "2\n", 0},
		{"grep none", `grep zzz /data/list`, "", "", 1},
		{"grep extended", `grep -E 'b|c' /data/list`, "", "b 2\nc 3\n", 0},
		{"grep basic alternation", `grep 'b\|c' /data/list`, "", "b 2\nc 3\n", 0},
		{"grep invert quiet", `grep -qv a /data/list && echo yes`, "", "yes\n", 0},
		{"grep recursive", `grep -r y /data`, "", "/data/sub/three.txt:y\n", 0},
		{"sed print line", `sed -n 2p /data/list`, "", "a 1\n", 0},
		{"sed substitute", `echo aaa | sed 's/a/b/g'`, "", "bbb\n", 0},
		{"sed delete", `sed '1d;3d' /data/list`, "", "a 1\na 1\n", 0},
		{"sed groups", `echo key=value | sed -E 's/([a-z]+)=([a-z]+)/\2:\1/'`, "", "value:key\n", 0},
		{"sed range", `sed -n '2,3p' /data/list`, "", "a 1\nc 3\n", 0},
		{"sed in place", `sed -i 's/x/X/' /data/sub/three.txt && cat /data/sub/three.txt`, "", "X\ny\nz\n", 0},
		{"seq", `seq 3`, "", "1\n2\n3\n", 0},
		{"seq step sep", `seq -s, 2 2 8`, "", "2,4,6,8\n", 0},
		{"xargs", `printf 'a b\nc\n' | xargs echo got`, "", "got a b c\n", 0},
		{"xargs -n", `printf 'a b c\n' | xargs -n 1 echo`, "", "a\nb\nc\n", 0},
		{"xargs -I", `printf 'one\ntwo\n' | xargs -I{} echo [{}]`, "", "[one]\n[two]\n", 0},
		{"find name", `find /data -name '*.txt'`, "", "/data/sub/three.txt\n", 0},
		{"find type d", `find /data -type d`, "", "/data\n/data/sub\n", 0},
		{"find maxdepth", `find /data -maxdepth 1 -type f`, "", "/data/list\n", 0},
		{"find relative", `cd /data && find . -type f | sort`, "", "./list\n./sub/three.txt\n", 0},
		{"find missing", `find /nope`, "", "", 1},
		{"ls", `ls /data`, "", "list\nsub\n", 0},
		{"ls missing", `ls /nope`, "", "", 2},
		{"stat format", `stat -c '%n %s %F' /data/list`, "", "/data/list 16 regular file\n", 0},
		{"mkdir exists", `mkdir /data`, "", "", 1},
		{"touch and test", `touch /tmp/new && test -f /tmp/new && echo ok`, "", "ok\n", 0},
		{"cp mv", `cp /data/list /tmp/a && mv /tmp/a /tmp/b && cat /tmp/b | head -1 && test ! -e /tmp/a`, "", "b 2\n", 0},
		{"cp -r", `cp -r /data /tmp/copy && cat /tmp/copy/sub/three.txt | wc -l`, "", "3\n", 0},
		{"rm", `rm /data/list && ls /data`, "", "sub\n", 0},
		{"rm dir without -r", `rm /data`, "", "", 1},
		{"rm -f missing", `rm -f /nothing`, "", "", 0},
		{"ln -s readlink", `ln -s /data/list /tmp/l && readlink /tmp/l && cat /tmp/l | head -1`, "", "/data/list\nb 2\n", 0},
		{"basename dirname", `basename /a/b/c.txt .txt; dirname /a/b/c.txt`, "", "c\n/a/b\n", 0},
		{"env assign", `env FOO=bar sh -c 'echo $FOO'`, "", "bar\n", 0},
		{"sh -c exit", `sh -c 'exit 7'`, "", "", 7},
		{"sh -c positional", `sh -c 'echo $1-$2' x one two`, "", "one-two\n", 0},
		{"sleep", `sleep 0.01 && echo slept`, "", "slept\n", 0},
		{"timeout", `timeout 0.05 sleep 5`, "", "", 124},
		{"true false", `true && ! false && echo fine`, "", "fine\n", 0},
		{"pwd", `cd /data/sub && pwd`, "", "/data/sub\n", 0},
		{"which", `which ls`, "", "/usr/bin/ls\n", 0},
		{"command -v", `command -v cat; command -v nope || echo missing`, "", "/usr/bin/cat\nmissing\n", 0},
		{"unknown command", `nosuchprogram --flag`, "", "", 127},
		{"tee", `echo hi | tee /tmp/t >/dev/null; cat /tmp/t`, "", "hi\n", 0},
		{"md5sum", `printf abc | md5sum`, "", "900150983cd24fb0d6963f7d28e17f72  -\n", 0},
		{"glob", `echo /data/*`, "", "/data/list /data/sub\n", 0},
		{"redirect append", `echo 1 > /tmp/r; echo 2 >> /tmp/r; cat /tmp/r`, "", "1\n2\n", 0},
		{"pipeline status", `false | true; echo $?`, "", "0\n", 0},
		{"script file", `printf '#!/bin/sh\necho from script $1\n' > /tmp/s.sh && chmod +x /tmp/s.sh && /tmp/s.sh arg`, "", "from script arg\n", 0},
		{"not executable", `printf 'echo x\n' > /tmp/n.sh && /tmp/n.sh`, "", "", 126},
		{"absolute std path", `/bin/echo hi; /usr/bin/true && echo ok`, "", "hi\nok\n", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sh, _ := newShell(t)
			if _, errOut, code := runIn(t, sh, setup, ""); code != 0 {
				t.Fatalf("setup failed: %d %s", code, errOut)
			}
			out, errOut, code := runIn(t, sh, tc.script, tc.stdin)
			if out != tc.want || code != tc.code {
				t.Fatalf("%s\n got %q (exit %d, stderr %q)\nwant %q (exit %d)", tc.script, out, code, errOut, tc.want, tc.code)
			}
		})
	}
}

func TestFindTimeAndDelete(t *testing.T) {
	t.Parallel()
	sh, _ := newShell(t)
	script := `mkdir -p /backups && touch -d '2 hours ago' /backups/old && touch -d '5 minutes ago' /backups/new
find /backups -type f -mmin -60
echo --
find /backups -type f -mmin +60
echo --
find /backups -name old -delete && ls /backups`
	out, errOut, code := runIn(t, sh, script, "")
	want := "/backups/new\n--\n/backups/old\n--\nnew\n"
	if out != want || code != 0 {
		t.Fatalf("got %q (exit %d, %q), want %q", out, code, errOut, want)
	}
}

func TestRemoveRootAndEscapes(t *testing.T) {
	t.Parallel()
	sh, dir := newShell(t)
	outside := filepath.Join(filepath.Dir(dir), "outside.txt")
	if err := os.WriteFile(outside, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	rel := strings.Repeat("../", 20) + strings.TrimPrefix(outside, "/")
	out, _, _ := runIn(t, sh, "cat "+rel+"; cat /root/"+rel+"; ln -s "+outside+" /tmp/x; cat /tmp/x; rm -rf "+outside+" /tmp/x", "")
	if strings.Contains(out, "keep") {
		t.Fatalf("read a file outside the sandbox: %q", out)
	}
	if _, _, code := runIn(t, sh, "rm -rf /var/lib/x; mkdir -p /var/lib/x && touch /var/lib/x/f && rm -rf /var/lib/x && test ! -e /var/lib/x", ""); code != 0 {
		t.Fatal("rm -rf /var/lib/x inside the sandbox failed")
	}
	if _, errOut, code := runIn(t, sh, "rm -rf /", ""); code != 0 {
		t.Fatalf("rm -rf /: %d %s", code, errOut)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 0 {
		t.Fatalf("sandbox not emptied: %v %v", entries, err)
	}
	if data, err := os.ReadFile(outside); err != nil || string(data) != "keep" {
		t.Fatalf("outside file changed: %q %v", data, err)
	}
	// The shell keeps working in the emptied machine.
	if out, _, code := runIn(t, sh, "pwd; ls /", ""); out != "/\n" || code != 0 {
		t.Fatalf("after rm -rf /: %q %d", out, code)
	}
}

func TestContextEndsCommands(t *testing.T) {
	t.Parallel()
	sh, _ := newShell(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	code := sh.Run(ctx, "sleep 30; echo never", shell.Stdio{})
	if time.Since(start) > 5*time.Second || code == 0 {
		t.Fatalf("sleep was not interrupted: exit %d after %v", code, time.Since(start))
	}
}
