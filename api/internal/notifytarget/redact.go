package notifytarget

import (
	"net/url"
	"regexp"
	"sort"
	"strings"
)

// A notification URL is a credential: ntfy and Gotify carry a token or a password, Discord,
// Slack and Telegram a webhook token in the path or the userinfo, generic webhooks often a
// key in the query. So whatever Oikos shows, logs or stores of one is its scheme and host
// only, and any error a sender returns (shoutrrr's and net/http's echo the URL they were
// given) is scrubbed before it is logged or stored.

// elided stands for what was removed.
const elided = "…"

// RedactURL returns raw reduced to its scheme and host: "ntfy://ntfy.sh/…". The userinfo,
// path, query and fragment are never part of the result; a URL that does not parse is
// "(unparsable URL)".
func RedactURL(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Scheme == "" {
		return "(unparsable URL)"
	}
	if u.Opaque != "" || u.Host == "" {
		if u.Opaque == "" && u.Path == "" && u.RawQuery == "" && u.User == nil {
			return u.Scheme + ":"
		}
		return u.Scheme + ":" + elided
	}
	out := u.Scheme + "://" + u.Host
	if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		out += "/" + elided
	}
	return out
}

// urlPattern finds URLs inside an error message ("Post \"https://h/p?k=v\": dial tcp ...").
var urlPattern = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.\-]*://[^\s"'<>]+`)

// minFragment is the shortest secret fragment Redact removes by value: shorter ones (a "/"
// path, a one-letter query value) carry no secret and would mangle every message.
const minFragment = 3

// Redact returns msg with every URL in it reduced by RedactURL, and every part of each of
// secrets that could identify or authorise (the whole value; for a URL its userinfo, user,
// password, path and each of its segments, query and each of its values, and fragment, in
// raw and decoded forms) replaced by "…". Pass the resolved URL and signing secret of the
// send that failed: a service that quotes a query value or a path segment on its own is
// scrubbed too.
func Redact(msg string, secrets ...string) string {
	var frags []string
	for _, s := range secrets {
		frags = append(frags, fragments(s)...)
	}
	// Longest first, so a whole value goes before the parts it contains.
	sort.Slice(frags, func(i, j int) bool { return len(frags[i]) > len(frags[j]) })
	scrub := func(text string) string {
		for _, f := range frags {
			if len(f) >= minFragment {
				text = strings.ReplaceAll(text, f, elided)
			}
		}
		return text
	}
	// URLs are reduced whole, and the text around them scrubbed of fragments. A reduced URL
	// is not scrubbed again: what is left of it, the scheme and host, is what every channel
	// view shows anyway, and scrubbing it would only mangle it.
	var b strings.Builder
	last := 0
	for _, m := range urlPattern.FindAllStringIndex(msg, -1) {
		b.WriteString(scrub(msg[last:m[0]]))
		u := msg[m[0]:m[1]]
		// A quoted URL may end in punctuation that belongs to the sentence.
		trail := ""
		for len(u) > 0 && strings.ContainsAny(u[len(u)-1:], ".,;:)]}") {
			trail = u[len(u)-1:] + trail
			u = u[:len(u)-1]
		}
		b.WriteString(RedactURL(u) + trail)
		last = m[1]
	}
	b.WriteString(scrub(msg[last:]))
	return b.String()
}

// RedactError is Redact of err's message; "" for nil.
func RedactError(err error, secrets ...string) string {
	if err == nil {
		return ""
	}
	return Redact(err.Error(), secrets...)
}

// fragments lists the secret parts of s: s itself and, when it is a URL, its parts.
func fragments(s string) []string {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	out := []string{s}
	add := func(v string) {
		if v == "" {
			return
		}
		out = append(out, v)
		if d, err := url.QueryUnescape(v); err == nil && d != v {
			out = append(out, d)
		}
		if e := url.QueryEscape(v); e != v {
			out = append(out, e)
		}
	}
	u, err := url.Parse(s)
	if err != nil {
		return out
	}
	if u.User != nil {
		add(u.User.String())
		add(u.User.Username())
		if p, ok := u.User.Password(); ok {
			add(p)
		}
	}
	add(u.Opaque)
	add(u.EscapedPath())
	add(u.Path)
	for _, seg := range strings.Split(u.Path, "/") {
		add(seg)
	}
	add(u.RawQuery)
	for _, vs := range u.Query() {
		for _, v := range vs {
			add(v)
		}
	}
	add(u.Fragment)
	return out
}
