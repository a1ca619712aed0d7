package netmap

import (
	"errors"
	"maps"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		want     map[string]string
		err      string // substring of the error; "" means success
	}{
		{name: "empty", in: "", want: map[string]string{}},
		{name: "only separators", in: " ,\n\t, ", want: map[string]string{}},
		{name: "one ip", in: "svc.lab.example=127.0.0.1", want: map[string]string{"svc.lab.example": "127.0.0.1"}},
		{name: "ip and port", in: "svc.lab.example=127.0.20.1:8443", want: map[string]string{"svc.lab.example": "127.0.20.1:8443"}},
		{name: "wildcard", in: "*.lab.example=127.0.20.1:8443", want: map[string]string{"*.lab.example": "127.0.20.1:8443"}},
		{
			name: "the env form, commas",
			in:   "jellyfin.lab.example=127.0.20.1,*.lab.example=127.0.20.1:8443",
			want: map[string]string{"jellyfin.lab.example": "127.0.20.1", "*.lab.example": "127.0.20.1:8443"},
		},
		{
			name: "newlines, spaces and a trailing comma",
			in:   "\n  a.lab.example=127.0.0.2\n\tb.lab.example=127.0.0.3:80 ,\n*.example=127.0.0.4,\n",
			want: map[string]string{"a.lab.example": "127.0.0.2", "b.lab.example": "127.0.0.3:80", "*.example": "127.0.0.4"},
		},
		{name: "names normalised", in: "Svc.Lab.Example.=127.0.0.1", want: map[string]string{"svc.lab.example": "127.0.0.1"}},
		{name: "ipv6 loopback", in: "v6.lab.example=::1", want: map[string]string{"v6.lab.example": "::1"}},
		{name: "ipv6 with port", in: "v6.lab.example=[::1]:8443", want: map[string]string{"v6.lab.example": "[::1]:8443"}},
		{name: "ipv4-mapped value unmapped", in: "m.lab.example=::ffff:127.0.0.1", want: map[string]string{"m.lab.example": "127.0.0.1"}},
		{name: "ip literal key", in: "192.0.2.10=127.0.0.1", want: map[string]string{"192.0.2.10": "127.0.0.1"}},
		{name: "ip literal key canonical", in: "[0:0::1]=127.0.0.1", want: map[string]string{"::1": "127.0.0.1"}},
		{name: "non-loopback value parses (the dialer refuses it)", in: "x.example=192.0.2.1", want: map[string]string{"x.example": "192.0.2.1"}},
		{name: "underscore and digits", in: "_svc-1.lab.example=127.0.0.1", want: map[string]string{"_svc-1.lab.example": "127.0.0.1"}},

		{name: "no equals", in: "a.lab.example=127.0.0.1,b.lab.example", err: `entry "b.lab.example": want name=ip`},
		{name: "value is a name", in: "a.lab.example=localhost", err: `entry "a.lab.example=localhost": value "localhost" is not an IP literal`},
		{name: "value name with port", in: "a.lab.example=ingress.lab:8443", err: `names are never resolved`},
		{name: "empty value", in: "a.lab.example=", err: `entry "a.lab.example=": empty value`},
		{name: "empty name", in: "=127.0.0.1", err: `entry "=127.0.0.1": empty name`},
		{name: "port 0", in: "a.lab.example=127.0.0.1:0", err: "port 0"},
		{name: "port out of range", in: "a.lab.example=127.0.0.1:70000", err: `value "127.0.0.1:70000"`},
		{name: "ipv6 with port without brackets", in: "a.lab.example=::1:8443:x", err: "not an IP literal"},
		{name: "wildcard inside", in: "a.*.example=127.0.0.1", err: `a wildcard is only allowed as a leading`},
		{name: "bare star", in: "*=127.0.0.1", err: `a wildcard is only allowed`},
		{name: "empty label", in: "a..example=127.0.0.1", err: "empty label"},
		{name: "bad character", in: "a/b.example=127.0.0.1", err: `character '/'`},
		{name: "spaces around equals", in: "a.lab.example = 127.0.0.1", err: `entry "a.lab.example"`},
		{name: "duplicate after normalising", in: "a.lab.example=127.0.0.1 A.lab.example.=127.0.0.2", err: "a.lab.example is already mapped to 127.0.0.1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := Parse(tc.in)
			if tc.err != "" {
				if err == nil || !errors.Is(err, ErrNameMap) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Parse(%q) = %v, %v; want an ErrNameMap containing %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || !maps.Equal(got, tc.want) {
				t.Fatalf("Parse(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}

// Exact names win over wildcards, the longest wildcard suffix wins, a wildcard does not
// match its bare suffix, wildcards never match IP literals; hosts are matched in any case,
// with a trailing dot, and IP literals in any spelling.
func TestMapLookup(t *testing.T) {
	t.Parallel()
	m, err := Compile(map[string]string{
		"exact.lab.example": "127.0.0.1", "*.lab.example": "127.0.0.2", "*.deep.lab.example": "127.0.0.3:8443",
		"*.example": "127.0.0.5:9000", "Plain.Lab.Example.": "127.0.0.6:8080", "10.0.0.1": "127.0.0.4",
		"v6.lab.example": "[::1]:8443", "[::2]": "127.0.0.7", "*.0.0.10": "127.0.0.8",
	})
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]string{
		"exact.lab.example":    "127.0.0.1",
		"other.lab.example":    "127.0.0.2",
		"a.b.lab.example":      "127.0.0.2",
		"X.LAB.example.":       "127.0.0.2",
		"a.deep.lab.example":   "127.0.0.3:8443",
		"deep.lab.example":     "127.0.0.2",
		"lab.example":          "127.0.0.5:9000",
		"plain.lab.example":    "127.0.0.6:8080",
		"v6.lab.example":       "[::1]:8443",
		"10.0.0.1":             "127.0.0.4",
		"::ffff:10.0.0.1":      "127.0.0.4",
		"0::2":                 "127.0.0.7",
		"[::2]":                "127.0.0.7",
		"10.0.0.10":            "", // an IP literal, not a name under *.0.0.10
		"example":              "",
		"svc.other":            "",
		"127.0.0.1":            "",
		"exact.lab.example.ex": "",
	} {
		got, ok := m.Lookup(host)
		if (want == "") == ok || (ok && got.String() != want) {
			t.Errorf("Lookup(%s) = %v, %v; want %q", host, got, ok, want)
		}
	}
	var empty Map
	if got, ok := empty.Lookup("a.lab.example"); ok {
		t.Errorf("the zero Map found %v", got)
	}
}

func TestCompileErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		names map[string]string
		want  string
	}{
		{map[string]string{"a.lab.example": "localhost"}, `entry "a.lab.example": value "localhost" is not an IP literal or ip:port (names are never resolved)`},
		{map[string]string{"a.lab.example": "127.0.0.1:0"}, "port 0"},
		{map[string]string{"a.*.example": "127.0.0.1"}, `entry "a.*.example": name "a.*.example": a wildcard is only allowed as a leading "*."`},
		{map[string]string{"": "127.0.0.1"}, "empty name"},
		{map[string]string{"A.lab.example": "127.0.0.1", "a.lab.example.": "127.0.0.2"}, "a.lab.example is mapped twice"},
		{map[string]string{"*.Lab.example": "127.0.0.1", "*.lab.example.": "127.0.0.2"}, "*.lab.example is mapped twice"},
		{map[string]string{"::1": "127.0.0.1", "[0::1]": "127.0.0.2"}, "::1 is mapped twice"},
	} {
		if _, err := Compile(tc.names); err == nil || !errors.Is(err, ErrNameMap) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Compile(%v) = %v; want an ErrNameMap containing %q", tc.names, err, tc.want)
		}
	}
	// Parse's result always compiles.
	names, err := Parse("jellyfin.lab.example=127.0.20.1,*.lab.example=127.0.20.1:8443,[::1]=[::1]:80")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Compile(names); err != nil {
		t.Fatalf("Compile(Parse(...)): %v", err)
	}
}

// Names as a set (the agent's allowlist): Add normalises, refuses what is not a name, and
// reports a name already present without replacing it.
func TestNamesAdd(t *testing.T) {
	t.Parallel()
	var s Names[int]
	for _, tc := range []struct {
		name  string
		added bool
		err   string
	}{
		{"Svc.Lab.Example.", true, ""},
		{"svc.lab.example", false, ""},
		{"*.lab.example", true, ""},
		{"*.LAB.example.", false, ""},
		{"127.0.0.1", true, ""},
		{"::ffff:127.0.0.1", false, ""},
		{"a.*.example", false, "a wildcard is only allowed"},
		{"bad host!", false, `character ' '`},
		{" ", false, "empty name"},
	} {
		added, err := s.Add(tc.name, len(tc.name))
		if added != tc.added || (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("Add(%q) = %v, %v; want %v, an error containing %q", tc.name, added, err, tc.added, tc.err)
		}
	}
	for host, want := range map[string]int{"svc.lab.example": len("Svc.Lab.Example."), "x.lab.example": len("*.lab.example"), "127.0.0.1": len("127.0.0.1")} {
		if got, ok := s.Lookup(host); !ok || got != want {
			t.Errorf("Lookup(%s) = %d, %v; want %d", host, got, ok, want)
		}
	}
	if _, ok := s.Lookup("lab.example"); ok {
		t.Error("a wildcard matched its bare suffix")
	}
}

func TestParseTarget(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"127.0.0.1": "127.0.0.1", " 127.0.0.1:8443 ": "127.0.0.1:8443", "::1": "::1", "[::1]:80": "[::1]:80",
		"::ffff:127.0.0.2": "127.0.0.2", "[::ffff:127.0.0.2]:80": "127.0.0.2:80",
	} {
		got, err := ParseTarget(in)
		if err != nil || got.String() != want {
			t.Errorf("ParseTarget(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	if got, _ := ParseTarget("127.0.0.1:8443"); got.Port != "8443" || got.Addr.String() != "127.0.0.1" {
		t.Errorf("fields: %+v", got)
	}
	for _, in := range []string{"", "localhost", "127.0.0.1:0", "127.0.0.1:x", "1.2.3.4.5"} {
		if got, err := ParseTarget(in); err == nil {
			t.Errorf("ParseTarget(%q) = %v; want an error", in, got)
		}
	}
}
