package llmsim

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// A template is a reply string with {{placeholders}}, parsed when the script loads so that a
// misspelt placeholder is a load error, not a silent literal.
type template struct {
	parts []tmplPart
}

// tmplPart is a literal (kind "") or a placeholder.
type tmplPart struct {
	kind string // "", "last_user", "last_tool_result", "arg", "match", "model"
	text string // the literal, the arg path or the match group
	def  string // the default of arg and match when the value is missing
	has  bool   // def was given (an empty default is still a default)
}

// tmplEnv is what placeholders expand from: one request seen through one rule.
type tmplEnv struct {
	lastUser   string
	toolResult string
	hasResult  bool
	model      string
	groups     map[string]string // user_matches capture groups by number and name
	parsed     any               // toolResult as JSON, decoded once
	parsedOK   bool
	parsedDone bool
}

// parseTemplate parses s. Placeholders: {{last_user}}, {{last_tool_result}}, {{model}},
// {{arg:a.b.0.c}} and {{match:N}} (or {{match:name}}), the last two with an optional
// default after a bar: {{arg:counts.down|0}}.
func parseTemplate(s string) (template, error) {
	var t template
	for s != "" {
		i := strings.Index(s, "{{")
		if i < 0 {
			t.parts = append(t.parts, tmplPart{text: s})
			break
		}
		if i > 0 {
			t.parts = append(t.parts, tmplPart{text: s[:i]})
		}
		rest := s[i+2:]
		j := strings.Index(rest, "}}")
		if j < 0 {
			return template{}, fmt.Errorf("unclosed {{ in %q", s)
		}
		p, err := parsePlaceholder(strings.TrimSpace(rest[:j]))
		if err != nil {
			return template{}, err
		}
		t.parts = append(t.parts, p)
		s = rest[j+2:]
	}
	return t, nil
}

func parsePlaceholder(body string) (tmplPart, error) {
	name, arg, hasArg := strings.Cut(body, ":")
	name = strings.TrimSpace(name)
	switch name {
	case "last_user", "last_tool_result", "model":
		if hasArg {
			return tmplPart{}, fmt.Errorf("{{%s}} takes no argument", name)
		}
		return tmplPart{kind: name}, nil
	case "arg", "match":
		p := tmplPart{kind: name}
		path, def, hasDef := strings.Cut(arg, "|")
		p.text, p.def, p.has = strings.TrimSpace(path), def, hasDef
		if !hasArg || p.text == "" {
			return tmplPart{}, fmt.Errorf("{{%s:...}} needs a %s", name, map[string]string{"arg": "JSON path", "match": "group"}[name])
		}
		return p, nil
	}
	return tmplPart{}, fmt.Errorf("unknown placeholder {{%s}} (known: last_user, last_tool_result, model, arg:path, match:group)", body)
}

// uses says whether the template has a placeholder of kind.
func (t template) uses(kind string) bool {
	for _, p := range t.parts {
		if p.kind == kind {
			return true
		}
	}
	return false
}

func (t template) expand(env *tmplEnv) string {
	if len(t.parts) == 1 && t.parts[0].kind == "" {
		return t.parts[0].text
	}
	var b strings.Builder
	for _, p := range t.parts {
		switch p.kind {
		case "":
			b.WriteString(p.text)
		case "last_user":
			b.WriteString(env.lastUser)
		case "last_tool_result":
			b.WriteString(env.toolResult)
		case "model":
			b.WriteString(env.model)
		case "match":
			if v, ok := env.groups[p.text]; ok && (v != "" || !p.has) {
				b.WriteString(v)
			} else {
				b.WriteString(p.def)
			}
		case "arg":
			if v, ok := env.arg(p.text); ok {
				b.WriteString(v)
			} else {
				b.WriteString(p.def)
			}
		}
	}
	return b.String()
}

// arg looks a dotted path up in the tool result's JSON: object keys by name, array elements
// by index. A string answers as itself, anything else as compact JSON.
func (env *tmplEnv) arg(path string) (string, bool) {
	if !env.parsedDone {
		env.parsedDone = true
		if env.hasResult {
			dec := json.NewDecoder(strings.NewReader(env.toolResult))
			dec.UseNumber()
			env.parsedOK = dec.Decode(&env.parsed) == nil
		}
	}
	if !env.parsedOK {
		return "", false
	}
	v := env.parsed
	for _, seg := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			next, ok := x[seg]
			if !ok {
				return "", false
			}
			v = next
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(x) {
				return "", false
			}
			v = x[i]
		default:
			return "", false
		}
	}
	switch x := v.(type) {
	case string:
		return x, true
	case nil:
		return "", false
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return "", false
		}
		return string(b), true
	}
}
