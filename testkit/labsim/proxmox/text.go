package proxmox

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// textResult renders a pvesh result in its default text format (pve-common's
// CLIFormatter): a scalar on a line of its own; an object as a key/value table; a list of
// objects as a table whose columns are the schema's properties (cols: required ones
// sorted, then optional ones sorted; without a schema every key, sorted), rows sorted by the first column, numbers right-aligned, in UTF-8
// box drawing (noborder and noheader drop the frame and the title row). Values are printed
// raw: the renderers of the real schema (bytes, durations) are not applied.
func textResult(v any, cols []string, noborder, noheader bool) string {
	switch t := v.(type) {
	case []any:
		if len(t) == 0 {
			return ""
		}
		rows := make([]map[string]any, 0, len(t))
		keys := map[string]bool{}
		for _, e := range t {
			m, ok := e.(map[string]any)
			if !ok {
				m = map[string]any{"value": e}
			}
			for k := range m {
				keys[k] = true
			}
			rows = append(rows, m)
		}
		props := cols
		if len(props) == 0 {
			for k := range keys {
				props = append(props, k)
			}
			sort.Strings(props)
		}
		return textTable(rows, props, noborder, noheader)
	case map[string]any:
		var keys []string
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		rows := make([]map[string]any, 0, len(keys))
		for _, k := range keys {
			rows = append(rows, map[string]any{"key": k, "value": cellText(t[k])})
		}
		return textTable(rows, []string{"key", "value"}, noborder, noheader)
	case nil:
		return ""
	}
	return cellText(v) + "\n"
}

func cellText(v any) string {
	switch t := v.(type) {
	case nil:
		return ""
	case string:
		return t
	case bool:
		return boolNum(t)
	case int:
		return strconv.Itoa(t)
	case int64:
		return strconv.FormatInt(t, 10)
	case float64:
		return strconv.FormatFloat(t, 'g', 15, 64)
	case map[string]any, []any:
		data, _ := json.Marshal(t)
		return string(data)
	}
	return fmt.Sprint(v)
}

func isNumber(v any) bool {
	switch v.(type) {
	case int, int64, float64:
		return true
	}
	return false
}

func textTable(rows []map[string]any, props []string, noborder, noheader bool) string {
	numeric := map[string]bool{}
	for _, p := range props {
		numeric[p] = true
		for _, r := range rows {
			if v, ok := r[p]; ok && !isNumber(v) {
				numeric[p] = false
			}
		}
	}
	first := props[0]
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i][first], rows[j][first]
		if numeric[first] {
			x, _ := strconv.ParseFloat(cellText(a), 64)
			y, _ := strconv.ParseFloat(cellText(b), 64)
			return x < y
		}
		return cellText(a) < cellText(b)
	})
	width := map[string]int{}
	for _, p := range props {
		width[p] = utf8.RuneCountInString(p)
		for _, r := range rows {
			width[p] = max(width[p], utf8.RuneCountInString(cellText(r[p])))
		}
	}
	pad := func(p, s string) string {
		fill := strings.Repeat(" ", width[p]-utf8.RuneCountInString(s))
		if numeric[p] {
			return fill + s
		}
		return s + fill
	}
	line := func(raw func(p string) string) string {
		var b strings.Builder
		for i, p := range props {
			c := pad(p, raw(p))
			switch {
			case noborder && i == len(props)-1:
				b.WriteString(raw(p)) // the last column is not aligned
			case noborder:
				b.WriteString(c + " ")
			default:
				b.WriteString("│ " + c + " ")
			}
		}
		if !noborder {
			b.WriteString("│")
		}
		return b.String() + "\n"
	}
	rule := func(l, m, r, h string) string {
		var b strings.Builder
		for i, p := range props {
			if i == 0 {
				b.WriteString(l)
			} else {
				b.WriteString(m)
			}
			b.WriteString(strings.Repeat(h, width[p]+2))
		}
		return b.String() + r + "\n"
	}
	var b strings.Builder
	if !noborder {
		b.WriteString(rule("┌", "┬", "┐", "─"))
	}
	if !noheader {
		b.WriteString(line(func(p string) string { return p }))
	}
	for i, r := range rows {
		if !noborder && (i > 0 || !noheader) {
			if i == 0 {
				b.WriteString(rule("╞", "╪", "╡", "═"))
			} else {
				b.WriteString(rule("├", "┼", "┤", "─"))
			}
		}
		b.WriteString(line(func(p string) string { return cellText(r[p]) }))
	}
	if !noborder {
		b.WriteString(rule("└", "┴", "┘", "─"))
	}
	return b.String()
}
