package ruleset

import "testing"

func TestEveryRuleHasAMatchExample(t *testing.T) {
	t.Parallel()
	s, err := Default(nil)
	if err != nil {
		t.Fatalf("embedded default policy does not compile: %v", err)
	}
	for _, r := range s.rules {
		if len(r.match) == 0 {
			t.Errorf("rule %q has no match example", r.Name)
		}
	}
}
