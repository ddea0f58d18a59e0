package runner

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/runner/harness"
	"github.com/sandbox-bot/sandbox-bot/templates"
)

// agentDriver runs the agent's passes of a run, a value of its own built
// once the checkout, its environment and the harness are there: it holds
// the run's budgets and what was spent of them, the session the passes
// continue, and where each pass is accounted (the receipt, the timeline,
// the progress lines).
type agentDriver struct {
	h   harness.Harness
	dir string
	env []string
	cfg sandboxcfg.Resolved
	// startupGrace and killGrace are the runner's options'; as is the
	// agent's user.
	startupGrace, killGrace time.Duration
	as                      *AgentUser
	templates               *templates.Set
	// budget is the run's, repairBudget the repairs' share of it;
	// mainCost and repairCost what was spent of each.
	budget, repairBudget float64
	mainCost, repairCost float64
	// session is the agent's session the next pass continues.
	session string
	// work ends with the run's time; parent only on SIGTERM.
	work, parent context.Context
	browser      *browser    // nil: the agent has no browser
	cast         *screencast // nil: its browser is not cast
	// promptData is the run's prompt data as it stands.
	promptData func() PromptData
	// reasons collect the agent's reasons for files outside the plan.
	reasons  map[string]string
	sessions *sessions
	res      *dispatch.Result
	tl       *timeline
	prog     *reporter
	red      *Redactor
	log      zerolog.Logger
}

// agent runs one agent pass and, if the agent CLI rejected an operation
// nobody could approve, one more pass in the same session that tells the
// agent what was rejected and why.
func (r *agentDriver) agent(spec agentSpec) (*agentOutcome, error) {
	stopDev := r.browser.start(r.work, r.dir, r.env, r.as, r.prog, r.log)
	defer stopDev()
	watching, stopWatching := context.WithCancel(r.work)
	defer stopWatching()
	go r.cast.watch(watching)
	extra, err := r.browser.prompt(r.templates, r.promptData())
	if err != nil {
		return &agentOutcome{}, err
	}
	if extra != "" {
		spec.Prompt += "\n\n" + extra
	}
	out := r.invoke(spec)
	if len(out.Stalls) > 0 && out.Stop == StopNone && r.work.Err() == nil {
		r.log.Warn().Strs("rejected", out.Stalls).Msg("the agent CLI rejected operations; giving the agent one more pass")
		r.prog.emit(dispatch.Progress{Stage: spec.Stage, Message: "rejected: " + strings.Join(out.Stalls, "; ")})
		data := r.promptData()
		data.Rejected = out.Stalls
		prompt, err := render(r.templates, PromptStall, data)
		if err != nil {
			return out, err
		}
		retry := spec
		retry.Prompt, retry.SessionID, retry.Images = prompt, out.SessionID, nil
		again := r.invoke(retry)
		again.Stalls = append(out.Stalls, again.Stalls...)
		again.Usage.Add(out.Usage)
		if again.FinalText == "" {
			again.FinalText = out.FinalText
		}
		out = again
	}
	return out, r.stopError(out, spec.Stage == "repair")
}

// invoke runs the agent once and accounts for it.
func (r *agentDriver) invoke(spec agentSpec) *agentOutcome {
	repair, review := spec.Stage == "repair", spec.Stage == stageReview
	costCap := r.budget - r.mainCost
	switch {
	case repair:
		costCap = r.repairBudget - r.repairCost
	case review:
		costCap = spec.CostCap
	}
	inactivity := time.Duration(r.cfg.InactivitySeconds) * time.Second
	p := &agentProc{
		h: r.h,
		req: harness.Request{
			Dir:       r.dir,
			Prompt:    spec.Prompt,
			Model:     firstNonEmpty(spec.Model, r.cfg.Model),
			Env:       r.env,
			SessionID: spec.SessionID,
			ReadOnly:  spec.ReadOnly,
			Images:    spec.Images,
			BudgetUSD: max(costCap, 0.01),
		},
		inactivity:   inactivity,
		startupGrace: r.startupGrace,
		killGrace:    r.killGrace,
		log:          r.log.With().Str("stage", spec.Stage).Logger(),
		red:          r.red,
		as:           r.as,
		costSoFar:    r.res.TokenUsage.TotalCostUSD,
		costCap:      max(costCap, 1e-9),
	}
	first := r.firstTurn(spec.Stage)
	p.onEvent = r.agentEvents(spec.Stage, r.res.TokenUsage, first)
	r.prog.emit(dispatch.Progress{Stage: spec.Stage, Message: "agent " + r.h.Name() + " started"})
	started := time.Now()
	first.started = started
	watching, stopWatching := context.WithCancel(r.work)
	watched := first.watchGateway(watching, r.env)
	out := p.run(r.work)
	stopWatching()
	watched()
	r.tl.add(spec.Stage, started, "")
	r.res.TokenUsage.Add(out.Usage)
	addTools(r.res, out.Tools)
	switch {
	case repair:
		r.repairCost += out.Usage.TotalCostUSD
	case review:
		// The reviewer's own share: its session is not the run's.
		return out
	default:
		r.mainCost += out.Usage.TotalCostUSD
	}
	if out.SessionID != "" {
		r.session = out.SessionID
		r.sessions.save(r.session)
	}
	outsideReasons(out.FinalText, r.reasons)
	if out.ParseErrors > 0 {
		r.log.Warn().Int("lines", out.ParseErrors).Msg("skipped agent output lines that did not parse")
	}
	return out
}

