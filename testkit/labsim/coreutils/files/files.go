// Package files holds the simulated utilities that read and change files and directories:
// cat, head, tail, ls, mkdir, rm, rmdir, touch, cp, mv, ln, stat, find, readlink, realpath,
// basename, dirname, tee, chmod, chown, du, md5sum and sha256sum.
package files

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/oikos-hq/oikos/testkit/labsim/coreutils/cli"
	"github.com/oikos-hq/oikos/testkit/labsim/sandbox"
	"github.com/oikos-hq/oikos/testkit/labsim/shell"
)

// Register adds the file utilities to reg.
func Register(reg shell.Registry) {
	maps.Copy(reg, shell.Registry{
		"cat": cat, "head": head, "tail": tail, "ls": ls, "mkdir": mkdir, "rm": rm, "rmdir": rmdir,
		"touch": touch, "cp": cp, "mv": mv, "ln": ln, "stat": stat, "find": find,
		"readlink": readlink, "realpath": realpath, "basename": basename, "dirname": dirname,
		"tee": tee, "chmod": chmod, "chown": chown, "du": du, "md5sum": hashsum, "sha256sum": hashsum,
	})
}

func cat(_ context.Context, inv *shell.Invocation) int {
	o, err := cli.Parse(inv.Args[1:], "", nil, false)
	if err != nil {
		return cli.Usage(inv, err, 1)
	}
	number := o.Has("n", "number")
	n := 0
	return cli.EachInput(inv, o.Args, func(_ string, r io.Reader) error {
		if !number {
			_, err := io.Copy(inv.Stdout, r)
			return err
		}
		return cli.ScanLines(r, func(line string) bool {
			n++
			fmt.Fprintf(inv.Stdout, "%6d\t%s\n", n, line)
			return true
		})
	})
}

// countArg parses head/tail counts such as "5", "+5", "-5", "1K".
func countArg(s string) (int, bool, bool) {
	plus := strings.HasPrefix(s, "+")
	s = strings.TrimLeft(s, "+-")
	mult := 1
	switch {
	case strings.HasSuffix(s, "K"), strings.HasSuffix(s, "k"):
		mult, s = 1024, s[:len(s)-1]
	case strings.HasSuffix(s, "M"):
		mult, s = 1024*1024, s[:len(s)-1]
	}
	n, ok := cli.Atoi(s)
	return n * mult, plus, ok
}

// legacyCount rewrites "head -5" into "head -n 5".
func legacyCount(args []string) []string {
	out := make([]string, 0, len(args)+1)
	for _, a := range args {
		if len(a) > 1 && a[0] == '-' && a[1] >= '0' && a[1] <= '9' {
			out = append(out, "-n", a[1:])
			continue
		}
		out = append(out, a)
	}
	return out
}

func head(_ context.Context, inv *shell.Invocation) int {
	return headTail(inv, true)
}

func tail(_ context.Context, inv *shell.Invocation) int {
	return headTail(inv, false)
}

func headTail(inv *shell.Invocation, isHead bool) int {
	o, err := cli.Parse(legacyCount(inv.Args[1:]), "nc", []string{"lines", "bytes"}, false)
	if err != nil {
		return cli.Usage(inv, err, 1)
	}
	count, plus, bytesMode := 10, false, false
	if v, ok := o.Val("n", "lines"); ok {
		n, p, ok := countArg(v)
		if !ok {
			inv.Errorf("invalid number of lines: '%s'", v)
			return 1
		}
		count, plus = n, p
	}
	if v, ok := o.Val("c", "bytes"); ok {
		n, p, ok := countArg(v)
		if !ok {
			inv.Errorf("invalid number of bytes: '%s'", v)
			return 1
		}
		count, plus, bytesMode = n, p, true
	}
	names := o.Args
	headers := len(names) > 1 && !o.Has("q", "quiet", "silent")
	first := true
	return cli.EachInput(inv, names, func(name string, r io.Reader) error {
		if headers {
			if !first {
				fmt.Fprintln(inv.Stdout)
			}
			label := name
			if name == "-" {
				label = "standard input"
			}
			fmt.Fprintf(inv.Stdout, "==> %s <==\n", label)
		}
		first = false
		if bytesMode {
			data, err := io.ReadAll(r)
			if err != nil {
				return err
			}
			switch {
			case isHead:
				data = data[:min(count, len(data))]
			case plus:
				data = data[min(max(count-1, 0), len(data)):]
			default:
				data = data[max(len(data)-count, 0):]
			}
			_, err = inv.Stdout.Write(data)
			return err
		}
		if isHead {
			n := 0
			if count == 0 {
				return nil
			}
			return scanLinesRaw(r, func(line string) bool {
				io.WriteString(inv.Stdout, line)
				n++
				return n < count
			})
		}
		var all []string
		if err := scanLinesRaw(r, func(line string) bool { all = append(all, line); return true }); err != nil {
			return err
		}
		if plus {
			all = all[min(max(count-1, 0), len(all)):]
		} else {
			all = all[max(len(all)-count, 0):]
		}
		for _, l := range all {
			io.WriteString(inv.Stdout, l)
		}
		return nil
	})
}

