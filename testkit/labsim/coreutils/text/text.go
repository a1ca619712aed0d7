// Package text holds the simulated filters: wc, grep (egrep, fgrep), sort, uniq, cut, tr,
// seq and sed.
package text

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/oikos-hq/oikos/testkit/labsim/coreutils/cli"
	"github.com/oikos-hq/oikos/testkit/labsim/shell"
)

// Register adds the text utilities to reg.
func Register(reg shell.Registry) {
	maps.Copy(reg, shell.Registry{
		"wc": wc, "grep": grep, "egrep": grep, "fgrep": grep, "sort": sortProg, "uniq": uniq,
		"cut": cut, "tr": tr, "sed": sed, "seq": seq,
	})
}

func wc(_ context.Context, inv *shell.Invocation) int {
	o, err := cli.Parse(inv.Args[1:], "", nil, false)
	if err != nil {
		return cli.Usage(inv, err, 1)
	}
	showL, showW, showC, showM := o.Has("l", "lines"), o.Has("w", "words"), o.Has("c", "bytes"), o.Has("m", "chars")
	if !showL && !showW && !showC && !showM {
		showL, showW, showC = true, true, true
	}
	type counts struct {
		name                       string
		lines, words, bytes, chars int
	}
	var rows []counts
	var total counts
	stdin := len(o.Args) == 0
	code := cli.EachInput(inv, o.Args, func(name string, r io.Reader) error {
		data, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		c := counts{name: name, lines: strings.Count(string(data), "\n"), words: len(strings.Fields(string(data))),
			bytes: len(data), chars: utf8.RuneCount(data)}
		if name == "-" {
			c.name = ""
			if !stdin {
				c.name = "-"
			}
		}
		rows = append(rows, c)
		total.lines += c.lines
		total.words += c.words
		total.bytes += c.bytes
		total.chars += c.chars
		return nil
	})
	if len(rows) > 1 {
		total.name = "total"
		rows = append(rows, total)
	}
	nCols := 0
	for _, b := range []bool{showL, showW, showC, showM} {
		if b {
			nCols++
		}
	}
	width := len(strconv.Itoa(total.bytes))
	if stdin && nCols > 1 {
		width = max(width, 7)
	}
	if nCols == 1 && len(rows) == 1 {
		width = 1
	}
	for _, r := range rows {
		var cols []string
		if showL {
			cols = append(cols, fmt.Sprintf("%*d", width, r.lines))
		}
		if showW {
			cols = append(cols, fmt.Sprintf("%*d", width, r.words))
		}
		if showM {
			cols = append(cols, fmt.Sprintf("%*d", width, r.chars))
		}
		if showC {
			cols = append(cols, fmt.Sprintf("%*d", width, r.bytes))
		}
		line := strings.Join(cols, " ")
		if r.name != "" {
			line += " " + r.name
		}
		fmt.Fprintln(inv.Stdout, line)
	}
	return code
}

