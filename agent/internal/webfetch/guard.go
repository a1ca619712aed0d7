package webfetch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"unicode"

	"golang.org/x/net/idna"

	"github.com/oikos-hq/oikos/shared/netmap"
)

// AllowVar is the environment variable Config.Allow comes from; refusals name it.
const AllowVar = "OIKOS_HTTP_GET_ALLOW"

// ErrRefused is wrapped by every refusal of the guard: a scheme other than http and https, a
// host that is not a valid name or address, or an address the guard does not let through.
var ErrRefused = errors.New("refused by the fetch guard")

// refusal is an ErrRefused with its reason: "refused: <reason>".
type refusal struct{ reason string }

func (r *refusal) Error() string { return "refused: " + r.reason }
func (r *refusal) Unwrap() error { return ErrRefused }

func refuse(format string, args ...any) error {
	return &refusal{reason: fmt.Sprintf(format, args...)}
}

// class is what kind of address an address is, for the guard.
type class uint8

const (
	public class = iota
	loopback
	privateNet
	linkLocal
	cgnat
	reserved
	metadata
	unspecified
	multicast
	broadcast
)

func (c class) phrase() string {
	switch c {
	case loopback:
		return "a loopback address"
	case privateNet:
		return "a private address"
	case linkLocal:
		return "a link-local address"
	case cgnat:
		return "a carrier-grade NAT address (100.64.0.0/10)"
	case reserved:
		return "a reserved, documentation or otherwise non-public address"
	case metadata:
		return "a cloud metadata address"
	case unspecified:
		return "the unspecified address"
	case multicast:
		return "a multicast address"
	case broadcast:
		return "the broadcast address"
	}
	return "a public address"
}

// never reports the classes no allowlist opens: nothing is served there.
func (c class) never() bool { return c == unspecified || c == multicast || c == broadcast }

// metadataAddrs are the instance metadata and platform endpoints of the clouds a fleet may
// run in. A host allowlist or a CIDR does not open them; only the exact address does.
var metadataAddrs = map[netip.Addr]bool{
	netip.MustParseAddr("169.254.169.254"): true, // AWS, GCP, Azure, OpenStack, DigitalOcean, Oracle…
	netip.MustParseAddr("169.254.170.2"):   true, // AWS ECS task metadata
	netip.MustParseAddr("169.254.170.23"):  true, // AWS EKS pod identity
	netip.MustParseAddr("169.254.0.23"):    true, // Tencent Cloud
	netip.MustParseAddr("100.100.100.200"): true, // Alibaba Cloud
	netip.MustParseAddr("168.63.129.16"):   true, // Azure wireserver (a public-range address)
	netip.MustParseAddr("192.0.0.192"):     true, // Oracle Cloud (legacy)
	netip.MustParseAddr("fd00:ec2::254"):   true, // AWS over IPv6
	netip.MustParseAddr("fd00:ec2::23"):    true, // AWS EKS pod identity over IPv6
}

// metadataNames resolve to metadata endpoints inside a cloud.
var metadataNames = map[string]bool{
	"metadata.google.internal":   true,
	"metadata.goog":              true,
	"metadata":                   true,
	"instance-data":              true,
	"instance-data.ec2.internal": true,
	"metadata.tencentyun.com":    true,
	"metadata.azure.internal":    true,
}

type classPrefix struct {
	p netip.Prefix
	c class
}

// Order matters: the first prefix containing an address decides its class.
var prefixes4 = []classPrefix{
	{netip.MustParsePrefix("0.0.0.0/32"), unspecified},
	{netip.MustParsePrefix("0.0.0.0/8"), reserved},
	{netip.MustParsePrefix("10.0.0.0/8"), privateNet},
	{netip.MustParsePrefix("100.64.0.0/10"), cgnat},
	{netip.MustParsePrefix("127.0.0.0/8"), loopback},
	{netip.MustParsePrefix("169.254.0.0/16"), linkLocal},
	{netip.MustParsePrefix("172.16.0.0/12"), privateNet},
	{netip.MustParsePrefix("192.0.0.0/24"), reserved},
	{netip.MustParsePrefix("192.0.2.0/24"), reserved},
	{netip.MustParsePrefix("192.88.99.0/24"), reserved},
	{netip.MustParsePrefix("192.168.0.0/16"), privateNet},
	{netip.MustParsePrefix("198.18.0.0/15"), reserved},
	{netip.MustParsePrefix("198.51.100.0/24"), reserved},
	{netip.MustParsePrefix("203.0.113.0/24"), reserved},
	{netip.MustParsePrefix("224.0.0.0/4"), multicast},
	{netip.MustParsePrefix("255.255.255.255/32"), broadcast},
	{netip.MustParsePrefix("240.0.0.0/4"), reserved},
}