// scanLinesRaw streams lines including their newline (the last may lack one).
func scanLinesRaw(r io.Reader, fn func(line string) bool) error {
	buf := make([]byte, 32*1024)
	var pending []byte
	for {
		n, err := r.Read(buf)
		pending = append(pending, buf[:n]...)
		for {
			i := strings.IndexByte(string(pending), '\n')
			if i < 0 {
				break
			}
			line := string(pending[:i+1])
			pending = pending[i+1:]
			if !fn(line) {
				return nil
			}
		}
		if err == io.EOF {
			if len(pending) > 0 {
				fn(string(pending))
			}
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func modeString(m fs.FileMode) string {
	var b strings.Builder
	switch {
	case m.IsDir():
		b.WriteByte('d')
	case m&fs.ModeSymlink != 0:
		b.WriteByte('l')
	case m&fs.ModeNamedPipe != 0:
		b.WriteByte('p')
	case m&fs.ModeSocket != 0:
		b.WriteByte('s')
	case m&fs.ModeCharDevice != 0:
		b.WriteByte('c')
	case m&fs.ModeDevice != 0:
		b.WriteByte('b')
	default:
		b.WriteByte('-')
	}
	const rwx = "rwxrwxrwx"
	for i := 0; i < 9; i++ {
		if m.Perm()&(1<<uint(8-i)) != 0 {
			b.WriteByte(rwx[i])
		} else {
			b.WriteByte('-')
		}
	}
	return b.String()
}

func humanSize(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10)
	}
	units := "KMGTPE"
	f := float64(n)
	i := -1
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	if f < 10 {
		// ls and df round up to one decimal below 10.
		v := float64(int64(f*10+0.999999)) / 10
		if v >= 10 {
			return fmt.Sprintf("%d%c", int64(v), units[i])
		}
		return fmt.Sprintf("%.1f%c", v, units[i])
	}
	return fmt.Sprintf("%d%c", int64(f+0.999999), units[i])
}

func nlink(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	if fi.IsDir() {
		return 2
	}
	return 1
}

func lsTime(t, now time.Time) string {
	if now.Sub(t) > 180*24*time.Hour || t.After(now.Add(time.Hour)) {
		return t.Format("Jan _2  2006")
	}
	return t.Format("Jan _2 15:04")
}

func ls(_ context.Context, inv *shell.Invocation) int {
	o, err := cli.Parse(inv.Args[1:], "", nil, false)
	if err != nil {
		return cli.Usage(inv, err, 2)
	}
	long := o.Has("l")
	all, almost := o.Has("a", "all"), o.Has("A", "almost-all")
	human := o.Has("h", "human-readable")
	dirSelf := o.Has("d", "directory")
	byTime, reverse, bySize := o.Has("t"), o.Has("r", "reverse"), o.Has("S")
	now := inv.Shell.Now()
	targets := o.Args
	if len(targets) == 0 {
		targets = []string{"."}
	}
	type entry struct {
		name string
		fi   fs.FileInfo
		path string
	}
	sortEntries := func(es []entry) {
		sort.SliceStable(es, func(i, j int) bool {
			switch {
			case byTime:
				return es[i].fi.ModTime().After(es[j].fi.ModTime())
			case bySize:
				return es[i].fi.Size() > es[j].fi.Size()
			}
			return es[i].name < es[j].name
		})
		if reverse {
			for i, j := 0, len(es)-1; i < j; i, j = i+1, j-1 {
				es[i], es[j] = es[j], es[i]
			}
		}
	}
	print := func(es []entry) {
		for _, e := range es {
			if !long {
				fmt.Fprintln(inv.Stdout, e.name)
				continue
			}
			size := strconv.FormatInt(e.fi.Size(), 10)
			if human {
				size = humanSize(e.fi.Size())
			}
			name := e.name
			if e.fi.Mode()&fs.ModeSymlink != 0 {
				if t, err := inv.FS().Readlink(e.path); err == nil {
					name += " -> " + t
				}
			}
			fmt.Fprintf(inv.Stdout, "%s %d root root %s %s %s\n", modeString(e.fi.Mode()), nlink(e.fi), size, lsTime(e.fi.ModTime(), now), name)
		}
	}
	code := 0
	var files []entry
	var dirs []entry
	for _, t := range targets {
		p := inv.Abs(t)
		fi, err := inv.FS().Stat(p)
		if err != nil {
			if lfi, lerr := inv.FS().Lstat(p); lerr == nil {
				fi, err = lfi, nil
			}
		}
		if err != nil {
			inv.Errorf("cannot access '%s': %s", t, sandbox.Describe(err))
			code = 2
			continue
		}
		if fi.IsDir() && !dirSelf {
			dirs = append(dirs, entry{name: t, fi: fi, path: p})
		} else {
			files = append(files, entry{name: t, fi: fi, path: p})
		}
	}
	sortEntries(files)
	print(files)
	for i, d := range dirs {
		if len(targets) > 1 {
			if i > 0 || len(files) > 0 {
				fmt.Fprintln(inv.Stdout)
			}
			fmt.Fprintf(inv.Stdout, "%s:\n", d.name)
		}
		des, err := inv.FS().ReadDir(d.path)
		if err != nil {
			inv.Errorf("cannot open directory '%s': %s", d.name, sandbox.Describe(err))
			code = 2
			continue
		}
		var es []entry
		if all {
			es = append(es, entry{name: ".", fi: d.fi, path: d.path})
			if pfi, err := inv.FS().Stat(path.Dir(d.path)); err == nil {
				es = append(es, entry{name: "..", fi: pfi, path: path.Dir(d.path)})
			}
		}
		var total int64
		for _, de := range des {
			if strings.HasPrefix(de.Name(), ".") && !all && !almost {
				continue
			}
			fi, err := de.Info()
			if err != nil {
				continue
			}
			total += (fi.Size() + 4095) / 4096 * 4
			es = append(es, entry{name: de.Name(), fi: fi, path: path.Join(d.path, de.Name())})
		}
		if long {
			fmt.Fprintf(inv.Stdout, "total %d\n", total)
		}
		sortEntries(es)
		print(es)
	}
	return code
}

// failed reports an operand the utility could not handle as GNU tools do ("<prog>: <what>
// '<name>': <reason>") and returns the exit status that makes.
func failed(inv *shell.Invocation, what, name string, err error) int {
	inv.Errorf("%s '%s': %s", what, name, sandbox.Describe(err))
	return 1
}

// outcome reports what became of one operand: a failure as failed does (status 1), a
// success as the verbose line (doneFormat, with the operand) when verbose is set (status 0).
func outcome(inv *shell.Invocation, err error, what, name string, verbose bool, doneFormat string) int {
	if err != nil {
		return failed(inv, what, name, err)
	}
	if verbose {
		fmt.Fprintf(inv.Stdout, doneFormat, name)
	}
	return 0
}

func mkdir(_ context.Context, inv *shell.Invocation) int {
	o, err := cli.Parse(inv.Args[1:], "m", []string{"mode"}, false)
	if err != nil {
		return cli.Usage(inv, err, 1)
	}
	if len(o.Args) == 0 {
		return cli.Usage(inv, errors.New("missing operand"), 1)
	}
	parents, verbose := o.Has("p", "parents"), o.Has("v", "verbose")
	code := 0
	for _, a := range o.Args {
		p := inv.Abs(a)
		if parents {
			err = inv.FS().MkdirAll(p, 0o755)
		} else {
			err = inv.FS().Mkdir(p, 0o755)
		}
		code = max(code, outcome(inv, err, "cannot create directory", a, verbose, "mkdir: created directory '%s'\n"))
	}
	return code
}

func rm(_ context.Context, inv *shell.Invocation) int {
	o, err := cli.Parse(inv.Args[1:], "", nil, false)
	if err != nil {
		return cli.Usage(inv, err, 1)
	}
	recursive, force := o.Has("r", "R", "recursive"), o.Has("f", "force")
	emptyDirs, verbose := o.Has("d", "dir"), o.Has("v", "verbose")
	if len(o.Args) == 0 {
		if force {
			return 0
		}
		return cli.Usage(inv, errors.New("missing operand"), 1)
	}
	code := 0
	for _, a := range o.Args {
		p := inv.Abs(a)
		trimmed := strings.TrimRight(a, "/")
		if base := path.Base(trimmed); trimmed != "" && (base == "." || base == "..") {
			inv.Errorf("refusing to remove '.' or '..' directory: skipping '%s'", a)
			code = 1
			continue
		}
		fi, err := inv.FS().Lstat(p)
		if err != nil {
			if !force || !errors.Is(err, fs.ErrNotExist) {
				code = failed(inv, "cannot remove", a, err)
			}
			continue
		}
		switch {
		case fi.IsDir() && recursive:
			err = inv.FS().RemoveAll(p)
		case fi.IsDir() && !emptyDirs:
			err = syscall.EISDIR
		default:
			err = inv.FS().Remove(p)
		}
		code = max(code, outcome(inv, err, "cannot remove", a, verbose, "removed '%s'\n"))
	}
	return code
}

func rmdir(_ context.Context, inv *shell.Invocation) int {
	o, err := cli.Parse(inv.Args[1:], "", nil, false)
	if err != nil {
		return cli.Usage(inv, err, 1)
	}
	code := 0
	for _, a := range o.Args {
		if err := inv.FS().Remove(inv.Abs(a)); err != nil {
			code = failed(inv, "failed to remove", a, err)
		}
	}
	return code
}

// parseWhen reads touch -d / date -d forms: "@epoch", "N minutes ago", "now", RFC 3339 and
// "YYYY-MM-DD[ HH:MM[:SS]]".
func parseWhen(s string, now time.Time) (time.Time, bool) {
	s = strings.TrimSpace(s)
	if s == "" || s == "now" {
		return now, true
	}
	if strings.HasPrefix(s, "@") {
		f, err := strconv.ParseFloat(s[1:], 64)
		if err != nil {
			return time.Time{}, false
		}
		return time.Unix(0, int64(f*1e9)), true
	}
	switch s {
	case "yesterday":
		return now.Add(-24 * time.Hour), true
	case "tomorrow":
		return now.Add(24 * time.Hour), true
	}
	fields := strings.Fields(s)
	if len(fields) >= 2 {
		ago := len(fields) == 3 && fields[2] == "ago"
		sign := 1
		num := fields[0]
		if strings.HasPrefix(num, "-") {
			sign, num = -1, num[1:]
		}
		num = strings.TrimPrefix(num, "+")
		if n, err := strconv.Atoi(num); err == nil && (len(fields) == 2 || ago) {
			unit := strings.TrimSuffix(fields[1], "s")
			var d time.Duration
			switch unit {
			case "sec", "second":
				d = time.Second
			case "min", "minute":
				d = time.Minute
			case "hour":
				d = time.Hour
			case "day":
				d = 24 * time.Hour
			case "week":
				d = 7 * 24 * time.Hour
			default:
				d = 0
			}
			if d != 0 {
				total := time.Duration(sign*n) * d
				if ago {
					total = -total
				}
				return now.Add(total), true
			}
		}
	}
	for _, layout := range []string{time.RFC3339Nano, time.RFC3339, "2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, now.Location()); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// parseTouchStamp reads touch -t [[CC]YY]MMDDhhmm[.ss].
func parseTouchStamp(s string, now time.Time) (time.Time, bool) {
	sec := "00"
	if i := strings.IndexByte(s, '.'); i >= 0 {
		s, sec = s[:i], s[i+1:]
	}
	switch len(s) {
	case 8:
		s = strconv.Itoa(now.Year()) + s
	case 10:
		s = "20" + s
	case 12:
	default:
		return time.Time{}, false
	}
	t, err := time.ParseInLocation("200601021504.05", s+"."+sec, now.Location())
	return t, err == nil
}

func touch(_ context.Context, inv *shell.Invocation) int {
	o, err := cli.Parse(inv.Args[1:], "dtr", []string{"date", "reference"}, false)
	if err != nil {
		return cli.Usage(inv, err, 1)
	}
	now := inv.Shell.Now()
	when := now
	if v, ok := o.Val("d", "date"); ok {
		t, ok := parseWhen(v, now)
		if !ok {
			inv.Errorf("invalid date format '%s'", v)
			return 1
		}
		when = t
	}
	if v, ok := o.Val("t"); ok {
		t, ok := parseTouchStamp(v, now)
		if !ok {
			inv.Errorf("invalid date format '%s'", v)
			return 1
		}
		when = t
	}
	if v, ok := o.Val("r", "reference"); ok {
		fi, err := inv.FS().Stat(inv.Abs(v))
		if err != nil {
			return failed(inv, "failed to get attributes of", v, err)
		}
		when = fi.ModTime()
	}
	if len(o.Args) == 0 {
		return cli.Usage(inv, errors.New("missing file operand"), 1)
	}
	code := 0
	for _, a := range o.Args {
		p := inv.Abs(a)
		if _, err := inv.FS().Stat(p); err != nil {
			if o.Has("c", "no-create") {
				continue
			}
			f, err := inv.FS().OpenFile(p, os.O_WRONLY|os.O_CREATE, 0o644)
			if err != nil {
				code = failed(inv, "cannot touch", a, err)
				continue
			}
			f.Close()
		}
		if err := inv.FS().Chtimes(p, when, when); err != nil {
			code = failed(inv, "setting times of", a, err)
		}
	}
	return code
}

// copyTree copies src to dst inside the sandbox (recursively for directories).
func copyTree(fsys *sandbox.FS, src, dst string, recursive, preserve bool) error {
	fi, err := fsys.Lstat(src)
	if err != nil {
		return err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0 && recursive:
		t, err := fsys.Readlink(src)
		if err != nil {
			return err
		}
		return fsys.Symlink(t, dst)
	case fi.IsDir():
		if !recursive {
			return errOmitDir
		}
		if err := fsys.Mkdir(dst, fi.Mode().Perm()); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		des, err := fsys.ReadDir(src)
		if err != nil {
			return err
		}
		for _, de := range des {
			if err := copyTree(fsys, path.Join(src, de.Name()), path.Join(dst, de.Name()), recursive, preserve); err != nil {
				return err
			}
		}
	default:
		in, err := fsys.Open(src)
		if err != nil {
			return err
		}
		defer in.Close()
		sfi, err := in.Stat()
		if err != nil {
			return err
		}
		out, err := fsys.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, sfi.Mode().Perm())
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		if err := out.Close(); err != nil {
			return err
		}
	}
	if preserve {
		return fsys.Chtimes(dst, fi.ModTime(), fi.ModTime())
	}
	return nil
}

var errOmitDir = errors.New("omitting directory")

// destFor returns where src lands given the last operand dst.
func destFor(inv *shell.Invocation, src, dst string, many bool) (string, error) {
	d := inv.Abs(dst)
	fi, err := inv.FS().Stat(d)
	if err == nil && fi.IsDir() {
		return path.Join(d, path.Base(inv.Abs(src))), nil
	}
	if many {
		return "", fmt.Errorf("target '%s': Not a directory", dst)
	}
	return d, nil
}

func cp(_ context.Context, inv *shell.Invocation) int {
	o, err := cli.Parse(inv.Args[1:], "", nil, false)
	if err != nil {
		return cli.Usage(inv, err, 1)
	}
	recursive := o.Has("r", "R", "a", "recursive", "archive")
	preserve := o.Has("p", "a", "archive")
	return eachSource(inv, o.Args, func(s, _, target string) int {
		if err := copyTree(inv.FS(), inv.Abs(s), target, recursive, preserve); err != nil {
			if errors.Is(err, errOmitDir) {
				inv.Errorf("-r not specified; omitting directory '%s'", s)
			} else {
				inv.Errorf("cannot stat '%s': %s", s, sandbox.Describe(err))
			}
			return 1
		}
		return 0
	})
}

func mv(_ context.Context, inv *shell.Invocation) int {
	o, err := cli.Parse(inv.Args[1:], "", nil, false)
	if err != nil {
		return cli.Usage(inv, err, 1)
	}
	return eachSource(inv, o.Args, func(s, dst, target string) int {
		if err := inv.FS().Rename(inv.Abs(s), target); err != nil {
			inv.Errorf("cannot move '%s' to '%s': %s", s, dst, sandbox.Describe(err))
			return 1
		}
		return 0
	})
}

// eachSource runs op for every SOURCE of `cp|mv SOURCE... DEST` with DEST and the source's
// target (DEST itself, or inside it when DEST is a directory); op returns the source's
// status, and the worst one is the command's.
func eachSource(inv *shell.Invocation, args []string, op func(src, dst, target string) int) int {
	if len(args) < 2 {
		return cli.Usage(inv, errors.New("missing destination file operand"), 1)
	}
	srcs, dst := args[:len(args)-1], args[len(args)-1]
	code := 0
	for _, s := range srcs {
		target, err := destFor(inv, s, dst, len(srcs) > 1)
		if err != nil {
			inv.Errorf("%v", err)
			return 1
		}
		code = max(code, op(s, dst, target))
	}
	return code
}

func ln(_ context.Context, inv *shell.Invocation) int {
	o, err := cli.Parse(inv.Args[1:], "", nil, false)
	if err != nil {
		return cli.Usage(inv, err, 1)
	}
	if len(o.Args) == 0 {
		return cli.Usage(inv, errors.New("missing file operand"), 1)
	}
	target := o.Args[0]
	link := path.Base(target)
	if len(o.Args) > 1 {
		link = o.Args[1]
	}
	lp := inv.Abs(link)
	if fi, err := inv.FS().Stat(lp); err == nil && fi.IsDir() && !o.Has("n", "no-dereference", "T") {
		lp = path.Join(lp, path.Base(target))
	}
	if o.Has("f", "force") {
		_ = inv.FS().Remove(lp)
	}
	if o.Has("s", "symbolic") {
		err = inv.FS().Symlink(target, lp)
	} else {
		err = inv.FS().Link(inv.Abs(target), lp)
	}
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			inv.Errorf("failed to create symbolic link '%s': File exists", link)
		} else {
			inv.Errorf("failed to create link '%s': %s", link, sandbox.Describe(err))
		}
		return 1
	}
	return 0
}

