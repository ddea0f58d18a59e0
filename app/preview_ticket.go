package app

import (
	"net/http"
	"strings"
	"time"
)

// Path mode. A preview's page runs in an opaque origin (its CSP sandbox),
// so the browser sends no cookie of the bot's with the page's own requests
// for its scripts, styles and images. Once a person's access to the run is
// checked (their session, top-level), the bot sends the browser to the
// run's preview under a ticket in the path, /runs/<task-id>/preview/~<ticket>/,
// sealed like the session and good for previewTicketTTL: the page's
// relative requests carry it, and the bot strips it before the dev server
// sees the path. A ticket names one run and the person it was made for
// (whose connection bounds it counts against); past its time the bot
// sends the browser back through the session check for a new one. It is a
// bearer capability while it lasts: the preview's responses send no
// Referer.
const previewTicketTTL = 30 * time.Minute

type previewTicket struct {
	Task    string    `json:"task"`
	Viewer  string    `json:"viewer,omitempty"`
	Expires time.Time `json:"exp"`
}

// ticketOf splits "~<ticket>/rest" off the path after /runs/<task>/preview.
func ticketOf(r *http.Request) (ticket, rest string, ok bool) {
	after := strings.TrimPrefix(r.URL.Path, "/runs/"+r.PathValue("task")+"/preview/")
	if !strings.HasPrefix(after, "~") {
		return "", after, false
	}
	ticket, rest, _ = strings.Cut(after[1:], "/")
	return ticket, rest, true
}

// gate serves a request under a valid ticket for this run without the
// session; one under a stale ticket goes back for a new one; any other
// goes through signedIn. With a preview domain the bot's origin serves no
// preview at all: every request goes through signedIn, which hands the
// browser over to the preview's own origin.
func (p *previewProxy) gate(si *signIn, signedIn http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ticket, rest, ok := ticketOf(r)
		if si == nil || !ok || p.origin != nil {
			signedIn(w, r)
			return
		}
		task := r.PathValue("task")
		var t previewTicket
		if si.open(ticket, &t) != nil || t.Task != task || time.Now().After(t.Expires) {
			u := *r.URL
			u.Path, u.RawPath = "/runs/"+task+"/preview/"+rest, ""
			http.Redirect(w, r, u.RequestURI(), http.StatusFound)
			return
		}
		p.forwardLive(w, r, task, "ticket:"+t.Viewer, "/runs/"+task+"/preview")
	}
}

// sendToTicket answers a session-checked request without a ticket with a
// redirect to the same place under a fresh one; false when no ticket is
// needed (the admin listener) or none could be made.
func (p *previewProxy) sendToTicket(w http.ResponseWriter, r *http.Request, si *signIn, task, login string) bool {
	if si == nil {
		return false
	}
	if _, _, ok := ticketOf(r); ok {
		return false
	}
	sealed, err := si.seal(previewTicket{Task: task, Viewer: login, Expires: time.Now().Add(previewTicketTTL)})
	if err != nil {
		return false
	}
	u := *r.URL
	u.Path = "/runs/" + task + "/preview/~" + sealed + "/" + strings.TrimPrefix(r.URL.Path, "/runs/"+task+"/preview/")
	u.RawPath = ""
	w.Header().Set("Referrer-Policy", "no-referrer")
	http.Redirect(w, r, u.RequestURI(), http.StatusFound)
	return true
}
