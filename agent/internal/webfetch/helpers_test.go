package webfetch

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// fakeResolver answers from a table; tests never resolve a real name. seq gives successive
// answers for a host (the last one repeats), to play a rebinding DNS server.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][]netip.Addr
	seq     map[string][][]netip.Addr
	// fallback answers any other name (the fuzz target); nil: "no such host".
	fallback []netip.Addr
	calls    []string
}

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

func (r *fakeResolver) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, host)
	if network != "ip" {
		return nil, errors.New("fakeResolver: unexpected network " + network)
	}
	if s := r.seq[host]; len(s) > 0 {
		a := s[0]
		if len(s) > 1 {
			r.seq[host] = s[1:]
		}
		return a, nil
	}
	if a, ok := r.answers[host]; ok {
		return a, nil
	}
	if r.fallback != nil {
		return r.fallback, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (r *fakeResolver) calledFor() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

// dialLog records the addresses a Fetcher dials and refuses (failing the test) any that
// is not loopback: tests dial nothing else.
type dialLog struct {
	mu    sync.Mutex
	addrs []string
}

func (d *dialLog) dialled() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.addrs...)
}

// newTestFetcher builds a Fetcher with a fake resolver (res, or an empty one) and a dialler
// that records every dial and allows only loopback ones.
func newTestFetcher(t *testing.T, cfg Config, res *fakeResolver) (*Fetcher, *fakeResolver, *dialLog) {
	t.Helper()
	if res == nil {
		res = &fakeResolver{}
	}
	cfg.Resolver = res
	f, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	log := &dialLog{}
	realDial := f.dial
	f.dial = func(ctx context.Context, network, address string) (net.Conn, error) {
		log.mu.Lock()
		log.addrs = append(log.addrs, address)
		log.mu.Unlock()
		ap, err := netip.ParseAddrPort(address)
		if err != nil || !ap.Addr().Unmap().IsLoopback() {
			t.Errorf("a dial to %s: tests dial loopback only", address)
			return nil, errors.New("test dialler: not loopback")
		}
		return realDial(ctx, network, address)
	}
	return f, res, log
}

// server is a loopback httptest server that counts its requests.
type server struct {
	*httptest.Server
	hits atomic.Int64
	host string // 127.0.0.1
	port string
}

func newServer(t *testing.T, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(s.Close)
	u, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	s.host, s.port = u.Hostname(), u.Port()
	if ip, err := netip.ParseAddr(s.host); err != nil || !ip.IsLoopback() {
		t.Fatalf("test server on %s, not loopback", s.host)
	}
	return s
}

func textHandler(ct, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", ct)
		_, _ = w.Write([]byte(body))
	}
}