func fileType(fi fs.FileInfo) string {
	m := fi.Mode()
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "fifo"
	case m.IsRegular() && fi.Size() == 0:
		return "regular empty file"
	case m.IsRegular():
		return "regular file"
	}
	return "unknown"
}

func statTimes(fi fs.FileInfo) (atime, ctime time.Time) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return time.Unix(st.Atim.Sec, st.Atim.Nsec), time.Unix(st.Ctim.Sec, st.Ctim.Nsec)
	}
	return fi.ModTime(), fi.ModTime()
}

func statFormat(format string, name string, fi fs.FileInfo) string {
	atime, ctime := statTimes(fi)
	return cli.Expand(format, true, func(b *strings.Builder, c byte) bool {
		switch c {
		case 'n', 'N':
			b.WriteString(name)
		case 's':
			b.WriteString(strconv.FormatInt(fi.Size(), 10))
		case 'a':
			b.WriteString(strconv.FormatUint(uint64(fi.Mode().Perm()), 8))
		case 'A':
			b.WriteString(modeString(fi.Mode()))
		case 'F':
			b.WriteString(fileType(fi))
		case 'U', 'G':
			b.WriteString("root")
		case 'u', 'g':
			b.WriteByte('0')
		case 'Y':
			b.WriteString(strconv.FormatInt(fi.ModTime().Unix(), 10))
		case 'X':
			b.WriteString(strconv.FormatInt(atime.Unix(), 10))
		case 'Z':
			b.WriteString(strconv.FormatInt(ctime.Unix(), 10))
		case 'W':
			b.WriteString("0")
		case 'y':
			b.WriteString(fi.ModTime().Format("2006-01-02 15:04:05.000000000 -0700"))
		case 'x':
			b.WriteString(atime.Format("2006-01-02 15:04:05.000000000 -0700"))
		case 'z':
			b.WriteString(ctime.Format("2006-01-02 15:04:05.000000000 -0700"))
		case 'h':
			b.WriteString(strconv.FormatUint(nlink(fi), 10))
		case 'b':
			b.WriteString(strconv.FormatInt((fi.Size()+511)/512, 10))
		default:
			return false
		}
		return true
	})
}

