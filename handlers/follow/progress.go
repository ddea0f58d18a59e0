package follow

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/go-github/v62/github"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
	"github.com/sandbox-bot/sandbox-bot/handlers/markers"
)

// Progress turns the runner's progress lines into one GitHub Check Run on
// the head commit, updated at most once per interval, or, before a branch
// exists, one progress comment edited in place.
type Progress struct {
	ctx  context.Context // carries the run's logger
	r    *Runs
	gh   hub.GitHub
	meta dispatch.Meta

	mu         sync.Mutex
	last       dispatch.Progress
	lines      []string
	lastSent   time.Time
	headSHA    string
	checkRunID int64
	commentID  int64
	// superseded are check runs left on commits the run pushed past; the
	// next send closes them.
	superseded []int64
	// retry is a deferred edit's next try when no progress line comes
	// first; ended stops it once the run's last state is written.
	retry *time.Timer
	ended bool
	// sending keeps one send at a time (a retry and a line's update).
	sending sync.Mutex
}

func newProgress(ctx context.Context, r *Runs, gh hub.GitHub, meta dispatch.Meta) *Progress {
	p := &Progress{ctx: ctx, r: r, gh: gh, meta: meta, headSHA: meta.HeadSHA}
	p.startOnPR(ctx)
	return p
}

// Attach sets the commit the check run belongs to, once it is known.
func (p *Progress) Attach(sha string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if sha != "" && p.headSHA == "" {
		p.headSHA = sha
	}
}

// update is called for each progress line; it sends at most one update per
// interval, so a chatty agent cannot exhaust the API rate limit.
func (p *Progress) update(ev dispatch.Progress) {
	zerolog.Ctx(p.ctx).Debug().Str("stage", ev.Stage).Int("step", ev.Step).Float64("cost_usd", ev.CostUSD).Msg("progress")
	p.r.board.progress(p.meta, ev)
	p.mu.Lock()
	p.last = ev
	moved := p.moveLocked(ev.HeadSHA)
	line := fmt.Sprintf("`%s` %s", ev.Stage, oneLine(ev.Message))
	p.lines = append(p.lines, line)
	if len(p.lines) > 15 {
		p.lines = p.lines[len(p.lines)-15:]
	}
	due := moved || p.r.d.Now().Sub(p.lastSent) >= p.r.d.ProgressInterval
	if due {
		p.lastSent = p.r.d.Now()
	}
	p.mu.Unlock()
	if due {
		p.send(p.ctx)
	}
}

