package handlers

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/termtext"
	"github.com/sandbox-bot/sandbox-bot/handlers/sanitize"
)

// RoutineStartedData is github/routine_started: the answer to /run.
type RoutineStartedData struct {
	Name string
	// Issue is the issue the routine opened (0: none).
	Issue int
	// Known are the repository's routines, when Name is none of them.
	Known []string
	// Error says why the routine could not start.
	Error string
}

// runNow starts the routine /run names on t's repository now: it always
// opens a new issue. The comment's id is its claim, so a /run delivered to
// two replicas (or redelivered) starts it once.
func (rs *Routines) runNow(ctx context.Context, t thread, text string) error {
	name, _, _ := strings.Cut(strings.TrimSpace(text), " ")
	name, _, _ = strings.Cut(name, "\n")
	full := t.repo.GetFullName()
	target, ok := rs.cat.find(full, name)
	if !ok {
		// This replica may not have read the repository yet.
		if err := rs.cat.load(ctx, t.installation, t.repo, ""); err != nil {
			return err
		}
		target, ok = rs.cat.find(full, name)
	}
	if !ok {
		var known []string
		for _, tg := range rs.cat.list(full) {
			known = append(known, tg.r.Name)
		}
		return rs.c.reply(ctx, t.gh, t.number, "github/routine_started", RoutineStartedData{Name: sanitize.TruncateUTF8(termtext.Clean(name), 60), Known: known})
	}
	trigger := fmt.Sprintf("run-%d", t.commentID)
	st, err := dispatch.ClaimTrigger(ctx, rs.c.Backend, full, name, trigger, rs.holder, rs.now())
	if errors.Is(err, dispatch.ErrClaimed) {
		rs.log.Info().Str("repo", full).Str("routine", name).Str("trigger", trigger).Msg("/run claimed already (another replica, or a redelivery)")
		return nil
	}
	if err != nil {
		return err
	}
	o := routineOpener{rs: rs, t: target, log: rs.log.With().Str("repo", full).Str("routine", name).Str("trigger", trigger).Logger()}
	iss, err := o.run(ctx, trigger, st, true, "")
	data := RoutineStartedData{Name: name, Issue: iss}
	if err != nil {
		data.Error = "GitHub did not open its issue; try again."
	}
	return rs.c.reply(ctx, t.gh, t.number, "github/routine_started", data)
}

// routineLines are /status's lines of a repository's routines.
func routineLines(views []RoutineView) []string {
	out := make([]string, 0, len(views))
	for _, v := range views {
		when := "on " + v.On
		if v.Schedule != "" {
			when = v.Schedule + " " + cmpOr(v.Timezone, "UTC")
			if !v.Next.IsZero() {
				when += ", next " + v.Next.UTC().Format("2006-01-02 15:04 UTC")
			}
		}
		line := fmt.Sprintf("`%s` (%s)", v.Name, when)
		if v.Issue != 0 {
			line += fmt.Sprintf(", last #%d", v.Issue)
		}
		out = append(out, line)
	}
	return out
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
