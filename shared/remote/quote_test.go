package remote

import (
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"
	"unicode"
	"unicode/utf8"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// nastyCommands is a corpus of commands that break naive quoting.
var nastyCommands = []string{
	"",
	"echo hi",
	"echo 'single' \"double\"",
	`printf '%s\n' "a\"b" 'c'\''d'`,
	`echo \\ \\\\ \n \t`,
	"echo $(hostname) `uname -a` ${HOME} $HOME $((1+2))",
	"ls -la /tmp/*.log /var/[ab]? ~root ~/x {a,b}",
	"cat <<EOF\nline one\n\tline two\nEOF",
	"a && b || c; d | e & f > /tmp/out 2>&1 < /dev/null",
	"# comment only",
	"x=1 y='2' env",
	"echo ünïcødé 日本語 emoji 🚀",
	"echo control \x01\x02\x1b[31m red \x7f",
	"echo invalid utf8 \xff\xfe",
	"echo $'ansi\\tquoted' '$'\"'\"",
	"rm -rf /var/lib/docker/*",
	"echo trailing newline\n",
	"  leading and trailing spaces  ",
	"'",
	`"`,
	`\`,
	"$",
	"!",
	"echo -- -c sh",
	"\r\n",
}

// hopArgs parses a wrapped command line the way the host's shell would and
// expands every word under a hostile configuration: any variable, command
// substitution, tilde or glob that escaped the quoting changes the result.
func hopArgs(t testing.TB, line string) []string {
	t.Helper()
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(line), "")
	if err != nil {
		t.Fatalf("wrapped command does not parse: %v\n%s", err, line)
	}
	if len(f.Stmts) != 1 {
		t.Fatalf("wrapped command is %d statements, want 1:\n%s", len(f.Stmts), line)
	}
	st := f.Stmts[0]
	call, ok := st.Cmd.(*syntax.CallExpr)
	if !ok || len(call.Assigns) != 0 || len(st.Redirs) != 0 || st.Background || st.Negated {
		t.Fatalf("wrapped command is not one plain call:\n%s", line)
	}
	globFS := fstest.MapFS{"GLOBBED": &fstest.MapFile{}}
	cfg := &expand.Config{
		Env: expand.FuncEnviron(func(string) string { return "EXPANDED" }),
		CmdSubst: func(w io.Writer, _ *syntax.CmdSubst) error {
			_, err := io.WriteString(w, "SUBSTITUTED")
			return err
		},
		ReadDir2: func(string) ([]fs.DirEntry, error) { return globFS.ReadDir(".") },
	}
	args, err := expand.Fields(cfg, call.Args...)
	if err != nil {
		t.Fatalf("expanding wrapped command: %v\n%s", err, line)
	}
	return args
}

func checkHop(t testing.TB, cmd string) {
	t.Helper()
	pct, err := PctExecCommand(101, cmd)
	if err != nil {
		t.Fatalf("PctExecCommand(%q): %v", cmd, err)
	}
	if got, want := hopArgs(t, pct), []string{"pct", "exec", "101", "--", "sh", "-c", cmd}; !slices.Equal(got, want) {
		t.Fatalf("pct hop changed the command:\n got %q\nwant %q\nline %s", got, want, pct)
	}
	qm, err := GuestExecCommand(200, 90*time.Second, cmd)
	if err != nil {
		t.Fatalf("GuestExecCommand(%q): %v", cmd, err)
	}
	if got, want := hopArgs(t, qm), []string{"qm", "guest", "exec", "200", "--timeout", "90", "--", "sh", "-c", cmd}; !slices.Equal(got, want) {
		t.Fatalf("qm hop changed the command:\n got %q\nwant %q\nline %s", got, want, qm)
	}
}

func TestQuoteCorpusRoundTrips(t *testing.T) {
	t.Parallel()
	for _, cmd := range nastyCommands {
		checkHop(t, cmd)
	}
}

func TestQuoteRandomRoundTrips(t *testing.T) {
	t.Parallel()
	pieces := []string{
		"'", `"`, `\`, "$(", ")", "`", "\n", "\t", " ", "*", "?", "[", "]", "~", "{", "}", ",",
		"#", ";", "&", "|", ">", "<", "=", "!", "%", "$", "$'", "${", "é", "日本", "🚀", "\x01",
		"\x7f", "\xff", "\r", "echo", "-c", "--", "a", "0",
	}
	rng := rand.New(rand.NewPCG(5, 2026))
	for i := 0; i < 3000; i++ {
		var b strings.Builder
		for n := rng.IntN(12); n >= 0; n-- {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		checkHop(t, b.String())
	}
}

func FuzzQuoteRoundTrip(f *testing.F) {
	for _, c := range nastyCommands {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, cmd string) {
		if strings.IndexByte(cmd, 0) >= 0 {
			if _, err := PctExecCommand(1, cmd); !errors.Is(err, ErrInvalidCommand) {
				t.Fatalf("NUL byte accepted: %v", err)
			}
			return
		}
		checkHop(t, cmd)
	})
}

func TestQuoteRefusesNUL(t *testing.T) {
	t.Parallel()
	for _, wrap := range []func(string) (string, error){
		func(c string) (string, error) { return PctExecCommand(1, c) },
		func(c string) (string, error) { return GuestExecCommand(1, time.Second, c) },
		directWrap,
	} {
		if _, err := wrap("echo a\x00b"); !errors.Is(err, ErrInvalidCommand) {
			t.Errorf("err = %v, want ErrInvalidCommand", err)
		}
	}
}

func TestQuotePrefersPOSIX(t *testing.T) {
	t.Parallel()
	// Printable commands use plain POSIX quoting; bash's $'…' is kept for
	// commands POSIX quoting refuses (control characters, tabs, newlines,
	// invalid UTF-8).
	for _, cmd := range nastyCommands {
		if !utf8.ValidString(cmd) || strings.ContainsFunc(cmd, func(r rune) bool { return !unicode.IsPrint(r) }) {
			continue
		}
		q, err := QuoteArg(cmd)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(q, "$'") {
			t.Errorf("QuoteArg(%q) = %s uses bash quoting", cmd, q)
		}
	}
}
