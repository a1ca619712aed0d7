package httpapi_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOversizedBodyGets413 sends a 2 MiB body over a real TCP connection, as a client would,
// declared (Content-Length) and streamed (chunked): the client must read a 413 problem naming
// the limit, never a connection reset, and the server must go on serving.
func TestOversizedBodyGets413(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	big := []byte(`{"type":"host","name":"big","attributes":{"blob":"` + strings.Repeat("x", 2<<20) + `"}}`)
	before := e.snapshot()
	for i := range 5 {
		for _, declared := range []bool{true, false} {
			var body io.Reader = bytes.NewReader(big)
			if !declared {
				body = io.MultiReader(bytes.NewReader(big)) // no length: sent chunked
			}
			req, err := http.NewRequest(http.MethodPost, e.ts.URL+"/api/v1/entities", body)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+e.operator.token)
			// A client of its own, so every attempt is a fresh connection.
			hc := &http.Client{Transport: &http.Transport{DialContext: slowSender.DialContext}, Timeout: 30 * time.Second}
			hr, err := hc.Do(req)
			if err != nil {
				t.Fatalf("attempt %d (declared length %v): %v", i, declared, err)
			}
			raw, err := io.ReadAll(hr.Body)
			hr.Body.Close()
			if err != nil {
				t.Fatalf("attempt %d (declared length %v): reading the answer: %v", i, declared, err)
			}
			checkResponse(t, req, hr, raw)
			var p struct {
				Type, Detail string
				Status       int
			}
			if err := json.Unmarshal(raw, &p); err != nil || hr.StatusCode != http.StatusRequestEntityTooLarge ||
				p.Status != 413 || p.Type != "urn:oikos:problem:payload-too-large" || p.Detail != "request body exceeds 1048576 bytes" {
				t.Fatalf("attempt %d (declared length %v): %d %s", i, declared, hr.StatusCode, raw)
			}
			if hr.Header.Get("Connection") != "close" && !hr.Close {
				t.Errorf("attempt %d: the connection is kept after a refused body", i)
			}
			hc.CloseIdleConnections()
		}
	}
	// A client that sends its whole body before it reads (as many do): the server must have
	// read the body before it closed, or the client's kernel answers the close with a reset
	// that discards the 413 (ECONNRESET on the write or the read).
	for i := range 5 {
		for _, declared := range []bool{true, false} {
			status, raw, err := sendAllThenRead(e.ts.URL, e.operator.token, big, declared)
			if err != nil {
				t.Fatalf("send-then-read attempt %d (declared length %v): %v", i, declared, err)
			}
			if status != http.StatusRequestEntityTooLarge || !strings.Contains(string(raw), `"detail":"request body exceeds 1048576 bytes"`) {
				t.Fatalf("send-then-read attempt %d (declared length %v): %d %s", i, declared, status, raw)
			}
		}
	}
	if after := e.snapshot(); after != before {
		t.Errorf("a refused body changed the database")
	}
	// The server is fine, and a body just under the limit is parsed as usual.
	ok := `{"type":"host","name":"small","attributes":{"blob":"` + strings.Repeat("y", 1<<19) + `"}}`
	e.operator.do("POST", "/api/v1/entities", ok).expect(t, http.StatusCreated)
}

// slowSender dials with a small send buffer, so that a body the server does not read stays
// on the client's side of the connection (as over a real network) instead of being
// swallowed by loopback's large buffers.
var slowSender = &net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, 32<<10) }); err != nil {
		return err
	}
	return serr
}}

// sendAllThenRead writes a POST /api/v1/entities with body on a new TCP connection, all of it
// (Content-Length, or chunked when declared is false), and only then reads the answer.
func sendAllThenRead(base, token string, body []byte, declared bool) (int, []byte, error) {
	u, err := url.Parse(base)
	if err != nil {
		return 0, nil, err
	}
	conn, err := slowSender.Dial("tcp", u.Host)
	if err != nil {
		return 0, nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	w := bufio.NewWriter(conn)
	fmt.Fprintf(w, "POST /api/v1/entities HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n", u.Host, token)
	if declared {
		fmt.Fprintf(w, "Content-Length: %d\r\n\r\n", len(body))
		_, _ = w.Write(body)
	} else {
		fmt.Fprint(w, "Transfer-Encoding: chunked\r\n\r\n")
		for rest := body; len(rest) > 0; {
			n := min(len(rest), 32<<10)
			fmt.Fprintf(w, "%x\r\n", n)
			_, _ = w.Write(rest[:n])
			fmt.Fprint(w, "\r\n")
			rest = rest[n:]
		}
		fmt.Fprint(w, "0\r\n\r\n")
	}
	if err := w.Flush(); err != nil {
		return 0, nil, fmt.Errorf("send: %w", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, nil, fmt.Errorf("read the answer: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("read the answer's body: %w", err)
	}
	return resp.StatusCode, raw, nil
}
