// Package webui serves the dashboard (api/web) at /: the built files from memory, gzipped
// once at start, with the caching a hashed build allows (files under assets/ never change:
// immutable for a year; index.html must be re-read on every visit: no-cache with an ETag),
// and the single-page fallback (any other path that is not the api's answers index.html,
// so a reload of /entities/host:atlas lands in the app). Paths under /api/ are never the
// app's: they fall through as the api's JSON 404.
package webui

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"

	"github.com/labstack/echo/v4"
)

// file is one built file, ready to send.
type file struct {
	body, gz []byte
	ctype    string
	etag     string
	// immutable: a content-hashed name (assets/...), cacheable for ever.
	immutable bool
}

// Handler serves the app.
type Handler struct {
	files map[string]*file
	index *file
}

// securityHeaders go on every page of the app: scripts and connections only to the api's
// own origin, no framing. Inline style attributes are allowed because the chart and graph
// libraries position their elements with them.
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'self'; script-src 'self'; connect-src 'self'; img-src 'self' data: blob:; " +
		"style-src 'self' 'unsafe-inline'; font-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'",
	"X-Content-Type-Options": "nosniff",
	"Referrer-Policy":        "same-origin",
	"X-Frame-Options":        "DENY",
}

// New loads the app from fsys (web.Dist()). Without an index.html (the app was never
// built) the handler serves notBuilt, which says how to build it.
func New(fsys fs.FS) (*Handler, error) {
	h := &Handler{files: map[string]*file{}}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || strings.HasPrefix(path.Base(p), ".") {
			return nil
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		f, err := newFile(p, b)
		if err != nil {
			return err
		}
		h.files[p] = f
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load the dashboard: %w", err)
	}
	h.index = h.files["index.html"]
	if h.index != nil {
		h.index.immutable = false
	}
	return h, nil
}

// Built reports whether the app's files are present.
func (h *Handler) Built() bool { return h.index != nil }

func newFile(name string, b []byte) (*file, error) {
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = http.DetectContentType(b)
	}
	sum := sha256.Sum256(b)
	f := &file{body: b, ctype: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`,
		immutable: strings.HasPrefix(name, "assets/")}
	if compressible(ct) && len(b) > 256 {
		var buf bytes.Buffer
		zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		if err != nil {
			return nil, err
		}
		if _, err := zw.Write(b); err != nil {
			return nil, err
		}
		if err := zw.Close(); err != nil {
			return nil, err
		}
		if buf.Len() < len(b) {
			f.gz = buf.Bytes()
		}
	}
	return f, nil
}

func compressible(ct string) bool {
	return strings.HasPrefix(ct, "text/") || strings.Contains(ct, "javascript") || strings.Contains(ct, "json") ||
		strings.Contains(ct, "svg") || strings.Contains(ct, "xml")
}

// Register adds the app's routes to e: GET and HEAD of every path the api's own routes do
// not claim.
func (h *Handler) Register(e *echo.Echo) {
	e.GET("/*", h.serve)
	e.HEAD("/*", h.serve)
}

func (h *Handler) serve(c echo.Context) error {
	p := c.Request().URL.Path
	if p == "/api" || strings.HasPrefix(p, "/api/") {
		return unmatched(c)
	}
	if h.index == nil {
		return notBuilt(c)
	}
	name := strings.TrimPrefix(path.Clean("/"+p), "/")
	f, ok := h.files[name]
	if !ok || name == "index.html" {
		if strings.HasPrefix(name, "assets/") || (path.Ext(name) != "" && name != "index.html") {
			// A missing hashed file (a tab from before an upgrade asking for an old chunk)
			// is a plain 404, not the app: the page's import fails and it says to reload.
			return unmatched(c)
		}
		f = h.index
	}
	return send(c, f)
}

// unmatched is the 404 of a path nothing serves. The route pattern is cleared so the request
// metrics count it as unmatched, like any path no route claims, not as the app's "/*".
func unmatched(c echo.Context) error {
	c.SetPath("")
	return echo.ErrNotFound
}

func send(c echo.Context, f *file) error {
	hd := c.Response().Header()
	hd.Set(echo.HeaderContentType, f.ctype)
	hd.Set("ETag", f.etag)
	hd.Add("Vary", "Accept-Encoding")
	if f.immutable {
		hd.Set(echo.HeaderCacheControl, "public, max-age=31536000, immutable")
	} else {
		hd.Set(echo.HeaderCacheControl, "no-cache")
	}
	if strings.HasPrefix(f.ctype, "text/html") {
		for k, v := range securityHeaders {
			hd.Set(k, v)
		}
	} else {
		hd.Set("X-Content-Type-Options", "nosniff")
	}
	if match := c.Request().Header.Get("If-None-Match"); match != "" && etagMatches(match, f.etag) {
		return c.NoContent(http.StatusNotModified)
	}
	body := f.body
	if f.gz != nil && acceptsGzip(c.Request()) {
		hd.Set(echo.HeaderContentEncoding, "gzip")
		body = f.gz
	}
	if c.Request().Method == http.MethodHead {
		hd.Set(echo.HeaderContentLength, fmt.Sprint(len(body)))
		return c.NoContent(http.StatusOK)
	}
	return c.Blob(http.StatusOK, f.ctype, body)
}

func etagMatches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == etag {
			return true
		}
	}
	return false
}

// acceptsGzip reads Accept-Encoding, honouring an explicit q=0.
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(name), "gzip") {
			continue
		}
		q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
		return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
	}
	return false
}

// notBuilt answers 503 with a page saying how to build the dashboard.
func notBuilt(c echo.Context) error {
	hd := c.Response().Header()
	hd.Set(echo.HeaderCacheControl, "no-cache")
	for k, v := range securityHeaders {
		hd.Set(k, v)
	}
	if c.Request().Method == http.MethodHead {
		return c.NoContent(http.StatusServiceUnavailable)
	}
	return c.HTML(http.StatusServiceUnavailable, notBuiltPage)
}

const notBuiltPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Oikos: the dashboard is not built</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:3rem auto;padding:0 1rem}code,pre{background:#eef1f5;padding:.1rem .3rem;border-radius:4px}pre{padding:.6rem}</style>
</head><body>
<h1>The dashboard is not built</h1>
<p>This oikos-api was compiled without the dashboard's files (api/web/dist). The api itself
works: everything under <code>/api/v1</code> answers as usual.</p>
<p>To build the dashboard into the api, from the repository root:</p>
<pre>make build</pre>
<p>or by hand:</p>
<pre>cd api/web &amp;&amp; npm ci &amp;&amp; npm run build
cd ../.. &amp;&amp; go build -o bin/oikos-api ./api/cmd/oikos-api</pre>
<p>The container image (deploy/docker/Dockerfile) builds it in its Node stage.</p>
</body></html>
`
