// Package webfetch is the agent's way onto the web: the fetcher behind the http_get tool
// (Get) and the ping_service probe (Head).
//
// A model chooses the URLs http_get fetches, so Get is guarded against server-side request
// forgery. Only http and https are fetched. The host is normalised first (decimal, octal,
// hex and short IPv4 forms, IDNA, trailing dots, brackets and zones, userinfo), then
// mapped through the name map or resolved through the Resolver, and the request is refused
// if any address it stands for is loopback, link-local, private, CGNAT, reserved, a cloud
// metadata endpoint, unspecified, multicast or broadcast — IPv4-mapped, IPv4-compatible,
// NAT64, 6to4 and Teredo forms of such an address included — unless the host or the
// address is allowlisted (Config.Allow, from OIKOS_HTTP_GET_ALLOW). The connection is then
// made to exactly the addresses that were checked: the dialler never resolves, so a DNS
// answer that changes between the check and the dial (rebinding) changes nothing. Every
// redirect hop is checked and pinned the same way. Proxies from the environment are not
// used (a proxy would make the check meaningless).
//
// Some addresses stay closed whatever the allowlist says about the host: the unspecified,
// multicast and broadcast addresses always, and cloud metadata addresses unless that exact
// address is listed (a CIDR or a host name does not open them). A name in the name map is
// the operator's own statement of where a name lives (the demo fleet on the lab simulator),
// so its target counts as allowlisted, metadata excepted.
//
// Head with trusted=true is for URLs taken from the operator's own graph: private,
// loopback and link-local addresses are allowed, still only over http and https and still
// never metadata, unspecified, multicast or broadcast addresses.
//
// Bodies are capped (MaxBytes), HTML is reduced to readable text, JSON, XML and text/* are
// returned as they are, and binary content is refused with an error naming its type.
package webfetch

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/oikos-hq/oikos/shared/netmap"
)

// Defaults of Config.
const (
	DefaultMaxBytes     = 512 << 10
	DefaultMaxText      = 16 << 10
	DefaultTimeout      = 15 * time.Second
	DefaultMaxRedirects = 5
)

// maxURLLen bounds the URL a caller may pass.
const maxURLLen = 8 << 10

// userAgent is sent with every request.
const userAgent = "oikos-agent (webfetch)"

// ErrBinary is wrapped by the error for a response whose content type is not text.
var ErrBinary = errors.New("binary content refused")

// ErrTooManyRedirects is wrapped when a fetch stops at Config.MaxRedirects.
var ErrTooManyRedirects = errors.New("too many redirects")

// Resolver resolves a host name to addresses (net.DefaultResolver satisfies it).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Config configures a Fetcher. The zero value is usable: nothing allowlisted, the defaults
// below, net.DefaultResolver.
type Config struct {
	// Allow lists hosts ("grafana.lan", "*.lan"), CIDRs ("192.168.1.0/24") and IPs that may
	// be private, loopback or link-local (from OIKOS_HTTP_GET_ALLOW; an entry may itself
	// hold several separated by commas or spaces). A host entry opens every address the
	// host resolves to; an address or CIDR entry opens those addresses for any host. Cloud
	// metadata addresses open only by their exact address.
	Allow []string
	// MaxBytes caps the body read (default 512 KiB); a larger body is cut and Truncated set.
	MaxBytes int64
	// MaxText caps the returned text (default 16 KiB); longer text is cut and Truncated set.
	MaxText int
	// Timeout bounds a whole fetch, redirects and body included (default 15 s).
	Timeout time.Duration
	// MaxRedirects is how many redirects are followed (0: the default, 5; negative: none,
	// the redirect itself is the result).
	MaxRedirects int
	// Resolver resolves names not in NameMap (default net.DefaultResolver).
	Resolver Resolver
	// NameMap sends a host ("jellyfin.lab.example") or a wildcard ("*.lab.example") to an
	// IP or ip:port instead of resolving it: netmap.Parse's result (the demo fleet on the lab
	// simulator). A port replaces the URL's.
	NameMap map[string]string
	// RootCAs, if set, is trusted for https in addition to the system roots (the lab
	// simulator's CA).
	RootCAs *x509.CertPool
}

