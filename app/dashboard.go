package app

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/app/receipts"
	"github.com/sandbox-bot/sandbox-bot/handlers"
)

// PageSize is how many runs one dashboard page lists.
const PageSize = 50

// dashboard serves the receipts every run left: /dashboard (HTML) and
// /api/runs (the same data as JSON). On the admin listener it shows every
// repository; on the public listener, where it is served only when the
// App's OAuth credentials are set, a person signs in with GitHub and sees
// the repositories their GitHub account can read in the App's
// installations.
type dashboard struct {
	store  receipts.Store
	signIn *signIn // nil: OAuth not configured, admin listener only
	log    zerolog.Logger
	// budgets are what the usage page shows beside the spend.
	budgets usageBudgets
	// routines lists every repository's routines (the server sets it).
	routines func(ctx context.Context) []handlers.RoutineView
}

// newDashboard opens the store (store.go) and, with OAuth configured, the
// sign-in.
func newDashboard(cfg *Config, log zerolog.Logger) (*dashboard, error) {
	store, err := openStore(cfg)
	if err != nil {
		return nil, err
	}
	d := &dashboard{store: store, log: log, budgets: usageBudgets{now: time.Now}}
	id, secret := cfg.GitHub.OAuth.ClientID, cfg.GitHub.OAuth.ClientSecret
	if (id == "") != (secret == "") {
		store.Close()
		return nil, fmt.Errorf("GITHUB_OAUTH_CLIENT_ID and GITHUB_OAUTH_CLIENT_SECRET: set both (the dashboard's GitHub sign-in) or neither")
	}
	if id != "" {
		if d.signIn, err = newSignIn(cfg, log); err != nil {
			store.Close()
			return nil, err
		}
	}
	return d, nil
}

// receiptsFor is what the handlers keep receipts with and link to: each
// receipt is stored with its repository's id, read from GitHub through
// the run's installation, with the bot's (paced) client creator cc.
func (d *dashboard) receiptsFor(cfg *Config, cc githubapp.ClientCreator) handlers.Receipts {
	rc := handlers.Receipts{Store: withRepoIDs{store: d.store, cc: cc, log: d.log}}
	if d.signIn != nil && cfg.PublicURL != "" {
		rc.DashboardURL = strings.TrimSuffix(cfg.PublicURL, "/") + "/dashboard"
		rc.PublicURL = cfg.PublicURL
	}
	return rc
}

func (d *dashboard) close() error { return d.store.Close() }

// mountPublic serves the dashboard behind GitHub sign-in, when configured.
func (d *dashboard) mountPublic(mux *http.ServeMux) {
	if d.signIn == nil {
		return
	}
	mux.HandleFunc("GET /dashboard/login", d.signIn.login)
	mux.HandleFunc("GET /dashboard/callback", d.signIn.callback)
	mux.HandleFunc("POST /dashboard/logout", d.signIn.logout)
	mux.HandleFunc("GET /dashboard/style.css", serveStyle)
	mux.HandleFunc("GET /dashboard", d.signedIn(d.page, false))
	mux.HandleFunc("GET /dashboard/usage", d.signedIn(d.usage, false))
	mux.HandleFunc("GET /dashboard/usage.csv", d.signedIn(d.usageCSV, false))
	mux.HandleFunc("GET /api/runs", d.signedIn(d.api, true))
}

// mountAdmin serves the dashboard on the admin listener, every repository
// and no sign-in: whoever reaches that listener is the operator.
func (d *dashboard) mountAdmin(mux *http.ServeMux) {
	all := func(h func(http.ResponseWriter, *http.Request, viewer)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { h(w, r, viewer{}) }
	}
	mux.HandleFunc("GET /dashboard/style.css", serveStyle)
	mux.HandleFunc("GET /dashboard", all(d.page))
	mux.HandleFunc("GET /dashboard/usage", all(d.usage))
	mux.HandleFunc("GET /dashboard/usage.csv", all(d.usageCSV))
	mux.HandleFunc("GET /api/runs", all(d.api))
}

// viewer is who reads the dashboard: RepoIDs nil is the operator (every
// repository); a signed-in person sees the repositories GitHub says they
// can read, by id, so a receipt stays with its repository through a
// rename or a transfer and never goes to a new repository of the old name.
type viewer struct {
	Login   string
	RepoIDs []int64
}

// signedIn refuses requests without a session: HTML goes to sign-in,
// /api/runs gets 401. A session's repositories come from GitHub.
func (d *dashboard) signedIn(h func(http.ResponseWriter, *http.Request, viewer), api bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, ok := d.signIn.current(r)
		if !ok {
			if api {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				_ = json.NewEncoder(w).Encode(map[string]string{"error": "sign in at /dashboard/login first (GitHub sign-in)"})
				return
			}
			http.Redirect(w, r, "/dashboard/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusFound)
			return
		}
		repos, err := d.signIn.repos(r.Context(), s)
		if err != nil {
			d.log.Warn().Err(err).Str("user", s.Login).Msg("dashboard: read the person's repositories")
			http.Error(w, "read your repositories on GitHub: "+err.Error(), http.StatusBadGateway)
			return
		}
		h(w, r, viewer{Login: s.Login, RepoIDs: repos})
	}
}

