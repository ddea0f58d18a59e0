package handlers

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers/follow"
	"github.com/sandbox-bot/sandbox-bot/handlers/markers"
	"github.com/sandbox-bot/sandbox-bot/handlers/sanitize"
)

// statusInterval is how often one person gets the same answer to /status
// on one issue: the answer changes when a run starts or ends, and anyone
// may ask, so a reader repeating /status cannot make the bot spam the
// thread with it.
const statusInterval = 10 * time.Minute

// StatusData is github/status: the run in progress on an issue or PR, or
// the last one.
type StatusData struct {
	// User asked.
	User    string
	TaskID  string
	Mode    dispatch.Mode
	Running bool
	// Place is the run's place in the queue (1 starts next) when it waits
	// for a slot; 0 when it does not.
	Place int
	// Stage and Message are the runner's last progress line, when this
	// replica follows the run (sanitized: the sandbox wrote them).
	Stage   string
	Message string
	// Outcome says how the last run ended ("failed"), when it has.
	Outcome string
	// Elapsed is the time since the run started, or what it took.
	Elapsed string
	// CostUSD is the cost so far (or in all); HasCost is false when the
	// bot does not know it.
	CostUSD  float64
	HasCost  bool
	CheckURL string
	// LiveURL is the run's live page, when the bot serves one.
	LiveURL string
	PlanURL string
	// ResultURL is the comment that reported the end of the run.
	ResultURL string
	// Budgets are this month's figures of the installation's and the
	// repository's budgets, as the repository's runs have them: the
	// server's, lowered by the organisation's and the repository's
	// .sandbox.yml (budget.go).
	Budgets []BudgetLine
	// Routines are the repository's routines, each with its schedule or
	// event and next tick ("`weekly-deps` (0 6 * * 1 Europe/Berlin, next
	// 2026-12-07 06:00 CET)").
	Routines []string
}

// stateReplies answer what the bot sees without starting a run: /status,
// and the replies the table chooses for a command that does not apply in
// the state (state.go).
type stateReplies struct {
	c *core
	// routines name the repository's routines in /status.
	routines *Routines
	// runs tell what this replica saw of a run (its stage, its cost so
	// far, its check run).
	runs *follow.Runs
}

// status answers /status, for any reader. Where the bot never ran it
// says nothing: the command is not an invitation to talk.
func (sr *stateReplies) status(ctx context.Context, t thread, sc *scene) error {
	log := zerolog.Ctx(ctx)
	data, ok := sr.statusData(ctx, sc.holder, sc.marked)
	if !ok {
		log.Info().Str("sender", t.sender).Msg("/status where the bot never ran: no reply")
		return nil
	}
	// The run's state is part of the key: waiting, running, ended.
	key := fmt.Sprintf("status\x00%s#%d\x00%s\x00%s\x00%t\x00%t", t.gh.FullName(), t.number, t.sender, data.TaskID, data.Running, data.Place > 0)
	if !sr.c.trust.once(key, sr.c.Now(), statusInterval) {
		log.Info().Str("sender", t.sender).Msg("/status answered to this person recently; not replying again")
		return nil
	}
	data.User = t.sender
	data.Budgets = budgetLines(ctx, sr.c, t.installation, t.gh)
	if sr.routines != nil {
		data.Routines = routineLines(sr.routines.List(ctx, t.gh.FullName()))
	}
	return sr.c.reply(ctx, t.gh, t.number, "github/status", data)
}

// statusData describes the run holding the issue, else the newest run the
// bot's own comments tell of; ok is false when there is none.
func (sr *stateReplies) statusData(ctx context.Context, holder string, marked []markers.Comment) (StatusData, bool) {
	var d StatusData
	var start, end time.Time
	if holder != "" {
		d.TaskID, d.Running = holder, true
		if ack, ok := markers.Last(marked, markers.KindAck, holder); ok {
			d.Mode, start = ack.Marker.Mode, ack.Comment.GetCreatedAt().Time
		} else if q, ok := markers.Last(marked, markers.KindQueued, holder); ok {
			d.Mode, start = q.Marker.Mode, q.Comment.GetCreatedAt().Time
		}
		if st, err := sr.c.Backend.Status(ctx, holder); err == nil {
			d.Mode = st.Meta.Mode
			if !st.StartedAt.IsZero() {
				start = st.StartedAt
			}
		}
		end = sr.c.Now()
		d.Place = sr.queuePlace(ctx, holder)
	} else {
		last, ok := lastRun(marked)
		if !ok {
			return d, false
		}
		d.TaskID, d.Mode = last.Marker.TaskID, last.Marker.Mode
		if ack, ok := markers.Last(marked, markers.KindAck, d.TaskID); ok {
			start = ack.Comment.GetCreatedAt().Time
			d.Mode = ack.Marker.Mode
		}
		d.Outcome = "has not reported its result yet"
		if last.Marker.Kind != markers.KindAck {
			d.Outcome, d.ResultURL, end = outcomes[last.Marker.Kind], last.Comment.GetHTMLURL(), last.Comment.GetCreatedAt().Time
		}
		if last.Marker.Kind == markers.KindPlan {
			d.CostUSD, d.HasCost = last.Marker.Cost, true
		}
	}
	if !start.IsZero() && !end.IsZero() && end.After(start) {
		d.Elapsed = end.Sub(start).Round(time.Second).String()
	}
	if e, ok := sr.runs.Seen(d.TaskID); ok {
		d.Stage = sanitize.Inline(sr.c.Secrets.Redact(e.Stage), 40)
		d.Message = sanitize.Inline(sr.c.Secrets.Redact(e.Message), 200)
		d.CostUSD, d.HasCost = max(d.CostUSD, e.CostUSD), true
		d.CheckURL = e.CheckURL
	}
	if plan, ok := markers.Last(marked, markers.KindPlan, ""); ok {
		d.PlanURL = plan.Comment.GetHTMLURL()
	}
	d.LiveURL = sr.c.Receipts.LiveURL(d.TaskID)
	return d, true
}

// outcomes words how a run ended, by the kind of the marker that said so.
var outcomes = map[string]string{
	markers.KindPlan:    "posted its plan",
	markers.KindResult:  "finished",
	markers.KindFailure: "failed",
	markers.KindAborted: "was aborted",
	// The run never started: its budget did not fit the month's.
	markers.KindOverBudget: "was refused: too little was left of the month's budget",
}

// lastRun is the newest of the bot's comments that starts or ends a run.
func lastRun(marked []markers.Comment) (markers.Comment, bool) {
	for i := len(marked) - 1; i >= 0; i-- {
		if m := marked[i]; m.Marker.Kind == markers.KindAck || outcomes[m.Marker.Kind] != "" {
			return m, true
		}
	}
	return markers.Comment{}, false
}

// queuePlace is taskID's place among the runs waiting for a slot, 0 when
// it is not waiting (or the queue cannot be read: /status then says it
// runs, as the lock does).
func (sr *stateReplies) queuePlace(ctx context.Context, taskID string) int {
	if !sr.c.Caps.Any() {
		return 0
	}
	q, err := sr.c.Backend.ReadQueue(ctx)
	if err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("/status: read the run queue")
		return 0
	}
	return dispatch.Place(q, taskID)
}
