package githubtest

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"html"

	nethtml "golang.org/x/net/html"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// GitHub's rendering of the text people write (body_html, which the API
// adds when asked with the application/vnd.github.full+json or
// .html+json media type) and the attachments in it. An image uploaded to
// an issue is written in the markdown as <web>/user-attachments/assets/<id>,
// which for a private repository answers only a signed-in browser; the
// rendering points at a short-lived signed URL of the image host instead
// (private-user-images.githubusercontent.com?jwt=…), and an image from
// anywhere else at GitHub's image proxy (camo), with the original in
// data-canonical-src. HTML comments are not rendered at all.

// Attachment is a file uploaded to an issue or comment.
type Attachment struct {
	ID, Name string
	Data     []byte
	// Fetches counts the downloads of its signed URL.
	Fetches int
}

// signedURLLifetime is how long a signed URL in a rendering answers, as
// GitHub's (five minutes).
const signedURLLifetime = 5 * time.Minute

// AddAttachment uploads data as name and returns the URL the markdown
// names it by (<web>/user-attachments/assets/<id>).
func (s *Server) AddAttachment(name string, data []byte) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	id := fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.attachments == nil {
		s.attachments = map[string]*Attachment{}
	}
	s.attachments[id] = &Attachment{ID: id, Name: name, Data: data}
	return s.WebURL() + "/user-attachments/assets/" + id
}

// AttachmentFetches is how often the attachment at url (as AddAttachment
// returned it) was downloaded.
func (s *Server) AttachmentFetches(url string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.attachments[strings.TrimPrefix(url, s.WebURL()+"/user-attachments/assets/")]; a != nil {
		return a.Fetches
	}
	return 0
}

func (s *Server) renderedRoutes(h func(string, func(http.ResponseWriter, *http.Request, *Repo))) {
	h("GET /repos/{owner}/{repo}/pulls/{number}/reviews/{id}", s.getReview)
}

// unauthenticated are the paths a client reaches without a token: the
// signed image URLs and the web's attachment links.
func unauthenticated(path string) bool {
	return strings.HasPrefix(path, "/private-user-images/") || strings.HasPrefix(path, "/camo/") ||
		strings.HasPrefix(path, "/web/user-attachments/") || strings.HasPrefix(path, "/job-logs/")
}

// serveUnauthenticated answers those paths; false when path is not one.
func (s *Server) serveUnauthenticated(w http.ResponseWriter, r *http.Request) bool {
	switch {
	case !unauthenticated(r.URL.Path):
		return false
	case strings.HasPrefix(r.URL.Path, "/private-user-images/"):
		s.servePrivateImage(w, r)
	case strings.HasPrefix(r.URL.Path, "/job-logs/"):
		s.serveJobLog(w, r)
	default:
		// A private repository's attachment link without a session, and
		// the proxy of an image on the internet, which the fake cannot
		// reach.
		http.NotFound(w, r)
	}
	return true
}

// rendered asks for body_html.
func rendered(r *http.Request) bool {
	a := r.Header.Get("Accept")
	return strings.Contains(a, "full+json") || strings.Contains(a, "html+json")
}

var (
	htmlComment  = regexp.MustCompile(`(?s)<!--.*?(-->|$)`)
	mdImage      = regexp.MustCompile(`!\[([^\]]*)\]\(([^)\s]+)\)`)
	htmlImage    = regexp.MustCompile(`(?i)<img\b[^>]*?\bsrc="([^"]+)"[^>]*>`)
	htmlAlt      = regexp.MustCompile(`(?i)\balt="([^"]*)"`)
	bareAttached = regexp.MustCompile(`(?m)^\s*(https?://\S+/user-attachments/assets/[0-9a-f-]+)\s*$`)
)

