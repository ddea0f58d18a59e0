// Package visible reads the words a person sees in GitHub's rendering
// of a text (body_html), and counts what GitHub hides: an outsider's
// issue reaches the agent as that and nothing more.
package visible

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// An issue by someone without write access reaches the agent, once a
// writer vouched for it, as the words a person reading it on GitHub sees:
// what GitHub does not show is where an instruction meant for the agent
// alone would hide. Which Markdown GitHub shows is GitHub's to say (HTML
// blocks, fences, link reference definitions, footnotes and raw HTML
// have rules no line-by-line guess gets right), so the quote is built
// from GitHub's own rendering (body_html), read as a browser would:
//
//   - its text nodes, whitespace collapsed outside <pre>; comments,
//     processing instructions, declarations and CDATA (which a browser
//     reads as comments) are not text;
//   - each picture as "[image N]": GitHub shows the picture, not its alt
//     text, so the alt text is not quoted;
//   - a link as its words: GitHub shows where it points only on hover, so
//     the address is left out (and counted); a bare address is its own
//     words and stays;
//   - <details> and <summary> as text: their content is a click away for
//     the person reading, so it is no hidden channel;
//   - invisible characters removed from the text, where HTML entities
//     (&#xE0041;) decode to them: format characters (zero-width space,
//     joiners, word joiner, byte order mark, soft hyphen, Unicode tags),
//     bidirectional controls, the variation selectors past U+FE0F,
//     invisible fillers and control characters other than tab and newline.
//
// What the rendering left out is counted against the Markdown source: its
// words (addresses aside) that the quote does not hold.

// hiddenCounts is what a reader of GitHub's rendering does not see.
type HiddenCounts struct {
	ZeroWidth, Bidi, Tags, Controls int
	// links are link addresses left out; words are words of the source
	// the rendering does not show.
	links, words int
}

// describe names what was removed, for the acknowledgement and the work
// order ("14 words of the source GitHub does not show").
func (h HiddenCounts) Describe() []string {
	var out []string
	add := func(n int, one, many string) {
		switch {
		case n == 1:
			out = append(out, "1 "+one)
		case n > 1:
			out = append(out, fmt.Sprintf("%d %s", n, many))
		}
	}
	add(h.words, "word of the Markdown source that GitHub's rendering does not show",
		"words of the Markdown source that GitHub's rendering does not show")
	add(h.links, "link address (GitHub shows the link's words)", "link addresses (GitHub shows the links' words)")
	add(h.ZeroWidth, "zero-width or invisible character", "zero-width or invisible characters")
	add(h.Bidi, "bidirectional control character", "bidirectional control characters")
	add(h.Tags, "Unicode tag character", "Unicode tag characters")
	add(h.Controls, "control character", "control characters")
	return out
}

// dropInvisible removes the invisible characters of s, counting them.
func (h *HiddenCounts) dropInvisible(s string) string {
	return strings.Map(func(r rune) rune {
		switch k := invisible(r); k {
		case "":
			return r
		case "bidi":
			h.Bidi++
		case "tag":
			h.Tags++
		case "control":
			h.Controls++
		default:
			h.ZeroWidth++
		}
		return -1
	}, s)
}

// plainTitle is an issue's title as GitHub shows it: plain text, one line,
// invisible characters removed.
func PlainTitle(title string, h *HiddenCounts) string {
	return strings.Join(strings.Fields(h.dropInvisible(title)), " ")
}

// visibleText is the text a reader sees of GitHub's rendering of source
// (body_html), and what it does not show of source.
func Text(rendered, source string) (string, HiddenCounts, error) {
	nodes, err := html.ParseFragment(strings.NewReader(rendered), &html.Node{Type: html.ElementNode, Data: "body", DataAtom: atom.Body})
	if err != nil {
		return "", HiddenCounts{}, fmt.Errorf("read GitHub's rendering: %w", err)
	}
	w := &textWalker{}
	for _, n := range nodes {
		w.node(n)
	}
	text := tidyLines(w.b.String())
	w.h.words = unshownWords(source, text)
	return text, w.h, nil
}

// textWalker writes the text of a parsed rendering.
type textWalker struct {
	b      strings.Builder
	h      HiddenCounts
	images int
	pre    int
}

// skipped are elements whose content a browser does not show.
var skipped = map[atom.Atom]bool{atom.Script: true, atom.Style: true, atom.Template: true, atom.Noscript: true,
	atom.Head: true, atom.Title: true, atom.Textarea: true, atom.Iframe: true, atom.Object: true}

// blocks are elements that stand on lines of their own.
var blocks = map[atom.Atom]bool{atom.P: true, atom.Div: true, atom.Ul: true, atom.Ol: true, atom.Li: true, atom.Blockquote: true,
	atom.Table: true, atom.Tr: true, atom.Section: true, atom.Hr: true, atom.Dl: true, atom.Dt: true, atom.Dd: true,
	atom.Figure: true, atom.Caption: true, atom.H1: true, atom.H2: true, atom.H3: true, atom.H4: true, atom.H5: true, atom.H6: true}

