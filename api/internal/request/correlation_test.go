package request

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/auth"
)

func noLog() zerolog.Logger { return zerolog.Nop() }

func TestCorrelation(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, sent string
		kept       bool
	}{
		{"plain id is kept", "nomos-session/42:7@x", true},
		{"none is generated", "", false},
		{"spaces are refused", "a b", false},
		{"newlines are refused", "a\nb", false},
		{"too long is refused", strings.Repeat("a", 129), false},
		{"128 is the longest kept", strings.Repeat("a", 128), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := get("/api/v1/entities")
			if c.sent != "" {
				ctx.Request().Header.Set(HeaderCorrelationID, c.sent)
			}
			var seen string
			if err := Correlation(func(c echo.Context) error { seen = CorrelationID(c); return nil })(ctx); err != nil {
				t.Fatal(err)
			}
			header := ctx.Response().Header().Get(HeaderCorrelationID)
			if seen != header || seen == "" {
				t.Fatalf("context %q, header %q", seen, header)
			}
			if c.kept && seen != c.sent {
				t.Errorf("kept %q as %q", c.sent, seen)
			}
			if !c.kept {
				if u, err := uuid.Parse(seen); err != nil || u.Version() != 7 {
					t.Errorf("generated %q is not a uuid v7", seen)
				}
			}
		})
	}
	if CorrelationID(get("/")) != "" {
		t.Error("no correlation id without the middleware")
	}
}

func TestMetaOf(t *testing.T) {
	t.Parallel()
	e := echo.New()
	var m Meta
	e.PATCH("/api/v1/entities/:ref", func(c echo.Context) error { m = MetaOf(c); return nil },
		Correlation, Guard(newTokens(), auth.PermWrite))
	req := httptest.NewRequest(http.MethodPatch, "/api/v1/entities/lxc:web", nil)
	req.Header.Set(echo.HeaderAuthorization, "Bearer op-token")
	req.Header.Set(HeaderCorrelationID, "c-9")
	e.ServeHTTP(httptest.NewRecorder(), req)
	want := Meta{Actor: "op", Role: "operator", Method: http.MethodPatch, Path: "/api/v1/entities/lxc:web", CorrelationID: "c-9"}
	if m != want {
		t.Errorf("MetaOf = %+v, want %+v", m, want)
	}
}
