package policy

import (
	"errors"
	"strings"
	"testing"
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
	if err := CheckSyntax("echo " + strings.Repeat("a", maxCommandBytes)); err == nil {
		t.Errorf("an over-long command passed the syntax gate")
	}
	if err := CheckSyntax(strings.Repeat("$(", maxNesting+1) + "ls" + strings.Repeat(")", maxNesting+1)); err == nil {
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
		err := CheckSyntax(tt.cmd)
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
