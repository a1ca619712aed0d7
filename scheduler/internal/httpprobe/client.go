package httpprobe

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// maxRedirects is how many redirects an http check follows, as net/http's client does.
const maxRedirects = 10

// IdleTimeout closes a kept connection nobody used for this long (longer than the usual
// 60 s interval, so a check on its schedule always finds its connection).
const IdleTimeout = 5 * time.Minute

// MaxBodyBytes bounds what an http check reads of a body (to match it, or to drain it so the
// connection can be reused).
const MaxBodyBytes = 256 << 10

// maxHeaderBytes bounds the status line and headers of a response, as net/http's
// Transport bounds them by default.
const maxHeaderBytes = 10 << 20

// aLongTimeAgo is a deadline in the past: setting it makes a blocked read or write return.
var aLongTimeAgo = time.Unix(1, 0)

// errHeaderTooLarge ends an answer whose headers never end.
var errHeaderTooLarge = errors.New("server response headers too large")

// Answer is what an http check needs of the final response.
type Answer struct {
	Status int
	Body   []byte // only when asked for (a body match), at most MaxBodyBytes
}

// Client runs http checks as plain HTTP/1.1 exchanges on kept connections: the probe's
// own goroutine writes the request and reads the response on a buffered connection it has
// checked out of an idle list, keyed like net/http's (scheme and host:port of the URL), so a
// route checked on its interval reuses one TCP (and TLS) connection. net/http's Transport
// does the same with a read and a write goroutine per connection and channel hand-offs
// between them and the caller for every request; at a hundred checks a second those
// wake-ups cost more scheduler CPU than the exchange itself (docs/benchmarks.md, issue 6).
//
// Behaviour matches the Transport it replaces: names go through the name-map dialer only,
// TLS verifies against the configured roots with the URL's host as server name, redirects
// are followed up to ten like http.Client's, a kept connection the server closed meanwhile
// is retried once on a fresh one (the request is a GET) and one with anything to read
// before the request (a server's idle-timeout answer) is not used, credentials in the URL go
// as Basic authentication, the check's context bounds
// everything, errors are wrapped in *url.Error as http.Client wraps them. It speaks
// HTTP/1.1 only, which every health endpoint answers.
//
// It keeps up to maxIdle idle connections per scheme and host:port: as many as checks can
// run at once to one of them (the runner passes its concurrency), so checks that end
// together all find a connection at their next run instead of dialling (at 500 checks/s
// to one host:port, four kept connections meant 0.6–0.8 new connections per check).
type Client struct {
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)
	tls     *tls.Config
	maxIdle int
	// maxHeader bounds a response's status line and headers (maxHeaderBytes).
	maxHeader int64

	mu    sync.Mutex
	idle  map[string][]*keptConn // by "scheme://host:port" of the URL, most recently used last
	open  atomic.Int64
	dials atomic.Int64
}

// keptConn is one connection with its buffers.
type keptConn struct {
	key       string
	conn      net.Conn
	capped    cappedReader // conn, read through br
	br        *bufio.Reader
	bw        *bufio.Writer
	idleSince time.Time
	// used is set once the connection carried an exchange: from then on it must be idle
	// (nothing to read) before it carries another.
	used bool
}

// errUnsolicited: a kept connection had bytes (or an EOF) to read before a request was sent.
var errUnsolicited = errors.New("kept connection not idle: unsolicited data or close from the server")

// cappedReader fails a read once left bytes have been read: it bounds the headers of a
// response (http.ReadResponse itself reads them without limit).
type cappedReader struct {
	r    io.Reader
	left int64
}