// Result is one fetch.
type Result struct {
	URL         string // as asked for (a password in it redacted)
	FinalURL    string // after redirects, canonical host
	Status      int
	ContentType string
	Text        string // readable text of the body (Get only)
	Truncated   bool   // the body was cut at MaxBytes or the text at MaxText
	Bytes       int64  // body bytes read (decompressed, at most MaxBytes)
	Redirects   int
}

// Fetcher fetches URLs under the guard. It is safe for concurrent use.
type Fetcher struct {
	cfg      Config
	allow    allowList
	names    netmap.Map
	resolver Resolver
	// dial makes the TCP connection to a checked ip:port (tests record it).
	dial func(ctx context.Context, network, address string) (net.Conn, error)
}

// New checks the configuration (allowlist entries, name map: an unusable one is an error
// wrapping netmap.ErrNameMap) and applies the defaults.
func New(cfg Config) (*Fetcher, error) {
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.MaxText <= 0 {
		cfg.MaxText = DefaultMaxText
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxRedirects == 0 {
		cfg.MaxRedirects = DefaultMaxRedirects
	}
	allow, err := compileAllow(cfg.Allow)
	if err != nil {
		return nil, err
	}
	names, err := netmap.Compile(cfg.NameMap)
	if err != nil {
		return nil, err
	}
	f := &Fetcher{cfg: cfg, allow: allow, names: names, resolver: cfg.Resolver}
	if f.resolver == nil {
		f.resolver = net.DefaultResolver
	}
	f.dial = (&net.Dialer{}).DialContext
	return f, nil
}

// Get fetches rawURL under the guard and returns its body as text. A non-2xx status is not
// an error: the result carries it with the body's text.
func (f *Fetcher) Get(ctx context.Context, rawURL string) (Result, error) {
	return f.do(ctx, http.MethodGet, rawURL, false, nil)
}

// GetWith is Get sending header besides the fetcher's own (an Authorization resolved from a
// secret at the last moment). The caller's headers go to the URL's host only: a redirect to
// another host (or port, or scheme) is followed without them, so a credential meant for one
// server is never handed to the next.
func (f *Fetcher) GetWith(ctx context.Context, rawURL string, header http.Header) (Result, error) {
	return f.do(ctx, http.MethodGet, rawURL, false, header)
}

// Head asks rawURL for its status and headers only. trusted=true is for a URL taken from
// the operator's own graph (ping_service): private, loopback and link-local addresses are
// allowed; it is still only http or https and still never a metadata, unspecified,
// multicast or broadcast address. trusted=false is guarded like Get.
func (f *Fetcher) Head(ctx context.Context, rawURL string, trusted bool) (Result, error) {
	return f.do(ctx, http.MethodHead, rawURL, trusted, nil)
}

func (f *Fetcher) do(ctx context.Context, method, rawURL string, trusted bool, header http.Header) (Result, error) {
	rawURL = strings.TrimSpace(rawURL)
	if rawURL == "" {
		return Result{}, errors.New("no URL given")
	}
	if len(rawURL) > maxURLLen {
		return Result{}, fmt.Errorf("the URL is %d bytes long; at most %d are accepted", len(rawURL), maxURLLen)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return Result{}, &refusal{reason: "not a valid URL: " + strings.TrimPrefix(err.Error(), "parse ")}
	}
	res := Result{URL: u.Redacted()}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()

	s := &session{f: f, trusted: trusted, pins: map[string]pin{}, extra: header}
	if err := s.pinURL(ctx, u); err != nil {
		return res, err
	}
	client, tr := s.client()
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return res, fmt.Errorf("building the request for %s: %w", res.URL, err)
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header.Set("User-Agent", userAgent)
	if method == http.MethodGet {
		req.Header.Set("Accept", "text/html,application/xhtml+xml,application/json;q=0.9,text/*;q=0.8,*/*;q=0.1")
	}
	resp, err := client.Do(req)
	if err != nil {
		return res, f.fetchError(parent, ctx, res.URL, err)
	}
	defer resp.Body.Close()
	res.FinalURL = resp.Request.URL.Redacted()
	res.Status = resp.StatusCode
	res.ContentType = resp.Header.Get("Content-Type")
	res.Redirects = s.redirectCount()
	if method == http.MethodHead {
		return res, nil
	}

	kind, mt := contentKind(res.ContentType)
	if kind == kindBinary {
		return res, fmt.Errorf("%w: %s answered with %s, which is not text; only HTML, JSON, XML and text/* are returned",
			ErrBinary, res.FinalURL, mt)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, f.cfg.MaxBytes+1))
	if err != nil {
		return res, f.fetchError(parent, ctx, res.URL, err)
	}
	if int64(len(body)) > f.cfg.MaxBytes {
		body, res.Truncated = body[:f.cfg.MaxBytes], true
	}
	res.Bytes = int64(len(body))
	if kind == kindUnknown {
		sniffed := http.DetectContentType(body)
		if kind, mt = contentKind(sniffed); kind == kindBinary || kind == kindUnknown {
			return res, fmt.Errorf("%w: %s sent no content type and the body looks like %s, which is not text",
				ErrBinary, res.FinalURL, mt)
		}
	}
	var text string
	if kind == kindHTML {
		text = htmlToText(body)
	} else {
		text = cleanText(string(body))
	}
	if len(text) > f.cfg.MaxText {
		i := f.cfg.MaxText
		for i > 0 && !utf8.RuneStart(text[i]) {
			i--
		}
		text, res.Truncated = text[:i], true
	}
	res.Text = text
	return res, nil
}

