package llmsim

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/oikos-hq/oikos/shared/safego"
)

// ShutdownGrace is how long stop lets answers in flight (a slow stream) finish before it
// closes their connections.
const ShutdownGrace = 5 * time.Second

// Listen serves script on addr ("127.0.0.1:0" picks a free port) until stop is called or
// ctx ends. baseURL is the API's base with its /v1 suffix ("http://127.0.0.1:41234/v1"),
// what go-openai's ClientConfig.BaseURL and OIKOS_LLM_BASE_URL take. stop shuts the server
// down gracefully, waits for it, and is safe to call twice.
func Listen(ctx context.Context, addr string, script *Script, opts Options) (baseURL string, stop func(), err error) {
	if script == nil {
		return "", nil, errors.New("llmsim: no script")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, err
	}
	log := opts.Logger
	base, cancelBase := context.WithCancel(context.Background())
	srv := &http.Server{
		Handler:           NewServer(script, opts),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	served := make(chan struct{})
	safego.Go(log, "llmsim-serve", func() {
		defer close(served)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("llmsim: serve")
		}
	})
	stopped := make(chan struct{})
	var once sync.Once
	stop = func() {
		once.Do(func() {
			close(stopped)
			sctx, cancel := context.WithTimeout(context.Background(), ShutdownGrace)
			if err := srv.Shutdown(sctx); err != nil {
				_ = srv.Close()
			}
			cancel()
			cancelBase()
			<-served
		})
	}
	safego.Go(log, "llmsim-stop-on-ctx", func() {
		select {
		case <-ctx.Done():
			stop()
		case <-stopped:
		}
	})
	return "http://" + ln.Addr().String() + "/v1", stop, nil
}

// Start serves script on a free loopback port for one test and stops it when the test ends
// (stop may also be called earlier). opts is optional; at most the first is used.
func Start(tb testing.TB, script *Script, opts ...Options) (baseURL string, stop func()) {
	tb.Helper()
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	baseURL, stop, err := Listen(context.Background(), "127.0.0.1:0", script, o)
	if err != nil {
		tb.Fatalf("llmsim: %v", err)
	}
	tb.Cleanup(stop)
	return baseURL, stop
}
