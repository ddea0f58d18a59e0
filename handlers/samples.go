package handlers

import (
	"maps"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers/follow"
	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
	"github.com/sandbox-bot/sandbox-bot/handlers/markers"
	"github.com/sandbox-bot/sandbox-bot/handlers/rank"
)

// ReplySamples returns, for every github/*.tmpl, data of its type to
// render an operator's override with at start (templates.Set.CheckOverrides):
// a field the template names that the type lacks stops the bot there, with
// the file and line, instead of failing a reply on an issue later. Several
// samples take a template through its main branches (with and without a
// receipt, each mode). A new reply template gets its samples here;
// TestReplySamplesCoverEveryTemplate fails until it does.
func ReplySamples() map[string][]any {
	const task = "T-0123456789abcdef"
	plan := sampleReceipt(task, dispatch.ModePlan, sampleResult(task, dispatch.StatusCompleted))
	done := sampleReceipt(task, dispatch.ModeExecute, sampleResult(task, dispatch.StatusCompleted))
	failed := sampleReceipt(task, dispatch.ModeExecute, sampleResult(task, dispatch.StatusHung))
	lost := sampleReceipt(task, dispatch.ModeExecute, nil)
	noShots := sampleResult(task, dispatch.StatusCompleted)
	noShots.ScreenshotPaths, noShots.MediaError = nil, "the dev server did not answer on port 5173 within 90s"
	doneNoShots := sampleReceipt(task, dispatch.ModeExecute, noShots)
	taskDone := sampleReceipt(task, dispatch.ModeTask, sampleResult(task, dispatch.StatusCompleted))
	marker := markers.Marker{Kind: markers.KindResult, TaskID: task, Mode: dispatch.ModeExecute, Issue: 7}.String()
	issueCmds, prCmds := commandsFor(false), commandsFor(true)

	samples := map[string][]any{
		"github/ack":             ackSamples(task, marker),
		"github/refusal":         {RefusalData{User: "mallory", Action: "use `/approve`"}},
		"github/ci_base_failing": {CIBaseFailingData{Marker: marker, Head: "0123abc", Base: "main", Checks: []string{"test"}}},
		"github/ci_gave_up": {CIGaveUpData{Marker: marker, Head: "0123abc", Attempts: 2, Failing: []CIFailingLine{{Name: "test", Conclusion: "failure"}},
			Tried: []CITried{{TaskID: task, Checks: []string{"test"}, Result: "completed"}, {TaskID: task, Checks: []string{"test", "lint"}}}}},
		"github/busy":          {BusyData{Holder: task, HolderMode: dispatch.ModePlan, Mode: dispatch.ModeExecute, Command: "approve"}, BusyData{Holder: task, Mode: dispatch.ModePlan}},
		"github/command_error": {CommandErrorData{Error: "unknown flag --budgte", Commands: issueCmds, State: lifecycle.LabelAwaitingApproval}, CommandErrorData{Error: "x", Commands: prCmds, OnPR: true, State: lifecycle.LabelRunning}, CommandErrorData{Error: "x", Commands: issueCmds, State: lifecycle.LabelPlanning}},
		"github/config_error":  {ConfigErrorData{Source: "octo-org/hello", Error: "line 3: unknown field \"modle\"", File: ".sandbox.yml"}},
		"github/over_budget": {OverBudgetData{Mode: dispatch.ModePlan, Scope: "installation", Budget: "$500.00", Spent: "$492.10", Reserved: "$5.00", Left: "$2.90",
			Asked: "$5.00", Floor: "$3.00", Resets: "1 December 2026 00:00 UTC", Setting: "budgets.installation_monthly_usd", Again: "/approve", Marker: marker},
			OverBudgetData{Mode: dispatch.ModeRevise, Scope: "repository", Budget: "$50.00", Spent: "$50.00", Reserved: "$0.00", Left: "$0.00", Unknown: 2,
				Asked: "$5.00", Floor: "$1.00", Resets: "1 December 2026 00:00 CET", Setting: "budgets.repo_monthly_usd", Again: "/retry", Marker: marker}},
		"github/over_ceiling":   {OverCeilingData{Command: "approve", Flag: "budget", Asked: "$500.00", Ceiling: "$10.00", Within: "10", Setting: "limits.max_budget_usd"}, OverCeilingData{Flag: "timeout", Asked: "600m", Ceiling: "120m", Within: "120", Setting: "limits.max_timeout_minutes"}},
		"github/branch_updated": {BranchUpdatedData{Base: "main"}},
		"github/start_failed":   {StartFailedData{Marker: marker, TaskID: task, Mode: dispatch.ModePlan, What: "the sandbox backend refused the run", Todo: "Then comment `/retry`.", Delivery: "d-1"}},
		"github/stale_lock":     {StaleLockData{Holder: task}},
		"github/attempts_started": {AttemptsStartedData{TaskID: task, N: 2, Budget: 3, Rule: rank.Rule, Marker: marker,
			Attempts: []rank.Row{{K: 1, TaskID: task, Branch: attemptBranch(task, 1)}, {K: 2, TaskID: task, Branch: attemptBranch(task, 2)}}}},
		"github/attempt_not_started": {AttemptNotStartedData{K: 2, N: 3, What: "the sandbox backend refused the run.", Marker: marker}},
		"github/attempts_failed":     {AttemptsFailedData{Attempts: "### Attempts\n\n(table)", Marker: marker}, AttemptsFailedData{Attempts: "(table)", Aborted: true, Marker: marker}},
		"github/picked":              {PickData{K: 2, Branch: "agent/t-1-a", Head: "0123abc", Marker: marker}, PickData{K: 5, Refused: "there were 3 attempts."}},
		"github/pr_attempts":         {sampleAttempts(task, 3, ""), sampleAttempts(task, 2, "alice"), sampleAttempts(task, 0, "")},
		"github/abort_requested":     {AbortRequestedData{Marker: marker, TaskID: task, By: "alice"}},
		"github/queued":              {QueuedData{TaskID: task, Mode: dispatch.ModePlan, Place: 1, Caps: []string{"2 in all"}, Marker: marker}, QueuedData{TaskID: task, Mode: dispatch.ModeExecute, Place: 3, Ahead: 2, Caps: []string{"4 in all", "1 per repository"}, Marker: marker}},
		"github/queue_aborted":       {QueueAbortedData{TaskID: task, By: "alice", Marker: marker}},
		"github/progress":            {follow.ProgressData{Marker: marker, Title: "agent: step 3", Text: "Task `" + task + "` (execute) · step 3"}},
		"github/progress_done":       {follow.ProgressDoneData{Marker: marker, Conclusion: "success", Title: "Done", Summary: "Added a login page."}, follow.ProgressDoneData{Marker: marker, Conclusion: "neutral", Title: "No changes", Summary: "Nothing changed."}},
		"github/pr_checks":           {PRChecksData{Result: sampleChecks(task, true)}, PRChecksData{Result: sampleChecks(task, false)}},
		"github/plan_comment": {PlanCommentData{Receipt: plan, Marker: marker, MaxRounds: 5, CostSoFar: 1.25, PlanStart: markers.PlanStart, PlanEnd: markers.PlanEnd},
			PlanCommentData{Receipt: plan, Marker: marker, MaxRounds: 5, PlanStart: markers.PlanStart, PlanEnd: markers.PlanEnd,
				Images: []markers.ImageNote{{Name: "the issue, image 1 (login.png)"}, {Name: "the issue, image 2 (logs.txt)", Why: "its bytes are not a PNG, JPEG, GIF or WebP image"}}},
			PlanCommentData{Receipt: plan, Marker: marker, MaxRounds: 5, PlanStart: markers.PlanStart, PlanEnd: markers.PlanEnd,
				Images: []markers.ImageNote{{Name: "the issue, image 1"}}, ImagesNote: "the command harness takes no images"}},
		"github/pr_body": {PRBodyData{Receipt: done, Marker: marker, MediaBase: "https://github.com/octo-org/hello/raw/0123abc/", PlanURL: "https://github.com/octo-org/hello/issues/7#issuecomment-1",
			History: historyStart + "\n### Runs\n" + historyEnd}, PRBodyData{Receipt: lost, Marker: marker}, PRBodyData{Receipt: doneNoShots, Marker: marker}},
		"github/pr_history": {PRHistoryData{TotalUSD: 0.63, Runs: []RunEntry{
			{TaskID: task, Mode: dispatch.ModeExecute, Attempt: 1, Status: dispatch.StatusCompleted, CostUSD: 0.42, Steps: 12, URL: "https://github.com/octo-org/hello/issues/7#issuecomment-3"},
			{TaskID: task, Mode: dispatch.ModeRevise, Attempt: 2, Status: dispatch.StatusFailed, CostUSD: 0.21, Steps: 5},
		}}},
		"github/inline_reply": {
			InlineReplyData{Marker: marker, TaskID: task, Commit: "0123abcdef", CommitURL: "https://github.com/octo-org/hello/commit/0123abcdef", Comments: 1},
			InlineReplyData{Marker: marker, TaskID: task, Comments: 2},
		},
		"github/pr_opened": {PROpenedData{Receipt: done, Marker: marker, PRURL: "https://github.com/octo-org/hello/pull/8", PRNumber: 8}, PROpenedData{Receipt: lost, Marker: marker}},
		"github/done":      {DoneData{Receipt: done, Marker: marker}, DoneData{Receipt: lost, Marker: marker}},
		"github/task_done": {
			TaskDoneData{Receipt: taskDone, Marker: marker, Artifacts: &ArtifactsData{
				Branch: ArtifactBranch(task), TreeURL: "https://github.com/octo-org/hello/tree/agent-artifacts/" + task, Commit: "0123abc",
				Files:   []ArtifactLink{{Name: "report.md", URL: "https://github.com/octo-org/hello/blob/0123abc/report.md", Size: "1.2 KiB", Redacted: true}},
				Skipped: []SkippedArtifactLine{{Name: "data.bin", Size: "40 MiB", Reason: dispatch.SkipFileCap}}, MoreSkipped: 2, MoreFiles: 3,
				Caps: "5.0 MiB per file, 20 MiB in all, 100 files",
			}},
			TaskDoneData{Receipt: taskDone, Marker: marker, Artifacts: &ArtifactsData{Caps: "5.0 MiB per file", Error: "GitHub refused the artifacts branch."}},
			TaskDoneData{Receipt: taskDone, Marker: marker}, TaskDoneData{Receipt: lost, Marker: marker},
		},
		"github/no_changes": {NoChangesData{Receipt: done, Marker: marker}, NoChangesData{Receipt: lost, Marker: marker}},
		"github/failure":    {FailureData{Receipt: failed, Marker: marker, Retry: "/retry"}, FailureData{Receipt: lost, Marker: marker, Retry: "/retry"}},
		"github/aborted":    {AbortedData{Receipt: done, Marker: marker, By: "alice"}, AbortedData{Receipt: lost, Marker: marker}},
	}
	maps.Copy(samples, previewSamples(task))
	maps.Copy(samples, statusSamples(task))
	for _, name := range lifecycle.Replies() {
		samples["github/"+name] = tableReplySamples(task, issueCmds, prCmds)
	}
	return samples
}

