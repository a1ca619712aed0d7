// Package shell runs shell command lines for a simulated machine. Scripts are parsed with
// mvdan.cc/sh/v3/syntax and interpreted with mvdan.cc/sh/v3/interp, with every handler
// replaced: files are opened, listed and stat'ed through the machine's sandbox.FS, and a
// command name can only reach a Program written in Go and registered for that machine. A
// host binary is never executed; an unknown name prints "<name>: command not found" and exits
// 127, as bash does.
package shell

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"

	"github.com/oikos-hq/oikos/shared/safego"
	"github.com/oikos-hq/oikos/testkit/labsim/sandbox"
)

// DefaultPath is the PATH inside machines, the one lxc-attach sets.
const DefaultPath = "/sbin:/bin:/usr/sbin:/usr/bin"

// noTempDir is handed to the interpreter as TMPDIR. The interpreter opens paths under its
// temporary directory directly (for process-substitution FIFOs), bypassing the handlers; a
// directory under /proc can never be created, so that bypass can neither find nor create
// anything, and process substitution simply fails.
const noTempDir = "/proc/labsim-no-tmpdir"

// Program is a simulated command. It returns the exit status.
type Program func(ctx context.Context, inv *Invocation) int

// Registry maps command names to programs.
type Registry map[string]Program

// Shell is one machine's command interpreter: its file system, its programs and its login
// environment.
type Shell struct {
	// FS is the machine's sandbox; every path a command touches goes through it.
	FS *sandbox.FS
	// Programs are the commands the machine has, by name.
	Programs Registry
	// Env holds the login environment ("KEY=value"); PATH, HOME, USER and SHELL are defaulted.
	Env []string
	// Home is the starting directory (falls back to "/" when it does not exist).
	Home string
	// Log receives panics of the shell's helper goroutines (zero value: discarded).
	Log zerolog.Logger
	// Clock is the machine's notion of now (for date, touch, find -mmin); nil means time.Now.
	Clock func() time.Time
}

// Now is the machine's current time.
func (s *Shell) Now() time.Time {
	if s.Clock != nil {
		return s.Clock()
	}
	return time.Now()
}

// Stdio carries the standard streams of a run. Nil readers and writers mean empty / discard.
type Stdio struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

func (s Stdio) norm() Stdio {
	if s.Stdin == nil {
		s.Stdin = emptyReader{}
	}
	if s.Stdout == nil {
		s.Stdout = io.Discard
	}
	if s.Stderr == nil {
		s.Stderr = io.Discard
	}
	return s
}

// Invocation is what a Program receives: its arguments, streams, working directory and
// environment, plus the shell it runs in (to run further commands).
type Invocation struct {
	Args   []string
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Dir is the current directory, a virtual absolute path.
	Dir string
	// Env is the environment visible to the command (exported variables).
	Env expand.Environ
	// Shell is the machine the command runs on.
	Shell *Shell
}

// Name is the program name as invoked (base name of Args[0]).
func (inv *Invocation) Name() string { return path.Base(inv.Args[0]) }

// FS is the machine's sandboxed file system.
func (inv *Invocation) FS() *sandbox.FS { return inv.Shell.FS }

// Abs turns a path argument into a clean virtual absolute path.
func (inv *Invocation) Abs(p string) string { return sandbox.Clean(inv.Dir, p) }

// Errorf writes "<name>: <message>\n" to stderr.
func (inv *Invocation) Errorf(format string, args ...any) {
	fmt.Fprintf(inv.Stderr, "%s: %s\n", inv.Name(), fmt.Sprintf(format, args...))
}

// PathError writes the coreutils form "<name>: <path>: <reason>" and returns 1.
func (inv *Invocation) PathError(p string, err error) int {
	inv.Errorf("%s: %s", p, sandbox.Describe(err))
	return 1
}

// Getenv reads an environment variable.
func (inv *Invocation) Getenv(name string) string { return inv.Env.Get(name).String() }