// render is body as GitHub renders it (markdown.go): cmark-gfm, the
// sanitizer, and each image at its signed URL or behind the image proxy.
// Without cmark-gfm it is approxRender's rough rendering.
func (s *Server) render(body string) string {
	out, err := renderGFM(body)
	if err != nil {
		return s.approxRender(body)
	}
	// A bare attachment link on a line of its own is shown as the image.
	out = bareAttachedHTML.ReplaceAllStringFunc(out, func(m string) string {
		sm := bareAttachedHTML.FindStringSubmatch(m)
		if sm[1] != sm[2] {
			return m
		}
		return `<p><img src="` + sm[1] + `" alt=""></p>`
	})
	clean, err := sanitize(out, s.proxyImage)
	if err != nil {
		return ""
	}
	return clean
}

// bareAttachedHTML is cmark-gfm's autolink of a bare attachment address
// alone in a paragraph.
var bareAttachedHTML = regexp.MustCompile(`<p><a href="(https?://[^"]+/user-attachments/assets/[0-9a-f-]+)">(https?://[^<]+)</a></p>`)

// proxyImage points an <img> where GitHub serves it from: an attachment
// at its signed URL, anything else through the image proxy with the
// original in data-canonical-src.
func (s *Server) proxyImage(src string, n *nethtml.Node) {
	if id, ok := strings.CutPrefix(src, s.WebURL()+"/user-attachments/assets/"); ok && s.attachments[id] != nil {
		setAttr(n, "src", s.signedImageURL(s.attachments[id]))
	} else if src != "" {
		setAttr(n, "src", s.srv.URL+"/camo/"+hex.EncodeToString([]byte(src)))
		setAttr(n, "data-canonical-src", src)
	}
	setAttr(n, "style", "max-width: 100%;")
}

// approxRender is a rough rendering for machines without cmark-gfm:
// paragraphs of escaped text and the images, comments dropped.
func (s *Server) approxRender(body string) string {
	body = htmlComment.ReplaceAllString(body, "")
	var images []string
	keep := func(src, alt string) string {
		images = append(images, s.imgTag(src, alt))
		return fmt.Sprintf("\x00%d\x00", len(images)-1)
	}
	body = htmlImage.ReplaceAllStringFunc(body, func(m string) string {
		alt := ""
		if a := htmlAlt.FindStringSubmatch(m); a != nil {
			alt = a[1]
		}
		return keep(htmlImage.FindStringSubmatch(m)[1], alt)
	})
	body = mdImage.ReplaceAllStringFunc(body, func(m string) string {
		sm := mdImage.FindStringSubmatch(m)
		return keep(sm[2], sm[1])
	})
	body = bareAttached.ReplaceAllStringFunc(body, func(m string) string { return keep(strings.TrimSpace(m), "") })
	var out strings.Builder
	for _, para := range strings.Split(strings.TrimSpace(body), "\n\n") {
		text := html.EscapeString(para)
		for i, tag := range images {
			text = strings.ReplaceAll(text, fmt.Sprintf("\x00%d\x00", i), tag)
		}
		out.WriteString("<p dir=\"auto\">" + strings.ReplaceAll(text, "\n", "<br>\n") + "</p>\n")
	}
	return out.String()
}

// imgTag is an image as GitHub renders it: an attachment at its signed
// URL, anything else through the image proxy.
func (s *Server) imgTag(src, alt string) string {
	if id, ok := strings.CutPrefix(src, s.WebURL()+"/user-attachments/assets/"); ok && s.attachments[id] != nil {
		signed := s.signedImageURL(s.attachments[id])
		return fmt.Sprintf(`<a target="_blank" rel="noopener noreferrer" href="%s"><img src="%s" alt="%s" style="max-width: 100%%;"></a>`,
			html.EscapeString(signed), html.EscapeString(signed), html.EscapeString(alt))
	}
	camo := s.srv.URL + "/camo/" + hex.EncodeToString([]byte(src))
	return fmt.Sprintf(`<img src="%s" alt="%s" data-canonical-src="%s" style="max-width: 100%%;">`,
		html.EscapeString(camo), html.EscapeString(alt), html.EscapeString(src))
}

