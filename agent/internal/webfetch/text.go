package webfetch

import (
	"bytes"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// skipped elements contribute no text.
var skipped = map[atom.Atom]bool{
	atom.Script: true, atom.Style: true, atom.Noscript: true, atom.Template: true,
	atom.Svg: true, atom.Math: true, atom.Iframe: true, atom.Object: true, atom.Embed: true,
	atom.Canvas: true, atom.Meta: true, atom.Link: true, atom.Select: true, atom.Input: true,
	atom.Textarea: true,
}

// blocks start and end on a line of their own.
var blocks = map[atom.Atom]bool{
	atom.Address: true, atom.Article: true, atom.Aside: true, atom.Blockquote: true,
	atom.Body: true, atom.Caption: true, atom.Dd: true, atom.Details: true, atom.Dialog: true,
	atom.Div: true, atom.Dl: true, atom.Dt: true, atom.Fieldset: true, atom.Figcaption: true,
	atom.Figure: true, atom.Footer: true, atom.Form: true, atom.H1: true, atom.H2: true,
	atom.H3: true, atom.H4: true, atom.H5: true, atom.H6: true, atom.Header: true, atom.Hr: true,
	atom.Li: true, atom.Main: true, atom.Nav: true, atom.Ol: true, atom.P: true, atom.Pre: true,
	atom.Section: true, atom.Summary: true, atom.Table: true, atom.Tbody: true, atom.Thead: true,
	atom.Tfoot: true, atom.Title: true, atom.Tr: true, atom.Ul: true,
}

// paragraphs are set off by a blank line.
var paragraphs = map[atom.Atom]bool{
	atom.P: true, atom.H1: true, atom.H2: true, atom.H3: true, atom.H4: true, atom.H5: true,
	atom.H6: true, atom.Pre: true, atom.Blockquote: true, atom.Table: true, atom.Title: true,
	atom.Ul: true, atom.Ol: true, atom.Dl: true,
}

var headingLevel = map[atom.Atom]int{atom.H1: 1, atom.H2: 2, atom.H3: 3, atom.H4: 4, atom.H5: 5, atom.H6: 6}

// htmlToText reduces an HTML document to readable text: scripts, styles, forms' controls
// and hidden elements dropped; headings as "# …" lines, list items as "- …", table cells
// separated by " | ", link text kept; whitespace collapsed, at most one blank line in a row.
func htmlToText(body []byte) string {
	doc, err := html.Parse(bytes.NewReader(body))
	if err != nil {
		// html.Parse only fails on a reader error; a bytes.Reader has none.
		return cleanText(string(body))
	}
	w := &textWriter{}
	w.walk(doc, false)
	return cleanText(strings.TrimSpace(w.b.String()))
}

type textWriter struct {
	b     strings.Builder
	nl    int  // newlines owed before the next text (0, 1 or 2)
	space bool // a space owed before the next text on the same line
}

func (w *textWriter) breakLine(n int) {
	if w.b.Len() > 0 {
		w.nl = max(w.nl, n)
	}
	w.space = false
}

func (w *textWriter) write(s string) {
	if s == "" {
		return
	}
	if w.nl > 0 {
		w.b.WriteString(strings.Repeat("\n", w.nl))
		w.nl, w.space = 0, false
	} else if w.space && w.b.Len() > 0 {
		w.b.WriteByte(' ')
	}
	w.space = false
	w.b.WriteString(s)
}

// text writes a text node: runs of whitespace become one space (in pre, lines are kept).
func (w *textWriter) text(s string, pre bool) {
	if pre {
		// Preformatted text keeps its lines and their indentation.
		for i, line := range strings.Split(s, "\n") {
			if i > 0 {
				w.breakLine(1)
			}
			w.write(strings.TrimRight(line, " \t\r"))
		}
		return
	}
	w.words(s)
}

func (w *textWriter) words(s string) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		if s != "" {
			w.space = true
		}
		return
	}
	if isSpace(s[0]) {
		w.space = true
	}
	for i, f := range fields {
		if i > 0 {
			w.space = true
		}
		w.write(f)
	}
	if isSpace(s[len(s)-1]) {
		w.space = true
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }

func (w *textWriter) walk(n *html.Node, pre bool) {
	switch n.Type {
	case html.TextNode:
		w.text(n.Data, pre)
		return
	case html.ElementNode:
		if skipped[n.DataAtom] || hidden(n) {
			return
		}
		switch n.DataAtom {
		case atom.Br:
			w.breakLine(1)
			return
		case atom.Pre:
			pre = true
		case atom.Td, atom.Th:
			if prevCell(n) {
				w.space = true
				w.write("|")
			}
			w.space = true
		case atom.Img:
			if alt := attr(n, "alt"); strings.TrimSpace(alt) != "" {
				w.words(" " + alt + " ")
			}
			return
		}
		block := blocks[n.DataAtom]
		if block {
			gap := 1
			if paragraphs[n.DataAtom] {
				gap = 2
			}
			w.breakLine(gap)
		}
		if lvl := headingLevel[n.DataAtom]; lvl > 0 {
			w.write(strings.Repeat("#", lvl))
			w.space = true
		} else if n.DataAtom == atom.Li {
			w.write("-")
			w.space = true
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			w.walk(c, pre)
		}
		if block {
			gap := 1
			if paragraphs[n.DataAtom] {
				gap = 2
			}
			w.breakLine(gap)
		}
		return
	case html.CommentNode, html.DoctypeNode:
		return
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		w.walk(c, pre)
	}
}

// prevCell reports whether a table cell follows another in its row.
func prevCell(n *html.Node) bool {
	for p := n.PrevSibling; p != nil; p = p.PrevSibling {
		if p.Type == html.ElementNode && (p.DataAtom == atom.Td || p.DataAtom == atom.Th) {
			return true
		}
	}
	return false
}

// hidden reports an element the page does not show (hidden, aria-hidden="true", inline
// display:none).
func hidden(n *html.Node) bool {
	for _, a := range n.Attr {
		switch strings.ToLower(a.Key) {
		case "hidden":
			return true
		case "aria-hidden":
			if strings.EqualFold(strings.TrimSpace(a.Val), "true") {
				return true
			}
		case "style":
			s := strings.ReplaceAll(strings.ToLower(a.Val), " ", "")
			if strings.Contains(s, "display:none") || strings.Contains(s, "visibility:hidden") {
				return true
			}
		}
	}
	return false
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if strings.EqualFold(a.Key, key) {
			return a.Val
		}
	}
	return ""
}
