// Package netmap is the name map the scheduler's checks (OIKOS_CHECK_NAME_MAP) and the
// agent's probes (OIKOS_AGENT_NAME_MAP) dial through instead of resolving a name:
//
//	jellyfin.lab.example=127.0.20.1,*.lab.example=127.0.20.1:8443
//
// Parse reads that environment form, Compile turns its result into a Map, and Names is the
// exact-or-wildcard host matching a Map is made of (the agent's allowlist uses it too). A
// host matches an exact name first, then the longest "*.suffix" wildcard; wildcards never
// match IP literals. Nothing here resolves a name.
package netmap

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"unicode"
)

// ErrNameMap is wrapped by every error of Parse and Compile.
var ErrNameMap = errors.New("invalid name map")

// Target is where a name map entry sends a dial: an IP literal and, optionally, a port that
// replaces the one dialled (so "*.lab.example=127.0.20.1:8443" sends https on 443 to a
// listener an unprivileged process can bind).
type Target struct {
	Addr netip.Addr // never an IPv4-mapped IPv6 address (those are unmapped)
	Port string     // decimal, 1 to 65535; "" keeps the dialled port
}

// String is the canonical "ip" or "ip:port" form (IPv6 with a port as [::1]:8443).
func (t Target) String() string {
	if t.Port == "" {
		return t.Addr.String()
	}
	return net.JoinHostPort(t.Addr.String(), t.Port)
}

// ParseTarget accepts an IP literal or ip:port. Anything else (a name above all) is an
// error: the map is the only resolver and it never resolves.
func ParseTarget(v string) (Target, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return Target{}, errors.New("empty value, want ip or ip:port")
	}
	if ip, err := netip.ParseAddr(v); err == nil {
		return Target{Addr: ip.Unmap()}, nil
	}
	ap, err := netip.ParseAddrPort(v)
	if err != nil {
		return Target{}, fmt.Errorf("value %q is not an IP literal or ip:port (names are never resolved)", v)
	}
	if ap.Port() == 0 {
		return Target{}, fmt.Errorf("value %q: port 0", v)
	}
	return Target{Addr: ap.Addr().Unmap(), Port: strconv.Itoa(int(ap.Port()))}, nil
}

// normalizeName lower-cases a name and drops a trailing dot; it accepts a host name, an IP
// literal (returned in canonical form, brackets allowed) or a wildcard "*.suffix" (the "*"
// only as the whole first label).
func normalizeName(k string) (string, error) {
	k = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(k)), ".")
	if k == "" {
		return "", errors.New("empty name")
	}
	if ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(k, "["), "]")); err == nil {
		return ip.Unmap().String(), nil
	}
	host := strings.TrimPrefix(k, "*.")
	for label := range strings.SplitSeq(host, ".") {
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

// Names maps host names, IP literals and "*.suffix" wildcards to values of type T. An exact
// name wins over wildcards, and among wildcards the longest suffix wins. The zero value is
// empty and ready for Add; Lookup is safe for concurrent use once Adds are done.
type Names[T any] struct {
	exact map[string]T
	wild  map[string]T // by suffix, without the leading "*."
}

// Add stores v under name, normalised: lower-cased without a trailing dot, an IP literal in
// canonical form (brackets allowed). A name is a host name (letters, digits, '-' and '_'),
// an IP literal or "*.suffix". It reports false, storing nothing, if the normalised name is
// already present, and an error for a name that is none of those.
func (n *Names[T]) Add(name string, v T) (bool, error) {
	key, err := normalizeName(name)
	if err != nil {
		return false, err
	}
	if n.exact == nil {
		n.exact, n.wild = map[string]T{}, map[string]T{}
	}
	set := n.exact
	if suffix, ok := strings.CutPrefix(key, "*."); ok {
		set, key = n.wild, suffix
	}
	if _, dup := set[key]; dup {
		return false, nil
	}
	set[key] = v
	return true, nil
}

// Lookup finds the value for a host: a name (any case, a trailing dot allowed) or an IP
// literal (any spelling, brackets allowed; wildcards match names only).
func (n Names[T]) Lookup(host string) (T, bool) {
	var zero T
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")); err == nil {
		v, ok := n.exact[ip.Unmap().String()]
		return v, ok
	}
	if v, ok := n.exact[h]; ok {
		return v, true
	}
	if len(n.wild) == 0 {
		return zero, false
	}
	// Dropping one label at a time from the left tries the longest suffix first.
	for rest := h; ; {
		i := strings.IndexByte(rest, '.')
		if i < 0 {
			return zero, false
		}
		rest = rest[i+1:]
		if v, ok := n.wild[rest]; ok {
			return v, true
		}
	}
}

// Map is a compiled name map.
type Map = Names[Target]

// Compile checks every entry of a name map (Parse's result, or one built by hand) and
// returns it compiled. Two keys that normalise to the same name are an error.
func Compile(names map[string]string) (Map, error) {
	var m Map
	for k, v := range names {
		key, err := normalizeName(k)
		if err != nil {
			return Map{}, fmt.Errorf("%w: entry %q: %w", ErrNameMap, k, err)
		}
		t, err := ParseTarget(v)
		if err != nil {
			return Map{}, fmt.Errorf("%w: entry %q: %w", ErrNameMap, k, err)
		}
		// key is normalised already, so Add cannot fail on it; false is a duplicate.
		if added, _ := m.Add(key, t); !added {
			return Map{}, fmt.Errorf("%w: entry %q: %s is mapped twice", ErrNameMap, k, key)
		}
	}
	return m, nil
}

// Parse reads a name map from its environment form:
//
//	jellyfin.lab.example=127.0.20.1,*.lab.example=127.0.20.1:8443
//
// Entries are name=value, separated by commas, spaces or newlines. A name is a host name,
// an IP literal or a wildcard "*.suffix" (matching any name ending in ".suffix"); a value is
// an IP literal or ip:port (IPv6 as [::1]:8443), never a name. A port replaces the one
// dialled. Names are lower-cased without a trailing dot; a name given twice is an error.
// The result has names and values in canonical form, ready for Compile.
func Parse(s string) (map[string]string, error) {
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
		t, err := ParseTarget(value)
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