// ackSamples are github/ack's: each kind of run, and the acknowledgements
// that name what was left out, a vouched report, a CI fix and a live page.
func ackSamples(task, marker string) []any {
	acks := make([]any, 0, 8)
	for _, m := range []dispatch.Mode{dispatch.ModePlan, dispatch.ModeExecute, dispatch.ModeContinue, dispatch.ModeRevise, dispatch.ModeRebase, dispatch.ModeTask, dispatch.ModeReview, dispatch.ModeFix} {
		acks = append(acks, AckData{TaskID: task, Mode: m, Branch: "agent/7-add-login", Budget: 3, Harness: "opencode", Issue: 7, Round: 2, Attempt: 2, HasPlan: true, Marker: marker})
	}
	return append(acks,
		AckData{TaskID: task, Mode: dispatch.ModePlan, Budget: 3, Harness: "claude-code", Issue: 7, Round: 1, Attempt: 1, IssueAuthorExcluded: "mallory", Excluded: []string{"eve"}, Marker: marker},
		AckData{TaskID: task, Mode: dispatch.ModeExecute, Budget: 3, Harness: "opencode", Issue: 7, Attempt: 1, IssueAuthorExcluded: "mallory", HasPlan: true, Marker: marker,
			ReportWithheld: "Its title or description changed after @alice vouched for it, so the changed text was not passed."},
		AckData{TaskID: task, Mode: dispatch.ModePlan, Budget: 3, Harness: "opencode", Issue: 7, Round: 1, Attempt: 1, Excluded: []string{"eve"}, Marker: marker,
			Report: &ReportAck{Author: "mallory", VouchedBy: "alice", Passed: "its title and its description (120 characters)", Removed: []string{"14 words of the Markdown source that GitHub's rendering does not show"}}},
		AckData{TaskID: task, Mode: dispatch.ModeRevise, Branch: "agent/7-add-login", Budget: 3, Harness: "opencode", Issue: 7, Attempt: 1, Marker: marker,
			CI: &CIAck{Head: "0123abc", Checks: []string{"test", "lint"}, Attempt: 1, Attempts: 2}},
		AckData{TaskID: task, Mode: dispatch.ModeExecute, Budget: 3, Harness: "opencode", Issue: 7, Attempt: 1, Excluded: []string{"eve", "oscar"}, LiveURL: "https://bot.example.com/runs/" + task, Marker: marker})
}

