// Package redact takes credentials out of text before it reaches a model, a transcript or
// a log: the values of configured secrets, private key blocks, password hashes in
// /etc/shadow's crypt(3) form, and tokens of well-known formats (GitHub, GitLab, AWS, Slack,
// OpenAI/Anthropic, Stripe, Google, Oikos's own oik_ tokens, JWTs, Bearer and Basic
// authorization headers). Each redaction is replaced by a note saying what was there
// ("[redacted: private key]", "[redacted: secret:grafana_token]"), so a model reading the
// output knows something was taken out and why, and the operator can tell a redaction from
// missing output.
//
// The patterns are RE2 regular expressions (linear in the input), so redacting a hostile
// tool output costs time proportional to its size, whatever it holds.
package redact

import (
	"encoding/json"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// Finding is one kind of redaction made, and how many times.
type Finding struct {
	What  string // "private key", "github token", "secret:NAME", ...
	Count int
}

// pattern is one well-known credential format. keep, when > 0, is the regexp group kept as
// it is (a header name, a user name), the rest of the match being replaced.
type pattern struct {
	what string
	re   *regexp.Regexp
	keep int
	// hints: the pattern can only match text holding one of these (lower-cased when fold);
	// checked first, since a substring search costs a fraction of a regexp scan and most
	// outputs hold no credential at all.
	hints []string
	fold  bool
}

// minSecretLen is the shortest configured value redacted: a shorter one ("1", "yes") would
// blank out ordinary words of every output and carries little to leak.
const minSecretLen = 4

// patterns, in the order applied: the block-shaped ones first, so a key inside a JWT-like
// string is taken whole.
var patterns = []pattern{
	// A PEM private key, BEGIN to END; a block cut off before its END (a truncated output)
	// is redacted to the end of its base64 lines.
	{what: "private key", re: regexp.MustCompile(`-----BEGIN[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----(?:[\s\S]*?-----END[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|(?:[\r\n]+[A-Za-z0-9+/=:, -]*)*)`), hints: []string{"PRIVATE KEY"}},
	// A crypt(3) hash as /etc/shadow holds it: $id$[params$]salt$hash for MD5 (1), bcrypt
	// (2a/2b/2x/2y), SHA-256 (5), SHA-512 (6), yescrypt (y), gost-yescrypt (gy), scrypt (7).
	// Long enough that "$6$" in a shell line is left alone.
	{what: "password hash", re: regexp.MustCompile(`\$(?:1|2[abxy]|5|6|y|gy|7|sha1|md5)\$[./A-Za-z0-9$=,+-]{16,}`), hints: []string{"$"}},
	{what: "github token", re: regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_[A-Za-z0-9_]{22,255})\b`), hints: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"}},
	{what: "gitlab token", re: regexp.MustCompile(`\bglpat-[A-Za-z0-9_-]{20,}`), hints: []string{"glpat-"}},
	{what: "aws access key", re: regexp.MustCompile(`\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b`), hints: []string{"AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA"}},
	{what: "aws secret key", re: regexp.MustCompile(`(?i)(aws_secret_access_key\s*[=:]\s*["']?)[A-Za-z0-9/+=]{40}`), keep: 1, hints: []string{"aws_secret_access_key"}, fold: true},
	{what: "slack token", re: regexp.MustCompile(`\bxox[abposre]-[A-Za-z0-9-]{10,}`), hints: []string{"xox"}},
	{what: "slack webhook", re: regexp.MustCompile(`https://hooks\.slack\.com/services/[A-Za-z0-9/_-]{16,}`), hints: []string{"hooks.slack.com"}},
	{what: "stripe key", re: regexp.MustCompile(`\b[sr]k_(?:live|test)_[A-Za-z0-9]{16,}`), hints: []string{"k_live_", "k_test_"}},
	{what: "api key", re: regexp.MustCompile(`\bsk-(?:proj-|ant-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}`), hints: []string{"sk-"}},
	{what: "google api key", re: regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{35}\b`), hints: []string{"AIza"}},
	{what: "oikos token", re: regexp.MustCompile(`\boik_[A-Za-z0-9_-]{16,}`), hints: []string{"oik_"}},
	{what: "jwt", re: regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*`), hints: []string{"eyJ"}},
	// An Authorization (or Proxy-Authorization) value: the scheme is kept, its credential
	// goes; a bare "Bearer <token>" elsewhere in text too.
	{what: "authorization", re: regexp.MustCompile(`(?i)((?:authorization|x-api-key|x-auth-token|private-token)["']?\s*[:=]\s*["']?(?:(?:bearer|basic|token|digest)\s+)?)[A-Za-z0-9._~+/=:-]{8,}`), keep: 1, hints: []string{"authorization", "x-api-key", "x-auth-token", "private-token"}, fold: true},
	{what: "bearer token", re: regexp.MustCompile(`(?i)(\bbearer\s+)[A-Za-z0-9._~+/-]{16,}=*`), keep: 1, hints: []string{"bearer"}, fold: true},
	// A password in a URL's userinfo: scheme://user:PASSWORD@host.
	{what: "url password", re: regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/@]+:)[^\s@/]+@`), keep: 1, hints: []string{"://"}},
}

// Redactor redacts the values of configured secrets besides the well-known formats. The
// zero value redacts the formats only.
type Redactor struct {
	values *strings.Replacer
	names  map[string]string // replacement note -> the note's name, to count findings
}

// New is a Redactor for the secrets in values (name -> value). Each value is also matched
// as it appears JSON-escaped and URL-escaped; values shorter than 4 bytes
// are not redacted (they would blank ordinary words). Longer values are replaced before
// shorter ones, so a value containing another is replaced whole.
func New(values map[string]string) *Redactor {
	type rep struct{ old, note string }
	var reps []rep
	seen := map[string]bool{}
	names := map[string]string{}
	for name, v := range values {
		if len(v) < minSecretLen {
			continue
		}
		note := "[redacted: secret:" + name + "]"
		names[note] = "secret:" + name
		forms := []string{v, url.QueryEscape(v), url.PathEscape(v)}
		if j, err := json.Marshal(v); err == nil {
			inner := string(j[1 : len(j)-1])
			// Some encoders (PHP's, Python's with ensure_ascii) also escape '/'.
			forms = append(forms, inner, strings.ReplaceAll(inner, "/", `\/`))
		}
		for _, f := range forms {
			if f != "" && !seen[f] {
				seen[f] = true
				reps = append(reps, rep{f, note})
			}
		}
	}
	if len(reps) == 0 {
		return &Redactor{}
	}
	// strings.Replacer tries the pairs in argument order at each position: longest first,
	// then by note for a deterministic choice between two secrets of one value.
	slices.SortFunc(reps, func(a, b rep) int {
		if d := len(b.old) - len(a.old); d != 0 {
			return d
		}
		if c := strings.Compare(a.note, b.note); c != 0 {
			return c
		}
		return strings.Compare(a.old, b.old)
	})
	args := make([]string, 0, 2*len(reps))
	for _, r := range reps {
		args = append(args, r.old, r.note)
	}
	return &Redactor{values: strings.NewReplacer(args...), names: names}
}

// String returns text with every secret value and well-known credential replaced by its
// note, and what was redacted (nil when nothing was).
func (r *Redactor) String(text string) (string, []Finding) {
	counts := map[string]int{}
	if r != nil && r.values != nil {
		out := r.values.Replace(text)
		if out != text {
			for note, name := range r.names {
				if n := strings.Count(out, note) - strings.Count(text, note); n > 0 {
					counts[name] += n
				}
			}
			text = out
		}
	}
	lower := ""
	for _, p := range patterns {
		hay := text
		if p.fold {
			if lower == "" {
				lower = strings.ToLower(text)
			}
			hay = lower
		}
		if !containsAny(hay, p.hints) {
			continue
		}
		note := "[redacted: " + p.what + "]"
		// One scan: the matches with their groups, then the text rebuilt around them.
		idx := p.re.FindAllStringSubmatchIndex(text, -1)
		n := len(idx)
		if n > 0 {
			var b strings.Builder
			b.Grow(len(text))
			last := 0
			for _, m := range idx {
				b.WriteString(text[last:m[0]])
				if p.keep > 0 && len(m) > 2*p.keep+1 && m[2*p.keep] >= 0 {
					b.WriteString(text[m[2*p.keep]:m[2*p.keep+1]])
				}
				b.WriteString(note)
				last = m[1]
			}
			b.WriteString(text[last:])
			text = b.String()
		}
		if n > 0 {
			counts[p.what] += n
			lower = "" // the text changed
		}
	}
	if len(counts) == 0 {
		return text, nil
	}
	out := make([]Finding, 0, len(counts))
	for w, n := range counts {
		out = append(out, Finding{What: w, Count: n})
	}
	slices.SortFunc(out, func(a, b Finding) int { return strings.Compare(a.What, b.What) })
	return text, out
}

// Text redacts the well-known formats only (no configured secrets).
func Text(text string) string {
	out, _ := (*Redactor)(nil).String(text)
	return out
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return len(subs) == 0
}
