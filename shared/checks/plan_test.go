package checks

import (
	"slices"
	"testing"
)

func TestStringList(t *testing.T) {
	for _, c := range []struct {
		in   any
		want []string
		bad  bool
	}{
		{in: nil},
		{in: []string{"a", "b"}, want: []string{"a", "b"}},
		{in: []any{"a", "b"}, want: []string{"a", "b"}},
		{in: []any{"a", 1}, bad: true},
		{in: "a", bad: true},
	} {
		got, err := StringList(c.in)
		if (err != nil) != c.bad || !slices.Equal(got, c.want) {
			t.Errorf("StringList(%#v) = %q, %v", c.in, got, err)
		}
	}
}
