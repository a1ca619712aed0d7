package httpprobe

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// countingServer is an httptest server that counts the TCP connections it accepted.
func countingServer(t *testing.T, tlsOn bool, h http.Handler) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	if tlsOn {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv, &conns
}

// getOnce is one check's GET through c, bounded by timeout as the check's context bounds it.
func getOnce(t *testing.T, c *Client, rawURL string, timeout time.Duration) (Answer, error) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return c.Get(ctx, u, true)
}

// client is a Client dialling names through names, closed when the test ends.
func client(t *testing.T, names map[string]string, tlsConfig *tls.Config) *Client {
	t.Helper()
	c := NewClient(NewDialer(names, false), tlsConfig, 4)
	t.Cleanup(func() { c.CloseIdle(0) })
	return c
}

// Redirects are followed as http.Client follows them (relative, to another mapped name, at
// most ten); the final answer is judged; a redirect to a name outside the map is refused
// as configuration.
func TestHTTPRedirects(t *testing.T) {
	t.Parallel()
	var port string
	srv, _ := countingServer(t, false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
			_, _ = io.WriteString(w, "healthy via "+r.Host+" from "+r.Referer())
		case "/moved":
			http.Redirect(w, r, "/health", http.StatusFound)
		case "/elsewhere":
			http.Redirect(w, r, "http://other.lab.example:"+port+"/health", http.StatusMovedPermanently)
		case "/unmapped":
			http.Redirect(w, r, "http://nowhere.example:"+port+"/health", http.StatusTemporaryRedirect)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		case "/bare":
			w.WriteHeader(http.StatusFound) // no Location: the answer itself
		}
	}))
	_, port, _ = net.SplitHostPort(srv.Listener.Addr().String())
	c := client(t, map[string]string{"svc.lab.example": "127.0.0.1", "other.lab.example": "127.0.0.1"}, nil)
	base := "http://svc.lab.example:" + port

	if ans, err := getOnce(t, c, base+"/moved", 5*time.Second); err != nil || ans.Status != 200 ||
		string(ans.Body) != "healthy via svc.lab.example:"+port+" from "+base+"/moved" {
		t.Errorf("relative redirect: %d %q %v", ans.Status, ans.Body, err)
	}
	if ans, err := getOnce(t, c, base+"/elsewhere", 5*time.Second); err != nil || !strings.Contains(string(ans.Body), "healthy via other.lab.example") {
		t.Errorf("redirect to another mapped name: %d %q %v", ans.Status, ans.Body, err)
	}
	if _, err := getOnce(t, c, base+"/unmapped", 5*time.Second); !errors.Is(err, ErrDialRefused) || !strings.Contains(err.Error(), "name map") {
		t.Errorf("redirect to an unmapped name: %v, want ErrDialRefused", err)
	}
	if _, err := getOnce(t, c, base+"/loop", 5*time.Second); err == nil || !strings.Contains(err.Error(), "stopped after 10 redirects") {
		t.Errorf("redirect loop: %v", err)
	}
	if ans, err := getOnce(t, c, base+"/bare", 5*time.Second); err != nil || ans.Status != http.StatusFound {
		t.Errorf("302 without Location: %d %v, want the 302 itself", ans.Status, err)
	}
}

// A connection is kept only when it can carry the next request: not after Connection:
// close, not after a body too long to read to its end. Either way every check gets its
// answer; a chunked body is matched like any other.
func TestHTTPConnectionReuseRules(t *testing.T) {
	t.Parallel()
	srv, conns := countingServer(t, false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/close":
			w.Header().Set("Connection", "close")
			_, _ = io.WriteString(w, "bye")
		case "/huge":
			_, _ = io.WriteString(w, "big-start ")
			_, _ = w.Write(make([]byte, MaxBodyBytes+10))
		case "/chunked":
			for _, part := range []string{"alpha ", "beta ", "gamma"} {
				_, _ = io.WriteString(w, part)
				w.(http.Flusher).Flush()
			}
		}
	}))
	c := client(t, map[string]string{"svc.lab.example": "127.0.0.1"}, nil)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	base := "http://svc.lab.example:" + port

	tests := []struct {
		path, match string
		newConns    int64 // for three checks in a row
	}{
		{"/close", "bye", 3},
		{"/huge", "big-start", 3},
		{"/chunked", "beta gamma", 1},
	}
	for _, tc := range tests {
		before := conns.Load()
		for i := 0; i < 3; i++ {
			if ans, err := getOnce(t, c, base+tc.path, 5*time.Second); err != nil || ans.Status != 200 || !strings.Contains(string(ans.Body), tc.match) {
				t.Fatalf("%s run %d: %d %.40q %v", tc.path, i, ans.Status, ans.Body, err)
			}
		}
		if got := conns.Load() - before; got != tc.newConns {
			t.Errorf("%s: %d new connections for 3 checks, want %d", tc.path, got, tc.newConns)
		}
	}
	if n := c.OpenConnections(); n != 1 {
		t.Errorf("%d connections open, want the one kept for /chunked", n)
	}
	if n := c.Dials(); n != 7 {
		t.Errorf("%d dials, want 7 (3 + 3 + 1)", n)
	}
	c.CloseIdle(0)
	if n := c.OpenConnections(); n != 0 {
		t.Errorf("%d connections open after closing the idle ones", n)
	}
}

