package actions

import (
	"slices"
	"testing"
)

func TestSystemctlVerbs(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"restart", "status", "is-failed", "show", "cat", "stop"} {
		if !SystemctlVerb(v) {
			t.Errorf("SystemctlVerb(%q) = false", v)
		}
	}
	for _, v := range []string{"", "reboot", "poweroff", "isolate", "RESTART", "daemon-reload"} {
		if SystemctlVerb(v) {
			t.Errorf("SystemctlVerb(%q) = true", v)
		}
	}
	if vs := SystemctlVerbs(); !slices.IsSorted(vs) || len(slices.Compact(slices.Clone(vs))) != len(vs) {
		t.Errorf("SystemctlVerbs() = %v, want sorted and unique", vs)
	}
}
