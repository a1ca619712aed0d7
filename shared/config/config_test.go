package config

import (
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
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
		got, err := ParseDuration(c.in)
		switch {
		case c.bad == "" && (err != nil || got != c.want):
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", c.in, got, err, c.want)
		case c.bad != "" && (err == nil || !strings.Contains(err.Error(), c.bad) || !strings.Contains(err.Error(), `"`+strings.TrimSpace(c.in)+`"`)):
			t.Errorf("ParseDuration(%q) = %v, %v; want an error naming the value and saying %q", c.in, got, err, c.bad)
		}
	}
}

func TestReaderDuration(t *testing.T) {
	t.Parallel()
	env := map[string]string{"A": "30d", "B": "90m", "BAD": "soon", "NEG": "-1h"}
	r := New(func(k string) string { return env[k] })
	if d := r.Duration("A", time.Second); d != 30*24*time.Hour {
		t.Errorf("A = %v", d)
	}
	if d := r.Duration("B", time.Second); d != 90*time.Minute {
		t.Errorf("B = %v", d)
	}
	if d := r.Duration("UNSET", time.Minute); d != time.Minute {
		t.Errorf("UNSET = %v", d)
	}
	if d := r.Duration("BAD", time.Minute); d != time.Minute {
		t.Errorf("BAD = %v, want the default", d)
	}
	r.Duration("NEG", time.Minute)
	err := r.Err()
	if err == nil || !strings.Contains(err.Error(), `BAD: "soon" is not a duration`) || !strings.Contains(err.Error(), `NEG: "-1h" is not a positive duration`) {
		t.Errorf("Err = %v", err)
	}
}
