package runner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// milestone commits the agent's work and pushes it.
func (r *run) milestone(msg string) error {
	r.gitMu.Lock()
	defer r.gitMu.Unlock()
	sha, err := r.git.CommitAll(r.work, msg)
	if err != nil {
		return err
	}
	if sha != "" {
		r.log.Info().Str("sha", sha).Msg("committed")
	}
	if !r.pushes || !r.spec.pushAtMilestones {
		return nil
	}
	// A push the secret scan holds back is no failure of the milestone:
	// the built-in check reports it and the repair loop gets it.
	var held *errHeld
	if err := r.pushLocked(r.work); err != nil && !errors.As(err, &held) {
		return err
	}
	return nil
}

func (r *run) push(ctx context.Context) error {
	r.gitMu.Lock()
	defer r.gitMu.Unlock()
	return r.pushLocked(ctx)
}

// pushLocked pushes HEAD if it moved since the last push and the branch
// has something beyond the base.
func (r *run) pushLocked(ctx context.Context) error {
	head, err := r.git.Head(ctx)
	if err != nil {
		return err
	}
	if head == r.pushedSHA || head == r.baseSHA {
		return nil
	}
	// The run's own branch, nothing else: never the base it started from,
	// forced only where the mode rewrites history.
	target := r.order.TargetBranch
	if !r.spec.pushes || target == "" || target == r.baseBranch {
		return fmt.Errorf("push: refusing to push %s mode's work to %q (base %q)", r.order.Mode, target, r.baseBranch)
	}
	if head, err = r.gatePush(ctx, head); err != nil {
		return err
	}
	if head == r.pushedSHA {
		return nil
	}
	lease := ""
	if r.spec.lease {
		lease = r.lease
	}
	if err := r.git.Push(ctx, head, target, lease); err != nil {
		return fmt.Errorf("push %s: %w", r.order.TargetBranch, err)
	}
	r.pushedSHA = head
	if r.spec.lease {
		r.lease = head
	}
	r.log.Info().Str("branch", r.order.TargetBranch).Str("sha", head).Msg("pushed")
	r.prog.emit(dispatch.Progress{Stage: "push", Message: "pushed " + r.order.TargetBranch, Branch: r.order.TargetBranch, HeadSHA: head})
	return nil
}

// periodicPush saves work in progress every PushInterval while the agent
// works, so a sandbox that dies without a SIGTERM loses minutes, not hours.
func (r *run) periodicPush() func() {
	if !r.pushes || r.spec.personsBranch {
		return func() {}
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(r.opts.PushInterval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-r.work.Done():
				return
			case <-t.C:
				if err := r.milestone("WIP: checkpoint of " + r.order.TaskID); err != nil {
					r.log.Warn().Err(err).Msg("periodic push failed; retrying at the next one")
				}
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(stop); <-done }) }
}

// saveWork commits what the agent left and pushes, in the modes that push.
func (r *run) saveWork(ctx context.Context, status dispatch.Status) error {
	if !r.pushes || r.spec.personsBranch && status != dispatch.StatusCompleted {
		return nil
	}
	r.gitMu.Lock()
	defer r.gitMu.Unlock()
	if r.git.RebaseInProgress() {
		// A half-done rebase is no state to push; the remote branch stays
		// as it was.
		_, err := r.git.run(ctx, "", "rebase", "--abort")
		return err
	}
	if status != dispatch.StatusCompleted {
		msg := fmt.Sprintf("WIP: %s (%s)\n\nThe sandbox saved the agent's work in progress.\n\nTask: %s", r.order.Task.Title, status, r.order.TaskID)
		if _, err := r.git.CommitAll(ctx, r.red.String(msg)); err != nil {
			return err
		}
	}
	return r.pushLocked(ctx)
}
