package runner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// branch is the run's branch on the remote, a value of its own built once
// the checkout is there: what was pushed, the lease of a push that
// rewrites history, the secret scan every push passes, and the lock every
// commit and push of the checkout takes (the periodic push runs beside the
// agent). The nil *branch is a run without a checkout: it saves nothing.
type branch struct {
	git *Git
	sec *secretGate
	// mu serialises the runner's commits and pushes of the checkout.
	mu sync.Mutex
	// target is the only branch pushed to; base and baseSHA are what the
	// run started from, never pushed to.
	target, base, baseSHA string
	// pushed is the last commit pushed ("" for none); lease what the
	// remote branch held before a forced push.
	pushed, lease string
	spec          modeSpec
	mode          dispatch.Mode
	taskID, title string
	red           *Redactor
	log           zerolog.Logger
	prog          *reporter
}

// milestone commits the agent's work and pushes it.
func (b *branch) milestone(ctx context.Context, msg string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	sha, err := b.git.CommitAll(ctx, msg)
	if err != nil {
		return err
	}
	if sha != "" {
		b.log.Info().Str("sha", sha).Msg("committed")
	}
	if !b.spec.pushes || !b.spec.pushAtMilestones {
		return nil
	}
	// A push the secret scan holds back is no failure of the milestone:
	// the built-in check reports it and the repair loop gets it.
	var held *errHeld
	if err := b.pushLocked(ctx); err != nil && !errors.As(err, &held) {
		return err
	}
	return nil
}

func (b *branch) push(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pushLocked(ctx)
}

// pushLocked pushes HEAD if it moved since the last push and the branch
// has something beyond the base.
func (b *branch) pushLocked(ctx context.Context) error {
	head, err := b.git.Head(ctx)
	if err != nil {
		return err
	}
	if head == b.pushed || head == b.baseSHA {
		return nil
	}
	// The run's own branch, nothing else: never the base it started from,
	// forced only where the mode rewrites history.
	if !b.spec.pushes || b.target == "" || b.target == b.base {
		return fmt.Errorf("push: refusing to push %s mode's work to %q (base %q)", b.mode, b.target, b.base)
	}
	if head, err = b.sec.gatePush(ctx, head, b.pushed); err != nil {
		return err
	}
	if head == b.pushed {
		return nil
	}
	lease := ""
	if b.spec.lease {
		lease = b.lease
	}
	if err := b.git.Push(ctx, head, b.target, lease); err != nil {
		return fmt.Errorf("push %s: %w", b.target, err)
	}
	b.pushed = head
	if b.spec.lease {
		b.lease = head
	}
	b.log.Info().Str("branch", b.target).Str("sha", head).Msg("pushed")
	b.prog.emit(dispatch.Progress{Stage: "push", Message: "pushed " + b.target, Branch: b.target, HeadSHA: head})
	return nil
}

// gateOnly scans what a push would publish now, without pushing.
func (b *branch) gateOnly(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	head, err := b.git.Head(ctx)
	if err != nil || head == b.pushed || head == b.baseSHA {
		return err
	}
	_, err = b.sec.gatePush(ctx, head, b.pushed)
	return err
}

// periodic saves work in progress every interval while the agent works
// (until ctx ends or the returned stop is called), so a sandbox that dies
// without a SIGTERM loses minutes, not hours.
func (b *branch) periodic(ctx context.Context, interval time.Duration) (stop func()) {
	if b == nil || !b.spec.pushes || b.spec.personsBranch {
		return func() {}
	}
	stopc := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-stopc:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if err := b.milestone(ctx, "WIP: checkpoint of "+b.taskID); err != nil {
					b.log.Warn().Err(err).Msg("periodic push failed; retrying at the next one")
				}
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(stopc); <-done }) }
}

// save commits what the agent left and pushes, in the modes that push (on
// a person's branch, only a completed run's work).
func (b *branch) save(ctx context.Context, status dispatch.Status) error {
	if b == nil || !b.spec.pushes || b.spec.personsBranch && status != dispatch.StatusCompleted {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.git.RebaseInProgress() {
		// A half-done rebase is no state to push; the remote branch stays
		// as it was.
		_, err := b.git.run(ctx, "", "rebase", "--abort")
		return err
	}
	if status != dispatch.StatusCompleted {
		msg := fmt.Sprintf("WIP: %s (%s)\n\nThe sandbox saved the agent's work in progress.\n\nTask: %s", b.title, status, b.taskID)
		if _, err := b.git.CommitAll(ctx, b.red.String(msg)); err != nil {
			return err
		}
	}
	return b.pushLocked(ctx)
}

// published is the commit the receipt describes: the checkout's HEAD, or
// the last push when the secret scan holds the rest back (the base when
// nothing was pushed); ok is false when there is none to describe.
func (b *branch) published(ctx context.Context) (sha string, ok bool) {
	if b.sec.heldBack() {
		return firstNonEmpty(b.pushed, b.baseSHA), b.pushed != ""
	}
	if sha, err := b.git.Head(ctx); err == nil {
		return sha, true
	}
	return b.baseSHA, false
}
