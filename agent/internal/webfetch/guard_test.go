package webfetch

import (
	"context"
	"errors"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// refusedForms are URLs the guard refuses without resolving anything; PORT is the port of a
// loopback server that must never be hit. want is a substring of the error.
var refusedForms = []struct{ name, url, want string }{
	{"loopback", "http://127.0.0.1:PORT/", "127.0.0.1 is a loopback address; add it to OIKOS_HTTP_GET_ALLOW to allow it"},
	{"loopback https", "https://127.0.0.1:PORT/", "loopback"},
	{"upper-case scheme", "HTTP://127.0.0.1:PORT/", "loopback"},
	{"other loopback", "http://127.9.8.7:PORT/", "127.9.8.7 is a loopback address"},
	{"decimal", "http://2130706433:PORT/", "2130706433 (127.0.0.1) is a loopback address"},
	{"octal", "http://0177.0.0.1:PORT/", "0177.0.0.1 (127.0.0.1) is a loopback"},
	{"octal whole", "http://017700000001:PORT/", "(127.0.0.1) is a loopback"},
	{"hex short", "http://0x7f.1:PORT/", "0x7f.1 (127.0.0.1) is a loopback"},
	{"hex whole", "http://0x7f000001:PORT/", "(127.0.0.1) is a loopback"},
	{"hex upper", "http://0X7F.0X0.0X0.0X1:PORT/", "(127.0.0.1) is a loopback"},
	{"hex dotted", "http://0x7f.0x0.0x0.0x1:PORT/", "(127.0.0.1) is a loopback"},
	{"short", "http://127.1:PORT/", "127.1 (127.0.0.1) is a loopback"},
	{"short three", "http://127.0.1:PORT/", "(127.0.0.1) is a loopback"},
	{"leading zeros", "http://127.000.000.001:PORT/", "(127.0.0.1) is a loopback"},
	{"trailing dot", "http://127.0.0.1.:PORT/", "loopback"},
	{"trailing dots", "http://127.0.0.1..:PORT/", "loopback"},
	{"percent-encoded", "http://%31%32%37.0.0.1:PORT/", "not a valid URL"},
	{"full-width digits", "http://１２７.０.０.１:PORT/", "loopback"},
	{"ideographic dots", "http://127。0。0。1:PORT/", "loopback"},
	{"ipv6 loopback", "http://[::1]:PORT/", "::1 is a loopback address"},
	{"ipv6 loopback zone", "http://[::1%25lo]:PORT/", "loopback"},
	{"ipv6 loopback long", "http://[0:0:0:0:0:0:0:1]:PORT/", "loopback"},
	{"v4-mapped", "http://[::ffff:127.0.0.1]:PORT/", "loopback"},
	{"v4-mapped hex", "http://[::ffff:7f00:1]:PORT/", "loopback"},
	{"v4-mapped long", "http://[0:0:0:0:0:ffff:127.0.0.1]:PORT/", "loopback"},
	{"v4-compatible", "http://[::127.0.0.1]:PORT/", "embeds 127.0.0.1, a loopback address"},
	{"v4-translated", "http://[::ffff:0:127.0.0.1]:PORT/", "embeds 127.0.0.1"},
	{"nat64", "http://[64:ff9b::127.0.0.1]:PORT/", "embeds 127.0.0.1, a loopback address"},
	{"nat64 hex", "http://[64:ff9b::7f00:1]:PORT/", "embeds 127.0.0.1"},
	{"nat64 private", "http://[64:ff9b::10.1.2.3]/", "embeds 10.1.2.3, a private address"},
	{"nat64 metadata", "http://[64:ff9b::a9fe:a9fe]/", "embeds 169.254.169.254, a cloud metadata address"},
	{"local-use nat64", "http://[64:ff9b:1::1]/", "private"},
	{"6to4", "http://[2002:7f00:1::]:PORT/", "embeds 127.0.0.1"},
	{"6to4 private", "http://[2002:c0a8:101::1]/", "embeds 192.168.1.1, a private address"},
	{"teredo client", "http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/", "embeds 127.0.0.1"},
	{"link-local", "http://169.254.1.1/", "169.254.1.1 is a link-local address"},
	{"link-local v6", "http://[fe80::1]:PORT/", "fe80::1 is a link-local address"},
	{"link-local v6 zone", "http://[fe80::1%25eth0]:PORT/", "link-local"},
	{"metadata", "http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a cloud metadata address; it is fetched only when that exact address is in OIKOS_HTTP_GET_ALLOW"},
	{"metadata decimal", "http://2852039166/", "(169.254.169.254) is a cloud metadata address"},
	{"metadata v4-mapped", "http://[::ffff:169.254.169.254]/", "metadata"},
	{"metadata ecs", "http://169.254.170.2/v2/credentials", "metadata"},
	{"metadata aws v6", "http://[fd00:ec2::254]/", "fd00:ec2::254 is a cloud metadata address"},
	{"metadata alibaba", "http://100.100.100.200/latest/meta-data/", "100.100.100.200 is a cloud metadata address"},
	{"metadata azure wireserver", "http://168.63.129.16/", "cloud metadata"},
	{"metadata name", "http://metadata.google.internal/computeMetadata/v1/", "metadata.google.internal is a cloud metadata name"},
	{"metadata name odd case", "http://METADATA.Google.Internal./", "metadata.google.internal is a cloud metadata name"},
	{"metadata short name", "http://metadata/", "cloud metadata name"},
	{"private 10", "http://10.0.0.1/", "10.0.0.1 is a private address"},
	{"private 172", "http://172.16.0.1/", "private"},
	{"private 172 top", "http://172.31.255.255/", "private"},
	{"private 192", "http://192.168.1.1/", "private"},
	{"private short", "http://10.1/", "10.1 (10.0.0.1) is a private address"},
	{"unique local", "http://[fc00::1]/", "private"},
	{"unique local fd", "http://[fd12:3456::1]/", "private"},
	{"site-local", "http://[fec0::1]/", "private"},
	{"cgnat", "http://100.64.0.1/", "100.64.0.1 is a carrier-grade NAT address"},
	{"cgnat top", "http://100.127.255.255/", "carrier-grade NAT"},
	{"unspecified", "http://0.0.0.0:PORT/", "0.0.0.0 is the unspecified address; nothing is fetched from it"},
	{"unspecified short", "http://0:PORT/", "0 (0.0.0.0) is the unspecified address"},
	{"unspecified hex", "http://0x0:PORT/", "unspecified"},
	{"unspecified v6", "http://[::]:PORT/", "unspecified"},
	{"this network", "http://0.1.2.3/", "reserved"},
	{"multicast", "http://224.0.0.1/", "multicast"},
	{"multicast v6", "http://[ff02::1]/", "multicast"},
	{"broadcast", "http://255.255.255.255/", "broadcast"},
	{"reserved", "http://240.0.0.1/", "reserved"},
	{"documentation", "http://192.0.2.1/", "reserved"},
	{"benchmarking", "http://198.18.0.1/", "reserved"},
	{"localhost", "http://localhost:PORT/", "localhost is a loopback name; add it to OIKOS_HTTP_GET_ALLOW"},
	{"localhost odd", "http://LOCALHOST.:PORT/", "localhost is a loopback name"},
	{"localhost sub", "http://app.localhost:PORT/", "app.localhost is a loopback name"},
	{"userinfo trick", "http://example.com@127.0.0.1:PORT/", "user info"},
	{"userinfo password", "http://user:pass@127.0.0.1:PORT/", "user info"},
	{"userinfo public", "http://user@example.com/", "user info"},
	{"backslash trick", `http://127.0.0.1:PORT\@example.com/`, "not a valid URL"},
	{"too many parts", "http://1.2.3.4.5/", "looks like an IPv4 address but is not a valid one"},
	{"octet too big", "http://256.0.0.1/", "not a valid one"},
	{"last part too big", "http://127.0.0.4294967296/", "not a valid one"},
	{"bad octal", "http://0189.0.0.1/", "not a valid one"},
	{"bad hex", "http://0xg.1/", "not a valid one"},
	{"numeric tld", "http://example.123/", "not a valid one"},
	{"bad ipv6", "http://[::1::2]/", "not a valid URL"},
	{"ftp", "ftp://127.0.0.1:PORT/", "only http and https URLs are fetched, not ftp:"},
	{"ftp public", "ftp://example.com/", "only http and https"},
	{"file", "file:///etc/passwd", "not file:"},
	{"gopher", "gopher://127.0.0.1:PORT/_HELO", "not gopher:"},
	{"javascript", "javascript:alert(1)", "not javascript:"},
	{"scheme-relative", "//127.0.0.1:PORT/", "has no scheme"},
	{"no scheme", "127.0.0.1:PORT", "not a valid URL"},
	{"opaque", "http:127.0.0.1", "no host"},
	{"empty host", "http:///etc/passwd", "no host"},
	{"bad port", "http://example.com:99999/", `port "99999"`},
	{"only dots", "http://.../", "only dots"},
	{"bad character", "http://exa_mple!.com/", "not a valid"},
}

// Every refused form is refused before anything is dialled or resolved, by Get and by an
// untrusted Head; the loopback server whose port the URLs name is never hit.
func TestGuardRefusesForms(t *testing.T) {
	t.Parallel()
	srv := newServer(t, textHandler("text/plain", "must not be reached"))
	f, res, log := newTestFetcher(t, Config{}, nil)
	for _, tc := range refusedForms {
		raw := strings.ReplaceAll(tc.url, "PORT", srv.port)
		for _, method := range []string{"GET", "HEAD"} {
			var err error
			if method == "GET" {
				_, err = f.Get(t.Context(), raw)
			} else {
				_, err = f.Head(t.Context(), raw, false)
			}
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %s %s = %v; want a refusal containing %q", tc.name, method, raw, err, tc.want)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "refused: ") {
				t.Errorf("%s: error %q does not start with \"refused: \"", tc.name, err)
			}
		}
	}
	if d := log.dialled(); len(d) != 0 {
		t.Errorf("dialled %v; refused forms must not dial", d)
	}
	if c := res.calledFor(); len(c) != 0 {
		t.Errorf("resolved %v; literal forms and refused names must not be resolved", c)
	}
	if n := srv.hits.Load(); n != 0 {
		t.Errorf("the loopback server was hit %d times", n)
	}
}

