package webui_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/labstack/echo/v4"

	"github.com/oikos-hq/oikos/api/internal/webui"
)

var bigJS = strings.Repeat("export const oikos = 'dashboard';\n", 200)

func serve(t *testing.T, fsys fstest.MapFS) *echo.Echo {
	t.Helper()
	h, err := webui.New(fsys)
	if err != nil {
		t.Fatal(err)
	}
	e := echo.New()
	e.GET("/api/v1/known", func(c echo.Context) error { return c.String(200, "api") })
	h.Register(e)
	return e
}

func get(e *echo.Echo, method, path string, headers ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	return rec
}

func built() fstest.MapFS {
	return fstest.MapFS{
		"index.html":              {Data: []byte(`<!doctype html><title>Oikos</title><script type="module" src="/assets/index-abc123.js"></script>`)},
		"assets/index-abc123.js":  {Data: []byte(bigJS)},
		"assets/index-abc123.css": {Data: []byte("body{}")},
		".gitkeep":                {Data: nil},
	}
}

func TestCachingAndFallback(t *testing.T) {
	e := serve(t, built())
	cases := []struct {
		path, wantType, wantCache string
		status                    int
	}{
		{"/", "text/html", "no-cache", 200},
		{"/entities/host:atlas", "text/html", "no-cache", 200}, // SPA fallback
		{"/chat/0190f7e2-aaaa-7bbb-8ccc-000000000001", "text/html", "no-cache", 200},
		{"/index.html", "text/html", "no-cache", 200},
		{"/assets/index-abc123.js", "text/javascript", "public, max-age=31536000, immutable", 200},
		{"/assets/index-abc123.css", "text/css", "public, max-age=31536000, immutable", 200},
		{"/assets/gone-999.js", "", "", 404}, // an old chunk is not the app
		{"/.gitkeep", "", "", 404},
		{"/api/v1/unknown", "", "", 404}, // the api's 404, never the app
	}
	for _, c := range cases {
		rec := get(e, "GET", c.path)
		if rec.Code != c.status {
			t.Errorf("GET %s: %d, want %d", c.path, rec.Code, c.status)
			continue
		}
		if c.status != 200 {
			continue
		}
		if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, c.wantType) {
			t.Errorf("GET %s: Content-Type %q, want %s", c.path, ct, c.wantType)
		}
		if cc := rec.Header().Get("Cache-Control"); cc != c.wantCache {
			t.Errorf("GET %s: Cache-Control %q, want %q", c.path, cc, c.wantCache)
		}
	}
	if rec := get(e, "GET", "/api/v1/known"); rec.Body.String() != "api" {
		t.Errorf("the app shadowed an api route: %q", rec.Body.String())
	}
	html := get(e, "GET", "/")
	if csp := html.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("index.html CSP %q", csp)
	}
}

func TestGzipAndETag(t *testing.T) {
	e := serve(t, built())
	rec := get(e, "GET", "/assets/index-abc123.js", "Accept-Encoding", "br, gzip")
	if rec.Header().Get("Content-Encoding") != "gzip" {
		t.Fatalf("no gzip for a client that accepts it: %v", rec.Header())
	}
	zr, err := gzip.NewReader(bytes.NewReader(rec.Body.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := io.ReadAll(zr)
	if string(plain) != bigJS || rec.Body.Len() >= len(bigJS) {
		t.Errorf("gzip body: %d bytes compressed, %d plain, equal=%v", rec.Body.Len(), len(plain), string(plain) == bigJS)
	}
	if rec := get(e, "GET", "/assets/index-abc123.js", "Accept-Encoding", "gzip;q=0"); rec.Header().Get("Content-Encoding") != "" || rec.Body.String() != bigJS {
		t.Errorf("gzip;q=0 still got gzip")
	}
	if rec := get(e, "GET", "/assets/index-abc123.js"); rec.Header().Get("Content-Encoding") != "" {
		t.Errorf("gzip without Accept-Encoding")
	}
	etag := get(e, "GET", "/").Header().Get("ETag")
	if etag == "" {
		t.Fatal("no ETag on index.html")
	}
	if rec := get(e, "GET", "/", "If-None-Match", etag); rec.Code != http.StatusNotModified || rec.Body.Len() != 0 {
		t.Errorf("If-None-Match: %d with %d bytes", rec.Code, rec.Body.Len())
	}
	if rec := get(e, "HEAD", "/assets/index-abc123.js"); rec.Code != 200 || rec.Body.Len() != 0 || rec.Header().Get("Content-Length") == "" {
		t.Errorf("HEAD: %d, %d bytes, length %q", rec.Code, rec.Body.Len(), rec.Header().Get("Content-Length"))
	}
}

// TestNotBuilt: an api compiled without the app says how to build it, on every app path,
// and the api itself still answers.
func TestNotBuilt(t *testing.T) {
	e := serve(t, fstest.MapFS{".gitkeep": {Data: nil}})
	for _, p := range []string{"/", "/entities", "/ops"} {
		rec := get(e, "GET", p)
		if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "make build") {
			t.Errorf("GET %s without the app: %d %.80q", p, rec.Code, rec.Body.String())
		}
	}
	if rec := get(e, "GET", "/api/v1/known"); rec.Code != 200 {
		t.Errorf("the api without the app: %d", rec.Code)
	}
}
