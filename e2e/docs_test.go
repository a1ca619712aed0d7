package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// TestCommentCitationsResolve keeps the documents the code cites in the repository. It reads
// the comments of every .go file under the repository root and fails on each citation that
// does not resolve:
//
//   - a path ending in .md that is not a file of the repository (a path starting with ./ or
//     ../ is taken relative to the citing file, any other one relative to the root first and
//     to the citing file second);
//   - a quoted section after such a path (`docs/architecture.md "One gated execution path"`)
//     that is not a heading of that document;
//   - a behaviour id (G1, S9, X6 …, or a range such as S4–S6) that docs/behaviours.md does not
//     define.
//
// The root is found by walking up from the test's directory to go.work, so the test runs
// for real wherever the module's tests run; a missing root or catalogue fails it.
func TestCommentCitationsResolve(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	catalogue := filepath.Join(root, "docs", "behaviours.md")
	defined, err := behaviourIDs(catalogue)
	if err != nil {
		t.Fatalf("read the behaviour catalogue: %v", err)
	}
	if len(defined) < 40 {
		t.Fatalf("docs/behaviours.md defines only %d behaviour ids (%v); the `- **X1 …` entries were not found", len(defined), sortedIDs(defined))
	}

	files, mdCites, idCites := 0, 0, 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		files++
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, c := range commentBlocks(src) {
			for _, ref := range mdRefs(c.text) {
				mdCites++
				where := fmt.Sprintf("%s:%d", rel, c.lineAt(ref.at))
				doc, ok := resolveDoc(root, filepath.Dir(path), ref.path)
				if !ok {
					t.Errorf("%s: comment cites %s, which is not a file in the repository", where, ref.path)
					continue
				}
				if ref.section != "" {
					has, err := hasHeading(doc, ref.section)
					if err != nil {
						t.Errorf("%s: read %s: %v", where, ref.path, err)
					} else if !has {
						t.Errorf("%s: comment cites section %q of %s, which has no such heading", where, ref.section, ref.path)
					}
				}
			}
			for _, m := range legacyDocRE.FindAllStringIndex(c.text, -1) {
				if !strings.HasPrefix(c.text[m[1]:], ".md") {
					t.Errorf("%s:%d: comment cites %s, a design document that is not in the repository; cite docs/%s instead",
						rel, c.lineAt(m[0]), c.text[m[0]:m[1]], legacyDocs[c.text[m[0]:m[1]]])
				}
			}
			for _, ref := range behaviourRefs(c.text) {
				idCites++
				for _, id := range ref.ids {
					if !defined[id] {
						t.Errorf("%s:%d: comment cites behaviour %s, which docs/behaviours.md does not define",
							rel, c.lineAt(ref.at), id)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	// Guards against a walk or a scanner that silently finds nothing.
	if files < 100 || mdCites < 10 || idCites < 20 {
		t.Fatalf("walked %d .go files with %d document and %d behaviour citations; expected far more (is %s the repository root?)",
			files, mdCites, idCites, root)
	}
	t.Logf("%d .go files: %d document citations, %d behaviour citations, %d behaviours defined", files, mdCites, idCites, len(defined))
}

// The matchers themselves, on the shapes the tree uses, so a regression in them cannot make
// the walk above pass vacuously.
func TestCitationMatchers(t *testing.T) {
	t.Parallel()
	text := `Package sweep (docs/behaviours.md S4–S6, S8): see docs/architecture.md "One gated execution path" ` +
		`and ../../docs/policy.md; ids G2-G5, X3-X10 and (S3). S8: logged. ` +
		`Not ids: E2E, x86, MAC BC:24:11:E7:30:20, A0, sha256, G13x. https://example.com/x/README.md is a link.`
	var paths []string
	for _, r := range mdRefs(text) {
		paths = append(paths, r.path+"|"+r.section)
	}
	if want := []string{"docs/behaviours.md|", "docs/architecture.md|One gated execution path", "../../docs/policy.md|"}; fmt.Sprint(paths) != fmt.Sprint(want) {
		t.Errorf("mdRefs = %q, want %q", paths, want)
	}
	var ids []string
	for _, r := range behaviourRefs(text) {
		ids = append(ids, r.ids...)
	}
	want := []string{"S4", "S5", "S6", "S8", "G2", "G3", "G4", "G5", "X3", "X4", "X5", "X6", "X7", "X8", "X9", "X10", "S3", "S8"}
	if fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Errorf("behaviourRefs = %v, want %v", ids, want)
	}
	src := []byte("package p\n\n// first line cites\n// docs/x.md \"A\"\nvar s = \"X9 in a string is no citation\" // S1\n/* G1 */\n")
	blocks := commentBlocks(src)
	if len(blocks) != 3 || blocks[0].text != `first line cites docs/x.md "A"` || blocks[0].lineAt(len("first line cites ")) != 4 ||
		blocks[1].text != "S1" || blocks[2].text != "G1" {
		t.Errorf("commentBlocks = %+v", blocks)
	}
}

// repoRoot walks up from the working directory to the directory holding go.work.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.work above the test's working directory; run the test inside the repository")
		}
		dir = parent
	}
}

