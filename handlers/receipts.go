package handlers

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/termtext"
	"github.com/sandbox-bot/sandbox-bot/handlers/follow"
	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
	"github.com/sandbox-bot/sandbox-bot/handlers/markers"
	"github.com/sandbox-bot/sandbox-bot/handlers/sanitize"
)

// ReceiptStore keeps the receipts of ended runs (the server keeps them in
// its store, for the dashboard and the runs' pages).
type ReceiptStore interface {
	Keep(ctx context.Context, r EndedRun) error
}

// EndedRun is what the handlers know of a run once its result is known:
// its receipt, as the store keeps it.
type EndedRun struct {
	Meta dispatch.Meta
	// Issue is the issue whose text was the task (a PR run's issue).
	Issue int
	// Title is the issue's or PR's title, redacted and without terminal
	// escapes: untrusted text, escaped where it is shown.
	Title  string
	Status string
	Branch string
	URL    string
	Error  string
	Usage  dispatch.TokenUsage
	// CostKnown: the run's result named what it cost (costOf, the rule
	// the budgets settle by); an unknown cost is never shown as $0.
	CostKnown       bool
	DurationSeconds float64
	EndedAt         time.Time
}

// TranscriptStore keeps every run's progress lines as its follower reads
// them, so the run's page shows them after the sandbox is gone. Each
// follower of a run (this replica's, another's, a restarted bot's) keeps
// them, numbered by their place in the run's log: the store keeps each
// number once.
type TranscriptStore interface {
	// Transcript starts keeping the run's lines; title is its issue's or
	// PR's title ("" when it could not be read).
	Transcript(ctx context.Context, meta dispatch.Meta, title string) follow.Transcript
}

// Receipts is where the bot keeps every receipt it sees end and every
// run's transcript, and where people read them.
type Receipts struct {
	// Store is nil when receipts are not kept (tests without a data dir).
	Store ReceiptStore
	// Transcripts is nil when transcripts are not kept.
	Transcripts TranscriptStore
	// DashboardURL is the dashboard's public address, for the link on each
	// run's check run; "" leaves the link out.
	DashboardURL string
	// PublicURL is where people reach the bot, when its pages are served
	// there (sign-in configured): each run's live page is
	// <PublicURL>/runs/<task-id>. "" leaves the links out.
	PublicURL string
}

// LiveURL is the run's live page, or "".
func (rc Receipts) LiveURL(taskID string) string {
	if rc.PublicURL == "" {
		return ""
	}
	return strings.TrimSuffix(rc.PublicURL, "/") + "/runs/" + url.PathEscape(taskID)
}

// EntryURL is the dashboard entry of one run, or "".
func (rc Receipts) EntryURL(taskID string) string {
	if rc.DashboardURL == "" {
		return ""
	}
	return strings.TrimSuffix(rc.DashboardURL, "/") + "?task=" + url.QueryEscape(taskID)
}

// RunURL is where a person reads one run after the fact: its page (its
// steps and its receipt) when the bot serves pages, else its dashboard
// entry, else "".
func (rc Receipts) RunURL(taskID string) string {
	if u := rc.LiveURL(taskID); u != "" {
		return u
	}
	return rc.EntryURL(taskID)
}

// noTranscript keeps nothing (transcripts not kept).
type noTranscript struct{}

func (noTranscript) Line(int, dispatch.Progress) {}
func (noTranscript) Close(bool)                  {}

// transcript starts keeping a run's lines, named by its issue's or PR's
// title as it is now.
func (rk *resultKeeper) transcript(ctx context.Context, gh hub.GitHub, meta dispatch.Meta) follow.Transcript {
	if rk.c.Receipts.Transcripts == nil {
		return noTranscript{}
	}
	return rk.c.Receipts.Transcripts.Transcript(ctx, meta, rk.title(ctx, gh, meta.Number))
}

// title is the issue's or PR's title, made safe to keep: it names the run
// on the dashboard and on its page, as untrusted text escaped where it is
// shown. "" when GitHub does not answer.
func (rk *resultKeeper) title(ctx context.Context, gh hub.GitHub, number int) string {
	is, err := gh.Issue(ctx, number)
	if err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("read the title of the run's issue")
		return ""
	}
	return plainText(rk.c.Secrets, is.GetTitle(), 300)
}

// plainText is s, read from GitHub or a check, as the bot passes it on:
// terminal escapes and control characters out, sec's secrets redacted,
// cut to n bytes.
func plainText(sec *sanitize.Secrets, s string, n int) string {
	return sanitize.TruncateUTF8(sec.Redact(termtext.Clean(s)), n)
}

// keepReceipt stores the run's figures once its result is known. res has
// been vetted (vetResult): its error text is redacted like everything the
// bot posts. A failure to store is logged, never fatal: the result on
// GitHub matters more.
func (rk *resultKeeper) keepReceipt(ctx context.Context, rc *runContext, res *dispatch.Result) {
	if rk.c.Receipts.Store == nil {
		return
	}
	status := string(statusOf(res))
	if _, aborted := rk.runs.AbortedBy(rc.meta.TaskID); aborted {
		status = "aborted"
	} else if _, marked := markers.Last(rc.marked, markers.KindAbortRequested, rc.meta.TaskID); marked {
		status = "aborted"
	}
	run := EndedRun{
		Meta: rc.meta, Issue: rc.issue, Status: status, Branch: rc.branch,
		URL:     fmt.Sprintf("%s/%s/issues/%d", strings.TrimSuffix(rk.c.WebURL, "/"), rc.meta.Repo, rc.meta.Number),
		EndedAt: rk.c.Now().UTC(),
	}
	if res != nil {
		if res.Branch != "" {
			run.Branch = res.Branch
		}
		run.Usage, run.DurationSeconds = res.TokenUsage, res.DurationSeconds
		_, run.CostKnown = costOf(res)
		if res.Error != nil {
			run.Error = sanitize.TruncateUTF8(res.Error.Message, 500)
		}
	}
	run.Title = rk.title(ctx, rc.gh, rc.meta.Number)
	if err := rk.c.Receipts.Store.Keep(context.WithoutCancel(ctx), run); err != nil {
		zerolog.Ctx(ctx).Error().Err(err).Msg("keep the run's receipt for the dashboard")
	}
}
