package handlers

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/app/receipts"
	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/termtext"
)

// ReceiptStore keeps the receipts of ended runs (receipts.Store).
type ReceiptStore interface {
	Put(ctx context.Context, r receipts.Run) error
}

// Receipts is where the bot keeps every receipt it sees end, and where
// people read them.
type Receipts struct {
	// Store is nil when receipts are not kept (tests without a data dir).
	Store ReceiptStore
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

// keepReceipt stores the run's figures once its result is known. res has
// been vetted (vetResult): its error text is redacted like everything the
// bot posts. A failure to store is logged, never fatal: the result on
// GitHub matters more.
func (r *Runs) keepReceipt(ctx context.Context, rc *runContext, res *dispatch.Result) {
	if r.c.Receipts.Store == nil {
		return
	}
	status := string(statusOf(res))
	if _, aborted := r.abortedBy(rc.meta.TaskID); aborted {
		status = "aborted"
	} else if _, marked := lastMarked(rc.marked, KindAbortRequested, rc.meta.TaskID); marked {
		status = "aborted"
	}
	run := receipts.Run{
		TaskID: rc.meta.TaskID, Repo: rc.meta.Repo, InstallationID: rc.meta.InstallationID, Number: rc.meta.Number, Issue: rc.issue,
		Mode: string(rc.meta.Mode), Status: status, Attempt: rc.meta.Attempt, Branch: rc.branch,
		URL:     fmt.Sprintf("%s/%s/issues/%d", strings.TrimSuffix(r.c.WebURL, "/"), rc.meta.Repo, rc.meta.Number),
		EndedAt: r.c.Now().UTC(),
	}
	if res != nil {
		if res.Branch != "" {
			run.Branch = res.Branch
		}
		run.CostUSD, run.DurationSeconds, run.Steps = res.TokenUsage.TotalCostUSD, res.DurationSeconds, res.TokenUsage.Steps
		run.InputTokens, run.OutputTokens = res.TokenUsage.Input, res.TokenUsage.Output
		if res.Error != nil {
			run.Error = truncateUTF8(res.Error.Message, 500)
		}
	}
	// The title names the run on the dashboard; it is untrusted text, kept
	// as text and escaped where it is shown.
	if is, err := rc.gh.Issue(ctx, rc.meta.Number); err == nil {
		run.Title = truncateUTF8(r.c.Secrets.Redact(termtext.Clean(is.GetTitle())), 300)
	}
	if err := r.c.Receipts.Store.Put(context.WithoutCancel(ctx), run); err != nil {
		zerolog.Ctx(ctx).Error().Err(err).Msg("keep the run's receipt for the dashboard")
	}
}