func (c *cappedReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, errHeaderTooLarge
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// NewClient builds a Client dialling through d (the name map and the loopback policy),
// verifying TLS against tlsConfig's roots (nil: the system roots) and keeping at most
// maxIdlePerHost idle connections per scheme and host:port (at least 1).
func NewClient(d *Dialer, tlsConfig *tls.Config, maxIdlePerHost int) *Client {
	if tlsConfig == nil {
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return &Client{dial: d.DialContext, tls: tlsConfig, maxIdle: max(maxIdlePerHost, 1), maxHeader: maxHeaderBytes,
		idle: map[string][]*keptConn{}}
}

// Get fetches u and returns the final answer after redirects.
func (c *Client) Get(ctx context.Context, u *url.URL, wantBody bool) (Answer, error) {
	return c.GetHeader(ctx, u, nil, wantBody)
}

// GetHeader is Get sending header too, to u's origin only: a redirect to another scheme,
// host or port goes without it, since a check's headers carry credentials meant for its
// target (issue #31), whatever their names.
func (c *Client) GetHeader(ctx context.Context, u *url.URL, header http.Header, wantBody bool) (Answer, error) {
	referer := ""
	origin := originOf(u)
	for redirects := 0; ; redirects++ {
		h := header
		if originOf(u) != origin {
			h = nil
		}
		ans, loc, err := c.roundTrip(ctx, u, referer, h, wantBody)
		if err != nil {
			return Answer{}, &url.Error{Op: "Get", URL: urlForError(u), Err: err}
		}
		if loc == "" {
			return ans, nil
		}
		if redirects == maxRedirects {
			return Answer{}, &url.Error{Op: "Get", URL: urlForError(u), Err: errors.New("stopped after 10 redirects")}
		}
		next, err := u.Parse(loc)
		if err != nil {
			return Answer{}, &url.Error{Op: "Get", URL: urlForError(u), Err: fmt.Errorf("failed to parse Location header %q: %w", loc, err)}
		}
		// http.Client sends the previous URL as Referer, except from https to http.
		referer = ""
		if u.Scheme != "https" || next.Scheme != "http" {
			ru := *u
			ru.User, ru.Fragment = nil, ""
			referer = ru.String()
		}
		u = next
	}
}

// originOf is scheme://host:port, the port made explicit.
func originOf(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return strings.ToLower(u.Scheme + "://" + net.JoinHostPort(u.Hostname(), port))
}

func urlForError(u *url.URL) string {
	if _, has := u.User.Password(); has {
		return u.Redacted()
	}
	return u.String()
}

// followed reports whether http.Client follows a response with this status (a GET).
func followed(status int) bool {
	switch status {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// roundTrip does one GET. loc is the Location to follow, if the answer is a redirect.
func (c *Client) roundTrip(ctx context.Context, u *url.URL, referer string, header http.Header, wantBody bool) (Answer, string, error) {
	if u.Scheme != "http" && u.Scheme != "https" {
		return Answer{}, "", fmt.Errorf("unsupported protocol scheme %q", u.Scheme)
	}
	if u.Host == "" {
		return Answer{}, "", errors.New("http: no Host in request URL")
	}
	host := u.Hostname()
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	addr := net.JoinHostPort(host, port)
	key := u.Scheme + "://" + addr
	// Host carries the port only when the URL does, as net/http writes it.
	hostHeader := strings.TrimSuffix(u.Host, ":")
	req := "GET " + u.RequestURI() + " HTTP/1.1\r\nHost: " + hostHeader + "\r\nUser-Agent: oikos-scheduler\r\n"
	if referer != "" {
		req += "Referer: " + referer + "\r\n"
	}
	if u.User != nil {
		// As http.Client does for credentials in the URL.
		pass, _ := u.User.Password()
		req += "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+pass)) + "\r\n"
	}
	for _, name := range sortedKeys(header) {
		for _, v := range header[name] {
			if strings.ContainsAny(v, "\r\n") {
				return Answer{}, "", fmt.Errorf("header %s: the value holds a line break", name)
			}
			req += name + ": " + v + "\r\n"
		}
	}
	req += "\r\n"

	for attempt := 0; ; attempt++ {
		var kc *keptConn
		reused := false
		if attempt == 0 {
			// The retry dials: another idle connection of the key may be as stale as the
			// first (a server whose keep-alive timeout is shorter than the interval).
			kc, reused = c.take(key)
		}
		if kc == nil {
			var err error
			if kc, err = c.connect(ctx, u.Scheme, host, addr, key); err != nil {
				return Answer{}, "", err
			}
		}
		ans, loc, keep, retry, err := c.exchange(ctx, kc, req, wantBody)
		if err != nil {
			c.discard(kc)
			if ctxErr := ctx.Err(); ctxErr != nil {
				return Answer{}, "", ctxErr
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				// The connection's deadline is the context's: it ran out a hair before the
				// context's own timer fired.
				return Answer{}, "", context.DeadlineExceeded
			}
			if reused && retry && attempt == 0 {
				// The server closed the kept connection while it was idle: nothing of this
				// request was answered, and a GET may be sent again (as net/http does).
				continue
			}
			return Answer{}, "", err
		}
		if keep {
			c.put(kc)
		} else {
			c.discard(kc)
		}
		return ans, loc, nil
	}
}

// exchange writes req on kc and reads the answer. keep says whether the connection can be
// reused; retry whether the error came before any byte of an answer (a stale connection).
func (c *Client) exchange(ctx context.Context, kc *keptConn, req string, wantBody bool) (ans Answer, loc string, keep, retry bool, err error) {
	deadline, _ := ctx.Deadline() // zero without one: no deadline
	if err := kc.conn.SetDeadline(deadline); err != nil {
		return Answer{}, "", false, true, err
	}
	// Cancellation without a deadline (Stop) unblocks the connection too. When the
	// cancellation has already fired, its SetDeadline may land after this exchange returns,
	// on whichever check took the connection next: such a connection is never kept.
	stop := context.AfterFunc(ctx, func() { _ = kc.conn.SetDeadline(aLongTimeAgo) })
	defer func() {
		if !stop() {
			keep = false
		}
	}()
	if kc.used && (kc.br.Buffered() > 0 || !socketIdle(kc.conn)) {
		// A kept connection must be silent while idle: bytes or an EOF waiting now (a 408
		// sent on the server's idle timeout, then a close) would otherwise be read as the
		// answer to this request. Retried on a fresh connection, like a stale one.
		return Answer{}, "", false, true, errUnsolicited
	}
	kc.used = true
	if _, err := kc.bw.WriteString(req); err != nil {
		return Answer{}, "", false, true, err
	}
	if err := kc.bw.Flush(); err != nil {
		return Answer{}, "", false, true, err
	}
	kc.capped.left = c.maxHeader
	if _, err := kc.br.Peek(1); err != nil {
		return Answer{}, "", false, true, err
	}
	var resp *http.Response
	for {
		resp, err = http.ReadResponse(kc.br, nil)
		if err != nil {
			return Answer{}, "", false, false, err
		}
		// 1xx answers (other than 101) precede the real one, as in net/http.
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			continue
		}
		break
	}
	kc.capped.left = math.MaxInt64 // the body is bounded as it is read
	ans.Status = resp.StatusCode
	if followed(resp.StatusCode) {
		loc = resp.Header.Get("Location")
	}
	var n int64
	if wantBody && loc == "" {
		ans.Body, err = io.ReadAll(io.LimitReader(resp.Body, MaxBodyBytes))
		n = int64(len(ans.Body))
	} else {
		n, err = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxBodyBytes))
	}
	if err != nil {
		return Answer{}, "", false, false, fmt.Errorf("reading the body: %w", err)
	}
	// The connection is reusable only with the whole body read and nothing after it. (The
	// body is never Closed: for a body read to its end there is nothing left to release,
	// and Close would drain an unread one without bound.)
	complete := n < MaxBodyBytes
	if !complete {
		var one [1]byte
		m, rerr := resp.Body.Read(one[:])
		complete = m == 0 && rerr == io.EOF
	}
	keep = complete && !resp.Close && resp.StatusCode != http.StatusSwitchingProtocols && kc.br.Buffered() == 0
	return ans, loc, keep, false, nil
}

// connect dials addr through the name-map dialer and, for https, does the TLS handshake
// with host as the server name.
func (c *Client) connect(ctx context.Context, scheme, host, addr, key string) (*keptConn, error) {
	conn, err := c.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if scheme == "https" {
		cfg := c.tls.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName = host
		}
		cfg.NextProtos = []string{"http/1.1"}
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = conn.Close()
			return nil, err
		}
		conn = tc
	}
	c.open.Add(1)
	c.dials.Add(1)
	kc := &keptConn{key: key, conn: conn, bw: bufio.NewWriterSize(conn, 1024)}
	kc.capped.r = conn
	kc.br = bufio.NewReaderSize(&kc.capped, 4096)
	return kc, nil
}

