package syntaxgate

import (
	"errors"
	"strings"
	"testing"

	"github.com/oikos-hq/oikos/shared/policy/internal/walk"
)

func TestCheckSyntax(t *testing.T) {
	t.Parallel()
	tests := []syntaxCase{
		{"tail -n 3 /var/log/syslog", nil},
		{"head -n 3 file", nil},
		{"head -3 file", nil},
		{"ls -la", nil},
		{"cat - file", nil},
		{"tar -cf - dir | ssh atlas tar -xf -", nil},
		{"tar -czf - x", nil},
		{"su - postgres", nil},
		{"cd -", nil},
		{"echo 'head - n 3'", nil},
		{`echo "a - b"`, nil},
		{"git checkout -", nil},
		{"diff - b.txt", nil},
		{"echo a - bc", nil},
		{"head - n 3 file", []string{"flag typo", "`- n`", "write `-n`", "`head -n 3 file`"}},
		{"tail - f /var/log/syslog", []string{"flag typo", "`tail -f /var/log/syslog`"}},
		{"ls - l /srv", []string{"write `-l`"}},
		{"systemctl status caddy | head - n 5", []string{"`head -n 5`"}},
		{"bash -c 'head - n 3 file'", []string{"flag typo", "`head -n 3 file`"}},
		{"head \u2013n 3 file", []string{"en dash", "write `-n`"}},
		{"ls \u2014la", []string{"em dash"}},
		{"ls \u2212l", []string{"minus sign"}},
		{"ls 'unterminated", []string{"does not parse", "quoting"}},
		{"if true; then", []string{"does not parse"}},
		{"", []string{"empty"}},
		{"   \n\t", []string{"empty"}},
	}
	checkSyntaxCases(t, tests)
	if err := Check("echo " + strings.Repeat("a", walk.MaxCommandBytes)); err == nil {
		t.Errorf("an over-long command passed the syntax gate")
	}
	if err := Check(strings.Repeat("$(", walk.MaxNesting+1) + "ls" + strings.Repeat(")", walk.MaxNesting+1)); err == nil {
		t.Errorf("an absurdly nested command passed the syntax gate")
	}
}

// syntaxCase is a command and the substrings CheckSyntax's error must hold
// (nil: the command passes).
type syntaxCase struct {
	cmd  string
	want []string
}

func checkSyntaxCases(t *testing.T, tests []syntaxCase) {
	t.Helper()
	for _, tt := range tests {
		err := Check(tt.cmd)
		if tt.want == nil {
			if err != nil {
				t.Errorf("CheckSyntax(%q) = %v, want nil", tt.cmd, err)
			}
			continue
		}
		if err == nil || !errors.Is(err, ErrSyntax) {
			t.Errorf("CheckSyntax(%q) = %v, want an ErrSyntax", tt.cmd, err)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("CheckSyntax(%q) = %q, missing %q", tt.cmd, err, w)
			}
		}
	}
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
