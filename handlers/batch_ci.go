package handlers

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
)

// Failing checks on a PR that a run holds wait, as review feedback does:
// a pending "batch" of kind batchCI (a lock in the backend, which outlives
// a restart and is shared by replicas) looks at the PR's head again once
// the run has ended. By then the run may have pushed: the new head's
// checks decide, not the old one's.

// batchCI is the kind of a pending look at failing checks.
const batchCI = "ci"

func ciWaitKey(repo string, number int) string {
	return batchPrefix + "ci/" + dispatch.LockKey(repo, number)
}

// waitCI opens (or joins) the PR's pending look at its checks.
func (bs *batches) waitCI(ctx context.Context, t thread, ev event) error {
	full := t.gh.FullName()
	h := batchHolder{
		TaskID: dispatch.NewTaskID(full, t.number, dispatch.ModeRevise, ev.trigger),
		Due:    bs.c.Now().Add(bs.c.ReviewBatchWindow).UTC(), Installation: t.installation,
		Repo: full, Number: t.number, Trigger: ev.trigger, Delivery: t.deliveryID, Kind: batchCI,
	}
	zerolog.Ctx(ctx).Info().Msg("a run holds the PR; its failing checks are looked at again once it ended")
	return bs.enter(ctx, h.key(), h)
}

// recheckCI looks at the PR's head again: when its checks have all
// completed and some failed, the table decides as for a fresh webhook.
func (bs *batches) recheckCI(ctx context.Context, gh hub.GitHub, h batchHolder) error {
	pr, _, ok, err := bs.agentPR(ctx, gh, h.Number)
	if err != nil || !ok {
		return err
	}
	repo, err := gh.Repository(ctx)
	if err != nil {
		return err
	}
	t := thread{gh: gh, installation: h.Installation, repo: repo, number: h.Number, isPR: true, pr: pr, deliveryID: h.Delivery}
	return bs.ci.checksOn(ctx, t, pr.GetHead().GetSHA())
}

// checksOn reads the checks on sha, the head of the PR t, and hands the
// table a ChecksFailed event when they have all completed and some
// failed.
func (cf *ciFixer) checksOn(ctx context.Context, t thread, sha string) error {
	log := zerolog.Ctx(ctx).With().Int("pr", t.number).Str("head", sha).Logger()
	st, err := cf.c.readChecks(ctx, t.gh, sha)
	if err != nil {
		return err
	}
	switch {
	case !st.complete():
		log.Debug().Strs("pending", st.pending).Msg("checks still running")
		return nil
	case len(st.failed) == 0:
		log.Debug().Int("checks", st.checks).Msg("checks passed")
		return nil
	}
	log.Info().Strs("failed", st.names()).Msg("the PR's checks failed")
	_, err = cf.on(log.WithContext(ctx), t, event{kind: lifecycle.ChecksFailed, trigger: ciTrigger(sha), ci: &ciEvent{state: st}})
	return err
}