// fetchError turns a client error into a sentence: refusals and redirect limits as they
// are, the fetch's own time-out as one, the caller's cancellation as the caller's.
func (f *Fetcher) fetchError(parent, ctx context.Context, shown string, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	switch {
	case errors.Is(err, ErrRefused), errors.Is(err, ErrTooManyRedirects):
		return err
	case parent.Err() != nil:
		return fmt.Errorf("fetching %s: %w", shown, parent.Err())
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("fetching %s: timed out after %s", shown, f.cfg.Timeout)
	}
	return fmt.Errorf("fetching %s: %w", shown, err)
}

// session is one fetch: the pins of the hosts it checked and its redirect count.
type session struct {
	f       *Fetcher
	trusted bool

	// extra are the caller's headers (GetWith), sent to the first request's origin only.
	extra http.Header

	mu        sync.Mutex
	pins      map[string]pin
	redirects int
}

// pinURL checks u (rewriting its host) and records the pin for its host.
func (s *session) pinURL(ctx context.Context, u *url.URL) error {
	key, p, err := s.f.check(ctx, u, s.trusted)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.pins[strings.ToLower(key)] = p
	s.mu.Unlock()
	return nil
}

func (s *session) redirectCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.redirects
}

func (s *session) client() (*http.Client, *http.Transport) {
	tr := &http.Transport{
		Proxy:                  nil, // a proxy would dial what the guard never checked
		DialContext:            s.dialContext,
		DisableKeepAlives:      true,
		TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    10 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	if s.f.cfg.RootCAs != nil {
		tr.DialTLSContext = s.dialTLS
	}
	return &http.Client{Transport: tr, CheckRedirect: s.checkRedirect}, tr
}

// checkRedirect checks every hop as the first request was checked.
func (s *session) checkRedirect(req *http.Request, via []*http.Request) error {
	maxRedirects := s.f.cfg.MaxRedirects
	if maxRedirects < 0 {
		return http.ErrUseLastResponse
	}
	if len(via) > maxRedirects {
		return fmt.Errorf("%w: stopped after %d redirects", ErrTooManyRedirects, maxRedirects)
	}
	if first := via[0].URL; len(s.extra) > 0 && (req.URL.Scheme != first.Scheme || req.URL.Host != first.Host) {
		// net/http copies the first request's headers onto the redirect; only the
		// credentials it knows (Authorization, Cookie) are dropped, and only across domains.
		for k := range s.extra {
			req.Header.Del(k)
		}
	}
	shown := req.URL.Redacted()
	if err := s.pinURL(req.Context(), req.URL); err != nil {
		if r, ok := errors.AsType[*refusal](err); ok {
			return &refusal{reason: fmt.Sprintf("redirect from %s to %s: %s", via[len(via)-1].URL.Redacted(), shown, r.reason)}
		}
		return fmt.Errorf("redirect to %s: %w", shown, err)
	}
	s.mu.Lock()
	s.redirects = len(via)
	s.mu.Unlock()
	return nil
}

// dialContext dials a checked host at its pinned addresses only; it never resolves.
func (s *session) dialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("%w: %q is not host:port", ErrRefused, address)
	}
	s.mu.Lock()
	p, ok := s.pins[strings.ToLower(host)]
	s.mu.Unlock()
	if !ok || len(p.addrs) == 0 {
		return nil, &refusal{reason: host + " was not checked before dialling"}
	}
	if p.port != "" {
		port = p.port
	}
	var first error
	for _, a := range p.addrs {
		conn, err := s.f.dial(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return conn, nil
		}
		if first == nil {
			first = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, first
}

// dialTLS is the https dial when Config.RootCAs is set: the pinned dial, then TLS verified
// against the system roots or, failing that, RootCAs, for the URL's host.
func (s *session) dialTLS(ctx context.Context, network, address string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("%w: %q is not host:port", ErrRefused, address)
	}
	raw, err := s.dialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		// Verification is done by VerifyConnection below, against two root sets.
		InsecureSkipVerify: true, //nolint:gosec // verified in VerifyConnection
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyChain(cs, host, s.f.cfg.RootCAs)
		},
	}
	if _, err := netip.ParseAddr(host); err != nil {
		cfg.ServerName = host
	}
	conn := tls.Client(raw, cfg)
	if err := conn.HandshakeContext(ctx); err != nil {
		_ = raw.Close()
		return nil, err
	}
	return conn, nil
}