// Names are resolved once and refused if any address they resolve to is refused.
func TestGuardRefusesNamesResolvingInside(t *testing.T) {
	t.Parallel()
	res := &fakeResolver{answers: map[string][]netip.Addr{
		"internal.example": addrs("127.0.0.1"),
		"mixed.example":    addrs("93.184.215.14", "10.0.0.7"),
		"v6loop.example":   addrs("::1"),
		"mapped.example":   addrs("::ffff:192.168.0.1"),
		"nat64.example":    addrs("64:ff9b::a9fe:a9fe"),
		"meta.example":     addrs("169.254.169.254"),
		"zero.example":     addrs("0.0.0.0"),
		"cgnat.example":    addrs("100.64.1.1"),
		"ula.example":      addrs("fd00::5"),
	}}
	f, _, log := newTestFetcher(t, Config{}, res)
	tests := []struct{ url, want string }{
		{"http://internal.example/", "internal.example resolves to 127.0.0.1, a loopback address; add the host or the address to OIKOS_HTTP_GET_ALLOW to allow it"},
		{"http://Internal.Example./x", "internal.example resolves to 127.0.0.1"},
		{"http://mixed.example/", "mixed.example resolves to 10.0.0.7, a private address"},
		{"http://v6loop.example/", "resolves to ::1, a loopback address"},
		{"http://mapped.example/", "resolves to ::ffff:192.168.0.1, a private address"},
		{"http://nat64.example/", "resolves to 64:ff9b::a9fe:a9fe, which embeds 169.254.169.254, a cloud metadata address"},
		{"http://meta.example/", "169.254.169.254, a cloud metadata address; it is fetched only when that exact address"},
		{"http://zero.example/", "the unspecified address; nothing is fetched"},
		{"http://cgnat.example/", "carrier-grade NAT"},
		{"https://ula.example/", "private"},
	}
	for _, tc := range tests {
		_, err := f.Get(t.Context(), tc.url)
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Get %s = %v; want a refusal containing %q", tc.url, err, tc.want)
		}
	}
	if d := log.dialled(); len(d) != 0 {
		t.Errorf("dialled %v", d)
	}
	// A name that does not resolve is an error, not a refusal.
	_, err := f.Get(t.Context(), "http://nowhere.example/")
	if err == nil || errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "resolving nowhere.example") {
		t.Errorf("unresolvable name: %v", err)
	}
}