func (w *textWalker) node(n *html.Node) {
	switch n.Type {
	case html.TextNode:
		w.text(n.Data)
		return
	case html.ElementNode:
	default: // comments, doctypes: nothing a reader sees
		return
	}
	if skipped[n.DataAtom] || hasAttr(n, "hidden") {
		return
	}
	switch n.DataAtom {
	case atom.Img:
		w.images++
		fmt.Fprintf(&w.b, "[image %d]", w.images)
		return
	case atom.Br:
		w.b.WriteString("\n")
		return
	case atom.Input:
		if attr(n, "type") == "checkbox" {
			w.b.WriteString(map[bool]string{true: "[x]", false: "[ ]"}[hasAttr(n, "checked")])
		}
		return
	case atom.A:
		if href := attr(n, "href"); href != "" && !strings.HasPrefix(href, "#") && strings.TrimSpace(nodeText(n)) != href {
			w.h.links++
		}
	}
	if n.DataAtom == atom.Pre {
		w.code(n)
		return
	}
	open, closing := w.wrap(n)
	w.b.WriteString(open)
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		w.node(c)
	}
	w.b.WriteString(closing)
}

// code writes a <pre> as a fence around its text as written.
func (w *textWalker) code(n *html.Node) {
	sub := &textWalker{h: w.h, images: w.images, pre: 1}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		sub.node(c)
	}
	w.h, w.images = sub.h, sub.images
	w.b.WriteString("\n```\n" + strings.TrimRight(sub.b.String(), "\n") + "\n```\n")
}

// wrap is what the text of n is put between: line breaks around blocks,
// a list item's dash, a fence around code, <details> and <summary> as
// text.
func (w *textWalker) wrap(n *html.Node) (string, string) {
	switch {
	case n.DataAtom == atom.Code && w.pre == 0:
		return "`", "`"
	case n.DataAtom == atom.Details:
		return "\n<details>", "</details>\n"
	case n.DataAtom == atom.Summary:
		return "<summary>", "</summary>\n"
	case n.DataAtom == atom.Li:
		return "\n- ", "\n"
	case n.DataAtom == atom.Td || n.DataAtom == atom.Th:
		return " | ", ""
	case blocks[n.DataAtom]:
		return "\n\n", "\n\n"
	}
	return "", ""
}

// text writes a text node: invisible characters removed, whitespace
// collapsed as a browser does outside <pre>.
func (w *textWalker) text(s string) {
	s = w.h.dropInvisible(s)
	if w.pre > 0 {
		w.b.WriteString(s)
		return
	}
	if strings.TrimSpace(s) == "" {
		if s != "" {
			w.b.WriteString(" ")
		}
		return
	}
	lead, trail := s != strings.TrimLeftFunc(s, unicode.IsSpace), s != strings.TrimRightFunc(s, unicode.IsSpace)
	s = strings.Join(strings.Fields(s), " ")
	if lead {
		s = " " + s
	}
	if trail {
		s += " "
	}
	w.b.WriteString(s)
}

// tidyLines trims each line outside fences and keeps at most one blank
// line in a row.
func tidyLines(s string) string {
	var out []string
	blank, fenced := false, false
	for _, line := range strings.Split(s, "\n") {
		if line == "```" {
			fenced = !fenced
		}
		if !fenced {
			line = strings.TrimSpace(line)
		}
		if line == "" && !fenced {
			if !blank && len(out) > 0 {
				out = append(out, "")
			}
			blank = true
			continue
		}
		blank = false
		out = append(out, strings.TrimRight(line, " "))
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func hasAttr(n *html.Node, key string) bool {
	for _, a := range n.Attr {
		if a.Key == key {
			return true
		}
	}
	return false
}

// nodeText is the text under n.
func nodeText(n *html.Node) string {
	if n.Type == html.TextNode {
		return n.Data
	}
	var b strings.Builder
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		b.WriteString(nodeText(c))
	}
	return b.String()
}

var (
	// sourceURL is an address in the source: a link's or an image's
	// target, which the count of unshown words leaves aside (link
	// addresses are counted as such).
	sourceURL = regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.-]*://[^\s<>()\[\]"']+`)
	// sourceTag is the name of an HTML tag or attribute in the source:
	// markup, not words someone wrote.
	sourceTag = regexp.MustCompile(`</?[A-Za-z][A-Za-z0-9-]*|\b[A-Za-z-]+=`)
)

// unshownWords counts the words of the Markdown source (addresses and
// tag names aside, entities decoded) that the shown text does not hold.
func unshownWords(source, shown string) int {
	var invisibles HiddenCounts // counted as such, not as words
	src := invisibles.dropInvisible(html.UnescapeString(sourceTag.ReplaceAllString(sourceURL.ReplaceAllString(source, " "), " ")))
	seen := map[string]int{}
	for _, w := range words(shown) {
		seen[w]++
	}
	n := 0
	for _, w := range words(src) {
		if seen[w] > 0 {
			seen[w]--
			continue
		}
		n++
	}
	return n
}

// words are the runs of letters and digits of s, lowercased.
func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// invisible says which kind of invisible character r is, "" for one a
// reader sees (or a tab or newline).
func invisible(r rune) string {
	switch {
	case r == '\t' || r == '\n':
		return ""
	case r == 0x200E || r == 0x200F || r == 0x061C || r >= 0x202A && r <= 0x202E || r >= 0x2066 && r <= 0x2069:
		return "bidi"
	case r >= 0xE0000 && r <= 0xE007F:
		return "tag"
	case unicode.IsControl(r):
		return "control"
	case unicode.In(r, unicode.Cf),
		r >= 0xE0100 && r <= 0xE01EF, // variation selectors 17-256: data riding on a visible character
		r == 0x034F, r == 0x115F, r == 0x1160, r == 0x3164, r == 0xFFA0:
		return "zero-width"
	}
	return ""
}