// take checks out the most recently used idle connection of key, closing any that idled too
// long.
func (c *Client) take(key string) (*keptConn, bool) {
	now := time.Now()
	var expired []*keptConn
	defer func() { c.discardAll(expired) }() // outside the lock: a TLS close writes
	c.mu.Lock()
	defer c.mu.Unlock()
	list := c.idle[key]
	for len(list) > 0 {
		kc := list[len(list)-1]
		list[len(list)-1] = nil
		list = list[:len(list)-1]
		if now.Sub(kc.idleSince) < IdleTimeout {
			c.setIdle(key, list)
			return kc, true
		}
		expired = append(expired, kc)
	}
	c.setIdle(key, list)
	return nil, false
}

func (c *Client) setIdle(key string, list []*keptConn) {
	if len(list) == 0 {
		delete(c.idle, key)
		return
	}
	c.idle[key] = list
}

// put returns a connection to its idle list (closing it when the list is full).
func (c *Client) put(kc *keptConn) {
	kc.idleSince = time.Now()
	c.mu.Lock()
	list := c.idle[kc.key]
	if len(list) >= c.maxIdle {
		c.mu.Unlock()
		c.discard(kc)
		return
	}
	c.idle[kc.key] = append(list, kc)
	c.mu.Unlock()
}

