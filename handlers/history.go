package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
	"github.com/sandbox-bot/sandbox-bot/handlers/markers"
)

// The agent PR's body keeps the history of the runs on it (execute,
// revise, rebase, continue) with their total cost. The history lives in
// the body itself, between two markers and with its data as hidden JSON,
// so a restarted bot (or another replica) extends it instead of starting
// over: the bot keeps no database.
const (
	historyStart = "<!-- sandbox-bot:history-start -->"
	historyEnd   = "<!-- sandbox-bot:history-end -->"
)

var historyDataRE = regexp.MustCompile(`<!-- sandbox-bot:history (\{.*?\}) -->`)

// RunEntry is one run in a PR's history.
type RunEntry struct {
	TaskID  string          `json:"task"`
	Mode    dispatch.Mode   `json:"mode"`
	Attempt int             `json:"attempt,omitempty"`
	Status  dispatch.Status `json:"status"`
	CostUSD float64         `json:"cost"`
	Steps   int             `json:"steps"`
	// URL is the run's page, its dashboard entry or its result comment
	// ("" when none is known).
	URL string `json:"url,omitempty"`
	// Head is the commit the run left the branch at: the App's own push,
	// which a CI fix answers (ci.go).
	Head string `json:"head,omitempty"`
	// CI names the failing checks a CI fix run was for, comma-separated.
	CI string `json:"ci,omitempty"`
}

// PRHistoryData is github/pr_history: the runs section of the PR body.
type PRHistoryData struct {
	Runs     []RunEntry
	TotalUSD float64
}

type historyData struct {
	Runs []RunEntry `json:"runs"`
}

// parseHistory reads the run history kept in a PR body (none in a PR
// opened before the bot kept one).
func parseHistory(body string) []RunEntry {
	_, section, ok := strings.Cut(body, historyStart)
	if !ok {
		return nil
	}
	sm := historyDataRE.FindStringSubmatch(section)
	if sm == nil {
		return nil
	}
	var d historyData
	if err := json.Unmarshal([]byte(sm[1]), &d); err != nil {
		return nil
	}
	return d.Runs
}

// entryOf is what the history says of one run.
func entryOf(rc *runContext, res *dispatch.Result, url string) RunEntry {
	e := RunEntry{TaskID: rc.meta.TaskID, Mode: rc.meta.Mode, Attempt: rc.meta.Attempt, Status: statusOf(res), URL: url}
	if res != nil {
		e.CostUSD, e.Steps, e.Head = res.TokenUsage.TotalCostUSD, res.TokenUsage.Steps, strings.ToLower(res.HeadSHA)
	}
	if ack, ok := markers.Last(rc.marked, markers.KindAck, rc.meta.TaskID); ok {
		e.CI = strings.Join(ack.Marker.CIChecks, ", ")
	}
	return e
}

// withEntry adds e to the history, replacing the entry of the same run
// (a retried post); changed is false when the history already had it.
func withEntry(runs []RunEntry, e RunEntry) (out []RunEntry, changed bool) {
	for i, r := range runs {
		if r.TaskID == e.TaskID && r.Attempt == e.Attempt {
			if r == e {
				return runs, false
			}
			out = append([]RunEntry(nil), runs...)
			out[i] = e
			return out, true
		}
	}
	return append(append([]RunEntry(nil), runs...), e), true
}

// renderHistory is the body's runs section, markers and data included.
func (c *core) renderHistory(runs []RunEntry) (string, error) {
	data := PRHistoryData{Runs: runs}
	for _, r := range runs {
		data.TotalUSD += r.CostUSD
	}
	text, err := c.Templates.Render("github/pr_history", data)
	if err != nil {
		return "", err
	}
	raw, err := json.Marshal(historyData{Runs: runs}) // escapes < and >: the comment cannot be closed early
	if err != nil {
		return "", fmt.Errorf("encode PR run history: %w", err)
	}
	return historyStart + "\n<!-- sandbox-bot:history " + string(raw) + " -->\n" + strings.TrimSpace(text) + "\n" + historyEnd, nil
}

