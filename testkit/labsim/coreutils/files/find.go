package files

import (
	"context"
	"fmt"
	"io/fs"
	"math"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/oikos-hq/oikos/testkit/labsim/coreutils/cli"
	"github.com/oikos-hq/oikos/testkit/labsim/sandbox"
	"github.com/oikos-hq/oikos/testkit/labsim/shell"
)

// findEntry is one file visited by find.
type findEntry struct {
	shown string // path as printed
	abs   string // virtual absolute path
	fi    fs.FileInfo
	depth int
}

// findExpr is a node of find's expression tree.
type findExpr interface {
	eval(ctx context.Context, f *finder, e findEntry) bool
}

type finder struct {
	inv        *shell.Invocation
	now        time.Time
	maxDepth   int
	minDepth   int
	depthFirst bool
	hasAction  bool
	failed     bool
	batches    []*execBatch
}

type andExpr struct{ l, r findExpr }
type orExpr struct{ l, r findExpr }
type notExpr struct{ x findExpr }
type predExpr func(ctx context.Context, f *finder, e findEntry) bool

func (a andExpr) eval(ctx context.Context, f *finder, e findEntry) bool {
	return a.l.eval(ctx, f, e) && a.r.eval(ctx, f, e)
}
func (o orExpr) eval(ctx context.Context, f *finder, e findEntry) bool {
	return o.l.eval(ctx, f, e) || o.r.eval(ctx, f, e)
}
func (n notExpr) eval(ctx context.Context, f *finder, e findEntry) bool {
	return !n.x.eval(ctx, f, e)
}
func (p predExpr) eval(ctx context.Context, f *finder, e findEntry) bool { return p(ctx, f, e) }

type execBatch struct {
	argv  []string
	paths []string
}

type findParser struct {
	toks []string
	pos  int
	f    *finder
}

func (p *findParser) peek() string {
	if p.pos < len(p.toks) {
		return p.toks[p.pos]
	}
	return ""
}

func (p *findParser) next() (string, error) {
	if p.pos >= len(p.toks) {
		return "", fmt.Errorf("missing argument to '%s'", p.toks[len(p.toks)-1])
	}
	t := p.toks[p.pos]
	p.pos++
	return t, nil
}

func (p *findParser) parseOr() (findExpr, error) {
	l, err := p.parseAnd()
	if err != nil {
		return nil, err
	}
	for p.peek() == "-o" || p.peek() == "-or" {
		p.pos++
		r, err := p.parseAnd()
		if err != nil {
			return nil, err
		}
		l = orExpr{l, r}
	}
	return l, nil
}

func (p *findParser) parseAnd() (findExpr, error) {
	l, err := p.parseUnary()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		if t == "" || t == "-o" || t == "-or" || t == ")" {
			return l, nil
		}
		if t == "-a" || t == "-and" {
			p.pos++
		}
		r, err := p.parseUnary()
		if err != nil {
			return nil, err
		}
		l = andExpr{l, r}
	}
}

func (p *findParser) parseUnary() (findExpr, error) {
	t, err := p.next()
	if err != nil {
		return nil, err
	}
	switch t {
	case "!", "-not":
		x, err := p.parseUnary()
		if err != nil {
			return nil, err
		}
		return notExpr{x}, nil
	case "(":
		x, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		if c, _ := p.next(); c != ")" {
			//lint:ignore ST1005 GNU find's message, verbatim
			return nil, fmt.Errorf("invalid expression; I was expecting to find a ')' somewhere but did not see one.")
		}
		return x, nil
	}
	return p.primary(t)
}

// numCmp parses find's "+N", "-N", "N" numeric arguments.
func numCmp(s string) (sign int, n float64, ok bool) {
	switch {
	case strings.HasPrefix(s, "+"):
		sign, s = 1, s[1:]
	case strings.HasPrefix(s, "-"):
		sign, s = -1, s[1:]
	}
	v, err := strconv.ParseFloat(s, 64)
	return sign, v, err == nil
}