// Exec runs another command (argv) in the same machine with the same directory and
// environment plus extra "KEY=value" pairs, and returns its exit status.
func (inv *Invocation) Exec(ctx context.Context, argv []string, stdio Stdio, extraEnv ...string) int {
	env := inv.Env
	if len(extraEnv) > 0 {
		env = withEnv(env, extraEnv)
	}
	return inv.Shell.execArgv(ctx, argv, stdio.norm(), inv.Dir, env, false)
}

// RunScript runs a shell script in the same machine, directory and environment, with the
// positional parameters params ($0 first).
func (inv *Invocation) RunScript(ctx context.Context, script string, params []string, stdio Stdio) int {
	return inv.Shell.run(ctx, script, params, stdio.norm(), inv.Dir, inv.Env)
}

// RunInteractive runs the script read from in one line at a time, the way sh runs a script
// on its standard input: every complete line is run before the next one is read, so a client
// can feed commands one by one and read each one's output before sending the next (a probe
// shell). Shell state (variables, directory, options) carries from line to line, `exit` ends
// the shell, and a syntax error ends it with status 2 as a non-interactive sh does. The
// commands' standard input is in too. A LineHook in ctx (WithLineHook) runs around each line.
func (inv *Invocation) RunInteractive(ctx context.Context, in io.Reader, params []string, stdio Stdio) int {
	return inv.Shell.runInteractive(ctx, in, params, stdio.norm(), inv.Dir, inv.Env)
}

// interpreterKey carries the name of the shell program interpreting a script (sh, dash,
// bash) and its $0, for the messages that shell prints itself.
type interpreterKey struct{}

type interpreter struct{ name, arg0 string }

// WithInterpreter returns ctx for a script run by the shell program name (as "sh", "dash"
// or "bash") with $0 arg0: a command it cannot find is reported in that shell's words
// (dash: "sh: 1: NAME: not found"; bash: "bash: NAME: command not found").
func WithInterpreter(ctx context.Context, name, arg0 string) context.Context {
	return context.WithValue(ctx, interpreterKey{}, interpreter{name, arg0})
}

// LineHook runs around each line an interactive shell (RunInteractive) reads: it calls run
// at most once, with the streams the line's output goes to, and returns false to end the
// shell (after ctx ended, or after dropping the connection). The lab's SSH server uses it to
// apply a host's faults to every command a long-lived shell receives.
type LineHook func(ctx context.Context, run func(ctx context.Context, stdout, stderr io.Writer)) bool

type lineHookKey struct{}

// WithLineHook returns ctx carrying h for the next interactive shell started under it. Only
// that shell sees it: shells nested inside it run their lines without a hook.
func WithLineHook(ctx context.Context, h LineHook) context.Context {
	return context.WithValue(ctx, lineHookKey{}, h)
}

// lineWriter passes on what is written to it a line at a time (or when its buffer fills, or
// at flush). Pipeline elements write concurrently, so it is locked.
type lineWriter struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

const lineWriterMax = 32 << 10

func newLineWriter(w io.Writer) *lineWriter { return &lineWriter{w: w} }

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	cut := bytes.LastIndexByte(l.buf, '\n') + 1
	if len(l.buf) >= lineWriterMax {
		cut = len(l.buf)
	}
	if cut == 0 {
		return len(p), nil
	}
	_, err := l.w.Write(l.buf[:cut])
	l.buf = append(l.buf[:0], l.buf[cut:]...)
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

func (l *lineWriter) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		_, _ = l.w.Write(l.buf) // the command has ended; a failed write has no one to tell
		l.buf = l.buf[:0]
	}
}

// switchWriter forwards to a writer that can be changed between lines.
type switchWriter struct{ w io.Writer }

func (s *switchWriter) Write(p []byte) (int, error) { return s.w.Write(p) }

