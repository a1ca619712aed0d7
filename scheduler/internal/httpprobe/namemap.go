package httpprobe

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"unicode"
)

// ErrNameMap is wrapped by every error of ParseNameMap.
var ErrNameMap = errors.New("invalid name map")

// nameTarget is where a name map entry sends a dial: an IP literal and, optionally, a port
// that replaces the one dialled (so "*.lab.example=127.0.20.1:8443" sends https on 443 to a
// listener an unprivileged process can bind). err is set for an entry that cannot be used;
// the dial is then refused with it instead of falling through to "not in the map".
type nameTarget struct {
	ip   netip.Addr
	port string
	err  error
}

// String is the canonical "ip" or "ip:port" form.
func (t nameTarget) String() string {
	if t.port == "" {
		return t.ip.String()
	}
	return net.JoinHostPort(t.ip.String(), t.port)
}

// parseNameTarget accepts an IP literal or IP:port. Anything else (a name above all) is an
// error: the map is the only resolver and it never resolves.
func parseNameTarget(v string) (nameTarget, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return nameTarget{}, errors.New("empty value, want ip or ip:port")
	}
	if ip, err := netip.ParseAddr(v); err == nil {
		return nameTarget{ip: ip}, nil
	}
	ap, err := netip.ParseAddrPort(v)
	if err != nil {
		return nameTarget{}, fmt.Errorf("value %q is not an IP literal or ip:port (names are never resolved)", v)
	}
	if ap.Port() == 0 {
		return nameTarget{}, fmt.Errorf("value %q: port 0", v)
	}
	return nameTarget{ip: ap.Addr(), port: strconv.Itoa(int(ap.Port()))}, nil
}

// normalizeName lower-cases a map key and drops a trailing dot; it accepts a host name, an
// IP literal or a wildcard "*.suffix" (the "*" only as the whole first label).
func normalizeName(k string) (string, error) {
	k = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(k)), ".")
	if k == "" {
		return "", errors.New("empty name")
	}
	if _, err := netip.ParseAddr(k); err == nil {
		return k, nil
	}
	host := strings.TrimPrefix(k, "*.")
	for _, label := range strings.Split(host, ".") {
		if label == "" {
			return "", fmt.Errorf("name %q has an empty label", k)
		}
		for _, r := range label {
			switch {
			case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			case r == '*':
				return "", fmt.Errorf("name %q: a wildcard is only allowed as a leading \"*.\"", k)
			default:
				return "", fmt.Errorf("name %q: character %q is not allowed in a host name", k, r)
			}
		}
	}
	return k, nil
}

// nameMap is a parsed name map: exact names win over wildcards, and among wildcards the
// longest suffix wins.
type nameMap struct {
	exact map[string]nameTarget
	wild  map[string]nameTarget // by suffix, without the leading "*."
}

// newNameMap parses every entry; an unusable one is kept with its error so that dialling
// that name says what is wrong with the configuration.
func newNameMap(names map[string]string) nameMap {
	m := nameMap{exact: make(map[string]nameTarget, len(names)), wild: map[string]nameTarget{}}
	for k, v := range names {
		t, err := parseNameTarget(v)
		key, kerr := normalizeName(k)
		if kerr != nil {
			// A key that cannot match a valid name is harmless: nothing dials it.
			continue
		}
		if err != nil {
			t = nameTarget{err: fmt.Errorf("name map entry %q: %w", k, err)}
		}
		if suffix, ok := strings.CutPrefix(key, "*."); ok {
			m.wild[suffix] = t
		} else {
			m.exact[key] = t
		}
	}
	return m
}

// lookup finds the entry for a host (a name or an IP literal; wildcards match names only).
func (m nameMap) lookup(host string) (nameTarget, bool) {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if t, ok := m.exact[h]; ok {
		return t, true
	}
	if _, err := netip.ParseAddr(h); err == nil || len(m.wild) == 0 {
		return nameTarget{}, false
	}
	// Dropping one label at a time from the left tries the longest suffix first.
	for rest := h; ; {
		i := strings.IndexByte(rest, '.')
		if i < 0 {
			return nameTarget{}, false
		}
		rest = rest[i+1:]
		if t, ok := m.wild[rest]; ok {
			return t, true
		}
	}
}

// ParseNameMap parses the scheduler's name map from its environment form:
//
//	jellyfin.lab.example=127.0.20.1,*.lab.example=127.0.20.1:8443
//
// Entries are name=value, separated by commas, spaces or newlines. A name is a host name,
// an IP literal or a wildcard "*.suffix" (matching any name ending in ".suffix"); a value is
// an IP literal or ip:port (IPv6 as [::1]:8443), never a name. A port replaces the one the
// check dials. Names are lower-cased without a trailing dot; a name given twice is an error.
// The result is the map NewDialer takes, values in canonical form.
func ParseNameMap(s string) (map[string]string, error) {
	out := map[string]string{}
	entries := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
	for _, e := range entries {
		name, value, ok := strings.Cut(e, "=")
		if !ok {
			return nil, fmt.Errorf("%w: entry %q: want name=ip or name=ip:port", ErrNameMap, e)
		}
		key, err := normalizeName(name)
		if err != nil {
			return nil, fmt.Errorf("%w: entry %q: %w", ErrNameMap, e, err)
		}
		t, err := parseNameTarget(value)
		if err != nil {
			return nil, fmt.Errorf("%w: entry %q: %w", ErrNameMap, e, err)
		}
		if prev, dup := out[key]; dup {
			return nil, fmt.Errorf("%w: entry %q: %s is already mapped to %s", ErrNameMap, e, key, prev)
		}
		out[key] = t.String()
	}
	return out, nil
}

// LoadCAFile returns a TLS configuration for http checks that trusts the system roots plus
// every certificate of the PEM file at path (a private CA, or the lab simulator's
// self-signed ingress certificate). Errors name the file.
func LoadCAFile(path string) (*tls.Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("CA file %s: %w", path, err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		// No system roots on this platform: the file alone is still a usable trust store.
		pool = x509.NewCertPool()
	}
	n := 0
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("CA file %s: certificate %d: %w", path, n+1, err)
		}
		pool.AddCert(cert)
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("CA file %s holds no PEM certificate", path)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}