// Public addresses pass the guard (checked here without dialling), odd literals are
// rewritten to their canonical form, and the pin holds exactly the checked addresses.
func TestGuardPassesPublicAndRewrites(t *testing.T) {
	t.Parallel()
	res := &fakeResolver{answers: map[string][]netip.Addr{
		"example.com":   addrs("93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"),
		"mapped.public": addrs("::ffff:93.184.215.14"),
	}}
	f, _, _ := newTestFetcher(t, Config{}, res)
	tests := []struct {
		url, host string
		pinned    []netip.Addr
		port      string
	}{
		{"http://example.com/", "example.com", addrs("93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"), ""},
		{"https://EXAMPLE.com.:8443/x", "example.com:8443", addrs("93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"), ""},
		{"http://mapped.public/", "mapped.public", addrs("93.184.215.14"), ""},
		{"http://8.8.8.8/", "8.8.8.8", addrs("8.8.8.8"), ""},
		{"http://0x08080808/", "8.8.8.8", addrs("8.8.8.8"), ""},
		{"http://134744072:81/", "8.8.8.8:81", addrs("8.8.8.8"), ""},
		{"http://010.010.010.010/", "8.8.8.8", addrs("8.8.8.8"), ""},
		{"http://[64:ff9b::808:808]/", "[64:ff9b::808:808]", addrs("64:ff9b::808:808"), ""},
		{"http://[2002:808:808::1]/", "[2002:808:808::1]", addrs("2002:808:808::1"), ""},
		{"http://[2606:4700:4700::1111]:8080/", "[2606:4700:4700::1111]:8080", addrs("2606:4700:4700::1111"), ""},
		{"http://bücher.example/", "xn--bcher-kva.example", nil, ""},
	}
	res.answers["xn--bcher-kva.example"] = addrs("93.184.215.14")
	tests[len(tests)-1].pinned = addrs("93.184.215.14")
	for _, tc := range tests {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		_, p, err := f.check(context.Background(), u, false)
		if err != nil {
			t.Errorf("check %s: %v", tc.url, err)
			continue
		}
		if u.Host != tc.host || !slices.Equal(p.addrs, tc.pinned) || p.port != tc.port {
			t.Errorf("check %s: host %q pin %v port %q; want %q %v %q", tc.url, u.Host, p.addrs, p.port, tc.host, tc.pinned, tc.port)
		}
	}
}

