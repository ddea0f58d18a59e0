package app

import (
	"context"
	_ "embed"
	"errors"
	"net/http"
	"regexp"
	"slices"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/app/receipts"
	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/termtext"
	"github.com/sandbox-bot/sandbox-bot/handlers/sanitize"
)

// livePages serve /runs/<task-id>: a run as it happens (stages, the
// agent's steps, cost and tokens so far, streamed with Server-Sent
// Events), its receipt once it has ended, and, while it lives, its dev
// server (/runs/<task-id>/preview/, preview.go). They are mounted where
// the dashboard is and decide access the same way: by the repository's
// id, among those the signed-in person can read.
type livePages struct {
	backend dispatch.Backend
	store   receipts.Store
	// retention is how long transcripts are kept (0: none are).
	retention time.Duration
	secrets   *sanitize.Secrets
	feeds     *liveFeeds
	casts     *screencasts // live_screencast.go
	preview   *previewProxy
	log       zerolog.Logger
}

func newLivePages(b dispatch.Backend, store receipts.Store, retention time.Duration, secrets *sanitize.Secrets, log zerolog.Logger) *livePages {
	lp := &livePages{backend: b, store: store, retention: retention, secrets: secrets, feeds: newLiveFeeds(b, log), casts: newScreencasts(b, log), log: log}
	lp.preview = newPreviewProxy(lp)
	return lp
}

// mount adds the routes; gate is the dashboard's sign-in (or, on the
// admin listener, the operator's pass).
func (lp *livePages) mount(mux *http.ServeMux, si *signIn, gate func(h func(http.ResponseWriter, *http.Request, viewer), api bool) http.HandlerFunc) {
	mux.HandleFunc("GET /runs/live.js", serveLiveScript)
	mux.HandleFunc("GET /runs/{task}", gate(lp.page, false))
	mux.HandleFunc("GET /runs/{task}/events", gate(lp.events, true))
	mux.HandleFunc("GET /runs/{task}/transcript", gate(lp.transcript, true))
	mux.HandleFunc("GET /runs/{task}/preview", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Path+"/", http.StatusMovedPermanently)
	})
	mux.Handle("/runs/{task}/preview/", lp.preview.gate(si, gate(lp.preview.serve(si), false)))
}

func (lp *livePages) close() { lp.feeds.close() }

// liveRun is what the page knows of a run: the backend's view while it
// is known there, the receipt once one is kept, the transcript's head
// once its follower began keeping its lines.
type liveRun struct {
	Meta    dispatch.Meta
	State   dispatch.State // "" when the backend no longer knows the run
	Started time.Time
	Receipt *receipts.Run
	Head    *receipts.Head
}

// Title is the or PR's title: as the run ended, else as it
// started (untrusted text: the page escapes it).
func (r liveRun) Title() string {
	if r.Receipt != nil && r.Receipt.Title != "" {
		return r.Receipt.Title
	}
	if r.Head != nil {
		return r.Head.Title
	}
	return ""
}

// fromStore is true when the run's lines are read from the store: the
// backend has forgotten the run (its sandbox is gone), or the run has
// ended and its whole transcript is kept. A live run's lines come from
// the backend, which has them first.
func (r liveRun) fromStore() bool {
	return !r.Live() && r.Head != nil && (r.State == "" || r.Head.Whole)
}

// Live reports whether the run has not ended.
func (r liveRun) Live() bool { return r.State != "" && !r.State.Ended() }

// errNoRun is a run that does not exist or that the viewer may not see:
// both are a 404, so a page does not tell which runs exist elsewhere.
var errNoRun = errors.New("no such run")

// find returns the run if the viewer may see it.
func (lp *livePages) find(ctx context.Context, taskID string, v viewer, withReceipt bool) (liveRun, error) {
	if !dispatch.ValidTaskID(taskID) {
		return liveRun{}, errNoRun
	}
	var run liveRun
	st, err := lp.backend.Status(ctx, taskID)
	switch {
	case err == nil:
		run.Meta, run.State, run.Started = st.Meta, st.State, st.StartedAt
	case !errors.Is(err, dispatch.ErrNotFound):
		return run, err
	}
	// A live run the backend names the repository of needs no receipt;
	// the preview asks on every request, so this read is saved there.
	if run.Live() && run.Meta.RepoID != 0 && !withReceipt {
		return run, lp.allowed(run, v)
	}
	lp.fromRecords(ctx, &run, taskID)
	if run.State == "" && run.Receipt == nil && run.Head == nil {
		return run, errNoRun
	}
	return run, lp.allowed(run, v)
}