// skipDir says which directories hold no source of the repository: hidden ones (.git, the
// local state in .local), dependencies and build output.
func skipDir(name string) bool {
	return strings.HasPrefix(name, ".") || name == "node_modules" || name == "vendor" || name == "bin" || name == "testdata"
}

// commentBlock is the text of consecutive line comments (or one block comment), joined with
// spaces so that a citation wrapped across lines is read whole.
type commentBlock struct {
	text string
	// starts[i] is the offset in text where the comment on lines[i] begins.
	starts []int
	lines  []int
}

func (c commentBlock) lineAt(off int) int {
	i := sort.Search(len(c.starts), func(i int) bool { return c.starts[i] > off }) - 1
	if i < 0 {
		i = 0
	}
	return c.lines[i]
}

// commentBlocks lexes src (it need not parse) and returns its comments.
func commentBlocks(src []byte) []commentBlock {
	fset := token.NewFileSet()
	file := fset.AddFile("", fset.Base(), len(src))
	var s scanner.Scanner
	s.Init(file, src, func(token.Position, string) {}, scanner.ScanComments)
	var out []commentBlock
	lastLine := -2
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok != token.COMMENT {
			lastLine = -2
			continue
		}
		line := fset.Position(pos).Line
		text := lit
		if strings.HasPrefix(text, "//") {
			text = strings.TrimSpace(strings.TrimPrefix(text, "//"))
		} else {
			text = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(text, "/*"), "*/"))
			lastLine = -2 // a block comment stands alone
		}
		if line == lastLine+1 && len(out) > 0 {
			b := &out[len(out)-1]
			b.text += " "
			b.starts = append(b.starts, len(b.text))
			b.lines = append(b.lines, line)
			b.text += text
		} else {
			out = append(out, commentBlock{text: text, starts: []int{0}, lines: []int{line}})
		}
		if strings.HasPrefix(lit, "//") {
			lastLine = line
		}
	}
	return out
}

// legacyDocs are the names the design documents had outside the repository, and the file of
// docs/ that replaced each; a citation by an old name followed by an id resolves nowhere.
var legacyDocs = map[string]string{
	"ARCHITECTURE": "architecture.md", "BEHAVIOURS": "behaviours.md", "PROXMOX": "proxmox.md",
	"exec-contract": "execution-contract.md",
}

var legacyDocRE = regexp.MustCompile(`\b(?:ARCHITECTURE|BEHAVIOURS|PROXMOX|exec-contract)\b`)

type mdRef struct {
	path, section string
	at            int
}

var (
	mdPathRE    = regexp.MustCompile(`(?:\.{1,2}/)*[A-Za-z0-9_][A-Za-z0-9_./-]*\.md\b`)
	mdSectionRE = regexp.MustCompile(`^[,:]?\s*"([^"]+)"`)
)

// mdRefs finds the markdown paths text cites, and the quoted section after each, if any.
// Links (a word containing "://") are not repository paths.
func mdRefs(text string) []mdRef {
	var out []mdRef
	for _, m := range mdPathRE.FindAllStringIndex(text, -1) {
		start := strings.LastIndexAny(text[:m[0]], " \t\n(") + 1
		if strings.Contains(text[start:m[1]], "://") {
			continue
		}
		r := mdRef{path: text[m[0]:m[1]], at: m[0]}
		if s := mdSectionRE.FindStringSubmatch(text[m[1]:]); s != nil {
			r.section = s[1]
		}
		out = append(out, r)
	}
	return out
}

// resolveDoc finds a cited document: ./ and ../ paths beside the citing file, others from
// the root first.
func resolveDoc(root, dir, p string) (string, bool) {
	candidates := []string{filepath.Join(root, p), filepath.Join(dir, p)}
	if strings.HasPrefix(p, "./") || strings.HasPrefix(p, "../") {
		candidates = candidates[1:]
	}
	for _, c := range candidates {
		if !strings.HasPrefix(c, root+string(filepath.Separator)) {
			continue // outside the repository
		}
		if st, err := os.Stat(c); err == nil && st.Mode().IsRegular() {
			return c, true
		}
	}
	return "", false
}

