package checks

import (
	"fmt"
	"sort"
	"strings"

	"github.com/oikos-hq/oikos/shared/secretbox"
)

// maxHeaders bounds the headers an http check sends.
const maxHeaders = 32

// HeaderLines turns an entity's `http_headers` attribute (an object, header name -> value)
// into the sorted "Name: value" lines of an http check's `headers` config, or a reason it
// cannot. A word of a value may be `secret:NAME` ("Bearer secret:grafana_token"): the line
// keeps the reference, and the scheduler resolves it only when it sends the request (issue
// #31), so a credential never sits in the entity, the check definition, its results or its
// events. Names are HTTP tokens; Host,
// Content-Length, Transfer-Encoding and Connection are the client's own; values hold no
// line break.
func HeaderLines(raw any) ([]string, string) {
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, fmt.Sprintf("`http_headers` must be an object of header name to value, not %T", raw)
	}
	if len(m) > maxHeaders {
		return nil, fmt.Sprintf("`http_headers` has %d headers, at most %d", len(m), maxHeaders)
	}
	out := make([]string, 0, len(m))
	for name, v := range m {
		if reason := headerName(name); reason != "" {
			return nil, reason
		}
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Sprintf("`http_headers.%s` must be a string", name)
		}
		if strings.ContainsAny(s, "\r\n\x00") {
			return nil, fmt.Sprintf("`http_headers.%s` holds a line break", name)
		}
		for _, w := range strings.Split(s, " ") {
			if _, isRef, err := secretbox.Ref(w); isRef && err != nil {
				return nil, fmt.Sprintf("`http_headers.%s`: %v", name, err)
			}
		}
		out = append(out, name+": "+strings.TrimSpace(s))
	}
	sort.Strings(out)
	return out, ""
}

// SplitHeader splits a "Name: value" line of the headers config.
func SplitHeader(line string) (name, value string, ok bool) {
	name, value, ok = strings.Cut(line, ":")
	if !ok || headerName(name) != "" || strings.ContainsAny(value, "\r\n\x00") {
		return "", "", false
	}
	return name, strings.TrimSpace(value), true
}

func headerName(name string) string {
	if name == "" {
		return "`http_headers` has an empty header name"
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r)) {
			return fmt.Sprintf("`http_headers` name %q is not an HTTP header name", name)
		}
	}
	switch strings.ToLower(name) {
	case "host", "content-length", "transfer-encoding", "connection", "user-agent":
		return fmt.Sprintf("`http_headers` cannot set %s: the scheduler's client sets it", name)
	}
	return ""
}
