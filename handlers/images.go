package handlers

import (
	"context"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"

	"github.com/rs/zerolog"
	"golang.org/x/net/html"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
	"github.com/sandbox-bot/sandbox-bot/handlers/markers"
	"github.com/sandbox-bot/sandbox-bot/handlers/sanitize"
)

// The pictures people attach reach the agent as images. The bot finds
// them in the text GitHub rendered (body_html, whose image addresses for a
// private repository are short-lived signed URLs), only in text that
// reaches the agent anyway (the issue, writers' comments, the feedback of
// a revise), fetches them itself from GitHub's hosts alone, keeps those
// whose bytes are PNG, JPEG, GIF or WebP within the caps, and puts them in
// the work order. What it could not pass is named with the reason.

// imageSource is a text whose images the agent may see, and what to call
// it for people.
type imageSource struct {
	What string      `json:"what"`
	Ref  hub.BodyRef `json:"ref"`
	// markdown is the text as written, to skip texts without an image
	// (it is not kept with a queued request: those carry only texts that
	// hold one).
	markdown string
	// rendered is GitHub's rendering when the run read it already (an
	// outsider's report: the one its vouch was checked against), so the
	// images are the quoted text's and it is not read twice.
	rendered string
}

// mayHoldImage is a cheap look at the markdown before GitHub is asked for
// the rendered text: image syntax, an <img>, or a bare attachment link
// (which GitHub shows as an image).
var mayHoldImage = regexp.MustCompile(`(?i)!\[|<img|/user-attachments/assets/|user-images\.githubusercontent\.com`)

// withImages keeps the sources that may hold an image.
func withImages(sources []imageSource) []imageSource {
	var out []imageSource
	for _, s := range sources {
		if mayHoldImage.MatchString(s.markdown) {
			out = append(out, s)
		}
	}
	return out
}

// maxImageNotes is how many images not given a run's comments name one
// by one; the rest are counted in one line, so the acknowledgement and
// the plan comment stay within GitHub's 65,536 characters whatever the
// text holds.
const maxImageNotes = 20

// imagesFor fetches the images of sources (in order) for a run, within
// the caps: what the agent is given, and a note for each image found (the
// first maxImageNotes of those not given, then how many more). Every
// request counts, an image's or not: at most twice MaxCount are made, and
// the bytes of those refused count toward MaxTotal, so a text full of
// links to large non-images costs a bounded fetch, not one per link.
func (a agentRun) imagesFor(ctx context.Context, gh hub.GitHub, sources []imageSource) ([]dispatch.Image, []markers.ImageNote) {
	caps := a.imageCaps()
	if caps.MaxCount <= 0 || len(sources) == 0 {
		return nil, nil
	}
	f := &imageFetches{a: a, caps: caps}
	for _, src := range sources {
		rendered := src.rendered
		if rendered == "" {
			r, err := gh.BodyHTML(ctx, src.Ref)
			if err != nil {
				zerolog.Ctx(ctx).Warn().Err(err).Str("source", src.What).Msg("read the rendered text for its images")
				f.note(markers.ImageNote{Name: "the images of " + src.What, Why: "GitHub's rendered text could not be read"})
				continue
			}
			rendered = r.HTML
		}
		for i, found := range imgSources(rendered) {
			name := fmt.Sprintf("%s, image %d%s", src.What, i+1, found.label())
			f.take(ctx, markers.ImageNote{Name: sanitize.Inline(name, 160)}, found.src)
		}
	}
	if f.unlisted > 0 {
		f.notes = append(f.notes, markers.ImageNote{Name: fmt.Sprintf("%d more images", f.unlisted),
			Why: fmt.Sprintf("not listed one by one (the first %d not given are above)", maxImageNotes)})
	}
	return f.imgs, f.notes
}

// imageFetches is one run's fetching of images: what it was given, what
// it spent, and its notes.
type imageFetches struct {
	a        agentRun
	caps     ImageSettings
	imgs     []dispatch.Image
	notes    []markers.ImageNote
	total    int64 // bytes read, images or not
	attempts int
	skipped  int // notes of images not given
	unlisted int // of those, not listed
}

// take fetches one image when the caps leave room, and notes it.
func (f *imageFetches) take(ctx context.Context, note markers.ImageNote, src string) {
	switch {
	case len(f.imgs) >= f.caps.MaxCount:
		note.Why = fmt.Sprintf("over the %d images a run is given", f.caps.MaxCount)
	case f.attempts >= 2*f.caps.MaxCount:
		note.Why = fmt.Sprintf("not fetched: a run tries at most %d images (twice the %d it is given)", 2*f.caps.MaxCount, f.caps.MaxCount)
	case f.total >= f.caps.MaxTotal:
		note.Why = fmt.Sprintf("over the %s of images a run is given", byteSize(f.caps.MaxTotal))
	default:
		img, read, tried, why := f.a.fetchImage(ctx, src, f.caps, f.caps.MaxTotal-f.total)
		if tried {
			f.attempts++
		}
		f.total += read
		if note.Why = why; why == "" {
			img.Name = note.Name
			f.imgs = append(f.imgs, img)
		}
	}
	f.note(note)
}

// note keeps a note; of the images not given, the first maxImageNotes.
func (f *imageFetches) note(n markers.ImageNote) {
	if n.Why != "" {
		if f.skipped++; f.skipped > maxImageNotes {
			f.unlisted++
			return
		}
	}
	f.notes = append(f.notes, n)
}

// foundImage is an <img> of the rendered text.
type foundImage struct{ src, alt string }

// label is what the image is called after its place: its alt text, or
// the last part of its path (never the query, where a signature is).
func (f foundImage) label() string {
	name := strings.TrimSpace(f.alt)
	if name == "" || strings.EqualFold(name, "image") {
		if u, err := url.Parse(f.src); err == nil {
			name = path.Base(u.Path)
		}
	}
	if name == "" || name == "." || name == "/" {
		return ""
	}
	return " (" + name + ")"
}

// imgSources lists the <img> elements of GitHub's rendered HTML, in
// order.
func imgSources(rendered string) []foundImage {
	var out []foundImage
	z := html.NewTokenizer(strings.NewReader(rendered))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return out
		case html.StartTagToken, html.SelfClosingTagToken:
			t := z.Token()
			if t.Data != "img" {
				continue
			}
			var f foundImage
			for _, a := range t.Attr {
				switch a.Key {
				case "src":
					f.src = a.Val
				case "alt":
					f.alt = a.Val
				}
			}
			if f.src != "" {
				out = append(out, f)
			}
		}
	}
}
