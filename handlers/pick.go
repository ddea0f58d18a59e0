package handlers

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/handlers/markers"
	"github.com/sandbox-bot/sandbox-bot/handlers/sanitize"
)

// PickData is github/picked: /pick moved the PR's branch, or why not.
type PickData struct {
	// K is the attempt asked for; Branch the PR's branch; Head the
	// commit it now points at ("" when refused).
	K      int
	Branch string
	Head   string
	// Refused says why nothing moved ("" when it did).
	Refused string
	Marker  string
}

// pick moves the PR's branch to attempt k's commit (/pick k): the PR's
// table of attempts says which commit each attempt left on its own
// branch; the branch moves only if it is still where the bot left it (a
// push or a revise run since is not thrown away), and only to the commit
// the attempt's branch holds. The table is updated and the move said.
func (b *Base) pick(ctx context.Context, t thread, ev event, sc *scene) error {
	refuse := func(k int, why string) error {
		return b.c.reply(ctx, t.gh, t.number, "github/picked", PickData{K: k, Refused: why})
	}
	k, err := strconv.Atoi(strings.TrimSpace(ev.cmd.Text))
	if err != nil || k < 1 {
		return refuse(0, fmt.Sprintf("`/pick` takes the number of an attempt, e.g. `/pick 2`; got `%s`.", sanitize.Inline(ev.cmd.Text, 40)))
	}
	m, ok := attemptsOf(sc.pr.GetBody())
	if !ok {
		return refuse(k, "this pull request did not come from several attempts (`/approve --attempts N`).")
	}
	if k > len(m.Attempts) || m.Attempts[k-1].K != k {
		return refuse(k, fmt.Sprintf("there were %d attempts.", len(m.Attempts)))
	}
	row := m.Attempts[k-1]
	if row.Head == "" || row.Out != "" && row.Out != "aborted" {
		return refuse(k, fmt.Sprintf("attempt %d left no change to carry (%s).", k, row.Outcome()))
	}
	if k == m.Picked {
		return refuse(k, fmt.Sprintf("the branch carries attempt %d already.", k))
	}
	branch := sc.pr.GetHead().GetRef()
	// The lease: the branch must be at the commit the bot last put there.
	cur, _, err := t.gh.RefCommit(ctx, "refs/heads/"+branch)
	if err != nil {
		return err
	}
	if m.Picked < 1 || m.Picked > len(m.Attempts) || !strings.EqualFold(cur, m.Attempts[m.Picked-1].Head) {
		return refuse(k, fmt.Sprintf("`%s` has moved since the attempts (a push or a revise run); moving it would drop those commits.", branch))
	}
	// The commit must be the one the attempt's own branch holds (the
	// branch is named from the approval, not read from the body).
	own, _, err := t.gh.RefCommit(ctx, "refs/heads/"+attemptBranch(m.TaskID, k))
	if err != nil {
		return err
	}
	if own == "" || !strings.EqualFold(own, row.Head) {
		return refuse(k, fmt.Sprintf("attempt %d's branch `%s` is gone or moved.", k, attemptBranch(m.TaskID, k)))
	}
	if err := t.gh.UpdateRef(ctx, "refs/heads/"+branch, row.Head); err != nil {
		return fmt.Errorf("move %s to attempt %d (%s): %w", branch, k, row.Head, err)
	}
	zerolog.Ctx(ctx).Info().Int("attempt", k).Str("branch", branch).Str("head", row.Head).Str("by", t.sender).Msg("picked an attempt")
	section, err := b.sets.renderAttempts(t.gh.FullName(), m.Branch, m.TaskID, m.Attempts, k, t.sender)
	if err != nil {
		return err
	}
	if body, ok := spliceAttempts(sc.pr.GetBody(), section); ok {
		if _, err := t.gh.EditPullRequestBody(ctx, t.number, body); err != nil {
			return err
		}
	}
	return b.c.reply(ctx, t.gh, t.number, "github/picked", PickData{K: k, Branch: branch, Head: row.Head,
		Marker: markers.Marker{Kind: markers.KindPicked, TaskID: m.TaskID, Variant: k, By: t.sender, Head: row.Head}.String()})
}