func oneLine(s string) string {
	s = strings.ReplaceAll(strings.TrimSpace(s), "\n", " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

func (p *Progress) summary() (title, text string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ev := p.last
	title = fmt.Sprintf("%s: %s", ev.Stage, oneLine(ev.Message))
	text = fmt.Sprintf("Task `%s` (%s) · step %d · %d tool calls · %d tokens · $%.2f\n\n%s",
		p.meta.TaskID, p.meta.Mode, ev.Step, ev.ToolCalls, ev.Tokens, ev.CostUSD, strings.Join(p.lines, "\n"))
	return title, text + p.entryLink()
}

func (p *Progress) send(ctx context.Context) {
	p.sending.Lock()
	defer p.sending.Unlock()
	log := zerolog.Ctx(ctx)
	p.closeSuperseded(ctx)
	// An edit of the progress gives way to every other write when writes
	// are paced (the pacer keeps it, and a newer edit replaces it; one it
	// could not keep is due again at the next progress line); its creation
	// does not, so a run shows from its start.
	edit := hub.Deferrable(ctx)
	warn := func(err error, what string) {
		if errors.Is(err, hub.ErrWriteQueued) {
			log.Debug().Msg(what + ": queued, writes are paced")
			return
		}
		if errors.Is(err, hub.ErrWriteDeferred) {
			p.deferred()
			log.Debug().Msg(what + ": deferred, writes are paced")
			return
		}
		log.Warn().Err(err).Msg(what)
	}
	title, text := p.summary()
	p.mu.Lock()
	sha, checkID, commentID := p.headSHA, p.checkRunID, p.commentID
	p.mu.Unlock()
	if sha != "" {
		if checkID == 0 {
			checkID = p.adopt(ctx, sha)
		}
		if checkID == 0 {
			cr, err := p.gh.CreateCheckRun(ctx, github.CreateCheckRunOptions{
				Name: p.r.d.CheckName, HeadSHA: sha, Status: github.String("in_progress"), ExternalID: github.String(p.externalID()),
				StartedAt: &github.Timestamp{Time: p.r.d.Now()}, DetailsURL: p.detailsURL(),
				Output: &github.CheckRunOutput{Title: &title, Summary: github.String(title), Text: &text},
			})
			if err != nil {
				warn(err, "create check run")
				return
			}
			p.mu.Lock()
			p.checkRunID = cr.GetID()
			p.mu.Unlock()
			p.r.board.checkRun(p.meta, cr)
			return
		}
		if err := p.gh.UpdateCheckRun(edit, checkID, github.UpdateCheckRunOptions{
			Name: p.r.d.CheckName, Output: &github.CheckRunOutput{Title: &title, Summary: github.String(title), Text: &text},
		}); err != nil {
			warn(err, "update check run")
		}
		return
	}
	body, err := p.render("github/progress", ProgressData{Marker: p.marker(), Title: title, Text: text})
	if err != nil {
		log.Error().Err(err).Msg("render progress comment")
		return
	}
	if commentID == 0 {
		c, err := p.gh.Comment(ctx, p.meta.Number, body)
		if err != nil {
			warn(err, "create progress comment")
			return
		}
		p.mu.Lock()
		p.commentID = c.GetID()
		p.mu.Unlock()
		return
	}
	if err := p.gh.EditComment(edit, commentID, body); err != nil {
		warn(err, "edit progress comment")
	}
}

// deferred makes the next progress line due at once, and tries the edit
// again after the interval (at least a second) if no line comes first: a
// quiet agent's last step still shows while the run goes on.
func (p *Progress) deferred() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lastSent = time.Time{}
	if p.retry != nil || p.ended {
		return
	}
	p.retry = time.AfterFunc(max(p.r.d.ProgressInterval, time.Second), func() {
		p.mu.Lock()
		p.retry = nil
		due := !p.ended && p.lastSent.IsZero()
		if due {
			p.lastSent = p.r.d.Now()
		}
		p.mu.Unlock()
		if due {
			p.send(p.ctx)
		}
	})
}

// ParseExternalID reads a run's check run's external id, "T-XXXXXXXX:owner/repo#N:mode".
func ParseExternalID(id string) (int, dispatch.Mode, bool) {
	parts := strings.Split(id, ":")
	if len(parts) != 3 || !dispatch.ValidTaskID(parts[0]) {
		return 0, "", false
	}
	_, num, ok := strings.Cut(parts[1], "#")
	if !ok {
		return 0, "", false
	}
	n, err := strconv.Atoi(num)
	if err != nil {
		return 0, "", false
	}
	return n, dispatch.Mode(parts[2]), true
}

// externalID ties a check run back to its task, for check_run
// rerequested (ParseExternalID).
func (p *Progress) externalID() string {
	return fmt.Sprintf("%s:%s#%d:%s", p.meta.TaskID, p.meta.Repo, p.meta.Number, p.meta.Mode)
}

// IsEnded says whether the run's last state was written (complete).
func (p *Progress) IsEnded() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ended
}