func (p *findParser) primary(t string) (findExpr, error) {
	always := predExpr(func(context.Context, *finder, findEntry) bool { return true })
	switch t {
	case "-name", "-iname", "-path", "-wholename", "-ipath":
		pat, err := p.next()
		if err != nil {
			return nil, err
		}
		fold := strings.HasPrefix(t, "-i")
		return predExpr(func(_ context.Context, _ *finder, e findEntry) bool {
			subject := path.Base(e.shown)
			if t == "-path" || t == "-wholename" || t == "-ipath" {
				subject = e.shown
			}
			pp := pat
			if fold {
				subject, pp = strings.ToLower(subject), strings.ToLower(pat)
			}
			ok, _ := path.Match(pp, subject)
			return ok
		}), nil
	case "-type":
		c, err := p.next()
		if err != nil {
			return nil, err
		}
		return predExpr(func(_ context.Context, _ *finder, e findEntry) bool {
			m := e.fi.Mode()
			for _, want := range strings.Split(c, ",") {
				switch want {
				case "f":
					if m.IsRegular() {
						return true
					}
				case "d":
					if m.IsDir() {
						return true
					}
				case "l":
					if m&fs.ModeSymlink != 0 {
						return true
					}
				case "p":
					if m&fs.ModeNamedPipe != 0 {
						return true
					}
				case "s":
					if m&fs.ModeSocket != 0 {
						return true
					}
				}
			}
			return false
		}), nil
	case "-mmin", "-mtime", "-amin", "-atime", "-cmin", "-ctime":
		v, err := p.next()
		if err != nil {
			return nil, err
		}
		sign, n, ok := numCmp(v)
		if !ok {
			return nil, fmt.Errorf("invalid argument '%s' to '%s'", v, t)
		}
		minutes := strings.HasSuffix(t, "min")
		return predExpr(func(_ context.Context, f *finder, e findEntry) bool {
			age := f.now.Sub(e.fi.ModTime()).Seconds()
			if minutes {
				age /= 60
				switch sign {
				case -1:
					return age < n
				case 1:
					return age > n
				}
				return math.Ceil(age) == n
			}
			days := math.Floor(age / 86400)
			switch sign {
			case -1:
				return days < n
			case 1:
				return days > n
			}
			return days == n
		}), nil
	case "-newer":
		ref, err := p.next()
		if err != nil {
			return nil, err
		}
		rfi, err := p.f.inv.FS().Stat(p.f.inv.Abs(ref))
		if err != nil {
			return nil, fmt.Errorf("'%s': %s", ref, sandbox.Describe(err))
		}
		return predExpr(func(_ context.Context, _ *finder, e findEntry) bool {
			return e.fi.ModTime().After(rfi.ModTime())
		}), nil
	case "-size":
		v, err := p.next()
		if err != nil {
			return nil, err
		}
		unit := int64(512)
		if v != "" {
			switch v[len(v)-1] {
			case 'c':
				unit, v = 1, v[:len(v)-1]
			case 'k':
				unit, v = 1024, v[:len(v)-1]
			case 'M':
				unit, v = 1024*1024, v[:len(v)-1]
			case 'G':
				unit, v = 1024*1024*1024, v[:len(v)-1]
			case 'b':
				v = v[:len(v)-1]
			}
		}
		sign, n, ok := numCmp(v)
		if !ok {
			return nil, fmt.Errorf("invalid argument '%s' to '-size'", v)
		}
		return predExpr(func(_ context.Context, _ *finder, e findEntry) bool {
			size := float64((e.fi.Size() + unit - 1) / unit)
			switch sign {
			case -1:
				return size < n
			case 1:
				return size > n
			}
			return size == n
		}), nil
	case "-empty":
		return predExpr(func(_ context.Context, f *finder, e findEntry) bool {
			if e.fi.IsDir() {
				des, err := f.inv.FS().ReadDir(e.abs)
				return err == nil && len(des) == 0
			}
			return e.fi.Mode().IsRegular() && e.fi.Size() == 0
		}), nil
	case "-maxdepth", "-mindepth":
		v, err := p.next()
		if err != nil {
			return nil, err
		}
		n, ok := cli.Atoi(v)
		if !ok {
			//lint:ignore ST1005 GNU find's message, verbatim
			return nil, fmt.Errorf("Expected a positive decimal integer argument to %s, but got '%s'", t, v)
		}
		if t == "-maxdepth" {
			p.f.maxDepth = n
		} else {
			p.f.minDepth = n
		}
		return always, nil
	case "-depth", "-xdev", "-mount", "-follow", "-noleaf":
		if t == "-depth" {
			p.f.depthFirst = true
		}
		return always, nil
	case "-true":
		return always, nil
	case "-false":
		return predExpr(func(context.Context, *finder, findEntry) bool { return false }), nil
	case "-print", "-print0":
		p.f.hasAction = true
		term := "\n"
		if t == "-print0" {
			term = "\x00"
		}
		return predExpr(func(_ context.Context, f *finder, e findEntry) bool {
			fmt.Fprint(f.inv.Stdout, e.shown+term)
			return true
		}), nil
	case "-delete":
		p.f.hasAction = true
		p.f.depthFirst = true
		return predExpr(func(_ context.Context, f *finder, e findEntry) bool {
			if e.depth == 0 && (e.shown == "." || e.abs == "/") {
				return true
			}
			if err := f.inv.FS().Remove(e.abs); err != nil {
				f.inv.Errorf("cannot delete '%s': %s", e.shown, sandbox.Describe(err))
				f.failed = true
				return false
			}
			return true
		}), nil
	case "-exec", "-execdir", "-ok":
		p.f.hasAction = true
		var argv []string
		for {
			a, err := p.next()
			if err != nil {
				return nil, fmt.Errorf("missing argument to '%s'", t)
			}
			if a == ";" {
				break
			}
			if a == "+" && len(argv) > 0 && argv[len(argv)-1] == "{}" {
				b := &execBatch{argv: argv[:len(argv)-1]}
				p.f.batches = append(p.f.batches, b)
				return predExpr(func(_ context.Context, _ *finder, e findEntry) bool {
					b.paths = append(b.paths, e.shown)
					return true
				}), nil
			}
			argv = append(argv, a)
		}
		if len(argv) == 0 {
			return nil, fmt.Errorf("missing argument to '%s'", t)
		}
		return predExpr(func(ctx context.Context, f *finder, e findEntry) bool {
			args := make([]string, len(argv))
			for i, a := range argv {
				args[i] = strings.ReplaceAll(a, "{}", e.shown)
			}
			return f.inv.Exec(ctx, args, shell.Stdio{Stdin: f.inv.Stdin, Stdout: f.inv.Stdout, Stderr: f.inv.Stderr}) == 0
		}), nil
	case "-prune":
		return always, nil
	}
	return nil, fmt.Errorf("unknown predicate '%s'", t)
}