// The allowlist opens hosts, addresses and CIDRs, but never the unspecified address, and
// metadata addresses only by their exact address.
func TestGuardAllowlist(t *testing.T) {
	t.Parallel()
	res := &fakeResolver{answers: map[string][]netip.Addr{
		"grafana.lan":    addrs("192.168.1.10"),
		"db.lan":         addrs("10.0.0.5"),
		"a.svc.internal": addrs("10.1.0.1"),
		"metaalias.lan":  addrs("169.254.169.254"),
		"other.example":  addrs("192.168.1.11"),
		"metadata.goog":  addrs("169.254.169.254"),
	}}
	f, _, _ := newTestFetcher(t, Config{Allow: []string{
		"grafana.lan", " *.svc.internal ,10.0.0.0/8", "[fd00::1]", "127.1", "169.254.0.0/16", "0.0.0.0/0 ",
		"metaalias.lan", "::ffff:172.20.0.0/112",
	}}, res)
	pass := []string{
		"http://grafana.lan:3000/",
		"http://db.lan/",         // by CIDR
		"http://a.svc.internal/", // by wildcard
		"http://10.9.9.9/",       // literal in CIDR
		"http://[::ffff:10.9.9.9]/",
		"http://[64:ff9b::10.9.9.9]/", // the embedded address is in the CIDR
		"http://[fd00::1]/",
		"http://127.0.0.1:8080/", // "127.1" normalised
		"http://169.254.1.1/",    // link-local by CIDR
		"http://172.20.1.1/",     // a mapped CIDR unmapped
		"http://other.example/",  // 0.0.0.0/0 opens every address…
	}
	for _, raw := range pass {
		u, _ := url.Parse(raw)
		if _, _, err := f.check(context.Background(), u, false); err != nil {
			t.Errorf("check %s: %v; want it allowed", raw, err)
		}
	}
	refused := map[string]string{
		"http://0.0.0.0/":         "unspecified",       // …but not the unspecified address,
		"http://224.0.0.1/":       "multicast",         // nor multicast,
		"http://169.254.169.254/": "metadata",          // nor metadata by a CIDR,
		"http://metaalias.lan/":   "metadata",          // nor metadata by a host entry,
		"http://metadata.goog/":   "metadata name",     // nor a metadata name not listed itself
		"http://[fd00::2]/":       "a private address", // only fd00::1 is listed
	}
	f2, _, _ := newTestFetcher(t, Config{Allow: []string{"grafana.lan"}}, res)
	for raw, want := range refused {
		u, _ := url.Parse(raw)
		ff := f
		if raw == "http://[fd00::2]/" {
			ff = f2
		}
		if _, _, err := ff.check(context.Background(), u, false); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), want) {
			t.Errorf("check %s: %v; want a refusal containing %q", raw, err, want)
		}
	}
	// The exact metadata address opens it.
	f3, _, _ := newTestFetcher(t, Config{Allow: []string{"169.254.169.254"}}, res)
	u, _ := url.Parse("http://169.254.169.254/")
	if _, _, err := f3.check(context.Background(), u, false); err != nil {
		t.Errorf("metadata listed exactly: %v", err)
	}
}