func stat(_ context.Context, inv *shell.Invocation) int {
	o, err := cli.Parse(inv.Args[1:], "cf", []string{"format", "printf"}, false)
	if err != nil {
		return cli.Usage(inv, err, 1)
	}
	if len(o.Args) == 0 {
		return cli.Usage(inv, errors.New("missing operand"), 1)
	}
	format, hasFormat := o.Val("c", "format")
	if v, ok := o.Val("printf"); ok {
		format, hasFormat = v, true
	}
	code := 0
	for _, a := range o.Args {
		p := inv.Abs(a)
		var fi fs.FileInfo
		if o.Has("L", "dereference") {
			fi, err = inv.FS().Stat(p)
		} else {
			fi, err = inv.FS().Lstat(p)
		}
		if err != nil {
			code = failed(inv, "cannot statx", a, err)
			continue
		}
		if hasFormat {
			out := statFormat(format, a, fi)
			if _, ok := o.Val("printf"); !ok {
				out += "\n"
			}
			io.WriteString(inv.Stdout, out)
			continue
		}
		atime, ctime := statTimes(fi)
		name := a
		if fi.Mode()&fs.ModeSymlink != 0 {
			if t, err := inv.FS().Readlink(p); err == nil {
				name = fmt.Sprintf("%s -> %s", a, t)
			}
		}
		const layout = "2006-01-02 15:04:05.000000000 -0700"
		fmt.Fprintf(inv.Stdout, "  File: %s\n", name)
		fmt.Fprintf(inv.Stdout, "  Size: %-15d Blocks: %-10d IO Block: 4096   %s\n", fi.Size(), (fi.Size()+511)/512, fileType(fi))
		fmt.Fprintf(inv.Stdout, "Device: 0,52\tInode: %-11d Links: %d\n", inode(fi), nlink(fi))
		fmt.Fprintf(inv.Stdout, "Access: (%04o/%s)  Uid: (    0/    root)   Gid: (    0/    root)\n", fi.Mode().Perm(), modeString(fi.Mode()))
		fmt.Fprintf(inv.Stdout, "Access: %s\nModify: %s\nChange: %s\n Birth: -\n", atime.Format(layout), fi.ModTime().Format(layout), ctime.Format(layout))
	}
	return code
}