// spliceHistory puts section in place of the body's runs section, or
// appends it to a body without one.
func spliceHistory(body, section string) string {
	before, rest, ok := strings.Cut(body, historyStart)
	if !ok {
		return strings.TrimRight(body, "\n") + "\n\n" + section + "\n"
	}
	_, after, _ := strings.Cut(rest, historyEnd)
	return before + section + after
}

// prHistory is the runs section of the body an execute or continue run
// gives its PR: the history the open PR on the branch has (a continue
// run, a post retried after a restart) with this run added.
func (rp *resultPoster) prHistory(ctx context.Context, rc *runContext, res *dispatch.Result) string {
	var runs []RunEntry
	owner, _, _ := strings.Cut(rc.meta.Repo, "/")
	existing, err := rc.gh.OpenPullRequests(ctx, owner+":"+res.Branch, "")
	if err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("read the PR's run history; starting it over")
	} else if len(existing) > 0 {
		runs = parseHistory(existing[0].GetBody())
	}
	runs, _ = withEntry(runs, entryOf(rc, res, rp.c.Receipts.RunURL(rc.meta.TaskID)))
	section, err := rp.c.renderHistory(runs)
	if err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("render the PR's run history")
		return ""
	}
	return section
}

// recordOnPR adds a run that ran on the PR (revise, rebase, continue) to
// the PR body's history, once.
func (rp *resultPoster) recordOnPR(ctx context.Context, rc *runContext, res *dispatch.Result) error {
	pr, err := rc.gh.PullRequest(ctx, rc.meta.Number)
	if err != nil {
		return fmt.Errorf("read PR #%d for its run history: %w", rc.meta.Number, err)
	}
	url := rp.c.Receipts.RunURL(rc.meta.TaskID)
	if url == "" {
		for _, kind := range []string{markers.KindResult, markers.KindFailure, markers.KindAborted} {
			if m, ok := markers.Last(rc.marked, kind, rc.meta.TaskID); ok {
				url = m.Comment.GetHTMLURL()
			}
		}
	}
	runs, changed := withEntry(parseHistory(pr.GetBody()), entryOf(rc, res, url))
	if !changed {
		return nil
	}
	section, err := rp.c.renderHistory(runs)
	if err != nil {
		return err
	}
	body := spliceHistory(pr.GetBody(), section)
	// A completed run's checks describe the branch as it is now.
	if res.Status == dispatch.StatusCompleted && hasChecks(res) {
		checks, err := rp.c.renderChecks(res)
		if err != nil {
			return err
		}
		body = spliceChecks(body, checks)
	}
	if _, err := rc.gh.EditPullRequestBody(ctx, rc.meta.Number, body); err != nil {
		return fmt.Errorf("update PR #%d's run history: %w", rc.meta.Number, err)
	}
	return nil
}

// afterPRRun is what follows a run on an agent PR once its result is
// posted: the run in the PR body's history and, for a completed revise,
// replies on the inline comments it addressed. Both are idempotent, and
// both run again when a restarted bot finds the run not yet cleaned up.
func (rp *resultPoster) afterPRRun(ctx context.Context, gh hub.GitHub, meta dispatch.Meta, res *dispatch.Result) {
	log := zerolog.Ctx(ctx)
	marked, err := rp.c.botMarked(ctx, gh, meta.Number)
	if err != nil {
		log.Warn().Err(err).Msg("read the run's acknowledgement for its PR follow-ups")
		return
	}
	ack, ok := markers.Last(marked, markers.KindAck, meta.TaskID)
	if !ok || ack.Marker.Issue == 0 || ack.Marker.Issue == meta.Number {
		return // not a run on a PR (execute and continue runs on the issue write the history when they open it)
	}
	rc := &runContext{meta: meta, gh: gh, issue: ack.Marker.Issue, round: ack.Marker.Round, branch: ack.Marker.Branch, marked: marked}
	res = rp.keep.vetResult(rc, res)
	if err := rp.recordOnPR(ctx, rc, res); err != nil {
		log.Warn().Err(err).Msg("PR run history")
	}
	if meta.Mode == dispatch.ModeRevise {
		if err := rp.replyInline(ctx, rc, ack.Marker, res); err != nil {
			log.Warn().Err(err).Msg("reply on addressed inline comments")
		}
	}
}