var prefixes6 = []classPrefix{
	{netip.MustParsePrefix("::/128"), unspecified},
	{netip.MustParsePrefix("::1/128"), loopback},
	{netip.MustParsePrefix("::/96"), reserved},            // IPv4-compatible (deprecated)
	{netip.MustParsePrefix("::ffff:0:0:0/96"), reserved},  // IPv4-translated (SIIT)
	{netip.MustParsePrefix("64:ff9b:1::/48"), privateNet}, // local-use NAT64
	{netip.MustParsePrefix("100::/64"), reserved},         // discard-only
	{netip.MustParsePrefix("2001:2::/48"), reserved},      // benchmarking
	{netip.MustParsePrefix("2001:db8::/32"), reserved},    // documentation
	{netip.MustParsePrefix("3fff::/20"), reserved},        // documentation
	{netip.MustParsePrefix("fc00::/7"), privateNet},       // unique local
	{netip.MustParsePrefix("fe80::/10"), linkLocal},
	{netip.MustParsePrefix("fec0::/10"), privateNet}, // site-local (deprecated)
	{netip.MustParsePrefix("ff00::/8"), multicast},
}

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
	teredo    = netip.MustParsePrefix("2001::/32")
	compat    = netip.MustParsePrefix("::/96")
	siit      = netip.MustParsePrefix("::ffff:0:0:0/96")
)

// classOf classifies one address (no embedded forms: see faces).
func classOf(a netip.Addr) class {
	a = a.WithZone("").Unmap()
	if metadataAddrs[a] {
		return metadata
	}
	table := prefixes6
	if a.Is4() {
		table = prefixes4
	}
	for _, cp := range table {
		if cp.p.Contains(a) {
			return cp.c
		}
	}
	return public
}

// faces is the address itself (zone dropped, IPv4-mapped forms unmapped) followed by every
// IPv4 address it embeds: NAT64 (64:ff9b::/96), 6to4 (2002::/16), Teredo (server and
// client), IPv4-compatible (::a.b.c.d) and IPv4-translated (::ffff:0:a.b.c.d). Each face is
// checked: an IPv6 form of a refused IPv4 address is refused too.
func faces(a netip.Addr) []netip.Addr {
	a = a.WithZone("").Unmap()
	out := []netip.Addr{a}
	if !a.Is6() {
		return out
	}
	b := a.As16()
	v4 := func(i int) netip.Addr { return netip.AddrFrom4([4]byte(b[i : i+4])) }
	switch {
	case nat64.Contains(a):
		out = append(out, v4(12))
	case sixToFour.Contains(a):
		out = append(out, v4(2))
	case teredo.Contains(a):
		client := [4]byte{b[12] ^ 0xff, b[13] ^ 0xff, b[14] ^ 0xff, b[15] ^ 0xff}
		out = append(out, v4(4), netip.AddrFrom4(client))
	case siit.Contains(a):
		out = append(out, v4(12))
	case compat.Contains(a) && classOf(a) != unspecified && classOf(a) != loopback:
		out = append(out, v4(12))
	}
	return out
}

// allowList is Config.Allow compiled.
type allowList struct {
	names netmap.Names[struct{}]
	ips   map[netip.Addr]bool
	nets  []netip.Prefix
}

func compileAllow(entries []string) (allowList, error) {
	al := allowList{ips: map[netip.Addr]bool{}}
	for _, joined := range entries {
		for _, e := range strings.FieldsFunc(joined, func(r rune) bool { return r == ',' || unicode.IsSpace(r) }) {
			if err := al.add(e); err != nil {
				return al, fmt.Errorf("%s entry %q: %w", AllowVar, e, err)
			}
		}
	}
	return al, nil
}