func inode(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}

func readlink(_ context.Context, inv *shell.Invocation) int {
	o, err := cli.Parse(inv.Args[1:], "", nil, false)
	if err != nil {
		return cli.Usage(inv, err, 1)
	}
	code := 0
	for _, a := range o.Args {
		if o.Has("f", "e", "m", "canonicalize") {
			fmt.Fprintln(inv.Stdout, canonical(inv, inv.Abs(a)))
			continue
		}
		t, err := inv.FS().Readlink(inv.Abs(a))
		if err != nil {
			code = 1
			continue
		}
		fmt.Fprintln(inv.Stdout, t)
	}
	return code
}

// canonical resolves symlinks in p inside the sandbox.
func canonical(inv *shell.Invocation, p string) string {
	out := "/"
	for _, c := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		if c == "" {
			continue
		}
		next := path.Join(out, c)
		for hops := 0; hops < 40; hops++ {
			t, err := inv.FS().Readlink(next)
			if err != nil {
				break
			}
			if strings.HasPrefix(t, "/") {
				next = path.Clean(t)
			} else {
				next = path.Join(path.Dir(next), t)
			}
		}
		out = next
	}
	return out
}

func realpath(_ context.Context, inv *shell.Invocation) int {
	code := 0
	for _, a := range inv.Args[1:] {
		if strings.HasPrefix(a, "-") {
			continue
		}
		p := canonical(inv, inv.Abs(a))
		if _, err := inv.FS().Stat(p); err != nil {
			code = inv.PathError(a, err)
			continue
		}
		fmt.Fprintln(inv.Stdout, p)
	}
	return code
}

