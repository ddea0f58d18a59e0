package docs

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

var (
	linkRE    = regexp.MustCompile(`!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	codeRE    = regexp.MustCompile("`[^`]*`")
	headingRE = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	inlineRE  = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// Every relative link in README.md and docs/*.md names a file that
// exists, and every anchor a heading of its file, as GitHub makes
// heading anchors.
func TestEveryRelativeLinkResolves(t *testing.T) {
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join("..", "README.md"))
	anchors := map[string]map[string]bool{}
	checked := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		// A link's text may run over a line's end: the whole prose at once.
		text := codeRE.ReplaceAllString(strings.Join(prose(string(b)), "\n"), "")
		for _, m := range linkRE.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			file, anchor, _ := strings.Cut(target, "#")
			dest := page
			if file != "" {
				dest = filepath.Join(filepath.Dir(page), filepath.FromSlash(file))
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s: the link %s names %s, which does not exist", page, target, dest)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if anchors[dest] == nil {
				anchors[dest], err = headingAnchors(dest)
				if err != nil {
					t.Fatal(err)
				}
			}
			if !anchors[dest][anchor] {
				t.Errorf("%s: the link %s names the anchor #%s, which no heading of %s makes", page, target, anchor, dest)
			}
		}
	}
	if checked < 20 {
		t.Errorf("checked %d relative links; the README and docs/ link each other more than that, so the pattern misses some", checked)
	}
	t.Logf("%d relative links checked in %d files", checked, len(pages))
}

// prose is the document's lines outside fenced code blocks.
func prose(doc string) []string {
	var out []string
	fenced := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, line)
		}
	}
	return out
}

// headingAnchors are the anchors GitHub gives the file's headings.
func headingAnchors(path string) (map[string]bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range prose(string(b)) {
		m := headingRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		s := Slug(m[1])
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out, nil
}

// Slug is GitHub's anchor of a heading: its text, lower case, with
// everything but letters, digits, spaces, hyphens and underscores dropped
// and spaces made hyphens.
func Slug(heading string) string {
	text := inlineRE.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

func TestSlugIsGitHubs(t *testing.T) {
	for heading, want := range map[string]string{
		"The life of a run: one table":         "the-life-of-a-run-one-table",
		"`.sandbox.yml`":                       "sandboxyml",
		"GitHub's rate limits":                 "githubs-rate-limits",
		"Try it locally: `sandbox-agent`":      "try-it-locally-sandbox-agent",
		"Reviews, replies and the run history": "reviews-replies-and-the-run-history",
		"A [linked](x.md) heading":             "a-linked-heading",
	} {
		if got := Slug(heading); got != want {
			t.Errorf("Slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

// Every Go package of the module says its role in a doc comment (what
// `go doc ./...` shows), in a file that is not a test.
func TestEveryPackageSaysItsRole(t *testing.T) {
	documented := map[string]bool{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && path != "..") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		dir := filepath.Dir(path)
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		documented[dir] = documented[dir] || f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != ""
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(documented) < 30 {
		t.Fatalf("found %d packages; the walk misses some", len(documented))
	}
	for dir, ok := range documented {
		if !ok {
			t.Errorf("package %s has no doc comment saying its role (add a doc.go)", dir)
		}
	}
}
