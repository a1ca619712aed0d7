package ruleset

import (
	"errors"
	"testing"
)

func TestClassRankAndMax(t *testing.T) {
	t.Parallel()
	order := []Class{ReadOnly, ReversibleLow, ConfigMutation, Destructive}
	for i, c := range order {
		if c.Rank() != i {
			t.Errorf("%s.Rank() = %d, want %d", c, c.Rank(), i)
		}
		if !c.Valid() {
			t.Errorf("%s.Valid() = false", c)
		}
	}
	if Class("").Rank() != 0 || Class("").Valid() {
		t.Errorf(`"" must rank 0 and be invalid`)
	}
	if Class("root").Rank() <= Destructive.Rank() {
		t.Errorf("an unknown class must rank above destructive")
	}
	tests := []struct{ a, b, want Class }{
		{ReadOnly, ReadOnly, ReadOnly},
		{ReadOnly, ReversibleLow, ReversibleLow},
		{ConfigMutation, ReversibleLow, ConfigMutation},
		{Destructive, ReadOnly, Destructive},
		{ReadOnly, Destructive, Destructive},
		{"", "", ReadOnly},
		{"", ConfigMutation, ConfigMutation},
		{"bogus", ReadOnly, Destructive},
		{ReadOnly, "bogus", Destructive},
	}
	for _, tt := range tests {
		if got := Max(tt.a, tt.b); got != tt.want {
			t.Errorf("Max(%q, %q) = %q, want %q", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestParseClass(t *testing.T) {
	t.Parallel()
	for _, c := range Classes() {
		got, err := ParseClass(" " + string(c) + " ")
		if err != nil || got != c {
			t.Errorf("ParseClass(%q) = %q, %v", c, got, err)
		}
	}
	if got, err := ParseClass("DESTRUCTIVE"); err != nil || got != Destructive {
		t.Errorf("ParseClass is not case-tolerant: %q, %v", got, err)
	}
	for _, bad := range []string{"", "root", "readonly", "read-only"} {
		if _, err := ParseClass(bad); !errors.Is(err, ErrUnknownClass) {
			t.Errorf("ParseClass(%q) error = %v, want ErrUnknownClass", bad, err)
		}
	}
}
