package nomad

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/nomad/api"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// jobs submits, stops and removes the runs' Nomad jobs, and writes the
// token Variable each job's template reads (CurrentToken reads it back,
// token.go).
type jobs struct {
	*shared
}

// Submit implements dispatch.Backend: it writes the token Variable, then
// registers the job create-only. A job that exists already, because the
// webhook was redelivered or another replica got there first, is success
// with created=false.
func (b *jobs) Submit(ctx context.Context, spec dispatch.RunSpec) (bool, error) {
	if spec.Meta.TaskID == "" {
		spec.Meta.TaskID = spec.Order.TaskID
	}
	if spec.Meta.Mode == "" {
		spec.Meta.Mode = spec.Order.Mode
	}
	if spec.Order.Mode == dispatch.ModePreview {
		// The code would travel in the job (Nomad keeps it in its log);
		// previews of a pull request run on the docker backend.
		return false, fmt.Errorf("submit %s: previews are not supported on the nomad backend yet", spec.Order.TaskID)
	}
	if spec.Order.Mode != dispatch.ModeTask && spec.Token == "" {
		return false, fmt.Errorf("submit %s: a repository token is required in %s mode", spec.Order.TaskID, spec.Order.Mode)
	}
	job, err := BuildJob(b.o, spec)
	if err != nil {
		return false, fmt.Errorf("submit %s: %w", spec.Order.TaskID, err)
	}
	id := *job.ID
	log := b.runLogger(spec.Meta, id)

	// A redelivery must not rewrite the token of a run that has already
	// ended and had its Variable removed.
	if _, _, err := b.c.Jobs().Info(id, b.qopts(ctx)); err == nil {
		log.Info().Msg("run exists already; not submitting again")
		b.w.remember(spec.Meta.TaskID, id)
		return false, nil
	} else if !isNotFound(err) {
		return false, fmt.Errorf("submit %s: look up job %s: %w", spec.Order.TaskID, id, err)
	}

	hasToken := spec.Token != "" || len(b.o.Env) > 0 || b.o.Gateway != nil
	if hasToken {
		if err := b.writeToken(ctx, id, spec.Token); err != nil {
			return false, fmt.Errorf("submit %s: %w", spec.Order.TaskID, err)
		}
	}
	resp, _, err := b.c.Jobs().RegisterOpts(job, &api.RegisterOptions{EnforceIndex: true, ModifyIndex: 0}, b.wopts(ctx))
	if err != nil {
		if isAlreadyExists(err) {
			// Another replica registered it between our look-up and
			// now; its sandbox reads the Variable we both wrote.
			log.Info().Msg("run registered concurrently by another bot; not submitting again")
			b.w.remember(spec.Meta.TaskID, id)
			return false, nil
		}
		if hasToken {
			b.deleteToken(context.WithoutCancel(ctx), id, log)
		}
		return false, fmt.Errorf("submit %s: register job %s at %s: %w", spec.Order.TaskID, id, b.c.Address(), err)
	}
	b.w.remember(spec.Meta.TaskID, id)
	log.Info().Str("eval_id", resp.EvalID).Str("mode", string(spec.Order.Mode)).Int("attempt", spec.Meta.Attempt).Msg("sandbox job registered")
	return true, nil
}

// writeToken stores the token where the job's template reads it. The
// value never reaches a log line or an error message.
func (b *jobs) writeToken(ctx context.Context, jobID, token string) error {
	items := api.VariableItems{TokenItem: token}
	for k, val := range b.o.Env {
		items[EnvItemPrefix+k] = val
	}
	if err := b.addGatewayItem(items); err != nil {
		return err
	}
	v := &api.Variable{Namespace: b.o.Namespace, Path: TokenVarPath(jobID), Items: items}
	if _, _, err := b.c.Variables().Update(v, b.wopts(ctx)); err != nil {
		return fmt.Errorf("write token variable %s: %w", TokenVarPath(jobID), err)
	}
	return nil
}

// Cancel implements dispatch.Backend by deregistering the job without
// purging it: Nomad sends SIGTERM and waits the task's kill_timeout before
// SIGKILL, and the stopped job stays readable for its result.
func (b *jobs) Cancel(ctx context.Context, taskID string) error {
	id, err := b.findJob(ctx, taskID)
	if err != nil {
		return err
	}
	evalID, _, err := b.c.Jobs().DeregisterOpts(id, &api.DeregisterOptions{Purge: false}, b.wopts(ctx))
	if err != nil {
		if isNotFound(err) {
			return fmt.Errorf("cancel %s: job %s: %w", taskID, id, dispatch.ErrNotFound)
		}
		return fmt.Errorf("cancel %s: deregister job %s: %w", taskID, id, err)
	}
	b.log.Info().Str("task_id", taskID).Str("job_id", id).Str("eval_id", evalID).Dur("kill_timeout", b.o.KillTimeout).Msg("sandbox job stopped; the runner has its kill timeout to push")
	return nil
}

// RefreshToken implements dispatch.Backend. The template's change_mode is
// noop: the runner reads the file on every git call.
func (b *jobs) RefreshToken(ctx context.Context, taskID, token string) error {
	if token == "" {
		return fmt.Errorf("refresh token of %s: the new token is empty", taskID)
	}
	id, err := b.findJob(ctx, taskID)
	if err != nil {
		return err
	}
	job, _, err := b.c.Jobs().Info(id, b.qopts(ctx))
	if err != nil {
		if isNotFound(err) {
			return fmt.Errorf("refresh token of %s: job %s: %w", taskID, id, dispatch.ErrNotFound)
		}
		return fmt.Errorf("refresh token of %s: read job %s: %w", taskID, id, err)
	}
	if (job.Stop != nil && *job.Stop) || (job.Status != nil && *job.Status == "dead") {
		// Writing it now would leave a live token in Nomad for nobody.
		return fmt.Errorf("refresh token of %s: job %s has ended; nothing written", taskID, id)
	}
	if err := b.writeToken(ctx, id, token); err != nil {
		return fmt.Errorf("refresh token of %s: %w", taskID, err)
	}
	b.log.Info().Str("task_id", taskID).Str("job_id", id).Msg("token refreshed")
	return nil
}

// Cleanup implements dispatch.Backend: the token Variable goes, and the job
// is purged (Options.Purge) or stopped and left to Nomad's job GC.
func (b *jobs) Cleanup(ctx context.Context, taskID string) error {
	id, err := b.findJob(ctx, taskID)
	if errors.Is(err, dispatch.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	log := b.log.With().Str("task_id", taskID).Str("job_id", id).Logger()
	if _, err := b.c.Variables().Delete(TokenVarPath(id), b.wopts(ctx)); err != nil && !isNotFound(err) {
		return fmt.Errorf("cleanup %s: delete token variable %s: %w", taskID, TokenVarPath(id), err)
	}
	job, _, err := b.c.Jobs().Info(id, b.qopts(ctx))
	switch {
	case isNotFound(err):
	case err != nil:
		return fmt.Errorf("cleanup %s: read job %s: %w", taskID, id, err)
	case b.o.Purge || job.Stop == nil || !*job.Stop:
		if _, _, err := b.c.Jobs().DeregisterOpts(id, &api.DeregisterOptions{Purge: b.o.Purge}, b.wopts(ctx)); err != nil && !isNotFound(err) {
			return fmt.Errorf("cleanup %s: deregister job %s: %w", taskID, id, err)
		}
	}
	b.w.forget(taskID, id)
	log.Info().Bool("purged", b.o.Purge).Msg("sandbox job cleaned up")
	return nil
}
