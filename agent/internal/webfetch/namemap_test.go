package webfetch

import (
	"errors"
	"maps"
	"strings"
	"testing"
)

// The syntax is the scheduler's OIKOS_CHECK_NAME_MAP (httpprobe.ParseNameMap).
func TestParseNameMap(t *testing.T) {
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
		{name: "ip literal key", in: "192.0.2.10=127.0.0.1", want: map[string]string{"192.0.2.10": "127.0.0.1"}},
		{name: "underscore and digits", in: "_svc-1.lab.example=127.0.0.1", want: map[string]string{"_svc-1.lab.example": "127.0.0.1"}},

		{name: "no equals", in: "a.lab.example=127.0.0.1,b.lab.example", err: `entry "b.lab.example": want name=ip`},
		{name: "value is a name", in: "a.lab.example=localhost", err: `value "localhost" is not an IP literal`},
		{name: "value name with port", in: "a.lab.example=ingress.lab:8443", err: `names are never resolved`},
		{name: "empty value", in: "a.lab.example=", err: `entry "a.lab.example=": empty value`},
		{name: "empty name", in: "=127.0.0.1", err: `entry "=127.0.0.1": empty name`},
		{name: "port 0", in: "a.lab.example=127.0.0.1:0", err: "port 0"},
		{name: "port out of range", in: "a.lab.example=127.0.0.1:70000", err: `value "127.0.0.1:70000"`},
		{name: "wildcard inside", in: "a.*.example=127.0.0.1", err: `a wildcard is only allowed as a leading`},
		{name: "bare star", in: "*=127.0.0.1", err: `a wildcard is only allowed`},
		{name: "empty label", in: "a..example=127.0.0.1", err: "empty label"},
		{name: "bad character", in: "a/b.example=127.0.0.1", err: `character '/'`},
		{name: "duplicate after normalising", in: "a.lab.example=127.0.0.1 A.lab.example.=127.0.0.2", err: "a.lab.example is already mapped to 127.0.0.1"},
	}
	for _, tc := range tests {
		got, err := ParseNameMap(tc.in)
		if tc.err != "" {
			if err == nil || !errors.Is(err, ErrNameMap) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: ParseNameMap(%q) = %v, %v; want an ErrNameMap containing %q", tc.name, tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || !maps.Equal(got, tc.want) {
			t.Errorf("%s: ParseNameMap(%q) = %v, %v; want %v", tc.name, tc.in, got, err, tc.want)
		}
	}
}

// Exact names win over wildcards, the longest wildcard suffix wins, wildcards never match
// IP literals.
func TestNameMapLookup(t *testing.T) {
	t.Parallel()
	m, err := compileNameMap(map[string]string{
		"exact.lab.example": "127.0.0.1", "*.lab.example": "127.0.0.2", "*.deep.lab.example": "127.0.0.3:8443",
		"10.0.0.1": "127.0.0.4",
	})
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]string{
		"exact.lab.example": "127.0.0.1", "other.lab.example": "127.0.0.2", "a.deep.lab.example": "127.0.0.3:8443",
		"lab.example": "", "10.0.0.1": "127.0.0.4", "example": "",
	} {
		got, ok := m.lookup(host)
		if (want == "") == ok || (ok && got.String() != want) {
			t.Errorf("lookup(%s) = %v, %v; want %q", host, got, ok, want)
		}
	}
}