// firstTurn reports the invocation's first model request as a progress
// line and the receipt's "agent start" stage.
func (r *agentDriver) firstTurn(stage string) *firstTurn {
	return &firstTurn{stage: stage, report: func(pr dispatch.Progress, d time.Duration, sign string) {
		note := "to its first model request, at the gateway"
		if sign != signGateway {
			note = "to its first step"
		}
		r.tl.span(StageAgentStart, pr.Time.Add(-d), d, note)
		r.prog.emit(pr)
	}}
}

// agentEvents turns the agent's events into progress lines: its steps,
// tool calls and text; first sees each event for the first model request.
// base is the run's usage before this invocation.
func (r *agentDriver) agentEvents(stage string, base dispatch.TokenUsage, first *firstTurn) func(harness.Event, agentStats) {
	return func(ev harness.Event, st agentStats) {
		r.tl.event(time.Now())
		first.see(ev)
		pr := dispatch.Progress{Stage: stage, Step: st.Steps, ToolCalls: base.Steps + st.ToolCalls, CostUSD: base.TotalCostUSD + st.CostUSD, Tokens: base.Input + base.Output + st.Tokens}
		switch ev.Type {
		case harness.EventToolUse:
			pr.Message, pr.Tool = "tool "+ev.Tool, ev.Tool
			pr.Kind, pr.Detail = dispatch.KindTool, ev.ToolInput
		case harness.EventText:
			if strings.TrimSpace(ev.Text) == "" {
				return
			}
			pr.Kind, pr.Detail = dispatch.KindText, ev.Text
		case harness.EventStepFinish:
			pr.Message = fmt.Sprintf("step %d done", st.Completed)
		case harness.EventError:
			pr.Message = "agent error: " + clipString(ev.Text, 200)
		case harness.EventSession:
			pr.Message = "agent session " + ev.SessionID
		default:
			return
		}
		r.prog.emit(pr)
	}
}

// stopError maps a stopped agent to the run's status.
func (r *agentDriver) stopError(out *agentOutcome, repair bool) error {
	switch out.Stop {
	case StopHung:
		return &statusError{status: dispatch.StatusHung, diag: out.Diagnostic,
			msg: fmt.Sprintf("the agent printed no event for %ds (inactivity_timeout); it was stopped", r.cfg.InactivitySeconds)}
	case StopBudget:
		limit, what := r.budget, "max_budget_usd"
		if repair {
			limit, what = r.repairBudget, "the repair budget"
		}
		return &statusError{status: dispatch.StatusBudgetExceeded, diag: out.Diagnostic,
			msg: fmt.Sprintf("the agent's cost passed %s ($%.2f); it was stopped", what, limit)}
	case StopInterrupted:
		return r.interruption(out.Diagnostic)
	}
	return nil
}

func (r *agentDriver) interruption(diag *dispatch.Diagnostic) error {
	if r.parent.Err() != nil {
		return &statusError{status: dispatch.StatusInterrupted, diag: diag, msg: "the run was stopped (SIGTERM) before it finished; the work so far is pushed"}
	}
	return &statusError{status: dispatch.StatusTimeout, diag: diag, msg: "timeout_minutes passed before the run finished; the work so far is pushed"}
}
