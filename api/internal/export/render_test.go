package export

import (
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oikos-hq/oikos/shared/seedfile"
)

// tricky are attribute values whose kind a careless writer would change on the way through
// YAML: strings that look like numbers, booleans, nulls, dates or YAML syntax; numbers
// beyond float64's exact range; integral floats; empty and nested containers.
const tricky = `{
	"version": "8.3", "zip": "007", "yes": "true", "no_str": "no", "on": "on", "empty": "", "nul": "null",
	"tilde": "~", "date": "2024-01-01", "hex": "0x10", "exp": "1e3", "inf": ".inf", "dash": "- a", "colon": "a: b",
	"hash": "#x", "spaces": "  padded  ", "multi": "line one\nline two\n", "quote": "it's \"quoted\"", "unicode": "Zürich ☃",
	"int": 101, "neg": -5, "big": 9007199254740993, "float": 0.1, "integral_float": 2.0, "huge": 100000000000000000000,
	"t": true, "f": false, "arr": [1, "2", true, null, 1.5], "empty_arr": [], "empty_obj": {},
	"nested": {"b": {"c": [ {"x": 1}, "y" ]}, "a": "1"}, "long_list": ["` + "a very long string that goes on and on and on and on and on and on and on and on and on" + `"],
	"multi_list": ["a\nb"], "dropped": null, "health": "up"
}`

func TestRenderRoundTrip(t *testing.T) {
	t.Parallel()
	attrs, err := decodeAttributes(tricky)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := attrs["dropped"]; ok {
		t.Error("a top-level null is exported")
	}
	if _, ok := attrs["health"]; ok {
		t.Error("a scheduler-owned key is exported")
	}
	f := &Fleet{At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Entities: []Entity{{Type: "site", Name: "8.3", State: "active", Attributes: attrs}, {Type: "site", Name: "bare", State: "active"}},
		Edges:    []Edge{{Type: "depends-on", Source: "site:8.3", Target: "site:bare"}}}
	out, err := f.YAML()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", out)
	inv, err := seedfile.ParseInventory(out)
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, out)
	}
	if len(inv.Entities) != 2 || len(inv.Relationships) != 1 || inv.Entities[0].Name != "8.3" || inv.Entities[1].State != "active" ||
		inv.Relationships[0] != (seedfile.EdgeSeed{Type: "depends-on", Source: "site:8.3", Target: "site:bare", Line: inv.Relationships[0].Line}) {
		t.Fatalf("parsed %+v", inv)
	}
	// What the seed stores (its values marshalled) must be the same JSON as the source.
	got, err := json.Marshal(inv.Entities[0].Attributes)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(attrs)
	var g, w any
	dg, dw := json.NewDecoder(strings.NewReader(string(got))), json.NewDecoder(strings.NewReader(string(want)))
	dg.UseNumber()
	dw.UseNumber()
	if err := dg.Decode(&g); err != nil {
		t.Fatal(err)
	}
	if err := dw.Decode(&w); err != nil {
		t.Fatal(err)
	}
	canon := func(v any) any { return canonNumbers(v) }
	if !reflect.DeepEqual(canon(g), canon(w)) {
		t.Errorf("round trip changed the attributes:\n got %s\nwant %s", got, want)
	}
	// Kinds, explicitly: the seed's own decoding.
	a := inv.Entities[0].Attributes
	for k, v := range map[string]any{"version": "8.3", "zip": "007", "yes": "true", "empty": "", "nul": "null", "date": "2024-01-01",
		"int": 101, "big": 9007199254740993, "t": true, "float": 0.1, "integral_float": 2.0, "multi": "line one\nline two\n"} {
		if !reflect.DeepEqual(a[k], v) {
			t.Errorf("%s: %#v, want %#v", k, a[k], v)
		}
	}
	if arr, ok := a["arr"].([]any); !ok || len(arr) != 5 || arr[1] != "2" || arr[3] != nil {
		t.Errorf("arr: %#v", a["arr"])
	}
	// Deterministic.
	again, _ := f.YAML()
	if string(again) != string(out) {
		t.Error("two renders differ")
	}
}

// canonNumbers gives every JSON number one form (an integer's digits, else its float64), so
// 2.0 and 2 compare equal, as jsonb compares them.
func canonNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if _, err := x.Int64(); err == nil {
			return x.String()
		}
		f, _ := x.Float64()
		if f == math.Trunc(f) && math.Abs(f) < 1<<62 {
			return strconv.FormatInt(int64(f), 10)
		}
		return f
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = canonNumbers(x[i])
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = canonNumbers(e)
		}
		return out
	}
	return v
}
