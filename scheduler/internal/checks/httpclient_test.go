package checks

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
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

func probeOnce(t *testing.T, r *Runner, url, match string, timeout time.Duration) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	res, err := r.runProbe(ctx, httpDef(url, 200, match, timeout), nil)
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	return res
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
	r := newRunner(Options{Fleet: machineResolver{}, Logger: zerolog.Nop(),
		NameMap: map[string]string{"svc.lab.example": "127.0.0.1", "other.lab.example": "127.0.0.1"}}, &blockingExec{})
	t.Cleanup(func() { r.closeIdleHTTP(0) })
	base := "http://svc.lab.example:" + port

	if res := probeOnce(t, r, base+"/moved", "healthy via svc.lab.example:"+port+" from "+base+"/moved", 5*time.Second); res.Health != HealthUp {
		t.Errorf("relative redirect: %+v", res)
	}
	if res := probeOnce(t, r, base+"/elsewhere", "healthy via other.lab.example", 5*time.Second); res.Health != HealthUp {
		t.Errorf("redirect to another mapped name: %+v", res)
	}
	if res := probeOnce(t, r, base+"/unmapped", "", 5*time.Second); res.Health != HealthUnknown || res.Class != ClassConfig ||
		!strings.Contains(res.Reason, "name map") {
		t.Errorf("redirect to an unmapped name: %+v", res)
	}
	if res := probeOnce(t, r, base+"/loop", "", 5*time.Second); res.Health != HealthDown || !strings.Contains(res.Reason, "stopped after 10 redirects") {
		t.Errorf("redirect loop: %+v", res)
	}
	if res := probeOnce(t, r, base+"/bare", "", 5*time.Second); res.Health != HealthDown || !strings.Contains(res.Reason, "HTTP 302") {
		t.Errorf("302 without Location: %+v", res)
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
			_, _ = w.Write(make([]byte, maxBodyBytes+10))
		case "/chunked":
			for _, part := range []string{"alpha ", "beta ", "gamma"} {
				_, _ = io.WriteString(w, part)
				w.(http.Flusher).Flush()
			}
		}
	}))
	r := newRunner(Options{Fleet: machineResolver{}, Logger: zerolog.Nop(), NameMap: map[string]string{"svc.lab.example": "127.0.0.1"}}, &blockingExec{})
	t.Cleanup(func() { r.closeIdleHTTP(0) })
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
			if res := probeOnce(t, r, base+tc.path, tc.match, 5*time.Second); res.Health != HealthUp {
				t.Fatalf("%s run %d: %+v", tc.path, i, res)
			}
		}
		if got := conns.Load() - before; got != tc.newConns {
			t.Errorf("%s: %d new connections for 3 checks, want %d", tc.path, got, tc.newConns)
		}
	}
	if n := r.httpc.openConnections(); n != 1 {
		t.Errorf("%d connections open, want the one kept for /chunked", n)
	}
	r.closeIdleHTTP(0)
	if n := r.httpc.openConnections(); n != 0 {
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
	r := newRunner(Options{Fleet: machineResolver{}, Logger: zerolog.Nop(), NameMap: map[string]string{"svc.lab.example": "127.0.0.1"}}, &blockingExec{})
	t.Cleanup(func() { r.closeIdleHTTP(0) })
	for i := 0; i < 3; i++ {
		if res := probeOnce(t, r, "http://svc.lab.example:"+port+"/", "ok", 5*time.Second); res.Health != HealthUp {
			t.Fatalf("run %d: %+v", i, res)
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
	r := newRunner(Options{Fleet: machineResolver{}, Logger: zerolog.Nop(), NameMap: map[string]string{"svc.lab.example": "127.0.0.1"}}, &blockingExec{})
	r.httpc.maxHeader = 64 << 10
	t.Cleanup(func() { r.closeIdleHTTP(0) })
	if res := probeOnce(t, r, "http://svc.lab.example:"+port+"/", "", 30*time.Second); res.Health != HealthDown ||
		res.Class != "" || !strings.Contains(res.Reason, "headers too large") {
		t.Errorf("endless headers: %+v", res)
	}
	if n := r.httpc.openConnections(); n != 0 {
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
	r := newRunner(Options{Fleet: machineResolver{}, Logger: zerolog.Nop(), NameMap: names,
		TLSConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}, &blockingExec{})
	t.Cleanup(func() { r.closeIdleHTTP(0) })
	for i := 0; i < 10; i++ {
		if res := probeOnce(t, r, "https://example.com:"+port+"/", "tls ok HTTP/1.1", 5*time.Second); res.Health != HealthUp {
			t.Fatalf("run %d: %+v", i, res)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d TLS connections for 10 checks, want 1", n)
	}
	// The certificate does not name svc.lab.example: the handshake must fail.
	if res := probeOnce(t, r, "https://svc.lab.example:"+port+"/", "", 5*time.Second); res.Health != HealthDown ||
		!strings.Contains(res.Reason, "certificate") {
		t.Errorf("wrong name: %+v", res)
	}
}

// Stopping the runner ends an exchange in flight: no result (the scheduler stopping says
// nothing about the target), and the probe returns at once rather than at its timeout.
func TestHTTPCancelledMidRequest(t *testing.T) {
	t.Parallel()
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	srv, _ := countingServer(t, false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
	}))
	t.Cleanup(func() { close(release) })
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	r := newRunner(Options{Fleet: machineResolver{}, Logger: zerolog.Nop(), NameMap: map[string]string{"svc.lab.example": "127.0.0.1"}}, &blockingExec{})
	t.Cleanup(func() { r.closeIdleHTTP(0) })
	ctx, cancel := context.WithCancel(context.Background())
	type outcome struct {
		res Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := r.runProbe(ctx, httpDef("http://svc.lab.example:"+port+"/", 200, "", time.Hour), nil)
		done <- outcome{res, err}
	}()
	select {
	case <-arrived:
	case <-time.After(5 * time.Second):
		t.Fatal("the request never reached the server")
	}
	cancel()
	select {
	case o := <-done:
		if !errors.Is(o.err, errShuttingDown) {
			t.Errorf("cancelled probe: %+v %v, want errShuttingDown", o.res, o.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the probe did not return after cancellation")
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
func settleIdle(t *testing.T, kc *keptClient) {
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
	kc := newKeptClient(newNetDialer(nil, false), nil, 4)
	t.Cleanup(func() { kc.closeIdle(0) })
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
	ans, err := kc.get(ctx, u, false)
	if err != nil || ans.status != http.StatusOK {
		t.Fatalf("status %d, err %v; want 200 on a fresh connection", ans.status, err)
	}
}

// Bytes a server sends on an idle kept connection (a 408 on its idle timeout, then a close)
// are not taken for the answer to the next request.
func TestHTTPUnsolicitedAnswerOnIdleConnection(t *testing.T) {
	t.Parallel()
	ln, conns := rawServer(t)
	kc := newKeptClient(newNetDialer(nil, false), nil, 4)
	t.Cleanup(func() { kc.closeIdle(0) })
	u, _ := url.Parse("http://" + ln.Addr().String() + "/")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if ans, err := kc.get(ctx, u, false); err != nil || ans.status != http.StatusOK {
		t.Fatalf("first check: %d %v", ans.status, err)
	}
	c := <-conns
	_, _ = io.WriteString(c, "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
	_ = c.Close()
	settleIdle(t, kc)
	if ans, err := kc.get(ctx, u, false); err != nil || ans.status != http.StatusOK {
		t.Fatalf("status %d, err %v; want the real answer (200), not the unsolicited 408", ans.status, err)
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
	kc := newKeptClient(newNetDialer(nil, false), nil, 4)
	t.Cleanup(func() { kc.closeIdle(0) })
	u, _ := url.Parse(srv.URL)
	u.User = url.UserPassword("monitor", "s3cret:x")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if ans, err := kc.get(ctx, u, false); err != nil || ans.status != http.StatusOK {
		t.Fatalf("status %d, err %v; want 200 with the URL's credentials", ans.status, err)
	}
}