func (s *Shell) runInteractive(ctx context.Context, in io.Reader, params []string, stdio Stdio, dir string, env expand.Environ) int {
	hook, _ := ctx.Value(lineHookKey{}).(LineHook)
	ctx = context.WithValue(ctx, lineHookKey{}, LineHook(nil))
	name := "sh"
	if len(params) > 0 {
		name = params[0]
	}
	stdin, done := asFile(s.Log, in)
	defer done()
	out, errw := &switchWriter{w: stdio.Stdout}, &switchWriter{w: stdio.Stderr}
	r, err := s.newRunner(Stdio{Stdin: stdin, Stdout: out, Stderr: errw}, env, params)
	if err != nil {
		fmt.Fprintf(stdio.Stderr, "%s: %v\n", name, err)
		return 1
	}
	if err := s.prelude(ctx, r, dir); err != nil {
		fmt.Fprintf(stdio.Stderr, "%s: %v\n", name, err)
		return 1
	}
	code := 0
	p := syntax.NewParser()
	for stmts, perr := range p.InteractiveSeq(stdin) {
		if perr != nil {
			fmt.Fprintf(stdio.Stderr, "%s: %v\n", name, perr)
			return 2
		}
		if p.Incomplete() || len(stmts) == 0 {
			continue
		}
		run := func(ctx context.Context, stdout, stderr io.Writer) {
			// The interpreter writes only while Run runs, so swapping between lines is safe.
			out.w, errw.w = stdout, stderr
			defer func() { out.w, errw.w = stdio.Stdout, stdio.Stderr }()
			for _, st := range stmts {
				code = exitCode(r.Run(ctx, st), stderr)
				if r.Exited() || ctx.Err() != nil {
					return
				}
			}
		}
		if hook != nil {
			if !hook(ctx, run) {
				return code
			}
		} else {
			run(ctx, stdio.Stdout, stdio.Stderr)
		}
		if r.Exited() || ctx.Err() != nil {
			return code
		}
	}
	return code
}

// Run interprets a command line as a login shell would run `sh -c script` (the way sshd runs
// an exec request) and returns its exit status.
func (s *Shell) Run(ctx context.Context, script string, stdio Stdio) int {
	return s.run(ctx, script, nil, stdio.norm(), s.startDir(), s.environ())
}

// RunArgv executes argv directly, without a shell in between, as lxc-attach and the QEMU
// guest agent do: no word splitting, globbing or expansion is applied to the arguments.
func (s *Shell) RunArgv(ctx context.Context, argv []string, stdio Stdio) int {
	stdio = stdio.norm()
	stdin, done := asFile(s.Log, stdio.Stdin)
	defer done()
	stdio.Stdin = stdin
	return s.execArgv(ctx, argv, stdio, s.startDir(), s.environ(), false)
}

// emptyReader is the standard input of a command that has none.
type emptyReader struct{}

func (emptyReader) Read([]byte) (int, error) { return 0, io.EOF }

// asFile turns a reader into something every command of a run can share: an *os.File (the
// only reader the interpreter hands on without a copying goroutine of its own per command)
// or emptyReader. done closes the pipe's read end, which ends the copying goroutine once the
// source has nothing more to give.
func asFile(log zerolog.Logger, r io.Reader) (io.Reader, func()) {
	switch r.(type) {
	case *os.File, emptyReader:
		return r, func() {}
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return r, func() {}
	}
	safego.Go(log, "labsim-shell-stdin", func() {
		_, _ = io.Copy(pw, r)
		pw.Close()
	})
	return pr, func() { pr.Close() }
}

// Lookup reports how a command name resolves on this machine: the path shown by `command -v`
// and whether it exists. A nil env means the login environment.
func (s *Shell) Lookup(name string, env expand.Environ, dir string) (string, bool) {
	if env == nil {
		env = s.environ()
	}
	if interp.IsBuiltin(name) {
		return name, true
	}
	if strings.Contains(name, "/") {
		p := sandbox.Clean(dir, name)
		if _, ok := s.Programs[path.Base(p)]; ok && isStdBinDir(path.Dir(p)) {
			return p, true
		}
		if fi, err := s.FS.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, true
		}
		return "", false
	}
	if _, ok := s.Programs[name]; ok {
		return "/usr/bin/" + name, true
	}
	if p, ok := s.findInPath(name, env, dir); ok {
		return p, true
	}
	return "", false
}