func basename(_ context.Context, inv *shell.Invocation) int {
	if len(inv.Args) < 2 {
		return cli.Usage(inv, errors.New("missing operand"), 1)
	}
	b := path.Base(inv.Args[1])
	if len(inv.Args) > 2 {
		b = strings.TrimSuffix(b, inv.Args[2])
	}
	fmt.Fprintln(inv.Stdout, b)
	return 0
}

func dirname(_ context.Context, inv *shell.Invocation) int {
	if len(inv.Args) < 2 {
		return cli.Usage(inv, errors.New("missing operand"), 1)
	}
	for _, a := range inv.Args[1:] {
		fmt.Fprintln(inv.Stdout, path.Dir(a))
	}
	return 0
}

func tee(_ context.Context, inv *shell.Invocation) int {
	o, err := cli.Parse(inv.Args[1:], "", nil, false)
	if err != nil {
		return cli.Usage(inv, err, 1)
	}
	flag := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if o.Has("a", "append") {
		flag = os.O_WRONLY | os.O_CREATE | os.O_APPEND
	}
	writers := []io.Writer{inv.Stdout}
	code := 0
	for _, a := range o.Args {
		f, err := inv.FS().OpenFile(inv.Abs(a), flag, 0o644)
		if err != nil {
			code = inv.PathError(a, err)
			continue
		}
		defer f.Close()
		writers = append(writers, f)
	}
	if _, err := io.Copy(io.MultiWriter(writers...), inv.Stdin); err != nil {
		return 1
	}
	return code
}

