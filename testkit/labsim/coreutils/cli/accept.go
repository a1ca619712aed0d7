package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/oikos-hq/oikos/testkit/labsim/shell"
)

// Spec is the option set of a GNU program (from its --help and manual): flag letters, the
// letters that take a value, long options (a trailing "=" when they take one), whether
// "-5" counts as an option (head, tail), and the exit status of a usage error.
type Spec struct {
	Short, ShortVal string
	Long            []string
	Digits          bool
	Code            int
	UsageLine       string // printed between the message and "Try …" (grep)
}

// GNU lists the utilities whose options are checked before they run; the others (find's
// expressions, sed's -i[SUFFIX], the command runners) parse their own.
var GNU = map[string]Spec{
	"ls": {Short: "aAbBcCdfFgGhHiklLmnNopqQrRsStuUvxXZ1", ShortVal: "ITw", Code: 2, Long: []string{"all", "almost-all", "author",
		"escape", "block-size=", "ignore-backups", "color", "directory", "dired", "classify", "file-type", "format=", "full-time",
		"group-directories-first", "no-group", "human-readable", "si", "dereference-command-line", "dereference-command-line-symlink-to-dir",
		"hide=", "hyperlink", "indicator-style=", "inode", "ignore=", "kibibytes", "dereference", "numeric-uid-gid", "literal",
		"hide-control-chars", "show-control-chars", "quote-name", "quoting-style=", "reverse", "recursive", "size", "sort=", "time=",
		"time-style=", "tabsize=", "width=", "context", "zero", "help", "version"}},
	"cat": {Short: "AbeEnstTuv", Code: 1, Long: []string{"show-all", "number-nonblank", "show-ends", "number", "squeeze-blank",
		"show-tabs", "show-nonprinting", "help", "version"}},
	"head": {Short: "qvz", ShortVal: "cn", Digits: true, Code: 1, Long: []string{"bytes=", "lines=", "quiet", "silent", "verbose", "zero-terminated", "help", "version"}},
	"tail": {Short: "fFqvz", ShortVal: "cns", Digits: true, Code: 1, Long: []string{"bytes=", "follow", "lines=", "pid=", "quiet", "retry",
		"silent", "sleep-interval=", "verbose", "zero-terminated", "max-unchanged-stats=", "help", "version"}},
	"wc": {Short: "clLmw", Code: 1, Long: []string{"bytes", "chars", "lines", "files0-from=", "max-line-length", "words", "total=", "help", "version"}},
	"grep": {Short: "EFGPiyvwxclLobqsrRnHhTZzaUVIs", ShortVal: "efmABCdD", Digits: true, Code: 2, UsageLine: "Usage: grep [OPTION]... PATTERNS [FILE]...",
		Long: []string{"extended-regexp", "fixed-strings", "basic-regexp", "perl-regexp", "regexp=", "file=", "ignore-case", "no-ignore-case",
			"word-regexp", "line-regexp", "null-data", "no-messages", "invert-match", "version", "help", "max-count=", "byte-offset",
			"line-number", "no-line-number", "line-buffered", "with-filename", "no-filename", "label=", "only-matching", "quiet", "silent",
			"binary-files=", "text", "directories=", "devices=", "recursive", "dereference-recursive", "include=", "exclude=",
			"exclude-from=", "exclude-dir=", "files-without-match", "files-with-matches", "count", "initial-tab", "null",
			"before-context=", "after-context=", "context=", "color", "colour", "binary"}},
	"sort": {Short: "bdfgiMhnRrVcCmsuz", ShortVal: "kotST", Code: 2, Long: []string{"ignore-leading-blanks", "dictionary-order",
		"ignore-case", "general-numeric-sort", "ignore-nonprinting", "month-sort", "human-numeric-sort", "numeric-sort", "random-sort",
		"random-source=", "reverse", "sort=", "version-sort", "batch-size=", "check", "compress-program=", "debug", "files0-from=",
		"key=", "merge", "output=", "stable", "buffer-size=", "field-separator=", "temporary-directory=", "parallel=", "unique",
		"zero-terminated", "help", "version"}},
	"du": {Short: "0abcDHhkLlmPSsxX", ShortVal: "BdtX", Code: 1, Long: []string{"null", "all", "apparent-size", "block-size=", "bytes",
		"total", "dereference-args", "max-depth=", "human-readable", "inodes", "dereference", "count-links", "no-dereference",
		"separate-dirs", "si", "summarize", "threshold=", "time", "time-style=", "exclude-from=", "exclude=", "one-file-system", "help", "version"}},
	"stat":  {Short: "LfZt", ShortVal: "c", Code: 1, Long: []string{"dereference", "file-system", "format=", "printf=", "terse", "cached=", "help", "version"}},
	"mkdir": {Short: "pvZ", ShortVal: "m", Code: 1, Long: []string{"mode=", "parents", "verbose", "context", "help", "version"}},
	"rm":    {Short: "fiIrRdv", Code: 1, Long: []string{"force", "interactive", "one-file-system", "no-preserve-root", "preserve-root", "recursive", "dir", "verbose", "help", "version"}},
	"uniq":  {Short: "cdDiuz", ShortVal: "fsw", Code: 1, Long: []string{"count", "repeated", "all-repeated", "skip-fields=", "group", "ignore-case", "skip-chars=", "unique", "zero-terminated", "check-chars=", "help", "version"}},
	"cut":   {Short: "nsz", ShortVal: "bcdf", Code: 1, Long: []string{"bytes=", "characters=", "delimiter=", "fields=", "complement", "only-delimited", "output-delimiter=", "zero-terminated", "help", "version"}},
}

// Guard wraps prog so that an option outside name's Spec is refused as GNU getopt refuses
// it ("NAME: unrecognized option '--x'" / "NAME: invalid option -- 'x'", then "Try 'NAME
// --help' for more information.") with the program's usage status.
func Guard(name string, prog shell.Program) shell.Program {
	spec, ok := GNU[name]
	if !ok || spec.Code == 0 {
		return prog
	}
	long := map[string]bool{}
	for _, l := range spec.Long {
		long[strings.TrimSuffix(l, "=")] = strings.HasSuffix(l, "=")
	}
	return func(ctx context.Context, inv *shell.Invocation) int {
		args := inv.Args[1:]
		refuse := func(msg string) int {
			inv.Errorf("%s", msg)
			if spec.UsageLine != "" {
				fmt.Fprintln(inv.Stderr, spec.UsageLine)
			}
			fmt.Fprintf(inv.Stderr, "Try '%s --help' for more information.\n", inv.Name())
			return spec.Code
		}
	scan:
		for i := 0; i < len(args); i++ {
			a := args[i]
			switch {
			case a == "--":
				break scan
			case strings.HasPrefix(a, "--"):
				n, _, hasV := strings.Cut(a[2:], "=")
				takes, known := long[n]
				if !known {
					return refuse(fmt.Sprintf("unrecognized option '%s'", a))
				}
				if takes && !hasV {
					i++
				}
			case len(a) > 1 && a[0] == '-':
				for j := 1; j < len(a); j++ {
					c := a[j]
					switch {
					case spec.Digits && c >= '0' && c <= '9':
					case strings.IndexByte(spec.ShortVal, c) >= 0:
						if j == len(a)-1 {
							i++
						}
						j = len(a)
					case strings.IndexByte(spec.Short, c) >= 0:
					default:
						return refuse(fmt.Sprintf("invalid option -- '%c'", c))
					}
				}
			}
		}
		return prog(ctx, inv)
	}
}
