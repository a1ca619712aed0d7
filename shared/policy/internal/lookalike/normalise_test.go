package lookalike

import (
	"testing"
)

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
		if got := Normalise(in); got != want {
			t.Errorf("normaliseLookalikes(%q) = %q, want %q", in, got, want)
		}
	}
}