// query is a dashboard request: the filter and the page.
type query struct {
	Filter             receipts.Filter
	Repo, Mode, Status string
	From, To, Task     string
	Page               int
}

// parseQuery reads the filters from the URL; dates are YYYY-MM-DD in UTC,
// "to" inclusive.
func parseQuery(r *http.Request, v viewer) (query, error) {
	q := r.URL.Query()
	out := query{Repo: q.Get("repo"), Mode: q.Get("mode"), Status: q.Get("status"), From: q.Get("from"), To: q.Get("to"), Task: q.Get("task"), Page: 1}
	out.Filter = receipts.Filter{RepoIDs: v.RepoIDs, Repo: out.Repo, Mode: out.Mode, Status: out.Status, TaskID: out.Task}
	if out.From != "" {
		t, err := time.Parse(time.DateOnly, out.From)
		if err != nil {
			return out, fmt.Errorf("from: %q is not a date (YYYY-MM-DD)", out.From)
		}
		out.Filter.From = t
	}
	if out.To != "" {
		t, err := time.Parse(time.DateOnly, out.To)
		if err != nil {
			return out, fmt.Errorf("to: %q is not a date (YYYY-MM-DD)", out.To)
		}
		out.Filter.To = t.Add(24 * time.Hour)
	}
	if p := q.Get("page"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			return out, fmt.Errorf("page: %q is not a page number", p)
		}
		out.Page = n
	}
	return out, nil
}

// data is everything one dashboard view shows.
type data struct {
	Viewer string `json:"viewer,omitempty"`
	// Routines are the routines of the repositories the viewer reads,
	// with their next tick, last run and result (handlers/routines.go).
	Routines []handlers.RoutineView `json:"routines"`
	Runs     receipts.Page          `json:"page"`
	Stats    receipts.Stats         `json:"stats"`
	Repos    []string               `json:"repositories"`
	Query    query                  `json:"-"`
}

func (d *dashboard) load(ctx context.Context, q query, v viewer) (data, error) {
	out := data{Viewer: v.Login, Query: q, Routines: d.routinesOf(ctx, v)}
	var err error
	if out.Repos, err = d.store.Repos(ctx, q.Filter); err != nil {
		return out, err
	}
	return out, d.figures(ctx, &out)
}

// figures reads the stats and the page of runs of out.Query.
func (d *dashboard) figures(ctx context.Context, out *data) error {
	var err error
	if out.Stats, err = d.store.Stats(ctx, out.Query.Filter); err != nil {
		return err
	}
	out.Runs, err = d.store.List(ctx, out.Query.Filter, (out.Query.Page-1)*PageSize, PageSize)
	return err
}

func (d *dashboard) api(w http.ResponseWriter, r *http.Request, v viewer) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "private, no-store")
	q, err := parseQuery(r, v)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
		return
	}
	out, err := d.load(r.Context(), q, v)
	if err != nil {
		d.log.Error().Err(err).Msg("dashboard: read receipts")
		w.WriteHeader(http.StatusInternalServerError)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "read receipts: " + err.Error()})
		return
	}
	_ = json.NewEncoder(w).Encode(out)
}

func (d *dashboard) page(w http.ResponseWriter, r *http.Request, v viewer) {
	q, err := parseQuery(r, v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	out := data{Viewer: v.Login, Query: q, Routines: d.routinesOf(r.Context(), v)}
	if out.Repos, err = d.store.Repos(r.Context(), q.Filter); err != nil {
		d.log.Error().Err(err).Msg("dashboard: read receipts")
		http.Error(w, "read receipts: "+err.Error(), http.StatusInternalServerError)
		return
	}
	pageHeaders(w)
	if err := renderHead(w, out); err != nil {
		d.log.Warn().Err(err).Msg("dashboard: render")
		return
	}
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	if err := d.figures(r.Context(), &out); err != nil {
		// The status is sent: say it on the page.
		d.log.Error().Err(err).Msg("dashboard: read receipts")
		fmt.Fprintf(w, "<p class=\"error\">Could not read the receipts: %s</p></body></html>", template.HTMLEscapeString(err.Error()))
		return
	}
	if err := renderBody(w, out); err != nil {
		d.log.Warn().Err(err).Msg("dashboard: render")
	}
}

// pageHeaders are the headers of a dashboard page: private, never
// cached, and a page that runs no script and loads nothing from
// elsewhere.
func pageHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "private, no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'")
}

// routinesOf are the routines of the repositories v reads (every one for
// the operator).
func (d *dashboard) routinesOf(ctx context.Context, v viewer) []handlers.RoutineView {
	if d.routines == nil {
		return nil
	}
	var out []handlers.RoutineView
	for _, r := range d.routines(ctx) {
		if v.RepoIDs == nil || slices.Contains(v.RepoIDs, r.RepoID) {
			out = append(out, r)
		}
	}
	return out
}

//go:embed dashboard.css
var dashboardCSS []byte

// serveStyle serves the dashboard's stylesheet, a static file.
func serveStyle(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Header().Set("Cache-Control", "public, max-age=3600")
	_, _ = w.Write(dashboardCSS)
}