// Trusted checks (ping_service) allow inside addresses but not metadata, unspecified or
// other schemes.
func TestGuardTrusted(t *testing.T) {
	t.Parallel()
	res := &fakeResolver{answers: map[string][]netip.Addr{"nas.lan": addrs("192.168.1.20"), "localhost": addrs("127.0.0.1")}}
	f, _, _ := newTestFetcher(t, Config{}, res)
	for _, raw := range []string{"http://192.168.1.20/", "http://nas.lan:5000/", "http://localhost/", "http://[fe80::1%25eth0]/",
		"http://admin:pw@10.0.0.1/", "http://0x7f.1/", "http://100.64.0.1/"} {
		u, _ := url.Parse(raw)
		if _, _, err := f.check(context.Background(), u, true); err != nil {
			t.Errorf("trusted %s: %v", raw, err)
		}
	}
	for raw, want := range map[string]string{
		"http://169.254.169.254/":  "metadata",
		"http://metadata.goog/":    "metadata name",
		"http://0.0.0.0/":          "unspecified",
		"ftp://192.168.1.20/":      "only http and https",
		"http://255.255.255.255/":  "broadcast",
		"http://[fd00:ec2::254]/":  "metadata",
		"http://1.2.3.4.5/":        "not a valid one",
		"file:///etc/hosts":        "not file:",
		"http://[::ffff:0.0.0.0]/": "unspecified",
	} {
		u, _ := url.Parse(raw)
		if _, _, err := f.check(context.Background(), u, true); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), want) {
			t.Errorf("trusted %s: %v; want a refusal containing %q", raw, err, want)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Allow: []string{"10.0.0.0/33"}}, `OIKOS_HTTP_GET_ALLOW entry "10.0.0.0/33": not a valid CIDR`},
		{Config{Allow: []string{"ok.lan,bad host!"}}, `OIKOS_HTTP_GET_ALLOW entry "host!"`},
		{Config{Allow: []string{"1.2.3.4.5"}}, "not a valid one"},
		{Config{NameMap: map[string]string{"a.lab.example": "localhost"}}, "names are never resolved"},
		{Config{NameMap: map[string]string{"a.*.example": "127.0.0.1"}}, "wildcard"},
		{Config{NameMap: map[string]string{"A.lab.example": "127.0.0.1", "a.lab.example.": "127.0.0.2"}}, "mapped twice"},
	} {
		if _, err := New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v; want an error containing %q", tc.cfg, err, tc.want)
		}
	}
}