func (s *Shell) startDir() string {
	home := s.Home
	if home == "" {
		home = "/root"
	}
	if fi, err := s.FS.Stat(home); err == nil && fi.IsDir() {
		return home
	}
	return "/"
}

// environ builds the login environment with defaults filled in.
func (s *Shell) environ() expand.Environ {
	have := map[string]bool{}
	pairs := make([]string, 0, len(s.Env)+8)
	for _, kv := range s.Env {
		k, _, _ := strings.Cut(kv, "=")
		have[k] = true
		pairs = append(pairs, kv)
	}
	home := s.Home
	if home == "" {
		home = "/root"
	}
	for _, kv := range []string{
		"PATH=" + DefaultPath, "HOME=" + home, "USER=root", "LOGNAME=root", "SHELL=/bin/bash",
		"LANG=C.UTF-8", "UID=0", "EUID=0", "GID=0",
	} {
		k, _, _ := strings.Cut(kv, "=")
		if !have[k] {
			pairs = append(pairs, kv)
		}
	}
	return expand.ListEnviron(pairs...)
}

func withEnv(env expand.Environ, extra []string) expand.Environ {
	var pairs []string
	override := map[string]bool{}
	for _, kv := range extra {
		k, _, _ := strings.Cut(kv, "=")
		override[k] = true
	}
	for name, vr := range env.Each {
		if vr.Exported && vr.IsSet() && !override[name] {
			pairs = append(pairs, name+"="+vr.String())
		}
	}
	return expand.ListEnviron(append(pairs, extra...)...)
}

// exitCode converts an interpreter result into an exit status.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	if code, ok := errors.AsType[interp.ExitStatus](err); ok {
		return int(code)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return 130
	}
	fmt.Fprintf(stderr, "sh: %v\n", err)
	return 1
}

// run interprets script with positional parameters params ($0 first) in dir with env.
func (s *Shell) run(ctx context.Context, script string, params []string, stdio Stdio, dir string, env expand.Environ) int {
	file, err := syntax.NewParser().Parse(strings.NewReader(script), "")
	if err != nil {
		name := "sh"
		if len(params) > 0 {
			name = params[0]
		}
		fmt.Fprintf(stdio.Stderr, "%s: %v\n", name, err)
		return 2
	}
	stdin, done := asFile(s.Log, stdio.Stdin)
	defer done()
	stdio.Stdin = stdin
	// The interpreter's builtins write a line in pieces (echo writes each word, then the
	// newline). A program writes a line at once, so a reader of both streams sees whole lines
	// in the order they were printed: the guest's output is passed on a line at a time.
	out, errw := newLineWriter(stdio.Stdout), newLineWriter(stdio.Stderr)
	defer errw.flush()
	defer out.flush()
	stdio.Stdout, stdio.Stderr = out, errw
	r, err := s.newRunner(stdio, env, params)
	if err != nil {
		fmt.Fprintf(stdio.Stderr, "sh: %v\n", err)
		return 1
	}
	if err := s.prelude(ctx, r, dir); err != nil {
		fmt.Fprintf(stdio.Stderr, "sh: %v\n", err)
		return 1
	}
	return exitCode(r.Run(ctx, file), stdio.Stderr)
}

func (s *Shell) newRunner(stdio Stdio, env expand.Environ, params []string) (*interp.Runner, error) {
	env = withEnv(env, []string{"TMPDIR=" + noTempDir})
	var stdin io.Reader = stdio.Stdin
	if _, empty := stdin.(emptyReader); empty {
		stdin = nil
	}
	opts := []interp.RunnerOption{
		interp.Env(env),
		// Dir is checked against the real file system by the interpreter, so it starts at
		// "/" (which exists everywhere) and prelude moves it to the virtual directory.
		interp.Dir("/"),
		interp.StdIO(stdin, stdio.Stdout, stdio.Stderr),
		interp.ExecHandlers(func(interp.ExecHandlerFunc) interp.ExecHandlerFunc {
			// The next handler is the interpreter's default, which runs host binaries:
			// it is deliberately never called.
			return s.execHandler
		}),
		interp.OpenHandler(s.openHandler),
		interp.ReadDirHandler2(s.readDirHandler),
		interp.StatHandler(s.statHandler),
		interp.AccessHandler(s.accessHandler),
		interp.CallHandler(s.callHandler),
	}
	if len(params) > 0 {
		// interp.Params takes "--" then $1..; $0 is not settable, so it is dropped.
		opts = append(opts, interp.Params(append([]string{"--"}, params[1:]...)...))
	}
	return interp.New(opts...)
}