func chmod(_ context.Context, inv *shell.Invocation) int {
	args := inv.Args[1:]
	var recursive bool
	for len(args) > 0 && (args[0] == "-R" || args[0] == "-v" || args[0] == "-f") {
		recursive = recursive || args[0] == "-R"
		args = args[1:]
	}
	if len(args) < 2 {
		return cli.Usage(inv, errors.New("missing operand"), 1)
	}
	spec := args[0]
	code := 0
	for _, a := range args[1:] {
		p := inv.Abs(a)
		fi, err := inv.FS().Stat(p)
		if err != nil {
			code = failed(inv, "cannot access", a, err)
			continue
		}
		mode, ok := applyMode(fi.Mode().Perm(), spec)
		if !ok {
			inv.Errorf("invalid mode: '%s'", spec)
			return 1
		}
		if err := inv.FS().Chmod(p, mode); err != nil {
			code = failed(inv, "changing permissions of", a, err)
		}
		_ = recursive
	}
	return code
}

// applyMode applies an octal or symbolic (u+x, a-w, +x) chmod spec.
func applyMode(cur fs.FileMode, spec string) (fs.FileMode, bool) {
	if n, err := strconv.ParseUint(spec, 8, 32); err == nil {
		return fs.FileMode(n) & fs.ModePerm, true
	}
	mode := cur
	for _, part := range strings.Split(spec, ",") {
		i := strings.IndexAny(part, "+-=")
		if i < 0 {
			return 0, false
		}
		who, op, perms := part[:i], part[i], part[i+1:]
		if who == "" || strings.Contains(who, "a") {
			who = "ugo"
		}
		var bits fs.FileMode
		for _, w := range who {
			shift := map[rune]uint{'u': 6, 'g': 3, 'o': 0}[w]
			for _, p := range perms {
				switch p {
				case 'r':
					bits |= 4 << shift
				case 'w':
					bits |= 2 << shift
				case 'x', 'X':
					bits |= 1 << shift
				}
			}
		}
		switch op {
		case '+':
			mode |= bits
		case '-':
			mode &^= bits
		case '=':
			mode = bits
		}
	}
	return mode, true
}