// A kept connection the server closed while it was idle is not an outage: the GET is sent
// again on a fresh connection.
func TestHTTPStaleConnectionIsRetried(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	var accepted atomic.Int64
	closed := make(chan struct{}, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				// One answer per connection, promising keep-alive, then a silent close.
				if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
					_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				}
				_ = c.Close()
				closed <- struct{}{}
			}()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	c := client(t, map[string]string{"svc.lab.example": "127.0.0.1"}, nil)
	for i := 0; i < 3; i++ {
		if ans, err := getOnce(t, c, "http://svc.lab.example:"+port+"/", 5*time.Second); err != nil || string(ans.Body) != "ok" {
			t.Fatalf("run %d: %d %q %v", i, ans.Status, ans.Body, err)
		}
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
			t.Fatal("the server never closed its connection")
		}
	}
	if n := accepted.Load(); n != 3 {
		t.Errorf("%d connections for 3 checks", n)
	}
}

// Headers that never end are cut off (net/http's Transport bounds them too) and the check
// is down, not stuck until its timeout with memory growing.
func TestHTTPEndlessHeadersAreCut(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				line := "X-Filler: " + strings.Repeat("a", 1000) + "\r\n"
				if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\n"); err != nil {
					return
				}
				for {
					if _, err := io.WriteString(c, line); err != nil {
						return
					}
				}
			}()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	c := client(t, map[string]string{"svc.lab.example": "127.0.0.1"}, nil)
	c.maxHeader = 64 << 10
	if _, err := getOnce(t, c, "http://svc.lab.example:"+port+"/", 30*time.Second); err == nil ||
		errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "headers too large") {
		t.Errorf("endless headers: %v", err)
	}
	if n := c.OpenConnections(); n != 0 {
		t.Errorf("%d connections kept after a broken answer", n)
	}
}

