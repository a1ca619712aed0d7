package shellword

import (
	"testing"
)

func TestOptionMatchesAbbreviationsAndGlobs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		have, want string
		match      bool
	}{
		{"--output", "--output", true},
		{"--o", "--output", true}, // GNU getopt_long takes any unambiguous prefix
		{"--ou", "--output", true},
		{"--", "--output", false},
		{"--outputx", "--output", false},
		{"-o", "--output", false}, // a short option is never a prefix
		{"--del", "--del*", true},
		{"--delete-after", "--del*", true},
		{"--dry-run", "--del*", false},
		{"-batc", "-ba*", true},
		{"-br", "-ba*", false},
		{"--password-command", "--*command*", true},
	}
	for _, tt := range tests {
		if got := OptionMatches(tt.have, tt.want); got != tt.match {
			t.Errorf("optionMatches(%q, %q) = %v, want %v", tt.have, tt.want, got, tt.match)
		}
	}
}