// statusSamples are /status's and /run's replies: a run going, waiting in
// the queue, ended, refused by a budget; a routine started, unknown, or
// not started.
func statusSamples(task string) map[string][]any {
	return map[string][]any{
		"github/routine_started": {
			RoutineStartedData{Name: "weekly-deps", Issue: 12}, RoutineStartedData{Name: "weekly-dep", Known: []string{"weekly-deps", "red-main"}},
			RoutineStartedData{Name: "weekly-deps", Error: "GitHub did not answer."},
		},
		"github/status": {
			StatusData{User: "maya", TaskID: task, Mode: dispatch.ModeExecute, Running: true, Stage: "validate", Message: "check test", Elapsed: "4m 10s", CostUSD: 0.42, HasCost: true,
				CheckURL: "https://github.com/octo-org/hello/runs/1", LiveURL: "https://bot.example.com/runs/" + task, PlanURL: "https://github.com/octo-org/hello/issues/7#issuecomment-1"},
			StatusData{User: "maya", TaskID: task, Mode: dispatch.ModePlan, Running: true, Place: 2, Elapsed: "3m 5s"},
			StatusData{User: "maya", TaskID: task, Mode: dispatch.ModePlan, Outcome: "failed", Elapsed: "1m 2s", ResultURL: "https://github.com/octo-org/hello/issues/7#issuecomment-2"},
			StatusData{User: "maya", TaskID: task, Mode: dispatch.ModePlan, Outcome: "was refused: too little was left of the month's budget", Budgets: []BudgetLine{
				{Scope: "installation", Budget: "$500.00", Spent: "$412.30", Reserved: "$10.00", Left: "$77.70", Unknown: 1},
				{Scope: "repository", Budget: "$50.00", Spent: "$48.00", Reserved: "$0.00", Left: "$2.00"}}},
		},
	}
}