// https checks verify the server against the configured roots with the URL's name, and keep
// their TLS connection.
func TestHTTPSKeepsItsConnection(t *testing.T) {
	t.Parallel()
	srv, conns := countingServer(t, true, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "tls ok "+r.Proto)
	}))
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	// httptest's certificate names example.com.
	names := map[string]string{"example.com": "127.0.0.1", "svc.lab.example": "127.0.0.1"}
	c := client(t, names, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12})
	for i := 0; i < 10; i++ {
		if ans, err := getOnce(t, c, "https://example.com:"+port+"/", 5*time.Second); err != nil || string(ans.Body) != "tls ok HTTP/1.1" {
			t.Fatalf("run %d: %d %q %v", i, ans.Status, ans.Body, err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d TLS connections for 10 checks, want 1", n)
	}
	// The certificate does not name svc.lab.example: the handshake must fail.
	var certErr *tls.CertificateVerificationError
	if _, err := getOnce(t, c, "https://svc.lab.example:"+port+"/", 5*time.Second); !errors.As(err, &certErr) {
		t.Errorf("wrong name: %v, want a certificate verification error", err)
	}
}

// rawServer answers each request on a connection with 200 "ok" until the connection closes,
// and hands every accepted connection to conns.
func rawServer(t *testing.T) (net.Listener, <-chan net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	conns := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns <- c
			go func() {
				br := bufio.NewReader(c)
				for {
					if _, err := http.ReadRequest(br); err != nil {
						return
					}
					if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln, conns
}

// settleIdle waits until every idle connection of kc has something to read (data or EOF)
// in its socket, consuming nothing, so a test does not depend on when the server's bytes
// or FIN reach the client.
func settleIdle(t *testing.T, kc *Client) {
	t.Helper()
	kc.mu.Lock()
	defer kc.mu.Unlock()
	for _, list := range kc.idle {
		for _, c := range list {
			rc, err := c.conn.(syscall.Conn).SyscallConn()
			if err != nil {
				t.Fatal(err)
			}
			_ = c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			var buf [1]byte
			if err := rc.Read(func(fd uintptr) bool { // peek; on "would block", wait and peek again
				_, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
				return !errors.Is(err, syscall.EAGAIN)
			}); err != nil {
				t.Fatalf("idle connection never became readable: %v", err)
			}
			_ = c.conn.SetReadDeadline(time.Time{})
			if socketIdle(c.conn) {
				t.Fatal("socketIdle says idle although the socket is readable")
			}
		}
	}
}

// Every idle connection of a route may be stale (a server whose keep-alive timeout is
// shorter than the interval): the retry dials instead of taking another stale one.
func TestHTTPAllIdleConnectionsStale(t *testing.T) {
	t.Parallel()
	ln, conns := rawServer(t)
	kc := NewClient(NewDialer(nil, false), nil, 4)
	t.Cleanup(func() { kc.CloseIdle(0) })
	u, _ := url.Parse("http://" + ln.Addr().String() + "/")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Two kept connections, each having carried a check.
	a, err := kc.connect(ctx, "http", "127.0.0.1", ln.Addr().String(), "http://"+ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := kc.connect(ctx, "http", "127.0.0.1", ln.Addr().String(), "http://"+ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	a.used, b.used = true, true
	kc.put(a)
	kc.put(b)
	for range 2 {
		_ = (<-conns).Close()
	}
	settleIdle(t, kc)
	ans, err := kc.Get(ctx, u, false)
	if err != nil || ans.Status != http.StatusOK {
		t.Fatalf("status %d, err %v; want 200 on a fresh connection", ans.Status, err)
	}
}

// Bytes a server sends on an idle kept connection (a 408 on its idle timeout, then a close)
// are not taken for the answer to the next request.
func TestHTTPUnsolicitedAnswerOnIdleConnection(t *testing.T) {
	t.Parallel()
	ln, conns := rawServer(t)
	kc := NewClient(NewDialer(nil, false), nil, 4)
	t.Cleanup(func() { kc.CloseIdle(0) })
	u, _ := url.Parse("http://" + ln.Addr().String() + "/")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if ans, err := kc.Get(ctx, u, false); err != nil || ans.Status != http.StatusOK {
		t.Fatalf("first check: %d %v", ans.Status, err)
	}
	c := <-conns
	_, _ = io.WriteString(c, "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
	_ = c.Close()
	settleIdle(t, kc)
	if ans, err := kc.Get(ctx, u, false); err != nil || ans.Status != http.StatusOK {
		t.Fatalf("status %d, err %v; want the real answer (200), not the unsolicited 408", ans.Status, err)
	}
}

// Credentials in the URL are sent as Basic authentication, as http.Client sends them.
func TestHTTPCredentialsInURL(t *testing.T) {
	t.Parallel()
	srv, _ := countingServer(t, false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "monitor" || p != "s3cret:x" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	kc := NewClient(NewDialer(nil, false), nil, 4)
	t.Cleanup(func() { kc.CloseIdle(0) })
	u, _ := url.Parse(srv.URL)
	u.User = url.UserPassword("monitor", "s3cret:x")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if ans, err := kc.Get(ctx, u, false); err != nil || ans.Status != http.StatusOK {
		t.Fatalf("status %d, err %v; want 200 with the URL's credentials", ans.Status, err)
	}
}

// A client keeps as many idle connections per host:port as it is told checks may run at
// once: n checks that run together and end together all find a connection next time; with
// fewer kept, the rest dial again.
func TestHTTPKeepsOneIdleConnectionPerConcurrentCheck(t *testing.T) {
	t.Parallel()
	const n = 8
	arrivals := make(chan struct{}, 2*n)
	var gate atomic.Pointer[chan struct{}]
	srv, _ := countingServer(t, false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Every request of a round waits for the whole round: n connections in use at once.
		g := *gate.Load()
		arrivals <- struct{}{}
		<-g
		_, _ = io.WriteString(w, "ok")
	}))
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	round := func(c *Client) {
		t.Helper()
		g := make(chan struct{})
		gate.Store(&g)
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				u, _ := url.Parse(fmt.Sprintf("http://svc.lab.example:%s/%d", port, i))
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				if _, err := c.Get(ctx, u, false); err != nil {
					errs <- err
				}
			}()
		}
		for range n {
			select {
			case <-arrivals:
			case err := <-errs:
				t.Fatal(err)
			case <-time.After(20 * time.Second):
				t.Fatal("the round's requests never all arrived")
			}
		}
		close(g)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		maxIdle     int
		secondDials int64
	}{{n, 0}, {4, n - 4}} {
		c := NewClient(NewDialer(map[string]string{"svc.lab.example": "127.0.0.1"}, false), nil, tc.maxIdle)
		round(c)
		if got := c.Dials(); got != n {
			t.Fatalf("maxIdle %d: %d dials for %d checks at once", tc.maxIdle, got, n)
		}
		if got := c.OpenConnections(); got != tc.maxIdle {
			t.Errorf("maxIdle %d: %d connections kept", tc.maxIdle, got)
		}
		round(c)
		if got := c.Dials() - n; got != tc.secondDials {
			t.Errorf("maxIdle %d: %d new dials in the second round of %d checks at once, want %d", tc.maxIdle, got, n, tc.secondDials)
		}
		c.CloseIdle(0)
	}
}
