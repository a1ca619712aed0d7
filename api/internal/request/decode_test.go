package request

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
)

// ctxWith builds an echo context for a request with body and Content-Type (none when "").
func ctxWith(method, target, body, contentType string) echo.Context {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, target, rd)
	if contentType != "" {
		req.Header.Set(echo.HeaderContentType, contentType)
	}
	return echo.New().NewContext(req, httptest.NewRecorder())
}

func TestDecodeJSON(t *testing.T) {
	t.Parallel()
	type body struct {
		Name  string         `json:"name"`
		Count int            `json:"count"`
		Flag  bool           `json:"flag"`
		Attrs map[string]any `json:"attrs"`
	}
	big := `{"name":"` + strings.Repeat("x", MaxBodyBytes) + `"}`
	cases := []struct {
		name, body, contentType string
		status                  int // 0: decodes
		field, detail           string
	}{
		{"object", `{"name":"web","count":2}`, "application/json", 0, "", ""},
		{"json suffix and no content type", `{"name":"web"}`, "", 0, "", ""},
		{"problem+json is json", `{"name":"web"}`, "application/merge-patch+json; charset=utf-8", 0, "", ""},
		{"text is refused", `name=web`, "text/plain", 415, "", `Content-Type "text/plain": send application/json`},
		{"unparsable content type", `{}`, "application/", 415, "", `Content-Type "application/": send application/json`},
		{"empty", ``, "application/json", 400, "", "a JSON request body is required"},
		{"blank", "  \n", "application/json", 400, "", "a JSON request body is required"},
		{"syntax", `{"name":}`, "application/json", 400, "", "malformed JSON at byte 9: invalid character '}' looking for beginning of value"},
		{"ends early", `{"name":"web"`, "application/json", 400, "", "malformed JSON: the body ends early"},
		{"two values", `{"name":"a"} {"name":"b"}`, "application/json", 400, "", "the body must hold a single JSON value; found more after it"},
		{"unknown field", `{"name":"a","nme":"b"}`, "application/json", 422, "nme", `unknown field "nme"`},
		{"wrong type names the JSON kind", `{"count":"two"}`, "application/json", 422, "count", "expected integer, got string"},
		{"boolean", `{"flag":1}`, "application/json", 422, "flag", "expected boolean, got number"},
		{"object", `{"attrs":[1]}`, "application/json", 422, "attrs", "expected object, got array"},
		{"not an object", `[1,2]`, "application/json", 422, "", "the body must be a JSON object, got array"},
		{"over the limit", big, "application/json", 413, "", "request body exceeds 1048576 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var b body
			err := DecodeJSON(ctxWith(http.MethodPost, "/", c.body, c.contentType), &b)
			if c.status == 0 {
				if err != nil {
					t.Fatalf("DecodeJSON: %v", err)
				}
				return
			}
			p, _ := ToProblem(err)
			if p.Status != c.status || p.Field != c.field || p.Detail != c.detail {
				t.Errorf("DecodeJSON(%.60s) = %d field %q detail %q; want %d %q %q", c.body, p.Status, p.Field, p.Detail,
					c.status, c.field, c.detail)
			}
		})
	}
}

func TestLimitBody(t *testing.T) {
	t.Parallel()
	var decoded error
	h := LimitBody(func(c echo.Context) error {
		var v map[string]any
		decoded = DecodeJSON(c, &v)
		return nil
	})
	// Content-Length says too much: refused before the handler runs.
	c := ctxWith(http.MethodPost, "/", `{}`, "application/json")
	c.Request().ContentLength = MaxBodyBytes + 1
	var mbe *http.MaxBytesError
	if err := h(c); !errors.As(err, &mbe) || mbe.Limit != MaxBodyBytes {
		t.Errorf("declared length over the limit: %v", err)
	}
	// A body that does not say its length is cut off while reading.
	c = ctxWith(http.MethodPost, "/", `{"a":"`+strings.Repeat("y", MaxBodyBytes)+`"}`, "application/json")
	c.Request().ContentLength = -1
	if err := h(c); err != nil || !errors.As(decoded, &mbe) {
		t.Errorf("streamed body over the limit: %v, decoded %v", err, decoded)
	}
	c = ctxWith(http.MethodPost, "/", `{"a":1}`, "application/json")
	if err := h(c); err != nil || decoded != nil {
		t.Errorf("small body: %v, decoded %v", err, decoded)
	}
}
