package readmodel

import (
	"math"
	"testing"
)

func TestTypeMatcher(t *testing.T) {
	t.Parallel()
	cases := []struct {
		types []string
		typ   string
		want  bool
	}{
		{nil, "anything", true},
		{[]string{"entity.created"}, "entity.created", true},
		{[]string{"entity.created"}, "entity.updated", false},
		{[]string{"health."}, "health.changed", true},
		{[]string{"health."}, "healthy", false},
		{[]string{"health.", "signal.resolved"}, "signal.resolved", true},
		{[]string{"health.", "signal.resolved"}, "signal.muted", false},
	}
	for _, c := range cases {
		if got := NewTypeMatcher(c.types).Match(c.typ); got != c.want {
			t.Errorf("%v match %q = %v", c.types, c.typ, got)
		}
	}
}

func TestSearchCursorRoundTrip(t *testing.T) {
	t.Parallel()
	for _, c := range []SearchCursor{{0.0607927, "runbook:a"}, {1e-20, "document:x|y"}, {math.MaxFloat32, "d:z"}} {
		got, err := ParseSearchCursor(c.String())
		if err != nil || got != c {
			t.Errorf("round trip %+v: %+v %v", c, got, err)
		}
	}
	for _, bad := range []string{"", "0.5", "x|slug", "0.5|", "NaN|a"} {
		if _, err := ParseSearchCursor(bad); err == nil {
			t.Errorf("ParseSearchCursor(%q) accepted", bad)
		}
	}
}

func TestLikePatternEscapes(t *testing.T) {
	t.Parallel()
	if got := likePattern(`50%_off\`); got != `%50\%\_off\\%` {
		t.Errorf("likePattern = %q", got)
	}
}
