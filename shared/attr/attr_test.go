package attr

import (
	"encoding/json"
	"testing"
)

func TestInt(t *testing.T) {
	t.Parallel()
	good := []struct {
		in   any
		want int
	}{{101, 101}, {int64(7), 7}, {int32(3), 3}, {float64(200), 200}, {json.Number("9300"), 9300}, {" 42 ", 42}}
	for _, c := range good {
		if got, err := Int(c.in); err != nil || got != c.want {
			t.Errorf("Int(%#v) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, bad := range []any{1.5, "x", nil, true, int64(1) << 40, []any{1}} {
		if _, err := Int(bad); err == nil {
			t.Errorf("Int(%#v) succeeded", bad)
		}
	}
}

func TestTrue(t *testing.T) {
	t.Parallel()
	for _, v := range []any{true, "true", "1", " TRUE ", 1, float64(1), json.Number("1")} {
		if !True(v) {
			t.Errorf("True(%#v) = false", v)
		}
	}
	for _, v := range []any{false, "false", "0", "no way", 0, 2, float64(0), nil, map[string]any{}} {
		if True(v) {
			t.Errorf("True(%#v) = true", v)
		}
	}
}
