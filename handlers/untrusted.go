package handlers

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers/sanitize"
)

// The receipt (result.json) is written inside the sandbox, where the agent
// runs: it is the sandbox's word, not a fact. The backends read it without
// following links, capped and strictly decoded; here the bot checks what
// it acts on (the branch) and cleans every text it will post.

// rejectedMessage is what the failure comment says about a result.json the
// backend refused; the details (paths, sizes) go to the log only.
const rejectedMessage = "The sandbox left a result.json the bot does not accept " +
	"(a symbolic link, not a regular file, larger than 1 MiB, or not the receipt's schema), so nothing it says is used. " +
	"The bot's log has the details."

// rejectedResult stands for a result.json the backend refused: the run
// failed, and nothing in the file is used.
func rejectedResult(meta dispatch.Meta, why string) *dispatch.Result {
	return &dispatch.Result{SchemaVersion: dispatch.ResultVersion, TaskID: meta.TaskID, Mode: meta.Mode,
		Status: dispatch.StatusFailed, Error: &dispatch.RunError{Message: why}}
}

var (
	shaRE       = regexp.MustCompile(`^[0-9a-fA-F]{1,64}$`) // hex only: it ends up in URLs
	mediaPathRE = regexp.MustCompile(`^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$`)
)

// vetResult checks and cleans a result before anything of it is posted.
// A branch other than the run's own fails the run (the bot would
// otherwise open or edit a PR from any branch the sandbox names). Text is
// redacted first and then sanitized and cut, so no cut leaves half a
// secret behind.
func (rk *resultKeeper) vetResult(rc *runContext, res *dispatch.Result) *dispatch.Result {
	if res == nil {
		return nil
	}
	if res.Branch != "" && !rk.isRunBranch(rc, res.Branch) {
		want := rc.branch
		if want == "" {
			want = "none"
		}
		return rejectedResult(rc.meta, fmt.Sprintf("The sandbox's result.json names the branch %q, but this run's branch is %s; "+
			"the bot does not open or update a pull request from another branch.", sanitize.Inline(rk.c.Secrets.Redact(res.Branch), 200), want))
	}
	cp := *res
	clean := func(s string, max int) string {
		return strings.TrimSpace(sanitize.Markdown(rk.c.Secrets.Redact(s), max))
	}
	cp.Plan = clean(res.Plan, sanitize.MaxPlanBytes)
	cp.PRSummary = clean(res.PRSummary, sanitize.MaxSummaryBytes)
	if res.Error != nil {
		e := *res.Error
		// Shown in a code fence: redacted and cut, not escaped.
		e.Message = sanitize.TruncateUTF8(rk.c.Secrets.Redact(e.Message), sanitize.MaxErrorBytes)
		if e.Diagnostic != nil {
			d := *e.Diagnostic
			d.LastEventType = sanitize.Inline(rk.c.Secrets.Redact(d.LastEventType), 80)
			e.Diagnostic = &d
		}
		cp.Error = &e
	}
	cp.Validation = nil
	for _, c := range res.Validation {
		c.Name = sanitize.Inline(rk.c.Secrets.Redact(c.Name), 100)
		c.Command = sanitize.Inline(rk.c.Secrets.Redact(c.Command), 300)
		c.OutputTail = sanitize.TruncateUTF8(rk.c.Secrets.Redact(c.OutputTail), sanitize.MaxErrorBytes)
		cp.Validation = append(cp.Validation, c)
	}
	cp.Repairs = nil
	for _, rp := range res.Repairs {
		var names []string
		for _, n := range rp.FailedChecks {
			names = append(names, sanitize.Inline(rk.c.Secrets.Redact(n), 100))
		}
		rp.FailedChecks = names
		cp.Repairs = append(cp.Repairs, rp)
	}
	cp.Commits = nil
	for _, c := range res.Commits {
		if shaRE.MatchString(c.SHA) {
			cp.Commits = append(cp.Commits, dispatch.Commit{SHA: c.SHA, Message: sanitize.Inline(rk.c.Secrets.Redact(c.Message), 200)})
		}
	}
	if !shaRE.MatchString(cp.HeadSHA) {
		cp.HeadSHA = ""
	}
	if !shaRE.MatchString(cp.MediaCommit) {
		cp.MediaCommit = ""
	}
	// Media paths become link targets in the PR body: only plain relative
	// paths, so none can close the link and add markdown of its own.
	cp.ScreenshotPaths = mediaPaths(res.ScreenshotPaths)
	cp.RecordingPaths = mediaPaths(res.RecordingPaths)
	cp.Artifacts = mediaPaths(res.Artifacts)
	vetMediaAndTools(&cp, res, rk.c.Secrets.Redact)
	cp.Session = vetSession(res.Session, rk.c.Secrets.Redact)
	if im := res.Images; im != nil {
		cp.Images = &dispatch.ImagesReport{Given: max(im.Given, 0), Note: sanitize.Inline(rk.c.Secrets.Redact(im.Note), 200)}
	}
	vetSetupAndTimings(&cp, rk.c.Secrets.Redact)
	vetChecks(&cp, res, rk.c.Secrets.Redact)
	return &cp
}

// isRunBranch reports whether branch is the one this run works on: the
// branch its acknowledgement named, or, when that is unknown, one of the
// task's own agent/<task-id>-... branches for runs that make one.
func (rk *resultKeeper) isRunBranch(rc *runContext, branch string) bool {
	if rc.branch != "" {
		return branch == rc.branch
	}
	switch rc.meta.Mode {
	case dispatch.ModeExecute:
		return strings.HasPrefix(branch, dispatch.BranchPrefix+strings.ToLower(rc.meta.TaskID)+"-")
	}
	return false
}

func mediaPaths(paths []string) []string {
	var out []string
	for _, p := range paths {
		if mediaPathRE.MatchString(p) && !strings.Contains(p, "..") {
			out = append(out, p)
		}
	}
	return out
}
