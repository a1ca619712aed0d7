package webfetch

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oikos-hq/oikos/shared/netmap"
	"github.com/oikos-hq/oikos/shared/safego"
	"github.com/rs/zerolog"
)

// An allowlisted loopback server is fetched; the result carries status, type and text.
func TestGetAllowlisted(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("User-Agent") != userAgent {
			t.Errorf("User-Agent %q", r.Header.Get("User-Agent"))
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"status":"degraded"}`))
	})
	for _, allow := range [][]string{{"127.0.0.1"}, {"127.0.0.0/8"}, {"127.1"}} {
		f, _, log := newTestFetcher(t, Config{Allow: allow}, nil)
		res, err := f.Get(t.Context(), srv.URL+"/health")
		if err != nil {
			t.Fatalf("Allow %v: %v", allow, err)
		}
		want := Result{URL: srv.URL + "/health", FinalURL: srv.URL + "/health", Status: 503, ContentType: "application/json",
			Text: `{"status":"degraded"}`, Bytes: 21}
		if res != want {
			t.Errorf("Allow %v: %+v; want %+v", allow, res, want)
		}
		if d := log.dialled(); !slices.Equal(d, []string{srv.Listener.Addr().String()}) {
			t.Errorf("dialled %v", d)
		}
	}
	// The same URL in an odd form is fetched at its canonical address.
	f, _, log := newTestFetcher(t, Config{Allow: []string{"127.0.0.1"}}, nil)
	res, err := f.Get(t.Context(), "http://0x7f.1:"+srv.port+"/health")
	if err != nil || res.FinalURL != srv.URL+"/health" {
		t.Errorf("odd form: %+v, %v", res, err)
	}
	if d := log.dialled(); !slices.Equal(d, []string{srv.Listener.Addr().String()}) {
		t.Errorf("dialled %v", d)
	}
}

// An allowlisted name is resolved once and dialled at the address that was checked: a
// resolver that answers something else the second time (DNS rebinding) is never asked again.
func TestGetPinsTheCheckedAddress(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Host != "svc.internal:"+portOf(r) {
			t.Errorf("Host %q", r.Host)
		}
		textHandler("text/plain", "pinned")(w, r)
	})
	res := &fakeResolver{seq: map[string][][]netip.Addr{
		"svc.internal": {addrs("127.0.0.1"), addrs("10.0.0.1")},
	}}
	f, _, log := newTestFetcher(t, Config{Allow: []string{"127.0.0.1"}}, res)
	got, err := f.Get(t.Context(), "http://svc.internal:"+srv.port+"/")
	if err != nil || got.Text != "pinned" {
		t.Fatalf("Get: %+v, %v", got, err)
	}
	if c := res.calledFor(); !slices.Equal(c, []string{"svc.internal"}) {
		t.Errorf("resolved %v; want one lookup", c)
	}
	if d := log.dialled(); !slices.Equal(d, []string{"127.0.0.1:" + srv.port}) {
		t.Errorf("dialled %v", d)
	}
	// The next fetch resolves afresh and gets the rebound (private) answer: refused.
	if _, err := f.Get(t.Context(), "http://svc.internal:"+srv.port+"/"); !errors.Is(err, ErrRefused) ||
		!strings.Contains(err.Error(), "svc.internal resolves to 10.0.0.1, a private address") {
		t.Errorf("rebound: %v", err)
	}
}

func portOf(r *http.Request) string {
	_, p, _ := net.SplitHostPort(r.Host)
	return p
}

// A redirect from an allowlisted server to a loopback address that is not allowlisted is
// refused before it is dialled.
func TestRedirectToUnlistedRefused(t *testing.T) {
	t.Parallel()
	// A server on 127.0.0.2 if the system has it (Linux routes all of 127/8); it must never
	// be hit.
	var otherPort = "9"
	var other *httptest.Server
	if ln, err := net.Listen("tcp", "127.0.0.2:0"); err == nil {
		other = httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			t.Error("the server on 127.0.0.2 was reached")
		}))
		_ = other.Listener.Close()
		other.Listener = ln
		other.Start()
		t.Cleanup(other.Close)
		_, otherPort, _ = net.SplitHostPort(ln.Addr().String())
	}
	targets := map[string]string{
		"/to-127.0.0.2":  "http://127.0.0.2:" + otherPort + "/",
		"/to-decimal":    "http://2130706434:" + otherPort + "/",
		"/to-localhost":  "http://localhost:" + otherPort + "/",
		"/to-metadata":   "http://169.254.169.254/latest/meta-data/",
		"/to-file":       "file:///etc/passwd",
		"/to-userinfo":   "http://x@127.0.0.2:" + otherPort + "/",
		"/to-v4-mapped":  "http://[::ffff:127.0.0.2]:" + otherPort + "/",
		"/to-nat64-priv": "http://[64:ff9b::192.168.0.1]/",
	}
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, targets[r.URL.Path], http.StatusFound)
	})
	f, res, log := newTestFetcher(t, Config{Allow: []string{"127.0.0.1"}}, nil)
	wants := map[string]string{
		"/to-127.0.0.2":  "refused: redirect from " + srv.URL + "/to-127.0.0.2 to http://127.0.0.2:" + otherPort + "/: 127.0.0.2 is a loopback address; add it to OIKOS_HTTP_GET_ALLOW to allow it",
		"/to-decimal":    "2130706434 (127.0.0.2) is a loopback address",
		"/to-localhost":  "localhost is a loopback name",
		"/to-metadata":   "169.254.169.254 is a cloud metadata address",
		"/to-file":       "only http and https URLs are fetched, not file:",
		"/to-userinfo":   "user info",
		"/to-v4-mapped":  "loopback",
		"/to-nat64-priv": "embeds 192.168.0.1, a private address",
	}
	for path, want := range wants {
		_, err := f.Get(t.Context(), srv.URL+path)
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), want) {
			t.Errorf("redirect %s: %v; want a refusal containing %q", path, err, want)
		}
	}
	for _, d := range log.dialled() {
		if d != srv.Listener.Addr().String() {
			t.Errorf("dialled %s; only the allowlisted server may be dialled", d)
		}
	}
	if c := res.calledFor(); len(c) != 0 {
		t.Errorf("resolved %v", c)
	}
	if srv.hits.Load() != int64(len(wants)) {
		t.Errorf("server hit %d times, want %d", srv.hits.Load(), len(wants))
	}
}

// Redirects are followed and counted, up to MaxRedirects; negative MaxRedirects returns the
// redirect itself.
func TestRedirects(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/a":
			http.Redirect(w, r, "/b", http.StatusMovedPermanently)
		case "/b":
			http.Redirect(w, r, "http://0x7f.1:"+portOf(r)+"/c", http.StatusTemporaryRedirect)
		case "/c":
			textHandler("text/plain", "landed")(w, r)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		}
	})
	f, _, _ := newTestFetcher(t, Config{Allow: []string{"127.0.0.1"}}, nil)
	res, err := f.Get(t.Context(), srv.URL+"/a")
	if err != nil || res.Text != "landed" || res.Redirects != 2 || res.FinalURL != srv.URL+"/c" || res.URL != srv.URL+"/a" {
		t.Fatalf("Get /a: %+v, %v", res, err)
	}
	f2, _, _ := newTestFetcher(t, Config{Allow: []string{"127.0.0.1"}, MaxRedirects: 3}, nil)
	if _, err := f2.Get(t.Context(), srv.URL+"/loop"); !errors.Is(err, ErrTooManyRedirects) || !strings.Contains(err.Error(), "stopped after 3 redirects") {
		t.Errorf("loop: %v", err)
	}
	f3, _, _ := newTestFetcher(t, Config{Allow: []string{"127.0.0.1"}, MaxRedirects: -1}, nil)
	if res, err := f3.Get(t.Context(), srv.URL+"/a"); err != nil || res.Status != http.StatusMovedPermanently || res.Redirects != 0 {
		t.Errorf("no redirects: %+v, %v", res, err)
	}
}

// Bodies are cut at MaxBytes (after decompression) and text at MaxText.
func TestSizeCaps(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("a", 1<<20)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(make([]byte, 8<<20))
	_ = zw.Close()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big":
			textHandler("text/plain; charset=utf-8", big)(w, r)
		case "/gzip":
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write(gz.Bytes())
		case "/utf8":
			textHandler("text/plain; charset=utf-8", strings.Repeat("é", 100))(w, r)
		}
	})
	f, _, _ := newTestFetcher(t, Config{Allow: []string{"127.0.0.1"}, MaxBytes: 1000}, nil)
	res, err := f.Get(t.Context(), srv.URL+"/big")
	if err != nil || !res.Truncated || res.Bytes != 1000 || len(res.Text) != 1000 {
		t.Errorf("big: truncated %v bytes %d text %d, %v", res.Truncated, res.Bytes, len(res.Text), err)
	}
	res, err = f.Get(t.Context(), srv.URL+"/gzip")
	if err != nil || !res.Truncated || res.Bytes != 1000 {
		t.Errorf("gzip: truncated %v bytes %d, %v", res.Truncated, res.Bytes, err)
	}
	f2, _, _ := newTestFetcher(t, Config{Allow: []string{"127.0.0.1"}, MaxText: 51}, nil)
	res, err = f2.Get(t.Context(), srv.URL+"/utf8")
	if err != nil || !res.Truncated || res.Text != strings.Repeat("é", 25) || res.Bytes != 200 {
		t.Errorf("utf8: %q truncated %v bytes %d, %v", res.Text, res.Truncated, res.Bytes, err)
	}
	f3, _, _ := newTestFetcher(t, Config{Allow: []string{"127.0.0.1"}}, nil)
	res, err = f3.Get(t.Context(), srv.URL+"/big")
	if err != nil || !res.Truncated || res.Bytes != DefaultMaxBytes || len(res.Text) != DefaultMaxText {
		t.Errorf("defaults: truncated %v bytes %d text %d, %v", res.Truncated, res.Bytes, len(res.Text), err)
	}
}

// A server that never answers is given up on after Timeout.
func TestTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	t.Cleanup(func() { close(release) }) // runs before srv.Close
	f, _, _ := newTestFetcher(t, Config{Allow: []string{"127.0.0.1"}, Timeout: 200 * time.Millisecond}, nil)
	start := time.Now()
	_, err := f.Get(t.Context(), srv.URL+"/slow")
	if err == nil || !strings.Contains(err.Error(), "fetching "+srv.URL+"/slow: timed out after 200ms") {
		t.Errorf("Get: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %s", d)
	}
	// A body that stalls half-way times out the same way.
	srv2 := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("partial"))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	if _, err := f.Get(t.Context(), srv2.URL+"/stall"); err == nil || !strings.Contains(err.Error(), "timed out after 200ms") {
		t.Errorf("stalled body: %v", err)
	}
	// The caller's cancellation is reported as the caller's, not as a time-out.
	entered := make(chan struct{}, 1)
	srv3 := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	f2, _, _ := newTestFetcher(t, Config{Allow: []string{"127.0.0.1"}}, nil)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	safego.Go(zerolog.New(zerolog.NewTestWriter(t)), "get", func() {
		errc <- safego.Call(func() error { _, err := f2.Get(ctx, srv3.URL+"/"); return err })
	})
	<-entered
	cancel()
	if err := <-errc; err == nil || !strings.Contains(err.Error(), "fetching "+srv3.URL+"/: context canceled") {
		t.Errorf("cancelled: %v", err)
	}
}

// HTML is reduced to text; JSON and text/* come as they are; binary types are refused.
func TestContentTypes(t *testing.T) {
	t.Parallel()
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/html":
			textHandler("text/html; charset=utf-8", `<html><head><title>Status</title><script>var token="s3cr3t"</script></head>
<body><h1>All   good</h1><p>Jellyfin is <a href="/x">up</a>.</p></body></html>`)(w, r)
		case "/json":
			textHandler("application/problem+json", `{"title":"nope"}`)(w, r)
		case "/csv":
			textHandler("text/csv", "a,b\n1,2\n")(w, r)
		case "/png":
			w.Header().Set("Content-Type", "image/png")
			_, _ = w.Write(png)
		case "/octet":
			textHandler("application/octet-stream", "\x00\x01\x02")(w, r)
		case "/untyped-png":
			w.Header()["Content-Type"] = nil
			_, _ = w.Write(png)
		case "/untyped-text":
			w.Header()["Content-Type"] = nil
			_, _ = w.Write([]byte("plain words\x00 here"))
		case "/untyped-html":
			w.Header()["Content-Type"] = nil
			_, _ = w.Write([]byte("<!DOCTYPE html><p>sniffed</p>"))
		}
	})
	f, _, _ := newTestFetcher(t, Config{Allow: []string{"127.0.0.1"}}, nil)
	for path, want := range map[string]string{
		"/html":         "Status\n\n# All good\n\nJellyfin is up.",
		"/json":         `{"title":"nope"}`,
		"/csv":          "a,b\n1,2\n",
		"/untyped-html": "sniffed",
	} {
		res, err := f.Get(t.Context(), srv.URL+path)
		if err != nil || res.Text != want {
			t.Errorf("%s: %q, %v; want %q", path, res.Text, err, want)
		}
	}
	for path, want := range map[string]string{
		"/png":          "answered with image/png, which is not text",
		"/octet":        "application/octet-stream",
		"/untyped-png":  "sent no content type and the body looks like image/png",
		"/untyped-text": "looks like application/octet-stream",
	} {
		res, err := f.Get(t.Context(), srv.URL+path)
		if !errors.Is(err, ErrBinary) || !strings.Contains(err.Error(), want) || res.Text != "" {
			t.Errorf("%s: %q, %v; want ErrBinary containing %q", path, res.Text, err, want)
		}
	}
}

// ping_service's trusted Head reaches a loopback server without any allowlist; an
// untrusted Head to it is refused.
func TestHeadTrusted(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodHead {
			t.Errorf("method %s", r.Method)
		}
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, "/ok", http.StatusFound)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNoContent)
	})
	f, _, log := newTestFetcher(t, Config{}, &fakeResolver{answers: map[string][]netip.Addr{"localhost": addrs("127.0.0.1")}})
	res, err := f.Head(t.Context(), srv.URL+"/moved", true)
	if err != nil || res.Status != http.StatusNoContent || res.Redirects != 1 || res.FinalURL != srv.URL+"/ok" || res.ContentType != "text/html" {
		t.Fatalf("trusted Head: %+v, %v", res, err)
	}
	if res, err := f.Head(t.Context(), "http://localhost:"+srv.port+"/", true); err != nil || res.Status != http.StatusNoContent {
		t.Errorf("trusted Head by name: %+v, %v", res, err)
	}
	n := len(log.dialled())
	if _, err := f.Head(t.Context(), srv.URL+"/", false); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("untrusted Head: %v", err)
	}
	if _, err := f.Head(t.Context(), "http://169.254.169.254/", true); !errors.Is(err, ErrRefused) {
		t.Errorf("trusted Head to metadata: %v", err)
	}
	if len(log.dialled()) != n {
		t.Errorf("refused Heads dialled: %v", log.dialled()[n:])
	}
}

// The name map sends demo names to a loopback server without resolving them; the request
// carries the demo name as its Host. Its target counts as allowlisted, metadata excepted.
func TestNameMap(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		textHandler("text/plain", "hello from "+r.Host)(w, r)
	})
	names, err := netmap.Parse("jellyfin.lab.example=" + srv.Listener.Addr().String() + ",*.lab.example=127.0.0.1:" + srv.port +
		" meta.lab.example=169.254.169.254")
	if err != nil {
		t.Fatal(err)
	}
	f, res, log := newTestFetcher(t, Config{NameMap: names}, nil)
	for _, host := range []string{"jellyfin.lab.example", "sonarr.lab.example", "Jellyfin.Lab.Example."} {
		got, err := f.Get(t.Context(), "http://"+host+"/")
		want := "hello from " + strings.TrimSuffix(strings.ToLower(host), ".")
		if err != nil || got.Text != want {
			t.Errorf("Get %s: %+v, %v; want %q", host, got, err, want)
		}
	}
	if c := res.calledFor(); len(c) != 0 {
		t.Errorf("resolved %v; mapped names are never resolved", c)
	}
	for _, d := range log.dialled() {
		if d != srv.Listener.Addr().String() {
			t.Errorf("dialled %s", d)
		}
	}
	if _, err := f.Get(t.Context(), "http://meta.lab.example/"); !errors.Is(err, ErrRefused) ||
		!strings.Contains(err.Error(), "meta.lab.example is mapped to 169.254.169.254, a cloud metadata address") {
		t.Errorf("mapped to metadata: %v", err)
	}
	// A name outside the map goes to the resolver (none here).
	if _, err := f.Get(t.Context(), "http://lab.example/"); err == nil || !strings.Contains(err.Error(), "resolving lab.example") {
		t.Errorf("unmapped: %v", err)
	}
}

// RootCAs is trusted on top of the system roots: the lab simulator's https through the
// name map.
func TestRootCAs(t *testing.T) {
	t.Parallel()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		textHandler("text/plain", "tls ok "+r.TLS.ServerName)(w, r)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes below
	srv.StartTLS()
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	addr := srv.Listener.Addr().String()
	names := map[string]string{"example.com": addr, "other.lab.example": addr}

	f, res, _ := newTestFetcher(t, Config{NameMap: names, RootCAs: pool, Allow: []string{"127.0.0.1"}}, nil)
	// httptest's certificate names example.com and 127.0.0.1.
	if got, err := f.Get(t.Context(), "https://example.com/"); err != nil || got.Text != "tls ok example.com" {
		t.Errorf("by name: %+v, %v", got, err)
	}
	if got, err := f.Get(t.Context(), srv.URL+"/"); err != nil || got.Text != "tls ok " {
		t.Errorf("by address: %+v, %v", got, err)
	}
	if _, err := f.Get(t.Context(), "https://other.lab.example/"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a name the certificate does not carry: %v", err)
	}
	if c := res.calledFor(); len(c) != 0 {
		t.Errorf("resolved %v", c)
	}
	// Without the CA the server is not trusted.
	f2, _, _ := newTestFetcher(t, Config{NameMap: names}, nil)
	if _, err := f2.Get(t.Context(), "https://example.com/"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without RootCAs: %v", err)
	}
}

func TestEmptyAndLongURL(t *testing.T) {
	t.Parallel()
	f, _, _ := newTestFetcher(t, Config{}, nil)
	if _, err := f.Get(t.Context(), "  "); err == nil || err.Error() != "no URL given" {
		t.Errorf("empty: %v", err)
	}
	if _, err := f.Get(t.Context(), "http://example.com/"+strings.Repeat("a", maxURLLen)); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("long: %v", err)
	}
}