// tableReplySamples are the samples of every reply the tables choose by
// name (TableReplyData): a reply added to the table is checked with them,
// with nothing to write here. Between them they take each reply through
// its branches: an issue and the App's PR, another's PR, a holder in a
// later round or none, a last run or none.
func tableReplySamples(task string, issueCmds, prCmds []string) []any {
	base := TableReplyData{Commands: issueCmds, MaxRounds: 5, TriggerLabel: "agent", Slug: "sandbox-bot"}
	with := func(f func(*TableReplyData)) TableReplyData {
		d := base
		f(&d)
		return d
	}
	return []any{
		with(func(d *TableReplyData) {
			d.Command, d.State, d.TaskID, d.Round, d.Mode = "approve", lifecycle.LabelPlanning, task, 1, dispatch.ModePlan
		}),
		with(func(d *TableReplyData) {
			d.Command, d.OnPR, d.Commands, d.State, d.TaskID, d.Round, d.Mode = "revise", true, prCmds, lifecycle.LabelRunning, task, 2, dispatch.ModeRevise
		}),
		with(func(d *TableReplyData) { d.Command, d.OnPR, d.NotAgentPR, d.Commands = "revise", true, true, nil }),
		with(func(d *TableReplyData) { d.Command, d.Round = "rebase", 1 }),
	}
}

