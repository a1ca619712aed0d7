package wrappers

import (
	"testing"

	"github.com/oikos-hq/oikos/shared/policy/internal/shellword"
)

func TestXargsOptions(t *testing.T) {
	t.Parallel()
	w := func(ss ...string) []shellword.Word {
		out := make([]shellword.Word, len(ss))
		for i, s := range ss {
			out[i] = shellword.Word{Val: s}
		}
		return out
	}
	tests := []struct {
		args []string
		repl string
		rest int
	}{
		{[]string{"rm", "-rf"}, "", 0},
		{[]string{"-l", "rm"}, "", 1},  // -l takes no separate value
		{[]string{"-l5", "rm"}, "", 1}, // attached
		{[]string{"-i", "rm", "{}"}, "{}", 1},
		{[]string{"-iX", "rm", "X"}, "X", 1},
		{[]string{"-I", "F", "rm", "F"}, "F", 2},
		{[]string{"-IF", "rm"}, "F", 1},
		{[]string{"-n", "1", "-P", "4", "rm"}, "", 4},
		{[]string{"--replace", "rm"}, "{}", 1},
		{[]string{"--replace=@", "rm"}, "@", 1},
		{[]string{"--max-args", "2", "rm"}, "", 2},
		{[]string{"-0r", "rm"}, "", 1},
		{[]string{"--", "-rm"}, "", 1},
	}
	for _, tt := range tests {
		repl, rest := xargsOpts(w(tt.args...))
		if repl != tt.repl || rest != tt.rest {
			t.Errorf("xargsOpts(%q) = %q, %d; want %q, %d", tt.args, repl, rest, tt.repl, tt.rest)
		}
	}
}

func TestSplitSSHOption(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, key, val string }{
		{"ProxyCommand=nc %h %p", "proxycommand", "nc %h %p"},
		{"ProxyCommand nc %h %p", "proxycommand", "nc %h %p"},
		{"  BatchMode = yes", "batchmode", "yes"},
		{"Port=22", "port", "22"},
		{"Compression", "compression", ""},
	}
	for _, tt := range tests {
		if k, v := splitSSHOption(tt.in); k != tt.key || v != tt.val {
			t.Errorf("splitSSHOption(%q) = %q, %q; want %q, %q", tt.in, k, v, tt.key, tt.val)
		}
	}
}
