package executor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/oikos-hq/oikos/shared/redact"
)

// maxHold bounds the output held back, per stream, until a line (or a private key block)
// is complete: a credential is redacted whole only when it is seen whole, but a command
// that prints no line break for this long is stored anyway, its credential possibly split.
const maxHold = 64 << 10

// outRedactor takes the stored secrets' values and the well-known credentials (private
// keys, shadow hashes, tokens: shared/redact) out of a run's output before anything is
// stored, so execution_logs, executions.output, the agent's tool results and the chat
// transcript only ever hold the note "[redacted: …]" (issue #31). Output is redacted a
// complete line at a time, and a private key block once it is complete, since the chunks a
// command's output arrives in may split a credential anywhere. Not safe for concurrent
// use: the sink calls it with its lock held.
type outRedactor struct {
	r     *redact.Redactor
	hold  map[string][]byte // per stream: the text after the last line break
	found map[string]int    // what was redacted, and how often
}

func newOutRedactor(r *redact.Redactor) *outRedactor {
	return &outRedactor{r: r, hold: map[string][]byte{}, found: map[string]int{}}
}

// take adds p to stream's held text and returns what can be stored now, redacted.
func (o *outRedactor) take(stream string, p []byte) []byte {
	buf := append(o.hold[stream], p...)
	cut := bytes.LastIndexAny(buf, "\n\r") + 1
	if len(buf) < maxHold {
		if openKeyBlock(buf[:cut]) {
			cut = 0
		}
		if cut == 0 {
			o.hold[stream] = buf
			return nil
		}
	} else if cut == 0 {
		cut = len(buf)
	}
	o.hold[stream] = append([]byte(nil), buf[cut:]...)
	return o.text(buf[:cut])
}

// rest returns stream's held text, redacted, and forgets it.
func (o *outRedactor) rest(stream string) []byte {
	buf := o.hold[stream]
	delete(o.hold, stream)
	if len(buf) == 0 {
		return nil
	}
	return o.text(buf)
}

func (o *outRedactor) text(b []byte) []byte {
	out, fs := o.r.String(string(b))
	if fs == nil {
		return b
	}
	for _, f := range fs {
		o.found[f.What] += f.Count
	}
	return []byte(out)
}

// String redacts one message (an error, a result), counting what it took.
func (o *outRedactor) String(s string) string {
	if s == "" {
		return s
	}
	return string(o.text([]byte(s)))
}

// result redacts a run's structured result as its JSON: a result that still marshals to
// valid JSON once redacted is kept in that form, one that would not is replaced by a note.
func (o *outRedactor) result(v any) any {
	if v == nil {
		return nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return v
	}
	out := o.text(raw)
	if bytes.Equal(out, raw) {
		return v
	}
	if json.Valid(out) {
		return json.RawMessage(out)
	}
	return map[string]string{"redacted": "the result held a credential"}
}

// note says what was redacted ("2 × secret:grafana_token, 1 × private key"), "" for nothing.
func (o *outRedactor) note() string {
	if len(o.found) == 0 {
		return ""
	}
	whats := make([]string, 0, len(o.found))
	for w := range o.found {
		whats = append(whats, w)
	}
	sort.Strings(whats)
	parts := make([]string, len(whats))
	for i, w := range whats {
		parts[i] = fmt.Sprintf("%d × %s", o.found[w], w)
	}
	return strings.Join(parts, ", ")
}

// openKeyBlock reports whether b ends inside a private key block: a BEGIN … PRIVATE KEY
// line with no END after it.
func openKeyBlock(b []byte) bool {
	i := bytes.LastIndex(b, []byte("-----BEGIN"))
	if i < 0 {
		return false
	}
	rest := b[i:]
	line := rest
	if j := bytes.IndexByte(rest, '\n'); j >= 0 {
		line = rest[:j]
	}
	return bytes.Contains(line, []byte("PRIVATE KEY")) && !bytes.Contains(rest, []byte("-----END"))
}