func (c *Client) discard(kc *keptConn) {
	_ = kc.conn.Close()
	c.open.Add(-1)
}

// CloseIdle closes the idle connections unused for at least olderThan (all with 0): a
// route whose check was removed does not keep its connection.
func (c *Client) CloseIdle(olderThan time.Duration) {
	now := time.Now()
	var old []*keptConn
	c.mu.Lock()
	for key, list := range c.idle {
		kept := list[:0]
		for _, kc := range list {
			if now.Sub(kc.idleSince) >= olderThan {
				old = append(old, kc)
			} else {
				kept = append(kept, kc)
			}
		}
		clear(list[len(kept):])
		c.setIdle(key, kept)
	}
	c.mu.Unlock()
	c.discardAll(old)
}

func (c *Client) discardAll(kcs []*keptConn) {
	for _, kc := range kcs {
		c.discard(kc)
	}
}

// OpenConnections counts the connections open now, idle or in use.
func (c *Client) OpenConnections() int { return int(c.open.Load()) }

// Dials counts the connections made (TCP, with TLS for https) since the client was built.
func (c *Client) Dials() int64 { return c.dials.Load() }

// GetWith is Get through an http.Client (a caller's own TLS roots or transport): one GET,
// redirects as client follows them, the body read as Get reads it.
func GetWith(ctx context.Context, client *http.Client, u *url.URL, wantBody bool) (Answer, error) {
	return GetWithHeader(ctx, client, u, nil, wantBody)
}

// GetWithHeader is GetWith sending header too, to u's origin only (as GetHeader): net/http
// itself keeps a header such as X-Api-Key across a redirect to another host.
func GetWithHeader(ctx context.Context, client *http.Client, u *url.URL, header http.Header, wantBody bool) (Answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Answer{}, err
	}
	for name, vs := range header {
		for _, v := range vs {
			req.Header.Add(name, v)
		}
	}
	req.Header.Set("User-Agent", "oikos-scheduler")
	if len(header) > 0 {
		origin, next := originOf(u), *client
		check := client.CheckRedirect
		next.CheckRedirect = func(r *http.Request, via []*http.Request) error {
			if originOf(r.URL) != origin {
				for name := range header {
					r.Header.Del(name)
				}
			}
			if check != nil {
				return check(r, via)
			}
			if len(via) >= maxRedirects {
				return errors.New("stopped after 10 redirects")
			}
			return nil
		}
		client = &next
	}
	resp, err := client.Do(req)
	if err != nil {
		return Answer{}, err
	}
	defer resp.Body.Close()
	ans := Answer{Status: resp.StatusCode}
	if wantBody {
		ans.Body, err = io.ReadAll(io.LimitReader(resp.Body, MaxBodyBytes))
	} else {
		_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxBodyBytes))
	}
	if err != nil {
		return Answer{}, fmt.Errorf("reading the body: %w", err)
	}
	return ans, nil
}

func sortedKeys(h http.Header) []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
