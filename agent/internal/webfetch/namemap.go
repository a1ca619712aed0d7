package webfetch

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"unicode"
)

// The name map has the syntax of the scheduler's OIKOS_CHECK_NAME_MAP (its parser lives in
// scheduler/internal/httpprobe, an internal package of another module, so it is repeated
// here rather than shared): a demo name such as jellyfin.lab.example is dialled at the lab
// simulator's address instead of being resolved.

// ErrNameMap is wrapped by every error of ParseNameMap and by New for an unusable NameMap.
var ErrNameMap = errors.New("invalid name map")

// nameTarget is where a name map entry sends a dial: an IP literal and, optionally, a port
// that replaces the one of the URL.
type nameTarget struct {
	ip   netip.Addr
	port string
}

// String is the canonical "ip" or "ip:port" form.
func (t nameTarget) String() string {
	if t.port == "" {
		return t.ip.String()
	}
	return net.JoinHostPort(t.ip.String(), t.port)
}

// parseNameTarget accepts an IP literal or ip:port; a name is an error (the map never
// resolves).
func parseNameTarget(v string) (nameTarget, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return nameTarget{}, errors.New("empty value, want ip or ip:port")
	}
	if ip, err := netip.ParseAddr(v); err == nil {
		return nameTarget{ip: ip.Unmap()}, nil
	}
	ap, err := netip.ParseAddrPort(v)
	if err != nil {
		return nameTarget{}, fmt.Errorf("value %q is not an IP literal or ip:port (names are never resolved)", v)
	}
	if ap.Port() == 0 {
		return nameTarget{}, fmt.Errorf("value %q: port 0", v)
	}
	return nameTarget{ip: ap.Addr().Unmap(), port: strconv.Itoa(int(ap.Port()))}, nil
}

// normalizeName lower-cases a map or allowlist key and drops a trailing dot; it accepts a
// host name, an IP literal (returned in canonical form) or a wildcard "*.suffix" (the "*"
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

// nameSet matches host names exactly or by "*.suffix" wildcards; the longest suffix wins.
type nameSet[T any] struct {
	exact map[string]T
	wild  map[string]T // by suffix, without the leading "*."
}

func newNameSet[T any]() nameSet[T] {
	return nameSet[T]{exact: map[string]T{}, wild: map[string]T{}}
}

// add stores a normalised key (see normalizeName); it reports false if the key is taken.
func (m nameSet[T]) add(key string, v T) bool {
	set := m.exact
	if suffix, ok := strings.CutPrefix(key, "*."); ok {
		set, key = m.wild, suffix
	}
	if _, dup := set[key]; dup {
		return false
	}
	set[key] = v
	return true
}

// lookup finds the entry for a normalised host (a name or a canonical IP literal; wildcards
// match names only).
func (m nameSet[T]) lookup(host string) (T, bool) {
	var zero T
	if t, ok := m.exact[host]; ok {
		return t, true
	}
	if _, err := netip.ParseAddr(host); err == nil || len(m.wild) == 0 {
		return zero, false
	}
	// Dropping one label at a time from the left tries the longest suffix first.
	for rest := host; ; {
		i := strings.IndexByte(rest, '.')
		if i < 0 {
			return zero, false
		}
		rest = rest[i+1:]
		if t, ok := m.wild[rest]; ok {
			return t, true
		}
	}
}

// ParseNameMap parses a name map from its environment form, the syntax of the scheduler's
// OIKOS_CHECK_NAME_MAP:
//
//	jellyfin.lab.example=127.0.20.1,*.lab.example=127.0.20.1:8443
//
// Entries are name=value, separated by commas, spaces or newlines. A name is a host name,
// an IP literal or a wildcard "*.suffix" (matching any name ending in ".suffix"); a value is
// an IP literal or ip:port (IPv6 as [::1]:8443), never a name. A port replaces the one of
// the URL. Names are lower-cased without a trailing dot; a name given twice is an error.
// The result is what Config.NameMap takes, values in canonical form.
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

// compileNameMap checks every entry of a Config.NameMap.
func compileNameMap(names map[string]string) (nameSet[nameTarget], error) {
	m := newNameSet[nameTarget]()
	for k, v := range names {
		key, err := normalizeName(k)
		if err != nil {
			return m, fmt.Errorf("%w: entry %q: %w", ErrNameMap, k, err)
		}
		t, err := parseNameTarget(v)
		if err != nil {
			return m, fmt.Errorf("%w: entry %q: %w", ErrNameMap, k, err)
		}
		if !m.add(key, t) {
			return m, fmt.Errorf("%w: entry %q: %s is mapped twice", ErrNameMap, k, key)
		}
	}
	return m, nil
}