// prelude moves the runner into dir and hides the TMPDIR used to fence off FIFOs.
func (s *Shell) prelude(ctx context.Context, r *interp.Runner, dir string) error {
	r.Reset()
	stmts := []*syntax.Stmt{
		{Cmd: callExpr("unset", "TMPDIR")},
	}
	if dir != "/" {
		if fi, err := s.FS.Stat(dir); err == nil && fi.IsDir() {
			stmts = append(stmts, &syntax.Stmt{Cmd: callExpr("cd", dir)})
		}
	}
	for _, st := range stmts {
		if err := r.Run(ctx, st); err != nil {
			if _, ok := errors.AsType[interp.ExitStatus](err); !ok {
				return err
			}
		}
	}
	return nil
}

// callExpr builds a simple command whose words are exactly args, with no expansion.
func callExpr(args ...string) *syntax.CallExpr {
	words := make([]*syntax.Word, len(args))
	for i, a := range args {
		words[i] = &syntax.Word{Parts: []syntax.WordPart{&syntax.SglQuoted{Value: a}}}
	}
	return &syntax.CallExpr{Args: words}
}

// runBuiltin runs a shell builtin (echo, printf, test, …) for a direct exec of argv.
func (s *Shell) runBuiltin(ctx context.Context, argv []string, stdio Stdio, dir string, env expand.Environ) int {
	stdin, done := asFile(s.Log, stdio.Stdin)
	defer done()
	stdio.Stdin = stdin
	r, err := s.newRunner(stdio, env, nil)
	if err != nil {
		fmt.Fprintf(stdio.Stderr, "%s: %v\n", argv[0], err)
		return 1
	}
	if err := s.prelude(ctx, r, dir); err != nil {
		fmt.Fprintf(stdio.Stderr, "%s: %v\n", argv[0], err)
		return 1
	}
	return exitCode(r.Run(ctx, &syntax.Stmt{Cmd: callExpr(argv...)}), stdio.Stderr)
}

var stdBinDirs = []string{"/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin"}

func isStdBinDir(d string) bool { return slices.Contains(stdBinDirs, d) }

func (s *Shell) findInPath(name string, env expand.Environ, dir string) (string, bool) {
	pathVar := env.Get("PATH").String()
	if pathVar == "" {
		pathVar = DefaultPath
	}
	for _, d := range strings.Split(pathVar, ":") {
		if d == "" {
			d = "."
		}
		p := sandbox.Clean(dir, d+"/"+name)
		if fi, err := s.FS.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, true
		}
	}
	return "", false
}

