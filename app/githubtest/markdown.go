package githubtest

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"time"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// GitHub renders what people write with cmark-gfm (its fork of the
// CommonMark reference implementation), raw HTML let through, then passes
// the result through an allowlist sanitizer: elements it does not know
// lose their tags (their text stays), scripts and styles go with their
// content, and comments, processing instructions, declarations and CDATA
// (which a browser reads as comments) are dropped. The fake renders the
// same way with Debian's cmark-gfm, so what its body_html shows is what
// GitHub would show; where cmark-gfm is not installed it falls back to a
// rough rendering (approxRender) that tests of the rendering itself must
// not rely on: they ask CmarkGFM first.

// cmarkArgs are GitHub's extensions, raw HTML let through (--unsafe: the
// sanitizer, not the renderer, decides what stays), and a line break in an
// issue or a comment shown as one (--hardbreaks), as GitHub shows them.
var cmarkArgs = []string{"--unsafe", "--hardbreaks", "-e", "table", "-e", "strikethrough", "-e", "autolink", "-e", "tagfilter", "-e", "tasklist", "-e", "footnotes"}

// CmarkGFM is the path of cmark-gfm, or an error saying it is missing.
func CmarkGFM() (string, error) {
	p, err := exec.LookPath("cmark-gfm")
	if err != nil {
		return "", fmt.Errorf("cmark-gfm (GitHub's Markdown engine, Debian package cmark-gfm) is not installed: %w", err)
	}
	return p, nil
}

// renderGFM is body rendered by cmark-gfm as GitHub renders it, before
// sanitizing.
func renderGFM(body string) (string, error) {
	bin, err := CmarkGFM()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, cmarkArgs...)
	cmd.Stdin = strings.NewReader(body)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("cmark-gfm: %w: %s", err, errOut.String())
	}
	return out.String(), nil
}

// allowedElements are the elements GitHub's sanitizer keeps (its
// html-pipeline allowlist, with the task lists' inputs and the footnotes'
// section).
var allowedElements = map[atom.Atom]bool{}

// droppedElements go with their content.
var droppedElements = map[atom.Atom]bool{atom.Script: true, atom.Style: true, atom.Textarea: true, atom.Title: true,
	atom.Iframe: true, atom.Noscript: true, atom.Template: true, atom.Object: true, atom.Embed: true, atom.Head: true}

// allowedAttrs are the attributes kept on any element; href and src are
// kept on a and img when their scheme is one GitHub allows.
var allowedAttrs = map[string]bool{}

func init() {
	for _, a := range strings.Fields(`h1 h2 h3 h4 h5 h6 br b i strong em a pre code img tt div ins del sup sub p ol ul table
		thead tbody tfoot blockquote dl dt dd kbd q samp var hr ruby rt rp li tr td th s strike summary details caption figure
		figcaption abbr bdo cite dfn mark small span time wbr input section picture source`) {
		allowedElements[atom.Lookup([]byte(a))] = true
	}
	for _, a := range strings.Fields(`abbr accept align alt aria-describedby aria-hidden aria-label aria-labelledby border
		checked cite colspan datetime dir disabled headers height hreflang id itemprop lang open rel role rowspan scope span
		start summary tabindex target title type valign value width class data-footnotes data-footnote-ref
		data-footnote-backref data-footnote-backref-idx`) {
		allowedAttrs[a] = true
	}
}

// safeURL is a link or image address GitHub keeps: http(s), mailto, or
// relative.
var safeURL = regexp.MustCompile(`(?i)^(https?:|mailto:|[^:]*$)`)

// sanitize is cmark-gfm's output as GitHub's sanitizer leaves it, each
// image at the address GitHub serves it from (img).
func sanitize(rendered string, img func(src string, n *html.Node)) (string, error) {
	ctx := &html.Node{Type: html.ElementNode, Data: "body", DataAtom: atom.Body}
	nodes, err := html.ParseFragment(strings.NewReader(rendered), ctx)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, n := range nodes {
		for _, kept := range clean(n, img) {
			if err := html.Render(&b, kept); err != nil {
				return "", err
			}
		}
	}
	return b.String(), nil
}

// clean is what stays of n: itself with allowed attributes, its children
// alone (a tag the allowlist does not hold), or nothing.
func clean(n *html.Node, img func(string, *html.Node)) []*html.Node {
	switch n.Type {
	case html.TextNode:
		return []*html.Node{{Type: html.TextNode, Data: n.Data}}
	case html.ElementNode:
	default:
		return nil
	}
	if droppedElements[n.DataAtom] {
		return nil
	}
	var kids []*html.Node
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		kids = append(kids, clean(c, img)...)
	}
	if !allowedElements[n.DataAtom] {
		return kids
	}
	out := &html.Node{Type: html.ElementNode, Data: n.Data, DataAtom: n.DataAtom}
	for _, a := range n.Attr {
		switch {
		case a.Namespace != "":
		case (a.Key == "href" && n.DataAtom == atom.A) || (a.Key == "src" && n.DataAtom == atom.Img):
			if safeURL.MatchString(strings.TrimSpace(a.Val)) {
				out.Attr = append(out.Attr, html.Attribute{Key: a.Key, Val: a.Val})
			}
		case allowedAttrs[a.Key]:
			out.Attr = append(out.Attr, html.Attribute{Key: a.Key, Val: a.Val})
		}
	}
	for _, k := range kids {
		out.AppendChild(k)
	}
	if n.DataAtom == atom.Img {
		img(attrVal(out, "src"), out)
	}
	return []*html.Node{out}
}

func attrVal(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// setAttr sets n's attribute key to val.
func setAttr(n *html.Node, key, val string) {
	for i, a := range n.Attr {
		if a.Key == key {
			n.Attr[i].Val = val
			return
		}
	}
	n.Attr = append(n.Attr, html.Attribute{Key: key, Val: val})
}

// RenderGFM is body as GitHub renders it (cmark-gfm, then the sanitizer),
// its images where the Markdown points: for tests of what GitHub shows.
func RenderGFM(body string) (string, error) {
	out, err := renderGFM(body)
	if err != nil {
		return "", err
	}
	return sanitize(out, func(string, *html.Node) {})
}
