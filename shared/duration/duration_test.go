package duration

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	cases := []struct {
		in   string
		want time.Duration
		bad  string // part of the error when the input is refused
	}{
		{"30d", 30 * 24 * time.Hour, ""},
		{"1d", 24 * time.Hour, ""},
		{"+2d", 48 * time.Hour, ""},
		{"1d12h", 36 * time.Hour, ""},
		{"1d30m15s", 24*time.Hour + 30*time.Minute + 15*time.Second, ""},
		{"12h", 12 * time.Hour, ""},
		{"90m", 90 * time.Minute, ""},
		{"1h30m", 90 * time.Minute, ""},
		{"1.5h", 90 * time.Minute, ""},
		{"250ms", 250 * time.Millisecond, ""},
		{"10us", 10 * time.Microsecond, ""},
		{"10µs", 10 * time.Microsecond, ""},
		{"5ns", 5, ""},
		{"1m0s", time.Minute, ""}, // time.Duration.String's form reads back
		{" 5m ", 5 * time.Minute, ""},
		{"0d", 0, "not a positive duration"},
		{"0s", 0, "not a positive duration"},
		{"0", 0, "not a positive duration"},
		{"-5h", 0, "not a positive duration"},
		{"-3d", 0, "not a positive duration"},
		{"", 0, "not a duration"},
		{"   ", 0, "not a duration"},
		{"d", 0, "not a duration"},
		{"-d", 0, "not a duration"},
		{"1.5d", 0, "not a duration"},
		{"xd", 0, "not a duration"},
		{"1d-2h", 0, "not a duration"},
		{"1d2", 0, "not a duration"},
		{"1dd", 0, "not a duration"},
		{"2w", 0, "not a duration"},
		{"month", 0, "not a duration"},
		{"7", 0, "not a duration"},
		{"1y", 0, "not a duration"},
		{"999999999999d", 0, "longer than"},
		{"99999999999999999999d", 0, "longer than"},
		{"106751d23h59m", 0, "longer than"},
	}
	for _, c := range cases {
		got, err := Parse(c.in)
		switch {
		case c.bad == "" && (err != nil || got != c.want):
			t.Errorf("Parse(%q) = %v, %v; want %v", c.in, got, err, c.want)
		case c.bad != "" && (err == nil || !strings.Contains(err.Error(), c.bad) || !strings.Contains(err.Error(), `"`+strings.TrimSpace(c.in)+`"`)):
			t.Errorf("Parse(%q) = %v, %v; want an error naming the value and saying %q", c.in, got, err, c.bad)
		}
	}
}

func TestParseSyntaxErrorSaysWhatIsAccepted(t *testing.T) {
	_, err := Parse("soon")
	if err == nil || err.Error() != `"soon" is not a duration: use whole days such as 30d or a Go duration such as 12h or 90m` {
		t.Fatalf("Parse(soon): %v", err)
	}
}

func TestParseNonNegative(t *testing.T) {
	for in, want := range map[string]time.Duration{"0": 0, "0s": 0, "0d": 0, "30s": 30 * time.Second, "2d": 48 * time.Hour} {
		if got, err := ParseNonNegative(in); err != nil || got != want {
			t.Errorf("ParseNonNegative(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, bad := range map[string]string{"-1s": "negative", "-1d": "negative", "soon": "not a duration", "": "not a duration"} {
		if _, err := ParseNonNegative(in); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseNonNegative(%q) = %v; want an error saying %q", in, err, bad)
		}
	}
}

func TestFlag(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	d := Flag(fs, "timeout", 60*time.Second, "how long")
	if *d != time.Minute {
		t.Fatalf("default %v", *d)
	}
	if f := fs.Lookup("timeout"); f.DefValue != "1m0s" {
		t.Errorf("usage default %q, want 1m0s as flag.Duration shows it", f.DefValue)
	}
	if err := fs.Parse([]string{"--timeout", "1d"}); err != nil || *d != 24*time.Hour {
		t.Fatalf("--timeout 1d: %v, %v", *d, err)
	}
	if err := fs.Parse([]string{"--timeout=0"}); err != nil || *d != 0 {
		t.Fatalf("--timeout=0: %v, %v", *d, err)
	}
	fs2 := flag.NewFlagSet("t", flag.ContinueOnError)
	fs2.SetOutput(io.Discard)
	Flag(fs2, "timeout", time.Second, "")
	if err := fs2.Parse([]string{"--timeout", "soon"}); err == nil || !strings.Contains(err.Error(), `"soon" is not a duration`) {
		t.Fatalf("--timeout soon: %v", err)
	}
}

// The table shared/config tested when it held the parser (config.ParseDuration), unchanged.
func TestParseAsConfigDid(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want time.Duration
		bad  string // a part of the error
	}{
		{"30d", 30 * 24 * time.Hour, ""},
		{"1d", 24 * time.Hour, ""},
		{" 7d ", 7 * 24 * time.Hour, ""},
		{"12h", 12 * time.Hour, ""},
		{"90m", 90 * time.Minute, ""},
		{"1h30m", 90 * time.Minute, ""},
		{"300ms", 300 * time.Millisecond, ""},
		{"720h", 720 * time.Hour, ""},
		{"0d", 0, "not a positive duration"},
		{"0s", 0, "not a positive duration"},
		{"-5h", 0, "not a positive duration"},
		{"-3d", 0, "not a positive duration"},
		{"", 0, "not a duration"},
		{"d", 0, "not a duration"},
		{"1.5d", 0, "not a duration"},
		{"month", 0, "not a duration"},
		{"7", 0, "not a duration"},
		{"yesterday", 0, "use whole days such as 30d or a Go duration such as 12h or 90m"},
		{"999999999999d", 0, "longer than"},
	}
	for _, c := range cases {
		got, err := Parse(c.in)
		switch {
		case c.bad == "" && (err != nil || got != c.want):
			t.Errorf("Parse(%q) = %v, %v; want %v", c.in, got, err, c.want)
		case c.bad != "" && (err == nil || !strings.Contains(err.Error(), c.bad) || !strings.Contains(err.Error(), `"`+strings.TrimSpace(c.in)+`"`)):
			t.Errorf("Parse(%q) = %v, %v; want an error naming the value and saying %q", c.in, got, err, c.bad)
		}
	}
}