// Complete finishes the check run (creating it if the run never reported a
// commit but the result names one) and closes the progress comment.
func (p *Progress) Complete(ctx context.Context, conclusion, title, summary string, res *dispatch.Result) {
	log := zerolog.Ctx(ctx)
	p.mu.Lock()
	p.ended = true
	if p.retry != nil {
		p.retry.Stop()
		p.retry = nil
	}
	p.mu.Unlock()
	p.sending.Lock() // a retry's edit in flight goes before the last state
	defer p.sending.Unlock()
	if res != nil && res.HeadSHA != "" {
		p.mu.Lock()
		p.moveLocked(res.HeadSHA)
		p.mu.Unlock()
	}
	p.closeSuperseded(ctx)
	p.mu.Lock()
	sha, checkID, commentID := p.headSHA, p.checkRunID, p.commentID
	p.mu.Unlock()
	if checkID == 0 && sha != "" {
		checkID = p.adopt(ctx, sha)
	}
	text := receiptSummary(res) + p.entryLink()
	if summary == "" {
		summary = title
	}
	out := &github.CheckRunOutput{Title: &title, Summary: &summary, Text: &text}
	now := &github.Timestamp{Time: p.r.d.Now()}
	switch {
	case checkID != 0:
		if err := p.gh.UpdateCheckRun(ctx, checkID, github.UpdateCheckRunOptions{
			Name: p.r.d.CheckName, Status: github.String("completed"), Conclusion: &conclusion, CompletedAt: now, Output: out,
		}); err != nil {
			log.Warn().Err(err).Msg("complete check run")
		}
	case sha != "":
		if cr, err := p.gh.CreateCheckRun(ctx, github.CreateCheckRunOptions{
			Name: p.r.d.CheckName, HeadSHA: sha, Status: github.String("completed"), Conclusion: &conclusion,
			ExternalID: github.String(p.externalID()), CompletedAt: now, Output: out, DetailsURL: p.detailsURL(),
		}); err != nil {
			log.Warn().Err(err).Msg("create completed check run")
		} else {
			p.r.board.checkRun(p.meta, cr)
		}
	}
	p.r.board.ended(p.meta, res)
	if commentID != 0 {
		body, err := p.render("github/progress_done", ProgressDoneData{Marker: p.marker(), Conclusion: conclusion, Title: title, Summary: oneLine(summary)})
		if err != nil {
			log.Error().Err(err).Msg("render the progress comment's last edit")
			return
		}
		if err := p.gh.EditComment(ctx, commentID, body); err != nil {
			log.Warn().Err(err).Msg("close progress comment")
		}
	}
}

// marker is the hidden marker of the progress comment.
func (p *Progress) marker() string {
	return markers.Marker{Kind: markers.KindProgress, TaskID: p.meta.TaskID, Mode: p.meta.Mode}.String()
}

// render renders a progress comment; like every reply, it is trimmed.
func (p *Progress) render(tmpl string, data any) (string, error) {
	body, err := p.r.d.Templates.Render(tmpl, data)
	return strings.TrimSpace(body), err
}

// receiptSummary is the check run's text: the figures of the receipt.
func receiptSummary(res *dispatch.Result) string {
	if res == nil {
		return "No receipt: the sandbox ended without writing result.json."
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| | |\n|---|---|\n| Status | %s |\n| Duration | %s |\n| Cost | $%.2f |\n| Tokens | %d in / %d out |\n| Steps | %d |\n",
		res.Status, (time.Duration(res.DurationSeconds * float64(time.Second))).Round(time.Second), res.TokenUsage.TotalCostUSD,
		res.TokenUsage.Input, res.TokenUsage.Output, res.TokenUsage.Steps)
	for _, c := range res.Validation {
		mark := "✅"
		if !c.Passed {
			mark = "❌"
		}
		fmt.Fprintf(&b, "| %s `%s` | %s, %d attempt(s) |\n", mark, c.Name, map[bool]string{true: "passed", false: "failed"}[c.Passed], c.Attempts)
	}
	return b.String()
}

// ProgressData is github/progress: the comment that shows a run's progress
// before it has pushed a commit for a check run to sit on.
type ProgressData struct {
	Marker string
	// Title is the latest stage and message.
	Title string
	// Text is the figures and the latest progress lines.
	Text string
}

// ProgressDoneData is github/progress_done: the progress comment's last
// edit, when the run has ended.
type ProgressDoneData struct {
	Marker string
	// Conclusion is the check-run conclusion: success, failure, timed_out,
	// cancelled or neutral.
	Conclusion string
	Title      string
	Summary    string
}