func (al *allowList) add(e string) error {
	if strings.Contains(e, "/") {
		p, err := netip.ParsePrefix(strings.Replace(strings.Replace(e, "[", "", 1), "]", "", 1))
		if err != nil {
			return fmt.Errorf("not a valid CIDR: %w", err)
		}
		if p.Addr().Zone() != "" {
			return errors.New("a CIDR cannot carry a zone")
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		al.nets = append(al.nets, p.Masked())
		return nil
	}
	if strings.HasPrefix(e, "*.") {
		_, err := al.names.Add(e, struct{}{}) // an entry given twice is harmless
		return err
	}
	t, err := normaliseHost(strings.TrimSuffix(strings.TrimPrefix(e, "["), "]"))
	if err != nil {
		return err
	}
	if t.ip.IsValid() {
		al.ips[t.ip.WithZone("").Unmap()] = true
		return nil
	}
	_, err = al.names.Add(t.host, struct{}{})
	return err
}

func (al *allowList) exact(a netip.Addr) bool { return al.ips[a.WithZone("").Unmap()] }

func (al *allowList) contains(a netip.Addr) bool {
	a = a.WithZone("").Unmap()
	if al.ips[a] {
		return true
	}
	for _, p := range al.nets {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// target is a URL's host, normalised.
type target struct {
	host string     // ASCII lower-case name without trailing dots, or canonical IP literal
	ip   netip.Addr // set when the host is an IP literal (in whatever form it was written)
}

// normaliseHost turns the host of a URL (u.Hostname(): brackets and userinfo already gone,
// percent-escapes decoded) into a canonical name or IP literal. Every form a resolver or
// the C library would read as an IPv4 address is parsed as one here, as the WHATWG URL
// standard does (decimal 2130706433, octal 0177.0.0.1, hex 0x7f.1, short 127.1) so that it
// is checked, and rewritten, as the address it stands for; a host that ends in a number
// but is not a valid IPv4 address is an error. Non-ASCII names go through IDNA (full-width
// digits become ASCII ones and are then read as an address).
func normaliseHost(h string) (target, error) {
	if h == "" {
		return target{}, errors.New("the URL has no host")
	}
	if strings.Contains(h, ":") {
		ip, err := netip.ParseAddr(h)
		if err != nil || !ip.Is6() {
			return target{}, fmt.Errorf("%q is not a valid IPv6 address", h)
		}
		return target{host: ip.String(), ip: ip}, nil
	}
	if !isASCII(h) {
		a, err := idna.Lookup.ToASCII(h)
		if err != nil {
			return target{}, fmt.Errorf("%q is not a valid host name: %w", h, err)
		}
		h = a
	}
	h = strings.TrimRight(strings.ToLower(h), ".")
	if h == "" {
		return target{}, errors.New("the host is only dots")
	}
	if endsInNumber(h) {
		ip, ok := parseIPv4Loose(h)
		if !ok {
			return target{}, fmt.Errorf("%q looks like an IPv4 address but is not a valid one", h)
		}
		return target{host: ip.String(), ip: ip}, nil
	}
	if len(h) > 253 {
		return target{}, errors.New("the host name is longer than 253 characters")
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 {
			return target{}, fmt.Errorf("%q has an empty or over-long label", h)
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return target{}, fmt.Errorf("%q: character %q is not allowed in a host name", h, r)
			}
		}
	}
	return target{host: h}, nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// endsInNumber is the WHATWG URL "ends in a number" test: the last label is all digits or
// a 0x hex number.
func endsInNumber(h string) bool {
	last := h[strings.LastIndexByte(h, '.')+1:]
	if last == "" {
		return false
	}
	if rest, ok := strings.CutPrefix(last, "0x"); ok {
		return strings.Trim(rest, "0123456789abcdef") == ""
	}
	return strings.Trim(last, "0123456789") == ""
}

// parseIPv4Loose parses 1 to 4 dot-separated numbers, each decimal, octal (leading 0) or
// hex (0x), the last filling the remaining bytes (inet_aton, WHATWG's IPv4 parser).
func parseIPv4Loose(h string) (netip.Addr, bool) {
	parts := strings.Split(h, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var v uint64
	for i, p := range parts {
		n, ok := parseIPv4Number(p)
		if !ok {
			return netip.Addr{}, false
		}
		if i < len(parts)-1 {
			if n > 255 {
				return netip.Addr{}, false
			}
			v = v<<8 | n
			continue
		}
		rest := uint(8 * (5 - len(parts)))
		if n >= 1<<rest {
			return netip.Addr{}, false
		}
		v = v<<rest | n
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

func parseIPv4Number(p string) (uint64, bool) {
	if p == "" || len(p) > 40 {
		return 0, false
	}
	base := 10
	switch {
	case strings.HasPrefix(p, "0x"):
		p, base = p[2:], 16
		if p == "" {
			return 0, true
		}
	case len(p) > 1 && p[0] == '0':
		p, base = p[1:], 8
	}
	n, err := strconv.ParseUint(p, base, 64)
	if err != nil || n > 1<<32 {
		return 0, false
	}
	return n, true
}

func isLocalhostName(h string) bool { return h == "localhost" || strings.HasSuffix(h, ".localhost") }

// pin is what a checked host may be dialled at: the addresses that were checked (never
// resolved again) and the port of a name map entry, if it has one.
type pin struct {
	addrs []netip.Addr
	port  string
}

// check applies the guard to u, rewrites u.Host to its canonical form (an odd literal is
// never passed on as written) and returns the pin the dialler must use for that host.
// trusted relaxes the address rule to "anything but metadata, unspecified, multicast and
// broadcast" (a URL from the operator's own graph).
func (f *Fetcher) check(ctx context.Context, u *url.URL, trusted bool) (string, pin, error) {
	if u.Scheme != "http" && u.Scheme != "https" {
		if u.Scheme == "" {
			return "", pin{}, refuse("%q has no scheme; only http and https URLs are fetched", u.Redacted())
		}
		return "", pin{}, refuse("only http and https URLs are fetched, not %s:", u.Scheme)
	}
	if u.Opaque != "" || u.Host == "" {
		return "", pin{}, refuse("the URL has no host")
	}
	if u.User != nil && !trusted {
		return "", pin{}, refuse("URLs with user info (user@host) are not fetched")
	}
	raw := u.Hostname()
	t, err := normaliseHost(raw)
	if err != nil {
		return "", pin{}, refuse("the host is not a valid host name or IP address: %v", err)
	}
	port := u.Port()
	if port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return "", pin{}, refuse("port %q is not a valid port", port)
		}
	}

	var p pin
	var addrs []netip.Addr
	hostAllowed, mapped := false, false
	if !t.ip.IsValid() {
		_, hostAllowed = f.allow.names.Lookup(t.host)
	}
	if nt, ok := f.names.Lookup(t.host); ok {
		addrs, p.port, mapped = []netip.Addr{nt.Addr}, nt.Port, true
	} else if t.ip.IsValid() {
		addrs = []netip.Addr{t.ip}
	} else {
		if !hostAllowed && metadataNames[t.host] {
			return "", pin{}, refuse("%s is a cloud metadata name; it is fetched only when the name and its exact address are in %s", t.host, AllowVar)
		}
		if !hostAllowed && !trusted && isLocalhostName(t.host) {
			return "", pin{}, refuse("%s is a loopback name; add it to %s to allow it", t.host, AllowVar)
		}
		addrs, err = f.resolver.LookupNetIP(ctx, "ip", t.host)
		if err != nil {
			return "", pin{}, fmt.Errorf("resolving %s: %w", t.host, err)
		}
		if len(addrs) == 0 {
			return "", pin{}, fmt.Errorf("resolving %s: no addresses", t.host)
		}
	}

	for _, a := range addrs {
		if err := f.verdict(raw, t, a, hostAllowed || mapped, mapped, trusted); err != nil {
			return "", pin{}, err
		}
		p.addrs = append(p.addrs, a.Unmap())
	}

	if port != "" {
		u.Host = net.JoinHostPort(t.host, port)
	} else if t.ip.Is6() {
		u.Host = "[" + t.host + "]"
	} else {
		u.Host = t.host
	}
	return t.host, p, nil
}

// verdict checks one address the host stands for; nil lets it through.
func (f *Fetcher) verdict(raw string, t target, a netip.Addr, hostAllowed, mapped, trusted bool) error {
	fs := faces(a)
	// The embedded addresses first: "embeds 127.0.0.1, a loopback address" says more than
	// "a reserved address" about an IPv4-compatible form.
	for k := range fs {
		i := (k + 1) % len(fs)
		face := fs[i]
		c := classOf(face)
		if c == public {
			continue
		}
		switch {
		case c.never():
		case c == metadata:
			if f.allow.exact(a) || f.allow.exact(face) {
				continue
			}
		case trusted || hostAllowed || f.allow.contains(a) || f.allow.contains(face):
			continue
		}
		// The sentence: what the host is, what the address is, how to allow it.
		var subject string
		switch {
		case mapped:
			subject = fmt.Sprintf("%s is mapped to %s", t.host, a)
		case !t.ip.IsValid():
			subject = fmt.Sprintf("%s resolves to %s", t.host, a)
		case raw != t.host:
			subject = fmt.Sprintf("%s (%s)", raw, t.host)
		default:
			subject = t.host
		}
		var what string
		switch {
		case i > 0 && (mapped || !t.ip.IsValid()):
			what = fmt.Sprintf(", which embeds %s, %s", face, c.phrase())
		case i > 0:
			what = fmt.Sprintf(" embeds %s, %s", face, c.phrase())
		case mapped || !t.ip.IsValid():
			what = ", " + c.phrase()
		default:
			what = " is " + c.phrase()
		}
		var how string
		switch {
		case c.never():
			how = "nothing is fetched from it"
		case c == metadata:
			how = fmt.Sprintf("it is fetched only when that exact address is in %s", AllowVar)
		case t.ip.IsValid() && !mapped:
			how = fmt.Sprintf("add it to %s to allow it", AllowVar)
		default:
			how = fmt.Sprintf("add the host or the address to %s to allow it", AllowVar)
		}
		return refuse("%s%s; %s", subject, what, how)
	}
	return nil
}