// previewSamples are the /preview replies' samples.
func previewSamples(task string) map[string][]any {
	marker := markers.Marker{Kind: markers.KindPreview, TaskID: task, Mode: dispatch.ModePreview}.String()
	live := "https://bot.example.com/runs/" + task
	return map[string][]any{
		"github/preview": {
			PreviewData{Marker: marker, URL: live + "/preview/", LiveURL: live, SHA: "0a1b2c3d4e5f", Minutes: 30, Until: "14:05 UTC"},
			PreviewData{Marker: marker, LiveURL: live, SHA: "0a1b2c3d4e5f", Ended: true, Outcome: "ended after 30m0s"},
		},
		"github/preview_refused": {PreviewRefusedData{Reason: "this pull request comes from a fork"}},
		"github/fixed": {FixData{Marker: marker, SHA: "0123abc", Branch: "faster-add", Summary: "Dropped the `+ 1`.", Cost: 0.2, LiveURL: "https://bot.example.com/runs/" + task},
			FixData{Marker: marker, Branch: "faster-add"}, FixData{Marker: marker, Suggest: true, Suggested: 2, Outside: 1, Summary: "Dropped the `+ 1`."}},
		"github/fix_refused": {FixRefusedData{Reason: "the branch moved since the review"}},
		"github/review": {
			ReviewData{Marker: marker, Summary: "The sum is off by one.", Inline: 1, Head: "0123abc", Cost: 0.42, Seconds: 95, LiveURL: "https://bot.example.com/runs/" + task,
				Checks: []ReviewCheck{{Name: "test", Command: "sh test.sh", Seconds: "2s", Failing: []string{"calc.sh:2: want 4, got 5"}}, {Name: "lint", Command: "shellcheck *.sh", Passed: true, Seconds: "1s"}}},
			ReviewData{Marker: marker, Head: "0123abc"}},
	}
}

func sampleReceipt(task string, mode dispatch.Mode, res *dispatch.Result) Receipt {
	return Receipt{TaskID: task, Mode: mode, Repo: "octo-org/hello", Issue: 7, Number: 7, Branch: "agent/7-add-login", Attempt: 2, Round: 2, Result: res}
}

// sampleResult is a receipt with every list filled, so templates walk
// their loops.
func sampleResult(task string, status dispatch.Status) *dispatch.Result {
	res := &dispatch.Result{
		SchemaVersion: dispatch.ResultVersion, TaskID: task, Mode: dispatch.ModeExecute, Status: status, DurationSeconds: 754,
		Branch: "agent/7-add-login", HeadSHA: "0123abc", Commits: []dispatch.Commit{{SHA: "0123abc", Message: "Add a login page"}},
		DiffStats: dispatch.DiffStats{FilesChanged: 3, Insertions: 120, Deletions: 4},
		Plan:      "1. Add the page.\n2. Test it.", PRSummary: "Adds a login page.",
		Validation: []dispatch.CheckResult{
			{Name: "test", Command: "go test ./...", Passed: status == dispatch.StatusCompleted, Attempts: 2, DurationSeconds: 30, OutputTail: "FAIL: TestLogin"},
		},
		Repairs:         []dispatch.Repair{{Attempt: 1, FailedChecks: []string{"test"}, CostUSD: 0.12, Fixed: true}},
		TokenUsage:      dispatch.TokenUsage{Input: 1000, Output: 200, Reasoning: 50, CacheRead: 300, CacheWrite: 20, TotalCostUSD: 0.42, Steps: 12},
		ScreenshotPaths: []string{".sandbox-bot/media/login.png"}, RecordingPaths: []string{".sandbox-bot/media/login.webm"},
		MediaCommit: "0123abc", Artifacts: []string{"report.md"},
		Setup:   &dispatch.SetupReport{Status: dispatch.SetupCached, Cache: "restored entry 1a2b3c4d5e6f (12 MiB, saved on 0123abc)", Seconds: 0.8},
		Timings: sampleTimings(),
	}
	if status != dispatch.StatusCompleted {
		res.Error = &dispatch.RunError{Message: "the agent sent no event for 300 s", Diagnostic: &dispatch.Diagnostic{
			LastEventType: "tool_use", LastEventAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), CurrentStep: 9, CompletedSteps: 8, CostSoFarUSD: 0.4, IdleSeconds: 300,
		}}
	}
	return res
}