// badOracle is an independent (netip-based) statement of what must never be dialled
// untrusted without an allowlist: loopback, private, link-local, unspecified, multicast,
// CGNAT, broadcast, metadata, and the IPv4 inside NAT64, 6to4 and IPv4-compatible forms.
func badOracle(a netip.Addr) bool {
	a = a.WithZone("").Unmap()
	inside := func(a netip.Addr) bool {
		return a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
			a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() ||
			netip.MustParsePrefix("100.64.0.0/10").Contains(a) || a == netip.MustParseAddr("255.255.255.255") ||
			netip.MustParsePrefix("0.0.0.0/8").Contains(a) || a == netip.MustParseAddr("100.100.100.200") ||
			a == netip.MustParseAddr("fd00:ec2::254")
	}
	if inside(a) {
		return true
	}
	if a.Is6() {
		b := a.As16()
		var embedded []netip.Addr
		switch {
		case netip.MustParsePrefix("64:ff9b::/96").Contains(a), netip.MustParsePrefix("::/96").Contains(a):
			embedded = append(embedded, netip.AddrFrom4([4]byte(b[12:16])))
		case netip.MustParsePrefix("2002::/16").Contains(a):
			embedded = append(embedded, netip.AddrFrom4([4]byte(b[2:6])))
		}
		if slices.ContainsFunc(embedded, inside) {
			return true
		}
	}
	return false
}

// FuzzGuard: the guard never panics, never passes an address the oracle calls inside
// (untrusted, nothing allowlisted), and what it passes is consistent: the rewritten host
// re-parses to the pin's key, and an IP-literal host is one of the pinned addresses. Each
// input is checked without any dial; names resolve through a fake resolver (a public
// address, or loopback for names containing "rebind").
func FuzzGuard(f *testing.F) {
	for _, tc := range refusedForms {
		f.Add(strings.ReplaceAll(tc.url, "PORT", "8080"))
	}
	for _, s := range []string{"http://example.com/", "https://8.8.8.8/", "http://[64:ff9b::808:808]/",
		"http://rebind.example/", "http://xn--bcher-kva.example/", "http://0x8.0x8.0x8.0x8/", "http://[2002:808:808::]/"} {
		f.Add(s)
	}
	fe, err := New(Config{Resolver: resolverFunc(func(_ context.Context, _, host string) ([]netip.Addr, error) {
		if strings.Contains(host, "rebind") {
			return addrs("93.184.215.14", "127.0.0.1"), nil
		}
		return addrs("93.184.215.14"), nil
	})})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if len(raw) > 2048 {
			return
		}
		u, err := url.Parse(raw)
		if err != nil {
			return
		}
		orig := u.Hostname()
		key, p, err := fe.check(context.Background(), u, false)
		if err != nil {
			if !errors.Is(err, ErrRefused) && !strings.HasPrefix(err.Error(), "resolving ") {
				t.Fatalf("check %q: unexpected error kind %v", raw, err)
			}
			return
		}
		if len(p.addrs) == 0 {
			t.Fatalf("check %q passed with no pinned address", raw)
		}
		for _, a := range p.addrs {
			if badOracle(a) {
				t.Fatalf("check %q passed %s", raw, a)
			}
		}
		if ip, err := netip.ParseAddr(orig); err == nil && badOracle(ip) {
			t.Fatalf("check %q passed the literal %s", raw, ip)
		}
		u2, err := url.Parse(u.String())
		if err != nil {
			t.Fatalf("rewritten URL %q does not parse: %v", u.String(), err)
		}
		if h := u2.Hostname(); h != key {
			t.Fatalf("rewritten URL %q has host %q, the pin is for %q", u.String(), h, key)
		}
		if ip, err := netip.ParseAddr(key); err == nil && !slices.Contains(p.addrs, ip.Unmap()) {
			t.Fatalf("literal %s is not among the pinned %v", ip, p.addrs)
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			t.Fatalf("scheme %q passed", u.Scheme)
		}
	})
}

type resolverFunc func(ctx context.Context, network, host string) ([]netip.Addr, error)

func (r resolverFunc) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	return r(ctx, network, host)
}
