package config

import (
	"strings"
	"testing"
	"time"
)

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
