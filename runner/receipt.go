package runner

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// finish makes the run durable and writes the receipt: whatever happened,
// committed work is pushed (with a fresh deadline when the run's context
// is gone) and result.json is written.
func (r *run) finish(err error) {
	res := r.res
	res.Status = dispatch.StatusCompleted
	var se *statusError
	switch {
	case r.parent.Err() != nil:
		res.Status = dispatch.StatusInterrupted
		if errors.As(err, &se) && se.status == dispatch.StatusInterrupted {
			res.Error = &dispatch.RunError{Message: se.msg, Diagnostic: se.diag}
		} else {
			res.Error = &dispatch.RunError{Message: "the run was stopped (SIGTERM) before it finished"}
		}
	case r.work != nil && errors.Is(r.work.Err(), context.DeadlineExceeded):
		res.Status = dispatch.StatusTimeout
		msg := "timeout_minutes passed before the run finished"
		var diag *dispatch.Diagnostic
		if errors.As(err, &se) {
			diag = se.diag
		}
		res.Error = &dispatch.RunError{Message: msg, Diagnostic: diag}
	case errors.As(err, &se):
		res.Status = se.status
		res.Error = &dispatch.RunError{Message: se.msg, Diagnostic: se.diag}
	case err != nil:
		res.Status = dispatch.StatusFailed
		res.Error = &dispatch.RunError{Message: err.Error()}
	}

	if r.ws.git != nil {
		r.finalPush(res)
	}
	if r.spec.planFromOrder && res.Plan == "" {
		res.Plan = r.order.Plan
	}
	res.DurationSeconds = time.Since(r.start).Seconds()
	res.Timings = r.tl.result(r.order.RequestedAt, r.opts.StartTimings)
	if res.Error != nil {
		res.Error.Message = r.red.String(res.Error.Message)
	}
	res.PRSummary = r.red.String(res.PRSummary)
	res.PRReview = r.red.String(res.PRReview)
	res.PRPatch = r.red.String(res.PRPatch)
	res.Plan = r.red.String(res.Plan)
	for _, name := range r.checkOrder {
		res.Validation = append(res.Validation, *r.checks[name])
	}
	r.red.Refresh()
	if r.order.OutputDir != "" {
		if werr := dispatch.WriteResult(r.order.OutputDir, res); werr != nil {
			r.log.Error().Err(werr).Msg("could not write result.json")
		}
	}
	msg := "done: " + string(res.Status)
	if res.Error != nil {
		msg += ": " + clipString(res.Error.Message, 300)
	}
	r.prog.emit(dispatch.Progress{Stage: "done", Message: msg, Status: res.Status, CostUSD: res.TokenUsage.TotalCostUSD,
		Tokens: res.TokenUsage.Input + res.TokenUsage.Output, Branch: res.Branch, HeadSHA: res.HeadSHA})
	ev := r.log.Info()
	if res.Status != dispatch.StatusCompleted {
		ev = r.log.Warn()
	}
	ev.Str("status", string(res.Status)).Float64("cost_usd", res.TokenUsage.TotalCostUSD).Int("steps", res.TokenUsage.Steps).
		Float64("duration_s", res.DurationSeconds).Msg("run ended")
	if r.ws.tempWork {
		os.RemoveAll(r.ws.workDir)
	}
}

// finalPush pushes what is left (unless the secret scan holds it, which
// fails the run) and describes the branch and the checks before the PR.
func (r *run) finalPush(res *dispatch.Result) {
	ctx, cancel := context.WithTimeout(context.Background(), r.opts.FinalPushTimeout)
	defer cancel()
	var held *errHeld
	if perr := r.br.save(ctx, res.Status); errors.As(perr, &held) {
		r.log.Error().Str("findings", perr.Error()).Msg("nothing pushed: the secret scan held the push")
		msg := "Nothing was pushed: " + perr.Error()
		if res.Status == dispatch.StatusCompleted {
			res.Status = dispatch.StatusFailed
			res.Error = &dispatch.RunError{Message: msg}
		} else if res.Error != nil {
			res.Error.Message += "; and " + msg
		}
	} else if perr != nil {
		r.log.Error().Err(perr).Msg("could not push the work")
		if res.Status == dispatch.StatusCompleted {
			res.Status = dispatch.StatusFailed
			res.Error = &dispatch.RunError{Message: perr.Error()}
		} else if res.Error != nil {
			res.Error.Message += "; and the final push failed: " + perr.Error()
		}
	}
	r.describe(ctx)
	r.res.SecretScan = r.sec.report()
	if r.br == nil {
		return
	}
	head, _ := r.br.published(ctx)
	r.res.Dependencies = r.deps.dependencies(ctx, head)
	r.res.PlanScope = r.scope.compare(ctx, head)
}

// describe fills the receipt's git facts.
func (r *run) describe(ctx context.Context) {
	if r.br == nil {
		return
	}
	// The receipt describes what the branch holds: the last push, when
	// the secret scan holds the rest back.
	head, ok := r.br.published(ctx)
	if !ok {
		return
	}
	if r.ws.pushes {
		r.res.HeadSHA = head
		from := r.ws.startSHA
		if r.spec.commitsFromBase {
			from = "origin/" + r.ws.baseBranch
		}
		if commits, err := r.ws.git.Log(ctx, from, head); err == nil {
			r.res.Commits = commits
		}
		if ds, err := r.ws.git.DiffStats(ctx, "origin/"+r.ws.baseBranch, head); err == nil {
			r.res.DiffStats = ds
		}
	}
}
