package metrics

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
)

// HTTPRequestDuration is the histogram of HTTP requests every daemon exports, labelled
// method, route and code.
const HTTPRequestDuration = "oikos_http_request_duration_seconds"

// Label values that keep the HTTP histogram's series bounded whatever clients send.
const (
	// RouteUnmatched is the route of a request no route matched (404s, the mux's redirects):
	// a scan of random paths adds one series, not one per path.
	RouteUnmatched = "unmatched"
	// MethodOther is the method of a request whose method is not a standard one.
	MethodOther = "other"
)

type httpMetrics struct {
	duration *prometheus.HistogramVec
	codes    [600]string // status code → label, without a conversion per request
}

func newHTTPMetrics(reg prometheus.Registerer) httpMetrics {
	h := httpMetrics{duration: Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    HTTPRequestDuration,
		Help:    "HTTP requests by method, route pattern and status code: time from receiving the request to the handler's return.",
		Buckets: FastBuckets(),
	}, []string{"method", "route", "code"}))}
	for i := range h.codes {
		h.codes[i] = strconv.Itoa(i)
	}
	return h
}

func (h *httpMetrics) observe(method, route string, code int, d time.Duration) {
	c := "0"
	if code >= 0 && code < len(h.codes) {
		c = h.codes[code]
	}
	if route == "" {
		route = RouteUnmatched
	}
	h.duration.WithLabelValues(methodLabel(method), route, c).Observe(d.Seconds())
}

// methodLabel is the method as a label: a standard method, else MethodOther.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return MethodOther
}

// EchoMiddleware records every request of an echo server in the HTTP histogram, labelled
// with the route's pattern (echo's c.Path(), "/api/v1/entities/:ref"), never the raw path;
// a request no route matched is RouteUnmatched.
//
// A handler's error is handed to echo's HTTPErrorHandler here (c.Error), so the recorded
// code is the status actually sent, and the middleware returns nil. Put it outside the
// middleware that turns panics into errors, so a panic is recorded as the 500 it becomes.
func (r *Registry) EchoMiddleware() echo.MiddlewareFunc {
	h := &r.http
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			if err := next(c); err != nil {
				c.Error(err)
			}
			h.observe(c.Request().Method, c.Path(), c.Response().Status, time.Since(start))
			return nil
		}
	}
}

// InstrumentHandler records every request served by next — a net/http ServeMux — in the
// HTTP histogram, labelled with the path of the pattern the mux matched (Request.Pattern
// "GET /healthz" gives route "/healthz"); a request the mux matched to no pattern is
// RouteUnmatched. next must set the Pattern of the request it is given, as ServeMux does:
// wrap the mux itself, not a handler that copies the request.
func (r *Registry) InstrumentHandler(next http.Handler) http.Handler {
	h := &r.http
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, req)
		code := sw.code
		if code == 0 {
			code = http.StatusOK // the handler wrote nothing: net/http sends 200
		}
		h.observe(req.Method, patternRoute(req.Pattern), code, time.Since(start))
	})
}

// patternRoute is the path part of a ServeMux pattern ("[METHOD ][HOST]/[PATH]").
func patternRoute(p string) string {
	if i := strings.IndexAny(p, " \t"); i >= 0 {
		p = strings.TrimLeft(p[i:], " \t")
	}
	if i := strings.IndexByte(p, '/'); i > 0 {
		p = p[i:]
	}
	return p
}

// statusWriter remembers the status code a handler sends. It passes Flush on (streams) and
// unwraps for http.ResponseController.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 && code >= 200 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