// hasHeading reports whether the markdown file has a heading whose text is section
// (case-insensitive).
func hasHeading(doc, section string) (bool, error) {
	f, err := os.Open(doc)
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "#") {
			continue
		}
		if strings.EqualFold(strings.TrimSpace(strings.TrimLeft(line, "#")), section) {
			return true, nil
		}
	}
	return false, sc.Err()
}

type behaviourRef struct {
	ids []string
	at  int
}

// behaviourIDRE matches an id or a range of ids of one letter: S8, G2-G5, S1–S3, X3-X10.
var behaviourIDRE = regexp.MustCompile(`\b([GSXADNE])([1-9][0-9]?)(?:\s?[-–]\s?([GSXADNE])([1-9][0-9]?))?\b`)

// behaviourRefs finds the behaviour ids text cites, ranges expanded. A match glued to a
// word, a path or a colon before it (`BC:24:11:E7`), or followed by a colon and a hex digit,
// is not an id.
func behaviourRefs(text string) []behaviourRef {
	var out []behaviourRef
	for _, m := range behaviourIDRE.FindAllStringSubmatchIndex(text, -1) {
		if m[0] > 0 && strings.ContainsRune("_:./-", rune(text[m[0]-1])) {
			continue
		}
		if rest := text[m[1]:]; len(rest) > 1 && rest[0] == ':' && strings.ContainsRune("0123456789ABCDEFabcdef", rune(rest[1])) {
			continue
		}
		letter := text[m[2]:m[3]]
		lo, _ := strconv.Atoi(text[m[4]:m[5]])
		hi := lo
		if m[6] >= 0 {
			if text[m[6]:m[7]] != letter {
				// Two ids of different letters joined by a dash: check both as written.
				n, _ := strconv.Atoi(text[m[8]:m[9]])
				out = append(out, behaviourRef{ids: []string{letter + strconv.Itoa(lo), text[m[6]:m[7]] + strconv.Itoa(n)}, at: m[0]})
				continue
			}
			hi, _ = strconv.Atoi(text[m[8]:m[9]])
		}
		if hi < lo {
			lo, hi = hi, lo
		}
		r := behaviourRef{at: m[0]}
		for n := lo; n <= hi; n++ {
			r.ids = append(r.ids, letter+strconv.Itoa(n))
		}
		out = append(out, r)
	}
	return out
}

// catalogueEntryRE matches the entries of docs/behaviours.md: `- **G1 Ontology** (today)`.
var catalogueEntryRE = regexp.MustCompile(`^- \*\*([GSXADNE][1-9][0-9]?)\b`)

// behaviourIDs reads the ids docs/behaviours.md defines. An id defined twice is an error.
func behaviourIDs(path string) (map[string]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ids := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := catalogueEntryRE.FindStringSubmatch(sc.Text()); m != nil {
			if ids[m[1]] {
				return nil, fmt.Errorf("%s defines %s twice", path, m[1])
			}
			ids[m[1]] = true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, errors.New(path + " defines no behaviour ids")
	}
	return ids, nil
}

func sortedIDs(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for id := range m {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// TestMarkdownLinksResolve keeps the relative links of the repository's own documents (the
// README, CONTRIBUTING and everything under docs/) pointing at files that exist.
func TestMarkdownLinksResolve(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	docs := []string{filepath.Join(root, "README.md"), filepath.Join(root, "CONTRIBUTING.md")}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			docs = append(docs, path)
		}
		return err
	})
	if err != nil {
		t.Fatalf("walk docs: %v", err)
	}
	links := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatalf("read %s: %v", doc, err)
		}
		rel, _ := filepath.Rel(root, doc)
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range mdLinkRE.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || strings.HasPrefix(target, "#") {
					continue
				}
				links++
				target, _, _ = strings.Cut(target, "#")
				p := filepath.Join(filepath.Dir(doc), target)
				if _, err := os.Stat(p); err != nil || !strings.HasPrefix(p, root+string(filepath.Separator)) {
					t.Errorf("%s:%d: link to %s, which is not in the repository", rel, i+1, m[1])
				}
			}
		}
	}
	if links == 0 {
		t.Fatal("found no relative links in the documents; the matcher is broken")
	}
}

var mdLinkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)
