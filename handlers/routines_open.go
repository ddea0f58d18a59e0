package handlers

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-github/v62/github"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/dispatch/termtext"
	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
	"github.com/sandbox-bot/sandbox-bot/handlers/sanitize"
)

// RoutineLabelPrefix starts the label of the issues a routine opens
// (routine:<name>).
const RoutineLabelPrefix = "routine:"

// Bounds of what a routine's issue says.
const (
	maxRoutineTitle = 120
	maxRoutineBody  = 60_000
	// maxRoutineAnnotations is what GitHub takes in one check-run request.
	maxRoutineAnnotations = 50
)

// routineOpener acts on one claim: the issue the routine opens, or the
// note that it was skipped.
type routineOpener struct {
	rs  *Routines
	t   routineTarget
	log zerolog.Logger
}

// run opens the routine's issue and starts its plan, unless its last
// issue is still open and always is false (then it says so on that issue,
// once). extra is added to the issue's body (a failing head's checks). It
// returns the issue it opened (0: none) and why it could not.
func (o routineOpener) run(ctx context.Context, trigger string, st dispatch.RoutineState, always bool, extra string) (int, error) {
	full := o.t.repo.GetFullName()
	gh, err := o.rs.c.Hub.Repo(o.t.installation, full)
	if err != nil {
		o.record(ctx, "failed: "+err.Error(), nil)
		return 0, err
	}
	if st.Issue != 0 && !always {
		iss, err := gh.Issue(ctx, st.Issue)
		if err != nil && !errors.Is(err, hub.ErrNotFound) {
			o.log.Error().Err(err).Int("issue", st.Issue).Msg("routines: read the routine's last issue")
			o.record(ctx, "failed: "+err.Error(), nil)
			return 0, err
		}
		if err == nil && iss.GetState() == "open" {
			o.skip(ctx, gh, st)
			return 0, nil
		}
	}
	iss, err := o.open(ctx, gh, trigger, extra)
	if err != nil {
		o.log.Error().Err(err).Msg("routines: open the routine's issue")
		o.record(ctx, "failed: "+err.Error(), nil)
		return 0, err
	}
	o.log.Info().Int("issue", iss.GetNumber()).Msg("routine opened its issue")
	o.record(ctx, fmt.Sprintf("opened #%d", iss.GetNumber()), func(st *dispatch.RoutineState) {
		st.Issue, st.SkipNoted = iss.GetNumber(), 0
	})
	if err := o.rs.plan(ctx, o.t.installation, o.t.repo, iss, trigger); err != nil {
		o.log.Error().Err(err).Int("issue", iss.GetNumber()).Msg("routines: start the plan of the routine's issue")
	}
	return iss.GetNumber(), nil
}

// open creates the routine's issue, labeled with the trigger label and
// routine:<name>, by the App.
func (o routineOpener) open(ctx context.Context, gh hub.GitHub, trigger, extra string) (*github.Issue, error) {
	label := RoutineLabelPrefix + o.t.r.Name
	if err := gh.CreateLabel(ctx, label, "bfdadc", "Opened by the routine "+o.t.r.Name+" of .sandbox.yml"); err != nil {
		o.log.Warn().Err(err).Str("label", label).Msg("routines: create the routine's label; GitHub creates it with the issue")
	}
	return gh.CreateIssue(ctx, routineTitle(o.t.r), o.body(trigger, extra), []string{o.rs.c.TriggerLabel, label})
}

// routineTitle is the routine's name and the first line of its task.
func routineTitle(r sandboxcfg.Routine) string {
	first, _, _ := strings.Cut(strings.TrimSpace(r.Task), "\n")
	return sanitize.TruncateUTF8(termtext.Clean(r.Name+": "+strings.TrimSpace(first)), maxRoutineTitle)
}

// body is the task as the routine declares it, what started it, and the
// failing checks (extra) when a red default branch started it.
func (o routineOpener) body(trigger, extra string) string {
	var b strings.Builder
	b.WriteString(strings.TrimSpace(o.t.r.Task))
	b.WriteString("\n\n")
	if extra != "" {
		b.WriteString(extra)
		b.WriteString("\n\n")
	}
	when := "run now with `/run " + o.t.r.Name + "`"
	switch {
	case o.t.r.On == sandboxcfg.OnMainCIFailed:
		when = "the default branch's checks failed"
	case strings.HasPrefix(trigger, "routine-"):
		zone := o.t.r.Timezone
		if zone == "" {
			zone = "UTC"
		}
		when = fmt.Sprintf("its schedule `%s` (%s), tick %s", o.t.r.Schedule, zone, strings.TrimPrefix(trigger, "routine-"+o.t.r.Name+"-"))
	}
	fmt.Fprintf(&b, "---\n_Opened by the routine `%s` of `%s` on the default branch: %s. A plan follows; nothing changes before a writer's `/approve`._\n", o.t.r.Name, sandboxcfg.FileName, when)
	return sanitize.TruncateUTF8(o.rs.c.Secrets.Redact(b.String()), maxRoutineBody)
}

