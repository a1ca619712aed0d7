package budget

import (
	"encoding/json"
	"fmt"
	"strings"

	openai "github.com/sashabaranov/go-openai"
)

// maxJSONCut bounds the results cut as JSON (decoding one costs time on every request that
// replays it); a longer one is cut as text.
const maxJSONCut = 256 << 10

// Handle is how the model reads the rest of a result: the get_output call, as JSON the
// model can copy.
func Handle(id string, offset int) string {
	return fmt.Sprintf(`%s {"id": %q, "offset": %d}`, GetOutput, id, offset)
}

// Stub is a result not shown again: what it was and its handle.
func Stub(id, name string, size int) string {
	if name == "" {
		name = "a tool"
	}
	return fmt.Sprintf("[earlier result of %s (%d bytes) left out to fit the context window; %s reads it]", name, size, Handle(id, 0))
}

// Cut bounds result to limit bytes. A JSON object whose lists make it too long stays valid
// JSON: its longest lists are shortened (said so in "_cut", with the handle of the whole text
// in "_more"); anything else is cut at a line or character boundary, with a trailer naming the
// bytes shown and the handle of the rest.
func Cut(id, result string, limit int) string {
	if len(result) <= limit {
		return result
	}
	if len(result) <= maxJSONCut && strings.HasPrefix(result, "{") {
		if j, ok := cutJSON(result, limit, Handle(id, 0)); ok {
			return j
		}
	}
	trailer := func(n int) string {
		return fmt.Sprintf("\n…[cut: bytes 0–%d of %d shown; the rest: %s]", n, len(result), Handle(id, n))
	}
	cut := limit - len(trailer(len(result)))
	if cut < 0 {
		cut = 0
	}
	cut = boundary(result, cut)
	return result[:cut] + trailer(cut)
}

// boundary moves cut back to a character boundary, and to the end of a line when one is
// near (within the last fifth), so a log line is not shown half.
func boundary(s string, cut int) int {
	if cut >= len(s) {
		return len(s)
	}
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	if nl := strings.LastIndexByte(s[:cut], '\n'); nl > 0 && nl >= cut*4/5 {
		return nl + 1
	}
	return cut
}

// Page is bytes [offset, offset+size) of text, moved to character boundaries, with a trailer
// naming the next offset (or the end); get_output answers it.
func Page(id, text string, offset, size int) string {
	if offset >= len(text) {
		return fmt.Sprintf("[end of output: it is %d bytes; offset %d is past its end]", len(text), offset)
	}
	for offset > 0 && text[offset]&0xC0 == 0x80 {
		offset--
	}
	end := offset + size
	if end >= len(text) {
		return text[offset:] + fmt.Sprintf("\n…[bytes %d–%d of %d: the end]", offset, len(text), len(text))
	}
	end = boundary(text, end)
	if end <= offset {
		end = min(offset+size, len(text))
	}
	return text[offset:end] + fmt.Sprintf("\n…[bytes %d–%d of %d; next: %s]", offset, end, len(text), Handle(id, end))
}

// cutJSON shortens the longest top-level lists of a JSON object until the whole fits.
func cutJSON(s string, limit int, more string) (string, bool) {
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(s), &obj) != nil {
		return "", false
	}
	lists := map[string][]json.RawMessage{}
	for k, v := range obj {
		var l []json.RawMessage
		if len(v) > 0 && v[0] == '[' && json.Unmarshal(v, &l) == nil && len(l) > 0 {
			lists[k] = l
		}
	}
	if len(lists) == 0 {
		return "", false
	}
	total := map[string]int{}
	for k, l := range lists {
		total[k] = len(l)
		// A first guess in proportion, so a huge answer is not shortened one item at a time.
		if keep := len(l) * limit / len(s); keep+1 < len(l) {
			lists[k] = l[:keep+1]
		}
	}
	obj["_more"], _ = json.Marshal("the whole result, as text: " + more)
	for {
		longest, size := "", 0
		for k, l := range lists {
			if n := len(l); n > 0 && (longest == "" || n > size) {
				longest, size = k, n
			}
		}
		if longest == "" {
			return "", false
		}
		lists[longest] = lists[longest][:size-1]
		cut := map[string]string{}
		for k, l := range lists {
			obj[k], _ = json.Marshal(l)
			if len(l) < total[k] {
				cut[k] = fmt.Sprintf("%d of %d shown; ask for fewer (filters) or page the whole with get_output", len(l), total[k])
			}
		}
		obj["_cut"], _ = json.Marshal(cut)
		b, err := json.Marshal(obj)
		if err != nil {
			return "", false
		}
		if len(b) <= limit {
			return string(b), true
		}
	}
}

// compactTool is t without what the model can do without: the parameters' descriptions,
// titles and examples, and the tool's description past its first sentence.
func compactTool(t openai.Tool) openai.Tool {
	f := *t.Function
	if i := strings.Index(f.Description, ". "); i > 0 {
		f.Description = f.Description[:i+1]
	}
	raw, err := json.Marshal(f.Parameters)
	if err == nil {
		var v any
		if json.Unmarshal(raw, &v) == nil {
			strip(v, false)
			if b, err := json.Marshal(v); err == nil {
				f.Parameters = json.RawMessage(b)
			}
		}
	}
	t.Function = &f
	return t
}

// strip removes the descriptive keywords of a JSON schema, recursively. Under "properties"
// the keys are parameter names, never keywords.
func strip(v any, names bool) {
	switch x := v.(type) {
	case map[string]any:
		if !names {
			for _, k := range []string{"description", "title", "examples", "$schema", "$id", "default"} {
				delete(x, k)
			}
		}
		for k, c := range x {
			strip(c, !names && k == "properties")
		}
	case []any:
		for _, c := range x {
			strip(c, false)
		}
	}
}
