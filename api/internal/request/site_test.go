package request

import (
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/oikos-hq/oikos/api/internal/auth"
)

// onSite builds a request from peer to host with headers, passed through site's middleware,
// and returns the request as a handler sees it.
func onSite(t *testing.T, site *Site, method, peer, host string, headers ...string) *http.Request {
	t.Helper()
	r := httptest.NewRequest(method, "http://"+host+"/api/v1/entities", nil)
	r.RemoteAddr = peer
	r.Host = host
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Add(headers[i], headers[i+1])
	}
	if site == nil {
		return r
	}
	e := echo.New()
	c := e.NewContext(r, httptest.NewRecorder())
	var seen *http.Request
	if err := site.Middleware(func(c echo.Context) error { seen = c.Request(); return nil })(c); err != nil {
		t.Fatal(err)
	}
	return seen
}

// TestSameOrigin: which cookie-authenticated changes count as the dashboard's own, header by
// header; every refusal is ErrCrossOrigin (so a 403 of type cross-origin) naming what failed.
func TestSameOrigin(t *testing.T) {
	proxy := &Site{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}, PublicOrigin: "https://oikos.lan"}
	direct := &Site{}
	const host = "127.0.0.1:8080"
	cases := []struct {
		name    string
		site    *Site
		method  string
		peer    string
		host    string
		tls     bool
		headers []string
		refused string // "" admitted; else a part of the refusal's detail
	}{
		{"a read needs nothing", direct, "GET", "127.0.0.1:5000", host, false, nil, ""},
		{"HEAD and OPTIONS read", direct, "OPTIONS", "127.0.0.1:5000", host, false, []string{"Origin", "http://evil.example"}, ""},
		{"own Origin", direct, "POST", "127.0.0.1:5000", host, false, []string{"Origin", "http://127.0.0.1:8080"}, ""},
		{"own Origin, upper case", direct, "POST", "127.0.0.1:5000", host, false, []string{"Origin", "HTTP://127.0.0.1:8080"}, ""},
		{"default port dropped", direct, "PUT", "127.0.0.1:5000", "oikos.lan:80", false, []string{"Origin", "http://oikos.lan"}, ""},
		{"another loopback port", direct, "POST", "127.0.0.1:5000", host, false,
			[]string{"Origin", "http://127.0.0.1:9999"}, `Origin "http://127.0.0.1:9999" is not http://127.0.0.1:8080`},
		{"another site", direct, "DELETE", "127.0.0.1:5000", host, false, []string{"Origin", "http://evil.example"}, "evil.example"},
		{"the browser says cross-site", direct, "POST", "127.0.0.1:5000", host, false,
			[]string{"Sec-Fetch-Site", "cross-site"}, "Sec-Fetch-Site: cross-site"},
		{"same-site is another origin (another port)", direct, "POST", "127.0.0.1:5000", host, false,
			[]string{"Sec-Fetch-Site", "same-site", "Origin", "http://127.0.0.1:8080"}, "Sec-Fetch-Site: same-site"},
		{"same-origin vouches without Origin", direct, "PATCH", "127.0.0.1:5000", host, false, []string{"Sec-Fetch-Site", "same-origin"}, ""},
		{"Origin null and same-origin", direct, "POST", "127.0.0.1:5000", host, false,
			[]string{"Origin", "null", "Sec-Fetch-Site", "same-origin"}, ""},
		{"Origin null alone", direct, "POST", "127.0.0.1:5000", host, false, []string{"Origin", "null"}, "no Origin, Sec-Fetch-Site or Referer"},
		{"Referer of the own origin", direct, "POST", "127.0.0.1:5000", host, false,
			[]string{"Referer", "http://127.0.0.1:8080/entities?type=host"}, ""},
		{"Referer of another origin", direct, "POST", "127.0.0.1:5000", host, false,
			[]string{"Referer", "http://127.0.0.1:9999/evil.html"}, `Referer "http://127.0.0.1:9999"`},
		{"nothing to show where it came from", direct, "POST", "127.0.0.1:5000", host, false, nil, "no Origin, Sec-Fetch-Site or Referer"},
		{"an http page may not change what TLS serves", direct, "POST", "127.0.0.1:5000", "oikos.lan", true,
			[]string{"Origin", "http://oikos.lan"}, "is not https://oikos.lan"},
		{"https page over TLS", direct, "POST", "127.0.0.1:5000", "oikos.lan", true, []string{"Origin", "https://oikos.lan"}, ""},
		{"behind a proxy that says https", direct, "POST", "127.0.0.1:5000", "oikos.lan", false,
			[]string{"Origin", "http://oikos.lan", "X-Forwarded-Proto", "https"}, "is not https://oikos.lan"},
		{"X-Forwarded-Host from anyone is not believed", direct, "POST", "127.0.0.1:5000", host, false,
			[]string{"Origin", "http://evil.example", "X-Forwarded-Host", "evil.example"}, "evil.example"},
		{"X-Forwarded-Host from a trusted proxy", proxy, "POST", "10.0.0.5:5000", "api:8080", false,
			[]string{"Origin", "https://dash.lan", "X-Forwarded-Host", "dash.lan", "X-Forwarded-Proto", "https"}, ""},
		{"X-Forwarded-Host from an untrusted peer", proxy, "POST", "10.0.1.5:5000", "api:8080", false,
			[]string{"Origin", "https://dash.lan", "X-Forwarded-Host", "dash.lan"}, "dash.lan"},
		{"the public URL's origin", proxy, "POST", "10.0.1.5:5000", "api:8080", false, []string{"Origin", "https://oikos.lan"}, ""},
		{"the public URL's host over http", proxy, "POST", "10.0.1.5:5000", "api:8080", false, []string{"Origin", "http://oikos.lan"}, "oikos.lan"},
		{"no site on the context: Host only", nil, "POST", "127.0.0.1:5000", host, false, []string{"Origin", "http://127.0.0.1:8080"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := onSite(t, tc.site, tc.method, tc.peer, tc.host, tc.headers...)
			if tc.tls {
				r.TLS = &tls.ConnectionState{}
			}
			err := SameOrigin(r)
			switch {
			case tc.refused == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.refused == "":
			case err == nil:
				t.Fatalf("admitted; want refused with %q", tc.refused)
			case !errors.Is(err, ErrCrossOrigin) || !errors.Is(err, auth.ErrForbidden):
				t.Fatalf("refusal %v is not ErrCrossOrigin and auth.ErrForbidden", err)
			case !strings.Contains(err.Error(), tc.refused):
				t.Fatalf("refusal %q does not say %q", err, tc.refused)
			}
			if err != nil {
				p, _ := ToProblem(err)
				if p.Status != http.StatusForbidden || p.Type != "urn:oikos:problem:cross-origin" || p.Detail != err.Error() {
					t.Fatalf("problem %+v", p)
				}
			}
		})
	}
	// A role's refusal stays a plain forbidden, not a cross-origin one.
	if p, _ := ToProblem(auth.Forbidden(auth.RoleReadonly, auth.PermWrite)); p.Type != "urn:oikos:problem:forbidden" {
		t.Errorf("a role's refusal became %s", p.Type)
	}
}