// fromRecords adds what the store keeps of the run: its receipt and its
// transcript's head, which name the run when the backend has forgotten it.
func (lp *livePages) fromRecords(ctx context.Context, run *liveRun, taskID string) {
	if h, err := lp.store.Head(ctx, taskID); err == nil {
		run.Head = &h
		if run.State == "" {
			run.Meta = dispatch.Meta{TaskID: h.TaskID, Mode: dispatch.Mode(h.Mode), Repo: h.Repo, RepoID: h.RepoID,
				Number: h.Number, InstallationID: h.InstallationID}
		}
	} else if !errors.Is(err, receipts.ErrNoTranscript) {
		lp.log.Warn().Err(err).Str("task_id", taskID).Msg("live page: read the run's transcript")
	}
	if page, err := lp.store.List(ctx, receipts.Filter{TaskID: taskID}, 0, 1); err == nil && len(page.Runs) > 0 {
		rec := page.Runs[0]
		run.Receipt = &rec
		if run.State == "" {
			run.Meta = dispatch.Meta{TaskID: rec.TaskID, Mode: dispatch.Mode(rec.Mode), Repo: rec.Repo, RepoID: rec.RepoID,
				Number: rec.Number, InstallationID: rec.InstallationID, Attempt: rec.Attempt}
		}
		if run.Meta.RepoID == 0 {
			run.Meta.RepoID = rec.RepoID
		}
	}
	if run.Meta.RepoID == 0 && run.Head != nil {
		run.Meta.RepoID = run.Head.RepoID
	}
}

// allowed: the operator (RepoIDs nil) sees every run; a person the runs of
// the repositories GitHub says they can read. A run whose repository id
// is not known (started by an older bot) is the operator's alone.
func (lp *livePages) allowed(run liveRun, v viewer) error {
	if v.RepoIDs != nil && (run.Meta.RepoID == 0 || !slices.Contains(v.RepoIDs, run.Meta.RepoID)) {
		return errNoRun
	}
	return nil
}

// backendUnclear is what a viewer reads when the backend's answer failed:
// its own words (a Nomad address, a docker command) go to the log only.
const backendUnclear = "the backend did not say how the run is; try again, or ask the operator (the bot's log says why)"

// findOr404 answers the request itself when the run cannot be shown.
func (lp *livePages) findOr404(w http.ResponseWriter, r *http.Request, v viewer, withReceipt bool) (liveRun, bool) {
	run, err := lp.find(r.Context(), r.PathValue("task"), v, withReceipt)
	switch {
	case errors.Is(err, errNoRun):
		http.Error(w, "no such run, or not in a repository you can read", http.StatusNotFound)
		return run, false
	case err != nil:
		lp.log.Warn().Err(err).Str("task_id", r.PathValue("task")).Msg("live page: ask the backend")
		http.Error(w, backendUnclear, http.StatusBadGateway)
		return run, false
	}
	return run, true
}

// credentialShapes are what a token or key looks like when the bot does
// not know its value (one minted by another replica): GitHub's token
// prefixes, and the common provider key prefixes.
var credentialShapes = regexp.MustCompile(`\b(gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{20,}|sk-[A-Za-z0-9_\-]{16,}|xox[abpr]-[A-Za-z0-9\-]{10,}|AKIA[0-9A-Z]{16})\b`)

// clean makes sandbox text safe to show: the runner redacted it already
// (its secrets and token, as in receipts); the bot redacts what it knows
// (every token it minted, SANDBOX_PASS_ENV), then anything shaped like a
// credential, and strips terminal escapes.
func (lp *livePages) clean(s string) string {
	s = lp.secrets.Redact(s)
	s = credentialShapes.ReplaceAllString(s, sanitize.RedactedText)
	return termtext.Clean(s)
}
