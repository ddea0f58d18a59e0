package handlers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
)

// on: main_ci_failed. When the checks of the default branch's head have
// all completed and some failed, each such routine opens one issue whose
// body holds what a CI fix run is given (ci_checks.go): each failing
// check, its annotations and the tail of its failing log. A failing head
// is claimed once (redeliveries, replicas); a later head failing the same
// checks opens nothing while the issue for them is open.

// mainChecks looks at sha, a commit of repo's default branch whose checks
// changed.
func (rs *Routines) mainChecks(ctx context.Context, installation int64, repo *github.Repository, sha string) error {
	full := repo.GetFullName()
	var targets []routineTarget
	for _, t := range rs.cat.list(full) {
		if t.r.On == sandboxcfg.OnMainCIFailed {
			targets = append(targets, t)
		}
	}
	if len(targets) == 0 {
		return nil
	}
	gh, err := rs.c.Hub.Repo(installation, full)
	if err != nil {
		return err
	}
	log := zerolog.Ctx(ctx).With().Str("repo", full).Str("sha", sha).Logger()
	if head, _, err := gh.RefCommit(ctx, "heads/"+repo.GetDefaultBranch()); err != nil || !strings.EqualFold(head, sha) {
		log.Debug().Err(err).Msg("routines: not the default branch's head (any more)")
		return err
	}
	state, err := rs.c.readChecks(ctx, gh, sha)
	if err != nil || !state.complete() || len(state.failed) == 0 {
		return err
	}
	names := state.names()
	slices.Sort(names)
	failure := strings.Join(names, ", ")
	var extra string
	for _, t := range targets {
		st, err := rs.claimFailure(ctx, gh, t, sha, failure)
		if err != nil {
			if !errors.Is(err, dispatch.ErrClaimed) {
				log.Error().Err(err).Str("routine", t.r.Name).Msg("routines: claim the failing head")
			}
			continue
		}
		if extra == "" {
			extra = rs.failureText(ctx, gh, state, repo.GetDefaultBranch())
		}
		o := routineOpener{rs: rs, t: t, log: log.With().Str("routine", t.r.Name).Logger()}
		if _, err := o.run(ctx, "head-"+sha, st, true, extra); err != nil {
			return err
		}
	}
	return nil
}

// claimFailure claims the failing head sha for routine t, unless the
// issue opened for the same failing checks is still open, or another
// replica is opening one for them.
func (rs *Routines) claimFailure(ctx context.Context, gh hub.GitHub, t routineTarget, sha, failure string) (dispatch.RoutineState, error) {
	full := t.repo.GetFullName()
	book, err := dispatch.ReadRoutines(ctx, rs.c.Backend, full)
	if err != nil {
		return dispatch.RoutineState{}, err
	}
	openIssue := 0
	if st := book[t.r.Name]; st.Failure == failure && st.Issue != 0 {
		iss, err := gh.Issue(ctx, st.Issue)
		if err != nil && !errors.Is(err, hub.ErrNotFound) {
			return dispatch.RoutineState{}, err
		}
		if err == nil && iss.GetState() == "open" {
			openIssue = st.Issue
		}
	}
	now := rs.now()
	return dispatch.ChangeRoutine(ctx, rs.c.Backend, full, t.r.Name, func(st *dispatch.RoutineState) error {
		trigger := "head-" + sha
		switch {
		case slices.Contains(st.Triggers, trigger):
			return dispatch.ErrClaimed
		case st.Failure == failure && openIssue != 0 && st.Issue == openIssue:
			return dispatch.ErrClaimed // its issue is open
		case st.Failure == failure && st.Busy != 0 && now.Sub(time.UnixMilli(st.Busy)) < dispatch.BusyFor:
			return dispatch.ErrClaimed // being opened by another replica
		}
		st.Triggers = append(st.Triggers, trigger)
		st.Failure, st.Busy, st.At, st.Holder = failure, now.UnixMilli(), now.UnixMilli(), rs.holder
		return nil
	})
}

// failureText is the issue's account of the failing checks: what a CI
// fix run is given of each.
func (rs *Routines) failureText(ctx context.Context, gh hub.GitHub, state ciState, branch string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "### Failing checks on `%.12s` (the head of `%s`)\n", state.sha, branch)
	for i, chk := range state.failed {
		if i == maxCIFailures {
			fmt.Fprintf(&b, "\n…and %d more.\n", len(state.failed)-i)
			break
		}
		f := rs.c.ciFailure(ctx, gh, chk)
		fmt.Fprintf(&b, "\n#### `%s` (%s)", strings.ReplaceAll(f.Name, "`", "'"), f.Conclusion)
		if f.Workflow != "" || f.Step != "" {
			fmt.Fprintf(&b, ": workflow %s, step %s", f.Workflow, f.Step)
		}
		b.WriteString("\n")
		if f.URL != "" {
			fmt.Fprintf(&b, "%s\n", f.URL)
		}
		for _, a := range f.Annotations {
			fmt.Fprintf(&b, "- `%s:%d` %s\n", strings.ReplaceAll(a.Path, "`", "'"), a.Line, a.Message)
		}
		if f.Summary != "" && f.LogTail == "" {
			b.WriteString(fenced(f.Summary))
		}
		if f.LogTail != "" {
			b.WriteString("The end of the failing step's log:\n")
			b.WriteString(fenced(f.LogTail))
		}
	}
	return b.String()
}

// fenced is text in a code block whose fence no line of it can close.
func fenced(text string) string {
	fence := "```"
	for strings.Contains(text, fence) {
		fence += "`"
	}
	return fence + "\n" + strings.TrimRight(text, "\n") + "\n" + fence + "\n"
}