func chown(_ context.Context, inv *shell.Invocation) int {
	// Every file in a machine belongs to root; ownership is accepted and ignored.
	for _, a := range inv.Args[2:] {
		if strings.HasPrefix(a, "-") {
			continue
		}
		if _, err := inv.FS().Lstat(inv.Abs(a)); err != nil {
			return failed(inv, "cannot access", a, err)
		}
	}
	return 0
}

func du(_ context.Context, inv *shell.Invocation) int {
	o, err := cli.Parse(inv.Args[1:], "d", []string{"max-depth"}, false)
	if err != nil {
		return cli.Usage(inv, err, 1)
	}
	human, summary := o.Has("h", "human-readable"), o.Has("s", "summarize")
	targets := o.Args
	if len(targets) == 0 {
		targets = []string{"."}
	}
	format := func(n int64) string {
		if human {
			if n == 0 {
				return "0"
			}
			return humanSize(n)
		}
		return strconv.FormatInt((n+1023)/1024, 10)
	}
	code := 0
	var walk func(p, shown string, depth int) int64
	walk = func(p, shown string, depth int) int64 {
		fi, err := inv.FS().Lstat(p)
		if err != nil {
			return 0
		}
		total := (fi.Size() + 4095) / 4096 * 4096
		if fi.IsDir() {
			des, _ := inv.FS().ReadDir(p)
			for _, de := range des {
				total += walk(path.Join(p, de.Name()), path.Join(shown, de.Name()), depth+1)
			}
			if !summary || depth == 0 {
				fmt.Fprintf(inv.Stdout, "%s\t%s\n", format(total), shown)
			}
		} else if depth == 0 {
			fmt.Fprintf(inv.Stdout, "%s\t%s\n", format(total), shown)
		}
		return total
	}
	for _, t := range targets {
		if _, err := inv.FS().Lstat(inv.Abs(t)); err != nil {
			code = failed(inv, "cannot access", t, err)
			continue
		}
		walk(inv.Abs(t), t, 0)
	}
	return code
}

func hashsum(_ context.Context, inv *shell.Invocation) int {
	newHash := func() hash.Hash { return sha256.New() }
	if inv.Name() == "md5sum" {
		newHash = func() hash.Hash { return md5.New() }
	}
	names := inv.Args[1:]
	return cli.EachInput(inv, names, func(name string, r io.Reader) error {
		h := newHash()
		if _, err := io.Copy(h, r); err != nil {
			return err
		}
		fmt.Fprintf(inv.Stdout, "%s  %s\n", hex.EncodeToString(h.Sum(nil)), name)
		return nil
	})
}