// TestClientAddr: the connection's peer, unless it is a trusted proxy; then the nearest
// X-Forwarded-For hop that is not one (a client cannot spoof its way past by writing hops of
// its own on the left).
func TestClientAddr(t *testing.T) {
	site := &Site{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24"), netip.MustParsePrefix("fd00::/64")}}
	cases := []struct {
		name, peer string
		xff        []string
		want       string
	}{
		{"no proxy: the peer", "192.0.2.1:4000", nil, "192.0.2.1"},
		{"an untrusted peer's X-Forwarded-For is ignored", "192.0.2.1:4000", []string{"198.51.100.7"}, "192.0.2.1"},
		{"a trusted proxy names the client", "10.0.0.5:4000", []string{"198.51.100.7"}, "198.51.100.7"},
		{"spoofed hops on the left do not count", "10.0.0.5:4000", []string{"6.6.6.6, 198.51.100.7"}, "198.51.100.7"},
		{"a chain of trusted proxies", "10.0.0.5:4000", []string{"198.51.100.7, 10.0.0.9"}, "198.51.100.7"},
		{"several header lines", "10.0.0.5:4000", []string{"6.6.6.6", "198.51.100.7, 10.0.0.9"}, "198.51.100.7"},
		{"a trusted proxy without the header is the client", "10.0.0.5:4000", nil, "10.0.0.5"},
		{"garbage stops at the last good hop", "10.0.0.5:4000", []string{"198.51.100.7, bogus"}, "10.0.0.5"},
		{"IPv6 peer and hop", "[fd00::2]:4000", []string{"2001:db8::7"}, "2001:db8::7"},
		{"IPv4-mapped peer", "[::ffff:10.0.0.5]:4000", []string{"198.51.100.7"}, "198.51.100.7"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var h []string
			for _, v := range tc.xff {
				h = append(h, "X-Forwarded-For", v)
			}
			r := onSite(t, site, "POST", tc.peer, "api:8080", h...)
			if got := ClientAddr(r); got.String() != tc.want {
				t.Fatalf("ClientAddr = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestParseProxies(t *testing.T) {
	p, err := ParseProxies(" 10.0.0.5, 172.16.0.0/12 ::1  fd00::/8,")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, x := range p {
		got = append(got, x.String())
	}
	if strings.Join(got, " ") != "10.0.0.5/32 172.16.0.0/12 ::1/128 fd00::/8" {
		t.Errorf("ParseProxies = %v", got)
	}
	for _, bad := range []string{"proxy.lan", "10.0.0.0/33", "10.0.0"} {
		if _, err := ParseProxies(bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseProxies(%q) = %v, want an error naming it", bad, err)
		}
	}
}

func TestOriginOf(t *testing.T) {
	for in, want := range map[string]string{
		"https://Oikos.LAN/":        "https://oikos.lan",
		"https://oikos.lan:443/x?y": "https://oikos.lan",
		"http://127.0.0.1:8080/a":   "http://127.0.0.1:8080",
		"http://[::1]:80":           "http://[::1]",
		"/relative":                 "",
		"":                          "",
		"javascript:alert(1)":       "",
	} {
		if got := OriginOf(in); got != want {
			t.Errorf("OriginOf(%q) = %q, want %q", in, got, want)
		}
	}
}
