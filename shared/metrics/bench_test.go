package metrics_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/oikos-hq/oikos/shared/metrics"
)

// The middleware's cost per request: an echo server answering a parameterised route in
// memory, without (Baseline) and with the HTTP histogram. The difference is the overhead.
func benchEcho(b *testing.B, mw ...echo.MiddlewareFunc) {
	e := echo.New()
	e.Use(mw...)
	e.GET("/api/v1/entities/:ref", func(c echo.Context) error { return c.NoContent(http.StatusNoContent) })
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		req := httptest.NewRequest(http.MethodGet, "/api/v1/entities/lxc:jellyfin", nil)
		for pb.Next() {
			e.ServeHTTP(httptest.NewRecorder(), req)
		}
	})
}

func BenchmarkEchoBaseline(b *testing.B)   { benchEcho(b) }
func BenchmarkEchoMiddleware(b *testing.B) { benchEcho(b, metrics.NewRegistry().EchoMiddleware()) }

func BenchmarkEchoBaselineSerial(b *testing.B) {
	e := echo.New()
	e.GET("/api/v1/entities/:ref", func(c echo.Context) error { return c.NoContent(http.StatusNoContent) })
	serial(b, e)
}

func BenchmarkEchoMiddlewareSerial(b *testing.B) {
	e := echo.New()
	e.Use(metrics.NewRegistry().EchoMiddleware())
	e.GET("/api/v1/entities/:ref", func(c echo.Context) error { return c.NoContent(http.StatusNoContent) })
	serial(b, e)
}

func serial(b *testing.B, h http.Handler) {
	req := httptest.NewRequest(http.MethodGet, "/api/v1/entities/lxc:jellyfin", nil)
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
}

// The same for the net/http middleware over a ServeMux (scheduler, agent).
func benchMux(b *testing.B, wrap func(http.Handler) http.Handler) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /items/{id}", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	serial(b, wrap(mux))
}

func BenchmarkMuxBaselineSerial(b *testing.B) {
	benchMux(b, func(h http.Handler) http.Handler { return h })
}
func BenchmarkMuxInstrumentSerial(b *testing.B) {
	benchMux(b, metrics.NewRegistry().InstrumentHandler)
}