// sampleTimings is a second run's start: setup restored from the cache.
func sampleTimings() *dispatch.Timings {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	return &dispatch.Timings{RequestedAt: at, SandboxStarted: at.Add(sec(1.1)), FirstAgentEvent: at.Add(sec(5.2)), FirstEventSeconds: 5.2,
		Stages: []dispatch.StageTiming{
			{Stage: "dispatch", Start: at, Seconds: 1.1, Note: "bot and container start"},
			{Stage: "sandbox", Start: at.Add(sec(1.1)), Seconds: 0.1},
			{Stage: "clone", Start: at.Add(sec(1.3)), Seconds: 0.4},
			{Stage: "setup", Start: at.Add(sec(1.7)), Seconds: 0.8, Note: dispatch.SetupCached},
			{Stage: "agent", Start: at.Add(sec(2.6)), Seconds: 40},
		}}
}

// sampleChecks is a receipt with every check before the PR; without
// findings, none held, nothing outside the plan and no review.
func sampleChecks(task string, findings bool) *dispatch.Result {
	r := sampleResult(task, dispatch.StatusCompleted)
	r.PlanScope = &dispatch.PlanScope{Items: []dispatch.PlanItem{{Path: "src/login.ts", Note: "the form", Changed: []string{"src/login.ts"}}, {Path: "docs/"}},
		Outside: []dispatch.OutsideChange{{File: "Makefile", Reason: "a target for the tests"}, {File: "x.txt"}}}
	r.Dependencies = &dispatch.Dependencies{AdvisoryDB: "OSV, 120 advisories", Errors: []string{"web/package-lock.json: not JSON"},
		Changes:    []dispatch.DependencyChange{{Ecosystem: "npm", Name: "left-pad", Change: dispatch.DepAdded, To: "1.3.1", Manifest: "package-lock.json"}, {Ecosystem: "Go", Name: "golang.org/x/net", Change: dispatch.DepRemoved, From: "v0.1.0", Manifest: "go.mod"}},
		Advisories: []dispatch.Advisory{{ID: "GHSA-xxxx", Ecosystem: "npm", Name: "left-pad", Version: "1.3.0", Summary: "pads wrong", Fixed: "1.3.1"}}}
	r.SecretScan = &dispatch.SecretScan{Scanner: "gitleaks 8.30.1", Commits: 3, Repaired: 1, Squashed: 1,
		Findings: []dispatch.SecretFinding{{Rule: "aws-access-token", File: "cfg.go", Line: 3}},
		Allowed:  []dispatch.SecretFinding{{Rule: "generic-api-key", File: "testdata/k.py", Line: 1, Allowlist: ".gitleaksignore"}}}
	r.Review = &dispatch.Review{Harness: "opencode", Model: "anthropic/claude-haiku-4-5", Text: "**Risks**\n- none", CostUSD: 0.04, Error: "x"}
	if !findings {
		r.PlanScope.Outside, r.Dependencies.Advisories, r.SecretScan.Findings, r.SecretScan.Allowed, r.Review = nil, nil, nil, nil, nil
	}
	return r
}

// sampleAttempts is a table of three attempts carrying attempt carried
// (0: none), picked by by.
func sampleAttempts(task string, carried int, by string) AttemptsData {
	rows := []rank.Row{
		{K: 1, TaskID: task, Branch: attemptBranch(task, 1), Head: "01", Status: "completed", Checks: []rank.Check{{Name: "test", Passed: false}}, Secrets: 0, Advisories: -1, Scope: -1, Files: 1, Insertions: 1, CostUSD: 0.1},
		{K: 2, TaskID: task, Branch: attemptBranch(task, 2), Head: "02", Status: "completed", Checks: []rank.Check{{Name: "test", Passed: true}}, Secrets: 0, Advisories: 0, Scope: 1, Review: "ok", Files: 4, Insertions: 80, Deletions: 3, CostUSD: 0.3, Tokens: 1200, Seconds: 61},
		{K: 3, Branch: attemptBranch(task, 3), Status: "not started", Out: "failed to start: see the comment on the issue", Secrets: -1, Advisories: -1, Scope: -1},
	}
	d := AttemptsData{Carried: carried, Best: 2, By: by, Rule: rank.Rule, Marker: markers.Marker{Kind: markers.KindAttempts, TaskID: task}.String()}
	for i, r := range rows {
		d.Rows = append(d.Rows, AttemptView{Row: r, Rank: i + 1, Compare: "https://github.com/o/r/compare/main..." + r.Branch, RunURL: "https://bot.example.com/runs/" + task})
	}
	return d
}