func find(ctx context.Context, inv *shell.Invocation) int {
	args := inv.Args[1:]
	for len(args) > 0 && (args[0] == "-L" || args[0] == "-H" || args[0] == "-P") {
		args = args[1:]
	}
	var starts []string
	for len(args) > 0 && (!strings.HasPrefix(args[0], "-") || args[0] == "-") && args[0] != "!" && args[0] != "(" {
		starts = append(starts, args[0])
		args = args[1:]
	}
	if len(starts) == 0 {
		starts = []string{"."}
	}
	f := &finder{inv: inv, now: inv.Shell.Now(), maxDepth: -1}
	var expr findExpr = predExpr(func(context.Context, *finder, findEntry) bool { return true })
	if len(args) > 0 {
		p := &findParser{toks: args, f: f}
		e, err := p.parseOr()
		if err != nil {
			inv.Errorf("%v", err)
			return 1
		}
		if p.pos < len(p.toks) {
			inv.Errorf("paths must precede expression: '%s'", p.toks[p.pos])
			return 1
		}
		expr = e
	}
	visit := func(e findEntry) {
		if e.depth < f.minDepth {
			return
		}
		if expr.eval(ctx, f, e) && !f.hasAction {
			fmt.Fprintln(inv.Stdout, e.shown)
		}
	}
	var walk func(e findEntry)
	walk = func(e findEntry) {
		if ctx.Err() != nil {
			return
		}
		if !f.depthFirst {
			visit(e)
		}
		if e.fi.IsDir() && (f.maxDepth < 0 || e.depth < f.maxDepth) {
			des, err := inv.FS().ReadDir(e.abs)
			if err != nil {
				inv.Errorf("'%s': %s", e.shown, sandbox.Describe(err))
				f.failed = true
			}
			for _, de := range des {
				fi, err := inv.FS().Lstat(path.Join(e.abs, de.Name()))
				if err != nil {
					continue
				}
				shown := e.shown + "/" + de.Name()
				if strings.HasSuffix(e.shown, "/") {
					shown = e.shown + de.Name()
				}
				walk(findEntry{shown: shown, abs: path.Join(e.abs, de.Name()), fi: fi, depth: e.depth + 1})
			}
		}
		if f.depthFirst {
			visit(e)
		}
	}
	for _, s := range starts {
		abs := inv.Abs(s)
		fi, err := inv.FS().Stat(abs)
		if err != nil {
			fi, err = inv.FS().Lstat(abs)
		}
		if err != nil {
			inv.Errorf("'%s': %s", s, sandbox.Describe(err))
			f.failed = true
			continue
		}
		walk(findEntry{shown: s, abs: abs, fi: fi})
	}
	for _, b := range f.batches {
		if len(b.paths) == 0 {
			continue
		}
		argv := append(append([]string{}, b.argv...), b.paths...)
		if inv.Exec(ctx, argv, shell.Stdio{Stdin: inv.Stdin, Stdout: inv.Stdout, Stderr: inv.Stderr}) != 0 {
			f.failed = true
		}
	}
	if f.failed {
		return 1
	}
	return 0
}
