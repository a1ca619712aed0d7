// Package attr reads entity attributes in the shapes they arrive in. Attributes are JSON, so
// a vmid may be a float64 from the database, an int from YAML, a json.Number or a string an
// agent wrote; a flag may be a bool, 0/1 or "true". The gate, the resolver, check derivation
// and drift discovery must all read them the same way, so they all read them here.
package attr

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Int returns v as an int: whole numbers of any numeric type, json.Number or a decimal
// string. A fraction, an out-of-range number or any other type is an error.
func Int(v any) (int, error) {
	switch x := v.(type) {
	case int:
		return x, nil
	case int32:
		return int(x), nil
	case int64:
		if x > math.MaxInt32 || x < math.MinInt32 {
			return 0, fmt.Errorf("%d is out of range", x)
		}
		return int(x), nil
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > math.MaxInt32 {
			return 0, fmt.Errorf("%v is not an integer", x)
		}
		return int(x), nil
	case json.Number:
		return strconv.Atoi(x.String())
	case string:
		return strconv.Atoi(strings.TrimSpace(x))
	case nil:
		return 0, errors.New("missing")
	default:
		return 0, fmt.Errorf("%v (%T) is not an integer", v, v)
	}
}

// True reports whether v is a true flag: true, "true"/"1"/"yes"-style strings that
// strconv.ParseBool accepts, or the number 1. Anything else, missing included, is false.
func True(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case string:
		b, err := strconv.ParseBool(strings.TrimSpace(x))
		return err == nil && b
	default:
		n, err := Int(v)
		return err == nil && n == 1
	}
}