// breToERE converts a POSIX basic regular expression into Go's syntax.
func breToERE(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c == '\\' && i+1 < len(p) {
			i++
			switch n := p[i]; n {
			case '(', ')', '|', '{', '}', '+', '?':
				b.WriteByte(n)
			default:
				b.WriteByte('\\')
				b.WriteByte(n)
			}
			continue
		}
		switch c {
		case '(', ')', '|', '{', '}', '+', '?':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '*':
			if i == 0 {
				b.WriteString(`\*`)
			} else {
				b.WriteByte('*')
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func compileRegex(pattern string, extended, fixed, fold, word, line bool) (*regexp.Regexp, error) {
	switch {
	case fixed:
		pattern = regexp.QuoteMeta(pattern)
	case !extended:
		pattern = breToERE(pattern)
	}
	if word {
		pattern = `\b(?:` + pattern + `)\b`
	}
	if line {
		pattern = `^(?:` + pattern + `)$`
	}
	if fold {
		pattern = `(?i)` + pattern
	}
	return regexp.Compile(pattern)
}

func grep(ctx context.Context, inv *shell.Invocation) int {
	o, err := cli.Parse(inv.Args[1:], "efmABC", []string{"regexp", "file", "max-count"}, false)
	if err != nil {
		return cli.Usage(inv, err, 2)
	}
	var patterns []string
	if v, ok := o.Vals["e"]; ok {
		patterns = append(patterns, v...)
	}
	patterns = append(patterns, o.Vals["regexp"]...)
	files := o.Args
	if len(patterns) == 0 {
		if len(files) == 0 {
			fmt.Fprintf(inv.Stderr, "Usage: grep [OPTION]... PATTERNS [FILE]...\n")
			return 2
		}
		patterns, files = []string{files[0]}, files[1:]
	}
	var expanded []string
	for _, p := range patterns {
		expanded = append(expanded, strings.Split(p, "\n")...)
	}
	extended := o.Has("E", "extended-regexp") || inv.Name() == "egrep"
	fixed := o.Has("F", "fixed-strings") || inv.Name() == "fgrep"
	var res []*regexp.Regexp
	for _, p := range expanded {
		re, err := compileRegex(p, extended, fixed, o.Has("i", "ignore-case"), o.Has("w", "word-regexp"), o.Has("x", "line-regexp"))
		if err != nil {
			inv.Errorf("invalid regular expression: %v", err)
			return 2
		}
		res = append(res, re)
	}
	invert, count, quiet := o.Has("v", "invert-match"), o.Has("c", "count"), o.Has("q", "quiet", "silent")
	listFiles, number, only := o.Has("l", "files-with-matches"), o.Has("n", "line-number"), o.Has("o", "only-matching")
	silent := o.Has("s", "no-messages")
	maxCount := -1
	if v, ok := o.Val("m", "max-count"); ok {
		maxCount, _ = cli.Atoi(v)
	}
	recursive := o.Has("r", "R", "recursive")
	if recursive && len(files) == 0 {
		files = []string{"."}
	}
	if recursive {
		var all []string
		for _, f := range files {
			all = append(all, walkFiles(inv, f)...)
		}
		files = all
	}
	withName := (len(files) > 1 || recursive) && !o.Has("h", "no-filename")
	if o.Has("H", "with-filename") {
		withName = true
	}
	matched := false
	code := 0
	if len(files) == 0 {
		files = []string{"-"}
	}
	for _, name := range files {
		if ctx.Err() != nil {
			return 130
		}
		r, err := cli.OpenInput(inv, name)
		if err != nil {
			if !silent {
				inv.PathError(name, err)
			}
			code = 2
			continue
		}
		label := name
		if name == "-" {
			label = "(standard input)"
		}
		n, hits := 0, 0
		err = cli.ScanLines(r, func(line string) bool {
			n++
			hit := false
			for _, re := range res {
				if re.MatchString(line) {
					hit = true
					break
				}
			}
			if hit == invert {
				return true
			}
			hits++
			matched = true
			if quiet || listFiles {
				return false
			}
			if !count {
				prefix := ""
				if withName {
					prefix = label + ":"
				}
				if number {
					prefix += strconv.Itoa(n) + ":"
				}
				if only && !invert {
					for _, re := range res {
						for _, m := range re.FindAllString(line, -1) {
							fmt.Fprintf(inv.Stdout, "%s%s\n", prefix, m)
						}
					}
				} else {
					fmt.Fprintf(inv.Stdout, "%s%s\n", prefix, line)
				}
			}
			return maxCount < 0 || hits < maxCount
		})
		r.Close()
		if err != nil {
			if errors.Is(err, cli.ErrIsDir) {
				inv.Errorf("%s: Is a directory", name)
			}
			code = 2
			continue
		}
		if quiet && matched {
			return 0
		}
		if listFiles && hits > 0 {
			fmt.Fprintln(inv.Stdout, label)
		}
		if count {
			if withName {
				fmt.Fprintf(inv.Stdout, "%s:%d\n", label, hits)
			} else {
				fmt.Fprintf(inv.Stdout, "%d\n", hits)
			}
		}
	}
	if code == 2 && !(quiet && matched) {
		return 2
	}
	if matched {
		return 0
	}
	return 1
}

// walkFiles lists regular files below p (p itself when it is a file).
func walkFiles(inv *shell.Invocation, p string) []string {
	fi, err := inv.FS().Stat(inv.Abs(p))
	if err != nil || !fi.IsDir() {
		return []string{p}
	}
	des, err := inv.FS().ReadDir(inv.Abs(p))
	if err != nil {
		return nil
	}
	var out []string
	for _, de := range des {
		child := strings.TrimSuffix(p, "/") + "/" + de.Name()
		if de.IsDir() {
			out = append(out, walkFiles(inv, child)...)
		} else if de.Type().IsRegular() {
			out = append(out, child)
		}
	}
	return out
}

// sortKey extracts the key of a line for sort -k/-t.
func sortKey(line, sep string, start, end int) string {
	var fields []string
	if sep == "" {
		fields = strings.Fields(line)
	} else {
		fields = strings.Split(line, sep)
	}
	if start <= 0 {
		return line
	}
	if start > len(fields) {
		return ""
	}
	if end <= 0 || end > len(fields) {
		end = len(fields)
	}
	if end < start {
		return ""
	}
	j := sep
	if j == "" {
		j = " "
	}
	return strings.Join(fields[start-1:end], j)
}

// leadingNumber parses the numeric prefix sort -n compares.
func leadingNumber(s string) float64 {
	s = strings.TrimSpace(s)
	end := 0
	for end < len(s) && (s[end] == '-' && end == 0 || s[end] == '.' || s[end] >= '0' && s[end] <= '9') {
		end++
	}
	f, err := strconv.ParseFloat(s[:end], 64)
	if err != nil {
		return 0
	}
	return f
}

// humanNumber parses sort -h values like 1.5K, 20M.
func humanNumber(s string) float64 {
	s = strings.TrimSpace(s)
	mult := 1.0
	if s != "" {
		switch unicode.ToUpper(rune(s[len(s)-1])) {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
	}
	return leadingNumber(strings.TrimRight(s, "KMGTkmgt")) * mult
}

func sortProg(_ context.Context, inv *shell.Invocation) int {
	o, err := cli.Parse(inv.Args[1:], "ktoS", []string{"key", "field-separator", "output"}, false)
	if err != nil {
		return cli.Usage(inv, err, 2)
	}
	var lines []string
	code := cli.EachInput(inv, o.Args, func(_ string, r io.Reader) error {
		ls, _, err := cli.ReadLines(r)
		lines = append(lines, ls...)
		return err
	})
	if code != 0 {
		return 2
	}
	sep, _ := o.Val("t", "field-separator")
	start, end := 0, 0
	if k, ok := o.Val("k", "key"); ok {
		a, b, _ := strings.Cut(k, ",")
		a = strings.TrimRight(a, "bdfhnrMV")
		b = strings.TrimRight(b, "bdfhnrMV")
		if i := strings.IndexByte(a, '.'); i >= 0 {
			a = a[:i]
		}
		if i := strings.IndexByte(b, '.'); i >= 0 {
			b = b[:i]
		}
		start, _ = cli.Atoi(a)
		end, _ = cli.Atoi(b)
		if strings.ContainsAny(k, "n") {
			o.Flags["n"] = true
		}
		if strings.ContainsAny(k, "r") && !strings.Contains(k, ",") {
			o.Flags["r"] = true
		}
	}
	numeric, human, fold := o.Has("n", "numeric-sort"), o.Has("h", "human-numeric-sort"), o.Has("f", "ignore-case")
	reverse, unique := o.Has("r", "reverse"), o.Has("u", "unique")
	less := func(a, b string) int {
		ka, kb := sortKey(a, sep, start, end), sortKey(b, sep, start, end)
		if fold {
			ka, kb = strings.ToLower(ka), strings.ToLower(kb)
		}
		switch {
		case numeric || human:
			var na, nb float64
			if human {
				na, nb = humanNumber(ka), humanNumber(kb)
			} else {
				na, nb = leadingNumber(ka), leadingNumber(kb)
			}
			if na != nb {
				if na < nb {
					return -1
				}
				return 1
			}
			if unique {
				return 0
			}
			return strings.Compare(a, b)
		}
		if c := strings.Compare(ka, kb); c != 0 || unique {
			return c
		}
		return strings.Compare(a, b)
	}
	sort.SliceStable(lines, func(i, j int) bool {
		c := less(lines[i], lines[j])
		if reverse {
			return c > 0
		}
		return c < 0
	})
	if unique {
		out := lines[:0]
		for i, l := range lines {
			if i == 0 || less(out[len(out)-1], l) != 0 {
				out = append(out, l)
			}
		}
		lines = out
	}
	w := inv.Stdout
	if dst, ok := o.Val("o", "output"); ok {
		var b strings.Builder
		for _, l := range lines {
			b.WriteString(l + "\n")
		}
		if err := inv.FS().WriteFile(inv.Abs(dst), []byte(b.String()), 0o644); err != nil {
			return inv.PathError(dst, err)
		}
		return 0
	}
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
	return 0
}

func uniq(_ context.Context, inv *shell.Invocation) int {
	o, err := cli.Parse(inv.Args[1:], "fs", nil, false)
	if err != nil {
		return cli.Usage(inv, err, 1)
	}
	count, dupOnly, uniqOnly, fold := o.Has("c", "count"), o.Has("d", "repeated"), o.Has("u", "unique"), o.Has("i", "ignore-case")
	var lines []string
	var in []string
	if len(o.Args) > 0 {
		in = o.Args[:1]
	}
	if code := cli.EachInput(inv, in, func(_ string, r io.Reader) error {
		ls, _, err := cli.ReadLines(r)
		lines = ls
		return err
	}); code != 0 {
		return code
	}
	eq := func(a, b string) bool {
		if fold {
			return strings.EqualFold(a, b)
		}
		return a == b
	}
	for i := 0; i < len(lines); {
		j := i + 1
		for j < len(lines) && eq(lines[j], lines[i]) {
			j++
		}
		n := j - i
		if (dupOnly && n < 2) || (uniqOnly && n > 1) {
			i = j
			continue
		}
		if count {
			fmt.Fprintf(inv.Stdout, "%7d %s\n", n, lines[i])
		} else {
			fmt.Fprintln(inv.Stdout, lines[i])
		}
		i = j
	}
	return 0
}

// parseList reads cut's LIST: "1,3", "2-", "-3", "2-4".
func parseList(s string) (func(int) bool, bool) {
	type rng struct{ a, b int }
	var rs []rng
	for _, part := range strings.Split(s, ",") {
		a, b, isRange := strings.Cut(part, "-")
		var r rng
		var ok bool
		if !isRange {
			if r.a, ok = cli.Atoi(a); !ok || r.a < 1 {
				return nil, false
			}
			r.b = r.a
		} else {
			r.a, r.b = 1, math.MaxInt
			if a != "" {
				if r.a, ok = cli.Atoi(a); !ok {
					return nil, false
				}
			}
			if b != "" {
				if r.b, ok = cli.Atoi(b); !ok {
					return nil, false
				}
			}
		}
		rs = append(rs, r)
	}
	return func(i int) bool {
		for _, r := range rs {
			if i >= r.a && i <= r.b {
				return true
			}
		}
		return false
	}, true
}

func cut(_ context.Context, inv *shell.Invocation) int {
	o, err := cli.Parse(inv.Args[1:], "dfcb", []string{"delimiter", "fields", "characters", "bytes"}, false)
	if err != nil {
		return cli.Usage(inv, err, 1)
	}
	delim := "\t"
	if d, ok := o.Val("d", "delimiter"); ok {
		delim = d
		if delim == "" {
			delim = "\t"
		}
	}
	onlyDelim := o.Has("s", "only-delimited")
	if f, ok := o.Val("f", "fields"); ok {
		sel, ok := parseList(f)
		if !ok {
			inv.Errorf("invalid field value '%s'", f)
			return 1
		}
		return cli.EachInput(inv, o.Args, func(_ string, r io.Reader) error {
			return cli.ScanLines(r, func(line string) bool {
				if !strings.Contains(line, delim) {
					if !onlyDelim {
						fmt.Fprintln(inv.Stdout, line)
					}
					return true
				}
				parts := strings.Split(line, delim)
				var out []string
				for i, p := range parts {
					if sel(i + 1) {
						out = append(out, p)
					}
				}
				fmt.Fprintln(inv.Stdout, strings.Join(out, delim))
				return true
			})
		})
	}
	list, ok := o.Val("c", "characters")
	if !ok {
		list, ok = o.Val("b", "bytes")
	}
	if !ok {
		inv.Errorf("you must specify a list of bytes, characters, or fields")
		return 1
	}
	sel, ok := parseList(list)
	if !ok {
		inv.Errorf("invalid byte/character position '%s'", list)
		return 1
	}
	return cli.EachInput(inv, o.Args, func(_ string, r io.Reader) error {
		return cli.ScanLines(r, func(line string) bool {
			var b strings.Builder
			for i, c := range []rune(line) {
				if sel(i + 1) {
					b.WriteRune(c)
				}
			}
			fmt.Fprintln(inv.Stdout, b.String())
			return true
		})
	})
}

// expandSet expands a tr SET: ranges, classes and escapes.
func expandSet(s string) []rune {
	classes := map[string]func(rune) bool{
		"[:upper:]": unicode.IsUpper, "[:lower:]": unicode.IsLower, "[:digit:]": unicode.IsDigit,
		"[:space:]": unicode.IsSpace, "[:alpha:]": unicode.IsLetter, "[:alnum:]": func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) },
		"[:punct:]": unicode.IsPunct, "[:blank:]": func(r rune) bool { return r == ' ' || r == '\t' },
	}
	var out []rune
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		matched := false
		for name, fn := range classes {
			if strings.HasPrefix(string(rs[i:]), name) {
				for c := rune(0); c < 128; c++ {
					if fn(c) {
						out = append(out, c)
					}
				}
				i += len(name) - 1
				matched = true
				break
			}
		}
		if matched {
			continue
		}
		c := rs[i]
		if c == '\\' && i+1 < len(rs) {
			i++
			switch rs[i] {
			case 'n':
				c = '\n'
			case 't':
				c = '\t'
			case 'r':
				c = '\r'
			case '0':
				c = 0
			default:
				c = rs[i]
			}
		}
		if i+2 < len(rs) && rs[i+1] == '-' {
			for x := c; x <= rs[i+2]; x++ {
				out = append(out, x)
			}
			i += 2
			continue
		}
		out = append(out, c)
	}
	return out
}

func tr(_ context.Context, inv *shell.Invocation) int {
	o, err := cli.Parse(inv.Args[1:], "", nil, false)
	if err != nil {
		return cli.Usage(inv, err, 1)
	}
	del, squeeze, complement := o.Has("d", "delete"), o.Has("s", "squeeze-repeats"), o.Has("c", "C", "complement")
	if len(o.Args) == 0 || (!del && !squeeze && len(o.Args) < 2) {
		return cli.Usage(inv, errors.New("missing operand"), 1)
	}
	set1 := expandSet(o.Args[0])
	in1 := map[rune]bool{}
	for _, c := range set1 {
		in1[c] = true
	}
	inSet1 := func(c rune) bool { return in1[c] != complement }
	var set2 []rune
	if len(o.Args) > 1 {
		set2 = expandSet(o.Args[1])
	}
	mapping := map[rune]rune{}
	if !del && len(set2) > 0 && !complement {
		for i, c := range set1 {
			j := min(i, len(set2)-1)
			mapping[c] = set2[j]
		}
	}
	data, err := io.ReadAll(inv.Stdin)
	if err != nil {
		return 1
	}
	var b strings.Builder
	var last rune = -1
	squeezeSet := map[rune]bool{}
	for _, c := range set2 {
		squeezeSet[c] = true
	}
	if len(set2) == 0 || del {
		for _, c := range set1 {
			squeezeSet[c] = true
		}
		if del && len(set2) > 0 {
			squeezeSet = map[rune]bool{}
			for _, c := range set2 {
				squeezeSet[c] = true
			}
		}
	}
	for _, c := range string(data) {
		if del && inSet1(c) {
			continue
		}
		if !del {
			if m, ok := mapping[c]; ok {
				c = m
			} else if complement && inSet1(c) && len(set2) > 0 {
				c = set2[len(set2)-1]
			}
		}
		if squeeze && c == last && squeezeSet[c] {
			continue
		}
		last = c
		b.WriteRune(c)
	}
	io.WriteString(inv.Stdout, b.String())
	return 0
}

func seq(_ context.Context, inv *shell.Invocation) int {
	o, err := cli.Parse(inv.Args[1:], "sf", []string{"separator"}, false)
	if err != nil {
		// "seq -5 5": a negative first operand is not an option.
		o = cli.Opts{Flags: map[string]bool{}, Vals: map[string][]string{}, Args: inv.Args[1:]}
	}
	sep := "\n"
	if s, ok := o.Val("s", "separator"); ok {
		sep = s
	}
	nums := make([]float64, len(o.Args))
	isFloat := false
	for i, a := range o.Args {
		f, err := strconv.ParseFloat(a, 64)
		if err != nil {
			inv.Errorf("invalid floating point argument: '%s'", a)
			return 1
		}
		nums[i] = f
		if strings.Contains(a, ".") {
			isFloat = true
		}
	}
	first, inc, last := 1.0, 1.0, 0.0
	switch len(nums) {
	case 1:
		last = nums[0]
	case 2:
		first, last = nums[0], nums[1]
	case 3:
		first, inc, last = nums[0], nums[1], nums[2]
	default:
		return cli.Usage(inv, errors.New("missing operand"), 1)
	}
	if inc == 0 {
		inv.Errorf("invalid Zero increment value: '0'")
		return 1
	}
	var parts []string
	for x := first; (inc > 0 && x <= last+1e-9) || (inc < 0 && x >= last-1e-9); x += inc {
		if isFloat {
			parts = append(parts, strconv.FormatFloat(x, 'f', -1, 64))
		} else {
			parts = append(parts, strconv.FormatInt(int64(math.Round(x)), 10))
		}
		if len(parts) > 10_000_000 {
			break
		}
	}
	if len(parts) > 0 {
		io.WriteString(inv.Stdout, strings.Join(parts, sep)+"\n")
	}
	return 0
}
