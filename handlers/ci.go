package handlers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
	"github.com/sandbox-bot/sandbox-bot/handlers/markers"
	"github.com/sandbox-bot/sandbox-bot/handlers/sanitize"
)

// The repository's own CI is the judge people trust: when the checks on
// the head of the App's pull request have all completed and some failed,
// the table's ChecksFailed row decides (ci.fix on, the head the App's own
// push, the failure not the base branch's too, fix runs left), and a fix
// run in revise mode gets each failing check's name, annotations and log
// tail. Everything that bounds it lives on GitHub: the fix runs are counted
// by their acknowledgements' markers, a head's task id derives from its
// sha (one run per head, however often and to whichever replica the
// webhook comes), and the App's pushes are the heads the PR body's run
// history records.

// ciFixer is the CI-fix path of the App's pull requests: it hears that
// a head's checks changed, reads them, hands the table ChecksFailed when
// they all completed and some failed, and performs the table's answer (a
// fix run, or a word that none starts).
type ciFixer struct {
	c      *core
	starts *starter
	// on is the router's way from an event to what the bot does.
	on func(ctx context.Context, t thread, ev event) (lifecycle.Case, error)
}

// ciEvent is what a ChecksFailed event carries, and what its facts found.
type ciEvent struct {
	state ciState
	cfg   sandboxcfg.ResolvedCI
	// alsoOnBase are the failing checks that fail on the base's head too.
	alsoOnBase []string
	// fixes are the fix runs the PR had.
	fixes []ciFix
}

// ciFix is one fix run on a PR, as its acknowledgement's marker says.
type ciFix struct {
	taskID, head string
	checks       []string
}

// ciTrigger is the task-id trigger of a head's failing checks.
func ciTrigger(sha string) string { return "ci-" + strings.ToLower(sha) }

// ciFixes are the fix runs the bot's markers on a PR tell of.
func ciFixes(marked []markers.Comment) []ciFix {
	var out []ciFix
	for _, m := range marked {
		if m.Marker.Kind == markers.KindAck && m.Marker.CIHead != "" &&
			!slices.ContainsFunc(out, func(f ciFix) bool { return f.taskID == m.Marker.TaskID }) {
			out = append(out, ciFix{taskID: m.Marker.TaskID, head: m.Marker.CIHead, checks: m.Marker.CIChecks})
		}
	}
	return out
}

// appPushed reports whether head is a commit the App's runs left the
// PR's branch at: one the body's run history or the markers of the runs'
// ends on the PR record (the marker is posted before the history is
// written, so checks that end in between still find it).
func appPushed(head, body string, marked []markers.Comment) bool {
	head = strings.ToLower(head)
	for _, r := range parseHistory(body) {
		if r.Head == head {
			return true
		}
	}
	for _, m := range marked {
		if m.Marker.Head == head {
			return true
		}
	}
	return false
}

// facts reads what the guards of ChecksFailed ask, each only when the
// ones before it leave the decision open (a held PR only waits).
func (cf *ciFixer) facts(ctx context.Context, t thread, sc *scene, ci *ciEvent) {
	f, log := &sc.facts, zerolog.Ctx(ctx)
	if sc.pr == nil {
		f.CIFixOff = true
		return
	}
	cfg, err := cf.c.loadConfig(ctx, t.installation, t.gh, sc.pr.GetBase().GetRef(), sandboxcfg.Flags{})
	if err != nil {
		log.Info().Err(err).Msg("the configuration does not read; no CI fix")
		f.CIFixOff = true
		return
	}
	ci.cfg = cfg.CI
	if f.CIFixOff = !cfg.CI.Fix; f.CIFixOff || sc.state.Running() {
		return
	}
	if f.PersonPushed = !appPushed(ci.state.sha, sc.pr.GetBody(), sc.marked); f.PersonPushed {
		return
	}
	onBase := cf.c.failingOnBase(ctx, t.gh, sc.pr.GetBase().GetRef())
	for _, c := range ci.state.failed {
		if onBase[c.name] {
			ci.alsoOnBase = append(ci.alsoOnBase, c.name)
		}
	}
	f.BaseFails = len(ci.alsoOnBase) == len(ci.state.failed)
	ci.fixes = ciFixes(sc.marked)
	f.FixesUsedUp = len(ci.fixes) >= cfg.CI.FixAttempts
}

