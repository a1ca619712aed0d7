package webfetch

import (
	"os"
	"strings"
	"testing"
)

// A status page becomes readable text: scripts, styles, noscript, hidden elements and form
// controls dropped; headings, list items, table rows, link text and preformatted lines kept.
func TestHTMLToTextGolden(t *testing.T) {
	t.Parallel()
	in, err := os.ReadFile("testdata/status.html")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/status.txt")
	if err != nil {
		t.Fatal(err)
	}
	if got := htmlToText(in); got != string(want) {
		t.Errorf("htmlToText:\n%s\n--- want:\n%s", got, want)
	}
}

func TestHTMLToText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"plain", "plain"},
		{"<p>a</p><p>b</p>", "a\n\nb"},
		{"<div>a</div><div>b</div>", "a\nb"},
		{"a<b>b</b>c", "abc"},
		{"a <b>b</b> c", "a b c"},
		{"<p>  spaced \n\t out  </p>", "spaced out"},
		{"<h3>Title</h3>text", "### Title\n\ntext"},
		{"<script>alert(1)</script><style>p{}</style>ok", "ok"},
		{"<p>unclosed <b>bold", "unclosed bold"},
		{"<p>line<br>break</p>", "line\nbreak"},
		{"<p>\x00ctl\x07chars</p>", "ctlchars"},
		{"<p>\xff\xfe</p>", "\uFFFD"},
		{"<a href=x>link</a> and <a>more</a>", "link and more"},
	} {
		if got := htmlToText([]byte(tc.in)); got != tc.want {
			t.Errorf("htmlToText(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
	// Nothing of a long document is lost but markup.
	long := strings.Repeat("<p>word</p>", 1000)
	if got := htmlToText([]byte(long)); strings.Count(got, "word") != 1000 {
		t.Errorf("long document: %d words", strings.Count(got, "word"))
	}
}