// signedImageURL is a's URL on the image host, good for five minutes;
// callers hold mu.
func (s *Server) signedImageURL(a *Attachment) string {
	exp := time.Now().Add(signedURLLifetime).Unix()
	return fmt.Sprintf("%s/private-user-images/%s/%s?jwt=%s&exp=%d", s.srv.URL, a.ID, a.Name, s.sign(a.ID, exp), exp)
}

// sign is the signature of a download of what id names until exp.
func (s *Server) sign(id string, exp int64) string {
	if s.signKey == nil {
		s.signKey = make([]byte, 32)
		_, _ = rand.Read(s.signKey)
	}
	m := hmac.New(sha256.New, s.signKey)
	fmt.Fprintf(m, "%s\x00%d", id, exp)
	return hex.EncodeToString(m.Sum(nil))
}

// signedOK reports whether r carries a live signature for id; callers
// hold mu.
func (s *Server) signedOK(r *http.Request, id, param string) bool {
	exp, err := strconv.ParseInt(r.URL.Query().Get("exp"), 10, 64)
	return err == nil && time.Now().Unix() <= exp && hmac.Equal([]byte(r.URL.Query().Get(param)), []byte(s.sign(id, exp)))
}

// servePrivateImage answers a signed image URL, and nothing else.
func (s *Server) servePrivateImage(w http.ResponseWriter, r *http.Request) {
	id, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/private-user-images/"), "/")
	s.mu.Lock()
	a := s.attachments[id]
	ok := a != nil && s.signedOK(r, id, "jwt")
	if ok {
		a.Fetches++
		s.notify()
	}
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", http.DetectContentType(a.Data))
	_, _ = w.Write(a.Data)
}

// listOrOne answers GET <kind>/{number}/comments with list and
// <kind>/comments/{id} with one: Go's mux will not tell the two patterns
// apart, so they share one, {number}/{what}.
func listOrOne(list, one func(http.ResponseWriter, *http.Request, *Repo)) func(http.ResponseWriter, *http.Request, *Repo) {
	return func(w http.ResponseWriter, r *http.Request, repo *Repo) {
		switch {
		case r.PathValue("what") == "comments":
			list(w, r, repo)
		case r.PathValue("number") == "comments":
			one(w, r, repo)
		default:
			writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		}
	}
}

func (s *Server) getComment(w http.ResponseWriter, r *http.Request, repo *Repo) {
	id, _ := strconv.ParseInt(r.PathValue("what"), 10, 64)
	iss, c := s.findComment(repo, id)
	if c == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	s.writeRendered(w, r, s.commentJSON(repo, iss.Number, c), c.Body)
}

func (s *Server) getReview(w http.ResponseWriter, r *http.Request, repo *Repo) {
	iss := repo.Issues[number(r)]
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if iss != nil && iss.PR != nil {
		for _, rv := range iss.PR.Reviews {
			if rv.ID == id {
				s.writeRendered(w, r, s.reviewJSON(rv), rv.Body)
				return
			}
		}
	}
	writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
}

func (s *Server) getReviewComment(w http.ResponseWriter, r *http.Request, repo *Repo) {
	id, _ := strconv.ParseInt(r.PathValue("what"), 10, 64)
	for _, iss := range repo.Issues {
		if iss.PR == nil {
			continue
		}
		for _, c := range iss.PR.ReviewComments {
			if c.ID == id {
				s.writeRendered(w, r, s.reviewCommentJSON(c), c.Body)
				return
			}
		}
	}
	writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
}

// writeRendered answers with out, and its body's rendering when r asked.
func (s *Server) writeRendered(w http.ResponseWriter, r *http.Request, out map[string]any, body string) {
	s.withHTML(r, out, body)
	writeJSON(w, http.StatusOK, out)
}

// withHTML adds body_html (and body_text) to out when r asked for them.
func (s *Server) withHTML(r *http.Request, out map[string]any, body string) {
	if rendered(r) {
		out["body_html"] = s.render(body)
		out["body_text"] = htmlComment.ReplaceAllString(body, "")
	}
}