// fix starts the fix run of a head: revise mode on the PR's branch,
// with the failing checks in its work order.
func (cf *ciFixer) fix(ctx context.Context, t thread, ev event, sc *scene) error {
	ci := ev.ci
	// Another delivery of the same head's failure (or another event of
	// it) may have started the run already: the logs are not read again.
	if _, err := cf.c.Backend.Status(ctx, dispatch.NewTaskID(t.gh.FullName(), t.number, dispatch.ModeRevise, ev.trigger)); err == nil {
		zerolog.Ctx(ctx).Info().Msg("the fix run of this head exists already; nothing to do")
		return nil
	}
	report := &dispatch.CIReport{HeadSHA: ci.state.sha, Attempt: len(ci.fixes) + 1, Attempts: ci.cfg.FixAttempts, AlsoOnBase: ci.alsoOnBase}
	for _, c := range ci.state.failed {
		if slices.Contains(ci.alsoOnBase, c.name) {
			continue
		}
		if len(report.Failures) == maxCIFailures {
			break
		}
		report.Failures = append(report.Failures, cf.c.ciFailure(ctx, t.gh, c))
	}
	for _, f := range report.Failures {
		zerolog.Ctx(ctx).Info().Str("check", f.Name).Int("log_tail_bytes", len(f.LogTail)).Int64("log_bytes", f.LogBytes).
			Int("annotations", len(f.Annotations)).Msg("failing check for the fix run")
	}
	req := requestFor(t, ev, dispatch.ModeRevise)
	req.Issue, req.Branch, req.BaseBranch, req.CI = sc.issue, sc.pr.GetHead().GetRef(), sc.pr.GetBase().GetRef(), report
	return cf.starts.start(ctx, t.gh, req)
}

// CIBaseFailingData is github/ci_base_failing: the checks that fail on the
// PR's head fail on its base's head too; no fix run starts.
type CIBaseFailingData struct {
	Marker string
	Head   string
	Base   string
	Checks []string
}

// CIGaveUpData is github/ci_gave_up: the fix runs are used up and the
// checks still fail.
type CIGaveUpData struct {
	Marker   string
	Head     string
	Attempts int
	Failing  []CIFailingLine
	Tried    []CITried
}

// CIFailingLine is one failing check, in a line.
type CIFailingLine struct{ Name, Conclusion string }

// CITried is one fix run the PR had.
type CITried struct {
	TaskID string
	Checks []string
	// Result is how it ended, from the PR's run history ("" when unknown).
	Result string
}

// reply posts the bot's word on failing checks that start no run, once
// per head: under a lock that only one replica takes, after looking again
// at whether the word is there already.
func (cf *ciFixer) reply(ctx context.Context, t thread, ev event, sc *scene, do lifecycle.Action) error {
	ci := ev.ci
	taskID := dispatch.NewTaskID(t.gh.FullName(), t.number, dispatch.ModeRevise, ev.trigger)
	marker := markers.Marker{Kind: markers.KindCI, TaskID: taskID, Mode: dispatch.ModeRevise, Issue: sc.issue, CIHead: ci.state.sha, CIChecks: ci.state.names()}.String()
	key := "ci/" + dispatch.LockKey(t.gh.FullName(), t.number)
	holder := fmt.Sprintf("%s@%d", taskID, cf.c.Now().UnixNano())
	if _, err := cf.c.Backend.Lock(ctx, key, holder); errors.Is(err, dispatch.ErrLocked) {
		zerolog.Ctx(ctx).Info().Msg("another replica answers these failing checks")
		return nil
	} else if err != nil {
		return fmt.Errorf("lock %s: %w", key, err)
	}
	defer func() {
		if err := cf.c.Backend.Unlock(context.WithoutCancel(ctx), key, holder); err != nil {
			zerolog.Ctx(ctx).Warn().Err(err).Msg("release the CI reply's lock")
		}
	}()
	if marked, err := cf.c.botMarked(ctx, t.gh, t.number); err != nil || triggerActed(marked, t.gh.FullName(), t.number, ev.trigger) {
		return err
	}
	if do == lifecycle.ReportBaseFails {
		return cf.c.reply(ctx, t.gh, t.number, "github/ci_base_failing", CIBaseFailingData{Marker: marker, Head: ci.state.sha,
			Base: sc.pr.GetBase().GetRef(), Checks: ci.alsoOnBase})
	}
	data := CIGaveUpData{Marker: marker, Head: ci.state.sha, Attempts: ci.cfg.FixAttempts}
	for _, c := range ci.state.failed {
		data.Failing = append(data.Failing, CIFailingLine{Name: sanitize.Inline(c.name, 100), Conclusion: c.conclusion})
	}
	ended := map[string]dispatch.Status{}
	for _, r := range parseHistory(sc.pr.GetBody()) {
		ended[r.TaskID] = r.Status
	}
	for _, f := range ci.fixes {
		data.Tried = append(data.Tried, CITried{TaskID: f.taskID, Checks: f.checks, Result: string(ended[f.taskID])})
	}
	return cf.c.reply(ctx, t.gh, t.number, "github/ci_gave_up", data)
}

// The acknowledgement's account of a CI fix run, and its marker's.
func ciAck(r *dispatch.CIReport) *CIAck {
	if r == nil {
		return nil
	}
	return &CIAck{Head: r.HeadSHA, Checks: ciChecks(r), Attempt: r.Attempt, Attempts: r.Attempts}
}

func ciHead(r *dispatch.CIReport) string {
	if r == nil {
		return ""
	}
	return r.HeadSHA
}

func ciChecks(r *dispatch.CIReport) []string {
	if r == nil {
		return nil
	}
	out := make([]string, 0, len(r.Failures))
	for _, f := range r.Failures {
		out = append(out, sanitize.Inline(f.Name, 100))
	}
	return out
}
