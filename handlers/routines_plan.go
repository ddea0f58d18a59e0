package handlers

import (
	"context"

	"github.com/google/go-github/v62/github"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
)

// routinePlan starts the plan of an issue a routine opened, as a writer's
// trigger label would: the table's Label row in the issue's state, the
// App's bot account as the sender. The gate is not asked: whoever could
// put the routine on the default branch can write, and the issue's text is
// the App's own (taskText trusts it). Its trigger (routine-<name>-<tick>,
// run-<comment id>) keeps a second start of the same issue from starting
// anything.
func routinePlan(b *Base) func(ctx context.Context, installation int64, repo *github.Repository, issue *github.Issue, trigger string) error {
	return func(ctx context.Context, installation int64, repo *github.Repository, issue *github.Issue, trigger string) error {
		return startRoutinePlan(ctx, b, installation, repo, issue, trigger)
	}
}

func startRoutinePlan(ctx context.Context, b *Base, installation int64, repo *github.Repository, issue *github.Issue, trigger string) error {
	login, err := b.c.LoadIdentity(ctx)
	if err != nil {
		return err
	}
	t, err := b.thread(installation, repo, issue.GetNumber(), false)
	if err != nil {
		return err
	}
	t.sender, t.deliveryID, t.issue = login, trigger, issue
	ctx = zerolog.Ctx(ctx).With().Str("repo", repo.GetFullName()).Int("issue", issue.GetNumber()).Logger().WithContext(ctx)
	ev := event{kind: lifecycle.Label, trigger: trigger}
	sc, err := b.observe(ctx, t)
	if err != nil {
		return err
	}
	c, ok := lifecycle.Decide(sc.place, sc.state, ev.kind, sc.facts)
	if !ok || c.Do == lifecycle.Nothing {
		return nil
	}
	if triggerActed(sc.marked, repo.GetFullName(), t.number, trigger) {
		return nil
	}
	return b.perform(ctx, t, ev, &sc, c)
}
