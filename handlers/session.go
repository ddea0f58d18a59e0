package handlers

import (
	"context"
	"errors"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/agentsession"
	"github.com/sandbox-bot/sandbox-bot/handlers/sanitize"
)

// A plan run leaves its agent's session in an archive beside result.json;
// the bot keeps it through the backend (dispatch.SessionKeeper) past the
// run's cleanup, and hands it to the execute run of that plan in the work
// order, so the agent resumes what it learned while planning.

// keepSession keeps the session archive of a completed plan run before
// the run is cleaned up. A backend that cannot keep one, or a failure,
// only means the execute run starts fresh.
func (rk *resultKeeper) keepSession(ctx context.Context, meta dispatch.Meta, res *dispatch.Result) {
	if meta.Mode != dispatch.ModePlan || res == nil || res.Status != dispatch.StatusCompleted || res.Session == nil || res.Session.Archive == "" {
		return
	}
	log := zerolog.Ctx(ctx)
	k, ok := rk.c.Backend.(dispatch.SessionKeeper)
	if !ok {
		log.Info().Str("backend", rk.c.Backend.Name()).Msg("the backend does not keep agent sessions; the execute run will start fresh")
		return
	}
	if kept, err := k.KeepSession(ctx, meta.TaskID); err != nil {
		log.Warn().Err(err).Msg("keep the plan's agent session")
	} else if kept {
		log.Info().Msg("plan's agent session kept for the execute run")
	}
}

// sessionHandoff is the execute run's part of the work order that hands
// over the session of the plan run planTask, or says why there is none.
func (a agentRun) sessionHandoff(ctx context.Context, planTask string) *dispatch.SessionHandoff {
	if planTask == "" {
		return nil
	}
	h := &dispatch.SessionHandoff{FromTask: planTask}
	k, ok := a.c.Backend.(dispatch.SessionKeeper)
	if !ok {
		h.Missing = fmt.Sprintf("the %s backend does not carry agent sessions between runs", a.c.Backend.Name())
		return h
	}
	archive, err := k.KeptSession(ctx, planTask)
	if err != nil {
		zerolog.Ctx(ctx).Info().Err(err).Str("plan_task", planTask).Msg("no agent session to hand over")
		h.Missing = "no agent session of the plan run " + planTask + " is kept"
		if notKept := (*dispatch.SessionNotKept)(nil); errors.As(err, &notKept) {
			h.Missing = notKept.Reason
		}
		return h
	}
	m, _, err := agentsession.Decode(archive)
	if err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Str("plan_task", planTask).Msg("kept agent session does not read")
		h.Missing = "the kept agent session of the plan run " + planTask + " does not read"
		return h
	}
	h.Harness, h.ID, h.Archive = m.Harness, m.ID, archive
	return h
}

// vetSession keeps what the PR body may show of the sandbox's account of
// the agent's session: a plan run id that is one, and the note redacted,
// on one line, at most 200 bytes (shown in a code span).
func vetSession(s *dispatch.SessionReport, redact func(string) string) *dispatch.SessionReport {
	if s == nil {
		return nil
	}
	cp := *s
	if !dispatch.ValidTaskID(cp.From) {
		cp.From, cp.Resumed = "", false
	}
	cp.Harness = sanitize.Inline(redact(cp.Harness), 40)
	cp.ID = sanitize.Inline(redact(cp.ID), 100)
	cp.Note = sanitize.Inline(redact(cp.Note), 200)
	return &cp
}