// execArgv is the single place a command name becomes something that runs.
// viaShell says the name came from a command line the login shell interprets.
func (s *Shell) execArgv(ctx context.Context, argv []string, stdio Stdio, dir string, env expand.Environ, viaShell bool) int {
	if len(argv) == 0 {
		return 0
	}
	if err := ctx.Err(); err != nil {
		return 130
	}
	name := argv[0]
	if strings.Contains(name, "/") {
		p := sandbox.Clean(dir, name)
		fi, err := s.FS.Stat(p)
		if err == nil && fi.Mode().IsRegular() {
			return s.execFile(ctx, p, fi, argv, stdio, dir, env)
		}
		base := path.Base(p)
		if isStdBinDir(path.Dir(p)) && errors.Is(err, fs.ErrNotExist) {
			if prog, ok := s.Programs[base]; ok {
				return s.callProgram(ctx, prog, argv, stdio, dir, env)
			}
			if interp.IsBuiltin(base) {
				return s.runBuiltin(ctx, append([]string{base}, argv[1:]...), stdio, dir, env)
			}
		}
		switch {
		case err == nil && fi.IsDir():
			fmt.Fprintf(stdio.Stderr, "sh: %s: Is a directory\n", name)
			return 126
		case err != nil:
			fmt.Fprintf(stdio.Stderr, "sh: %s: %s\n", name, sandbox.Describe(err))
			return 127
		}
		fmt.Fprintf(stdio.Stderr, "sh: %s: Permission denied\n", name)
		return 126
	}
	if prog, ok := s.Programs[name]; ok {
		return s.callProgram(ctx, prog, argv, stdio, dir, env)
	}
	if interp.IsBuiltin(name) {
		return s.runBuiltin(ctx, argv, stdio, dir, env)
	}
	if p, ok := s.findInPath(name, env, dir); ok {
		fi, err := s.FS.Stat(p)
		if err == nil {
			return s.execFile(ctx, p, fi, argv, stdio, dir, env)
		}
	}
	if viaShell {
		return notFoundCode // the caller knows which shell is speaking
	}
	fmt.Fprintf(stdio.Stderr, "%s: command not found\n", name)
	return 127
}

// notFoundCode is execArgv's answer to the interpreter for a name nothing answers to; it
// never leaves the package (notFound turns it into 127).
const notFoundCode = -127

// execFile runs a file from the sandbox: a shell script (any "#!" line naming a shell, or no
// "#!" line at all) is interpreted; anything else is refused as a host would refuse a binary
// for another architecture.
func (s *Shell) execFile(ctx context.Context, p string, fi fs.FileInfo, argv []string, stdio Stdio, dir string, env expand.Environ) int {
	if fi.Mode()&0o111 == 0 {
		fmt.Fprintf(stdio.Stderr, "sh: %s: Permission denied\n", argv[0])
		return 126
	}
	data, err := s.FS.ReadFile(p)
	if err != nil {
		fmt.Fprintf(stdio.Stderr, "sh: %s: %s\n", argv[0], sandbox.Describe(err))
		return 126
	}
	script := string(data)
	if strings.HasPrefix(script, "#!") {
		line, _, _ := strings.Cut(script, "\n")
		fields := strings.Fields(strings.TrimPrefix(line, "#!"))
		interpName := ""
		if len(fields) > 0 {
			interpName = path.Base(fields[0])
			if interpName == "env" && len(fields) > 1 {
				interpName = fields[1]
			}
		}
		switch interpName {
		case "sh", "bash", "dash", "ash", "zsh":
		default:
			fmt.Fprintf(stdio.Stderr, "sh: %s: cannot execute: required file not found\n", argv[0])
			return 126
		}
	} else if strings.ContainsRune(script, 0) {
		fmt.Fprintf(stdio.Stderr, "sh: %s: cannot execute binary file: Exec format error\n", argv[0])
		return 126
	}
	return s.run(ctx, script, append([]string{p}, argv[1:]...), stdio, dir, env)
}

func (s *Shell) callProgram(ctx context.Context, prog Program, argv []string, stdio Stdio, dir string, env expand.Environ) int {
	inv := &Invocation{
		Args: argv, Stdin: stdio.Stdin, Stdout: stdio.Stdout, Stderr: stdio.Stderr,
		Dir: dir, Env: env, Shell: s,
	}
	return prog(ctx, inv)
}

// execHandler is the interpreter's only way to run a command.
func (s *Shell) execHandler(ctx context.Context, args []string) error {
	hc := interp.HandlerCtx(ctx)
	stdio := Stdio{Stdin: hc.Stdin, Stdout: hc.Stdout, Stderr: hc.Stderr}.norm()
	if args[0] == typeProgram {
		return status(s.typeCommand(args[1:], stdio, hc.Dir, hc.Env))
	}
	code := s.execArgv(ctx, args, stdio, hc.Dir, hc.Env, true)
	if code == notFoundCode {
		code = s.notFound(ctx, stdio, args[0], hc.Pos.Line())
	}
	return status(code)
}