// verifyChain verifies the peer's chain for host against the system roots, then extra.
func verifyChain(cs tls.ConnectionState, host string, extra *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tls: the server sent no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	opts := x509.VerifyOptions{DNSName: host, Intermediates: inter}
	leaf := cs.PeerCertificates[0]
	_, sysErr := leaf.Verify(opts)
	if sysErr == nil {
		return nil
	}
	opts.Roots = extra
	if _, err := leaf.Verify(opts); err == nil {
		return nil
	}
	return fmt.Errorf("tls: the certificate of %s is trusted neither by the system roots nor by the configured CA: %w", host, sysErr)
}

type contentClass uint8

const (
	kindUnknown contentClass = iota
	kindHTML
	kindText
	kindBinary
)

// contentKind classifies a Content-Type; mt is its media type.
func contentKind(ct string) (contentClass, string) {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		mt, _, _ = strings.Cut(ct, ";")
		mt = strings.ToLower(strings.TrimSpace(mt))
	}
	switch {
	case mt == "":
		return kindUnknown, "no content type"
	case mt == "text/html" || mt == "application/xhtml+xml":
		return kindHTML, mt
	case strings.HasPrefix(mt, "text/"),
		mt == "application/json", strings.HasSuffix(mt, "+json"),
		mt == "application/xml", strings.HasSuffix(mt, "+xml"),
		mt == "application/x-ndjson", mt == "application/ndjson",
		mt == "application/javascript", mt == "application/x-javascript", mt == "application/ecmascript",
		mt == "application/yaml", mt == "application/x-yaml", mt == "application/toml",
		mt == "application/x-www-form-urlencoded":
		return kindText, mt
	}
	return kindBinary, mt
}

// cleanText makes a body printable: invalid UTF-8 replaced, control characters other than
// tab and newline dropped.
func cleanText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return r
		}
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return -1
		}
		return r
	}, s)
}
