package checkrun

import (
	"strings"
	"testing"

	"github.com/oikos-hq/oikos/scheduler/internal/probeparse"
)

func TestParseSpecRefusesProcessWithoutUnit(t *testing.T) {
	t.Parallel()
	if _, err := parseSpec("ssh-script", map[string]any{"script": "process", "os": "linux"}); err == nil ||
		!strings.Contains(err.Error(), "no unit") {
		t.Fatalf("err = %v", err)
	}
	s, err := parseSpec("ssh-script", map[string]any{"script": "process", "os": "linux", "args": []any{"jellyfin.service"}})
	if err != nil || s.(probeparse.Spec).Args[0] != "jellyfin.service" {
		t.Fatalf("%+v, %v", s, err)
	}
	for _, c := range []map[string]any{
		{"script": "cpu", "os": "windows"},
		{"script": "bogus"},
	} {
		if _, err := parseSpec("ssh-script", c); err == nil {
			t.Errorf("%v accepted", c)
		}
	}
}