// loginShell is the base name of the login shell (SHELL of the login environment), the
// program that interprets command lines: "bash" unless the machine says otherwise.
func (s *Shell) loginShell() string {
	for _, kv := range s.Env {
		if v, ok := strings.CutPrefix(kv, "SHELL="); ok && v != "" {
			return path.Base(v)
		}
	}
	return "bash"
}

// notFound reports a command name nothing answers to, in the words of the shell
// interpreting the line: the program that ran the script (dash for sh: "sh: LINE: NAME: not
// found"), else the login shell ("bash: NAME: command not found", zsh's "zsh: command not
// found: NAME"). A command run directly (RunArgv, as lxc-attach does, or through env,
// timeout and xargs) has no shell to speak for it and keeps "NAME: command not found".
func (s *Shell) notFound(ctx context.Context, stdio Stdio, name string, line uint) int {
	who := s.loginShell()
	arg0 := who
	if in, ok := ctx.Value(interpreterKey{}).(interpreter); ok {
		who, arg0 = in.name, in.arg0
	}
	switch who {
	case "sh", "dash":
		fmt.Fprintf(stdio.Stderr, "%s: %d: %s: not found\n", arg0, max(line, 1), name)
	case "zsh":
		fmt.Fprintf(stdio.Stderr, "zsh: command not found: %s\n", name)
	default:
		fmt.Fprintf(stdio.Stderr, "%s: %s: command not found\n", arg0, name)
	}
	return 127
}

func status(code int) error {
	if code == 0 {
		return nil
	}
	if code > 255 || code < 0 {
		code = 255
	}
	return interp.ExitStatus(uint8(code))
}

// typeProgram is the internal name the call handler substitutes for `type` and
// `command -v`, whose builtin versions search the real PATH of the host.
const typeProgram = "\x00labsim-type"

// callHandler rewrites the few builtins that would look at the host's real file system.
func (s *Shell) callHandler(ctx context.Context, args []string) ([]string, error) {
	switch args[0] {
	case "type":
		return append([]string{typeProgram, "type"}, args[1:]...), nil
	case "command":
		if len(args) > 1 && (args[1] == "-v" || args[1] == "-V") {
			return append([]string{typeProgram, args[1]}, args[2:]...), nil
		}
	case "pwd":
		// pwd -P resolves symlinks on the real file system: the virtual path is the answer.
		return []string{"pwd"}, nil
	}
	return args, nil
}

// typeCommand implements `type NAME…`, `command -v NAME…` and `command -V NAME…`.
func (s *Shell) typeCommand(args []string, stdio Stdio, dir string, env expand.Environ) int {
	mode := args[0]
	args = args[1:]
	if mode == "type" {
		for len(args) > 0 && strings.HasPrefix(args[0], "-") {
			if args[0] == "-t" || args[0] == "-p" || args[0] == "-P" {
				mode = "type" + args[0]
			}
			args = args[1:]
		}
	}
	code := 0
	for _, name := range args {
		kind := ""
		switch {
		case syntax.IsKeyword(name):
			kind = "keyword"
		case interp.IsBuiltin(name):
			kind = "builtin"
		}
		if kind != "" {
			switch mode {
			case "-v":
				fmt.Fprintln(stdio.Stdout, name)
			case "type-t":
				fmt.Fprintln(stdio.Stdout, kind)
			case "type-p", "type-P":
			default:
				fmt.Fprintf(stdio.Stdout, "%s is a shell %s\n", name, kind)
			}
			continue
		}
		p, ok := s.Lookup(name, env, dir)
		if !ok {
			code = 1
			if mode == "type" || mode == "-V" {
				fmt.Fprintf(stdio.Stderr, "sh: type: %s: not found\n", name)
			}
			continue
		}
		switch mode {
		case "-v", "type-p", "type-P":
			fmt.Fprintln(stdio.Stdout, p)
		case "type-t":
			fmt.Fprintln(stdio.Stdout, "file")
		default:
			fmt.Fprintf(stdio.Stdout, "%s is %s\n", name, p)
		}
	}
	return code
}

