package request

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
)

func get(target string) echo.Context {
	return echo.New().NewContext(httptest.NewRequest(http.MethodGet, target, nil), httptest.NewRecorder())
}

// fieldOf is the status and field of err's problem (0 for nil).
func fieldOf(err error) (int, string) {
	if err == nil {
		return 0, ""
	}
	p, _ := ToProblem(err)
	return p.Status, p.Field
}

func TestIntParam(t *testing.T) {
	t.Parallel()
	cases := []struct {
		query  string
		want   int64
		status int
	}{
		{"", 7, 0},
		{"?n=1", 1, 0},
		{"?n=10", 10, 0},
		{"?n=0", 0, 400},
		{"?n=11", 0, 400},
		{"?n=two", 0, 400},
		{"?n=99999999999999999999", 0, 400},
	}
	for _, c := range cases {
		n, err := IntParam(get("/x"+c.query), "n", 7, 1, 10)
		if status, field := fieldOf(err); n != c.want || status != c.status || (err != nil && field != "n") {
			t.Errorf("IntParam(%q) = %d, %v", c.query, n, err)
		}
	}
}

func TestBoolParam(t *testing.T) {
	t.Parallel()
	for q, want := range map[string]bool{"": false, "?b=true": true, "?b=1": true, "?b=false": false} {
		if b, err := BoolParam(get("/x"+q), "b"); err != nil || b != want {
			t.Errorf("BoolParam(%q) = %v, %v", q, b, err)
		}
	}
	if _, err := BoolParam(get("/x?b=maybe"), "b"); err == nil {
		t.Error("maybe is not a boolean")
	} else if status, field := fieldOf(err); status != 400 || field != "b" {
		t.Errorf("BoolParam(maybe): %d %q", status, field)
	}
}

func TestListParamAndOneOf(t *testing.T) {
	t.Parallel()
	got := ListParam(get("/x?s=a,%20b,,c&s=d&other=e"), "s")
	if !reflect.DeepEqual(got, []string{"a", "b", "c", "d"}) {
		t.Errorf("ListParam = %q", got)
	}
	if ListParam(get("/x"), "s") != nil {
		t.Error("an absent list is nil")
	}
	if err := OneOf("s", got, []string{"a", "b", "c", "d"}); err != nil {
		t.Error(err)
	}
	err := OneOf("s", got, []string{"a", "b"})
	if p, _ := ToProblem(err); p.Status != 422 || p.Field != "s" || p.Detail != `"c" is not one of a, b` {
		t.Errorf("OneOf: %+v", p)
	}
}

func TestParam(t *testing.T) {
	t.Parallel()
	// The values as echo's router hands them over: still escaped.
	for raw, want := range map[string]string{"runbook:a%2Fb": "runbook:a/b", "%zz": "", "": "", "plain": "plain"} {
		c := get("/")
		c.SetParamNames("slug")
		c.SetParamValues(raw)
		got, err := Param(c, "slug")
		status, field := fieldOf(err)
		if got != want || (want == "" && (status != 400 || field != "slug")) || (want != "" && err != nil) {
			t.Errorf("Param(%q) = %q, %v", raw, got, err)
		}
	}
}

// A page's cursor, read back by Page, resumes after the key ListOf was given.
func TestPageAndListOf(t *testing.T) {
	t.Parallel()
	l := ListOf([]string{"a", "b"}, "lxc:b")
	raw, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	if string(raw) != `{"items":["a","b"],"next_cursor":"bHhjOmI"}` {
		t.Errorf("list JSON %s", raw)
	}
	limit, after, err := Page(get("/x?limit=2&cursor=" + *l.NextCursor))
	if err != nil || limit != 2 || after != "lxc:b" {
		t.Errorf("Page = %d %q %v", limit, after, err)
	}
	if raw, _ := json.Marshal(ListOf[int](nil, "")); string(raw) != `{"items":[],"next_cursor":null}` {
		t.Errorf("last page JSON %s", raw)
	}
	if limit, after, err := Page(get("/x")); limit != DefaultLimit || after != "" || err != nil {
		t.Errorf("default page %d %q %v", limit, after, err)
	}
	for q, field := range map[string]string{"?limit=0": "limit", "?limit=501": "limit", "?cursor=***": "cursor", "?cursor=": ""} {
		_, _, err := Page(get("/x" + q))
		if status, f := fieldOf(err); f != field || (field != "" && status != 400) {
			t.Errorf("Page(%s): %v", q, err)
		}
	}
}

func TestDurationAndSinceParams(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		query string
		want  time.Duration
		bad   string
	}{
		{"", time.Minute, ""},
		{"d=7d", 7 * 24 * time.Hour, ""},
		{"d=90m", 90 * time.Minute, ""},
		{"d=12h", 12 * time.Hour, ""},
		{"d=-1h", 0, `"-1h" is not a positive duration`},
		{"d=0s", 0, `"0s" is not a positive duration`},
		{"d=soon", 0, `"soon" is not a duration`},
	} {
		d, err := DurationParam(get("/?"+c.query), "d", time.Minute)
		if c.bad == "" {
			if err != nil || d != c.want {
				t.Errorf("%q: %v %v", c.query, d, err)
			}
			continue
		}
		if p, _ := ToProblem(err); err == nil || p.Status != 400 || p.Field != "d" || !strings.Contains(p.Detail, c.bad) {
			t.Errorf("%q: %v", c.query, err)
		}
	}
	for _, c := range []struct {
		query string
		want  time.Time
		given bool
		bad   bool
	}{
		{"", time.Time{}, false, false},
		{"since=7d", now.Add(-7 * 24 * time.Hour), true, false},
		{"since=90m", now.Add(-90 * time.Minute), true, false},
		{"since=2026-11-01T00:00:00Z", time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), true, false},
		{"since=yesterday", time.Time{}, false, true},
	} {
		got, given, err := SinceParam(get("/?"+c.query), "since", now)
		if (err != nil) != c.bad || given != c.given || !got.Equal(c.want) {
			t.Errorf("%q: %v %v %v", c.query, got, given, err)
		}
		if !c.bad || err == nil {
			continue
		}
		if p, _ := ToProblem(err); p.Field != "since" || !strings.Contains(p.Detail, "nor an RFC 3339 time") {
			t.Errorf("%q: %+v", c.query, p)
		}
	}
}