// skip says on the routine's open issue, once, that a tick was skipped.
func (o routineOpener) skip(ctx context.Context, gh hub.GitHub, st dispatch.RoutineState) {
	result := fmt.Sprintf("skipped: #%d is still open", st.Issue)
	o.log.Info().Int("issue", st.Issue).Msg("routine skipped: its last issue is still open")
	if st.SkipNoted == st.Issue {
		o.record(ctx, result, nil)
		return
	}
	note := fmt.Sprintf("The routine `%s` is due again, but this issue (its last) is still open, so it opened no new one. It skips its ticks while this issue is open; close it to let the next tick open one, or run it now with `/run %s`.", o.t.r.Name, o.t.r.Name)
	if _, err := gh.Comment(ctx, st.Issue, note); err != nil {
		o.log.Warn().Err(err).Int("issue", st.Issue).Msg("routines: say the tick was skipped")
		o.record(ctx, result, nil)
		return
	}
	o.record(ctx, result, func(st *dispatch.RoutineState) { st.SkipNoted = st.Issue })
}

// record writes what the claim came to into the routine's book, and ends
// its busy mark.
func (o routineOpener) record(ctx context.Context, result string, also func(*dispatch.RoutineState)) {
	if err := dispatch.Done(ctx, o.rs.c.Backend, o.t.repo.GetFullName(), o.t.r.Name, sanitize.TruncateUTF8(result, 300), also); err != nil {
		o.log.Warn().Err(err).Msg("routines: record the result in the routine's book")
	}
}

// configBook is the routine book's entry of the file itself: its
// triggers are the commits whose bad routines were reported (no routine
// can have the name: routine names start with a letter or digit).
const configBook = "-file"

// reportRoutineErrors puts a failing check run on sha naming each bad
// routine's file, line and column, once per commit across replicas.
func (c *core) reportRoutineErrors(ctx context.Context, gh hub.GitHub, sha string, errs sandboxcfg.Errors) error {
	name := c.CheckName + " routines"
	if runs, err := gh.CheckRuns(ctx, sha, name); err != nil || len(runs) > 0 {
		return err
	}
	if _, err := dispatch.ClaimTrigger(ctx, c.Backend, gh.FullName(), configBook, "invalid-"+sha, "", c.Now()); err != nil {
		if errors.Is(err, dispatch.ErrClaimed) {
			return nil // another replica reports it
		}
		return err
	}
	clean := func(s string, n int) string { return plainText(c.Secrets, s, n) }
	var lines []string
	var anns []*github.CheckRunAnnotation
	for _, e := range errs {
		lines = append(lines, "- `"+strings.ReplaceAll(clean(e.Error(), 500), "`", "'")+"`")
		if len(anns) == maxRoutineAnnotations {
			continue
		}
		line := max(e.Pos.Line, 1)
		a := &github.CheckRunAnnotation{Path: github.String(clean(e.File, maxPathLen)), StartLine: github.Int(line), EndLine: github.Int(line),
			AnnotationLevel: github.String("failure"), Title: github.String("routine not valid"), Message: github.String(clean(e.Field+": "+e.Msg, 1000))}
		if e.Pos.Column > 0 {
			a.StartColumn, a.EndColumn = github.Int(e.Pos.Column), github.Int(e.Pos.Column)
		}
		anns = append(anns, a)
	}
	summary := fmt.Sprintf("These routines of `%s` are not valid, and do not run until they are fixed; the others run as declared:\n\n%s",
		sandboxcfg.FileName, strings.Join(lines, "\n"))
	_, err := gh.CreateCheckRun(ctx, github.CreateCheckRunOptions{
		Name: name, HeadSHA: sha, Status: github.String("completed"), Conclusion: github.String("failure"),
		Output: &github.CheckRunOutput{Title: github.String(fmt.Sprintf("%d routine(s) not valid", len(errs))),
			Summary: github.String(sanitize.TruncateUTF8(summary, 60_000)), Annotations: anns},
	})
	return err
}