func absFrom(ctx context.Context, p string) string {
	return sandbox.Clean(interp.HandlerCtx(ctx).Dir, p)
}

func (s *Shell) openHandler(ctx context.Context, p string, flag int, perm os.FileMode) (io.ReadWriteCloser, error) {
	if p == "/dev/null" {
		return devNull{}, nil
	}
	if p == "/dev/stdout" || p == "/dev/stderr" || p == "/dev/stdin" {
		hc := interp.HandlerCtx(ctx)
		switch p {
		case "/dev/stdout":
			return writeOnly{hc.Stdout}, nil
		case "/dev/stderr":
			return writeOnly{hc.Stderr}, nil
		}
		if hc.Stdin != nil {
			return readOnly{hc.Stdin}, nil
		}
		return devNull{}, nil
	}
	v := absFrom(ctx, p)
	f, err := s.FS.OpenFile(v, flag, perm)
	if err != nil {
		return nil, toOSPathError(err, p)
	}
	if fi, err := f.Stat(); err == nil && fi.IsDir() && flag&(os.O_WRONLY|os.O_RDWR) != 0 {
		f.Close()
		return nil, &os.PathError{Op: "open", Path: p, Err: syscall.EISDIR}
	}
	return f, nil
}

// toOSPathError keeps the path the script used and the errno, never a real path.
func toOSPathError(err error, p string) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &os.PathError{Op: pe.Op, Path: p, Err: pe.Err}
	}
	return &os.PathError{Op: "open", Path: p, Err: err}
}

func (s *Shell) readDirHandler(ctx context.Context, p string) ([]fs.DirEntry, error) {
	entries, err := s.FS.ReadDir(absFrom(ctx, p))
	if err != nil {
		return nil, toOSPathError(err, p)
	}
	return entries, nil
}

func (s *Shell) statHandler(ctx context.Context, p string, follow bool) (fs.FileInfo, error) {
	v := absFrom(ctx, p)
	var fi fs.FileInfo
	var err error
	if follow {
		fi, err = s.FS.Stat(v)
	} else {
		fi, err = s.FS.Lstat(v)
	}
	if err != nil {
		return nil, toOSPathError(err, p)
	}
	return fi, nil
}

// accessHandler answers test -r/-w/-x and cd's check as root would: everything that exists
// is readable and writable; executable needs an x bit (directories always pass).
func (s *Shell) accessHandler(ctx context.Context, p string, mode interp.AccessMode) error {
	v := absFrom(ctx, p)
	fi, err := s.FS.Stat(v)
	if err != nil {
		return toOSPathError(err, p)
	}
	if mode&interp.AccessExec != 0 && !fi.IsDir() && fi.Mode()&0o111 == 0 {
		return &os.PathError{Op: "access", Path: p, Err: syscall.EACCES}
	}
	if mode&interp.AccessWrite != 0 && fi.Mode()&0o222 == 0 && !fi.IsDir() {
		if strings.HasPrefix(v, "/proc/") {
			return &os.PathError{Op: "access", Path: p, Err: syscall.EACCES}
		}
	}
	return nil
}

// devNull is /dev/null: reads end at once, writes vanish.
type devNull struct{}

func (devNull) Read([]byte) (int, error)    { return 0, io.EOF }
func (devNull) Write(b []byte) (int, error) { return len(b), nil }
func (devNull) Close() error                { return nil }

// writeOnly and readOnly expose one standard stream as /dev/stdout, /dev/stderr or /dev/stdin.
type writeOnly struct{ w io.Writer }
type readOnly struct{ io.Reader }

func (w writeOnly) Read([]byte) (int, error)    { return 0, syscall.EBADF }
func (w writeOnly) Write(b []byte) (int, error) { return w.w.Write(b) }
func (w writeOnly) Close() error                { return nil }
func (r readOnly) Write([]byte) (int, error)    { return 0, syscall.EBADF }
func (r readOnly) Close() error                 { return nil }

// Names lists the registered program names, sorted (for `compgen`-like listings and tests).
func (r Registry) Names() []string {
	names := make([]string, 0, len(r))
	for n := range r {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
