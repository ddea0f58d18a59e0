package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/backendtest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/handlers/commands"
	"github.com/sandbox-bot/sandbox-bot/handlers/hub/hubtest"
	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
	"github.com/sandbox-bot/sandbox-bot/handlers/markers"
	"github.com/sandbox-bot/sandbox-bot/templates"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// The table's tests: every state an issue or pull request can be in,
// every event, through the handlers' own observe-decide-perform on an
// in-memory GitHub (hub/hubtest) and the in-memory backend, with
// what the bot did compared with a grid written here, apart from the
// table. They run in milliseconds; the scenario tests keep the wire.

const (
	tRepo   = "octo-org/hello"
	tWriter = "alice"
	// The runs a world's markers tell of.
	tPlanTask = "T-0000A001"
	tExecTask = "T-0000A002"
	tHeld     = "T-0000A003"
	tBranch   = "agent/t-0000a002-do-it"
	tInst     = 42
)

var tTemplates = templates.MustLoadEmbedded()

// world is one repository with an issue (#1) and, for the PR states, the
// App's pull request for it (#2), in a state the test chose.
type world struct {
	t       *testing.T
	ctx     context.Context
	hub     *hubtest.Hub
	repo    *hubtest.Repo
	backend *backendtest.Memory
	b       *Base
	logs    *testenv.Log
}

func tableSettings() Settings {
	return Settings{
		TriggerLabel: "agent", MaxContinues: 1, MaxPlanRounds: 5, ProgressInterval: time.Hour, TokenRefresh: time.Hour,
		DispatchDeadline: time.Second, CheckName: "sandbox-agent", WebURL: "https://github.example", Isolation: dispatch.IsolationCaps,
		ReviewBatchWindow: time.Hour, ResultRetry: time.Millisecond, PreviewDuration: time.Minute,
		Limits: sandboxcfg.Limits{}.WithDefaults(), ArtifactCaps: dispatch.DefaultArtifactCaps(), CILogBytes: 8 << 10,
		Images: ImageSettings{MaxCount: 5, MaxBytes: 1 << 20, MaxTotal: 4 << 20, Hosts: []string{"github.example"}},
	}
}

func newWorld(t *testing.T) *world {
	t.Helper()
	hub := hubtest.New()
	repo := hub.Named(tRepo)
	repo.Perms[tWriter] = "write"
	repo.SandboxYML = "name: hello\nharness: opencode\nmax_budget_usd: 4\ndev: { command: npm run dev, port: 3000 }\n"
	backend := backendtest.NewMemory()
	logs := &testenv.Log{}
	logger := zerolog.New(logs).Level(zerolog.DebugLevel)
	b, err := NewBase(Wiring{Hub: hub, Settings: tableSettings(), Backend: backend, Templates: tTemplates, Logger: logger,
		Receipts: Receipts{PublicURL: "https://bot.example"}}) // it serves pages: previews have a place
	if err != nil {
		t.Fatal(err)
	}
	b.c.retryWait = time.Millisecond
	t.Cleanup(b.Stop)
	w := &world{t: t, ctx: logger.WithContext(t.Context()), hub: hub, repo: repo, backend: backend, b: b, logs: logs}
	repo.AddIssue(tWriter, "Do it", "Please.", nil)
	return w
}

// bot posts a comment of the App's carrying m on #n.
func (w *world) bot(n int, m markers.Marker, text string) {
	w.repo.AddComment(n, w.hub.Login(), text+"\n"+m.String())
}

// hold makes taskID, a run of mode, hold #n: the lock, and the run on the
// backend.
func (w *world) hold(n int, taskID string, mode dispatch.Mode, branch string) {
	w.t.Helper()
	if _, err := w.backend.Lock(w.ctx, dispatch.LockKey(tRepo, n), taskID); err != nil {
		w.t.Fatal(err)
	}
	order := dispatch.WorkOrder{SchemaVersion: dispatch.WorkOrderVersion, TaskID: taskID, Mode: mode, Attempt: 1, Repo: tRepo, Number: n,
		CloneURL: "https://github.example/" + tRepo + ".git", TargetBranch: branch, Plan: "1. Do it.", OutputDir: "/out"}
	if mode == dispatch.ModePreview {
		order.Source, order.Config.Dev.Command, order.Config.Dev.Port = dispatch.SourcePath, "npm run dev", 3000
	}
	if mode == dispatch.ModeReview || mode == dispatch.ModeSuggest {
		order.PR = &dispatch.PRReview{HeadRef: "refs/pull/2/head", HeadSHA: strings.Repeat("a", 40)}
	}
	if _, err := w.backend.Submit(w.ctx, dispatch.RunSpec{Meta: dispatch.Meta{TaskID: taskID, Mode: mode, Repo: tRepo, Number: n, InstallationID: tInst, Attempt: 1}, Order: order}); err != nil {
		w.t.Fatal(err)
	}
}

// queue makes taskID, a run of mode, wait in the queue holding #n.
func (w *world) queue(n int, taskID string, mode dispatch.Mode) {
	w.t.Helper()
	w.bot(n, markers.Marker{Kind: markers.KindQueued, TaskID: taskID, Mode: mode, Issue: 1}, "⏳ Queued.")
	if _, err := w.backend.Lock(w.ctx, dispatch.LockKey(tRepo, n), taskID); err != nil {
		w.t.Fatal(err)
	}
	if _, err := dispatch.Enqueue(w.ctx, w.backend, dispatch.QueueEntry{TaskID: taskID, Repo: tRepo, Number: n, InstallationID: tInst, EnqueuedAt: 1}); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) planPosted() {
	w.bot(1, markers.Marker{Kind: markers.KindPlan, TaskID: tPlanTask, Mode: dispatch.ModePlan, Issue: 1, Round: 1}, markers.PlanStart+"\n1. Do it.\n"+markers.PlanEnd)
}

func (w *world) executed(kind string) {
	w.planPosted()
	w.bot(1, markers.Marker{Kind: markers.KindAck, TaskID: tExecTask, Mode: dispatch.ModeExecute, Issue: 1, Branch: tBranch, Attempt: 1}, "🚀 Executing.")
	if kind != "" {
		w.bot(1, markers.Marker{Kind: kind, TaskID: tExecTask, Mode: dispatch.ModeExecute, Issue: 1, Branch: tBranch}, "It ended.")
	}
}

// inIssue puts #1 in state s.
func (w *world) inIssue(s lifecycle.State) thread {
	switch s {
	case lifecycle.Idle:
	case lifecycle.Queued:
		w.queue(1, tHeld, dispatch.ModePlan)
	case lifecycle.Planning:
		w.bot(1, markers.Marker{Kind: markers.KindAck, TaskID: tHeld, Mode: dispatch.ModePlan, Issue: 1, Round: 1}, "📝 Planning.")
		w.hold(1, tHeld, dispatch.ModePlan, "")
	case lifecycle.PlanPosted:
		w.planPosted()
	case lifecycle.Executing:
		w.executed("")
		w.hold(1, tExecTask, dispatch.ModeExecute, tBranch)
	case lifecycle.Done:
		w.executed(markers.KindResult)
	case lifecycle.Failed:
		w.executed(markers.KindFailure)
	case lifecycle.Aborted:
		w.executed(markers.KindAborted)
	case lifecycle.OverBudget:
		// The plan run the label asked for was refused over budget.
		w.bot(1, markers.Marker{Kind: markers.KindOverBudget, TaskID: tHeld, Mode: dispatch.ModePlan, Issue: 1}, "💸 Over budget.")
	default:
		w.t.Fatalf("no issue state %q", s)
	}
	return w.thread(1, false)
}

// inPR opens #2, a pull request (the App's unless s is NotOurs), in state
// s.
func (w *world) inPR(s lifecycle.State) thread {
	pr := w.repo.AgentPullRequest("agent/t-0000a002-do-it", "main")
	body := markers.Marker{Kind: markers.KindPR, TaskID: tExecTask, Mode: dispatch.ModeExecute, Issue: 1, Branch: tBranch}.String()
	author := w.hub.Login()
	if s == lifecycle.NotOurs {
		author, pr.User.Login = "bob", strp("bob")
	}
	w.repo.AddIssue(author, "Do it", body, pr)
	revise := func(kind string) {
		w.bot(2, markers.Marker{Kind: markers.KindAck, TaskID: tHeld, Mode: dispatch.ModeRevise, Issue: 1, Branch: tBranch}, "🔁 Revising.")
		if kind != "" {
			w.bot(2, markers.Marker{Kind: kind, TaskID: tHeld, Mode: dispatch.ModeRevise, Issue: 1, Branch: tBranch}, "It ended.")
		}
	}
	switch s {
	case lifecycle.NotOurs, lifecycle.PROpen:
	case lifecycle.Queued:
		w.queue(2, tHeld, dispatch.ModeRevise)
	case lifecycle.Revising:
		revise("")
		w.hold(2, tHeld, dispatch.ModeRevise, tBranch)
	case lifecycle.Rebasing:
		w.bot(2, markers.Marker{Kind: markers.KindAck, TaskID: tHeld, Mode: dispatch.ModeRebase, Issue: 1, Branch: tBranch}, "Rebasing.")
		w.hold(2, tHeld, dispatch.ModeRebase, tBranch)
	case lifecycle.Failed:
		revise(markers.KindFailure)
	case lifecycle.Aborted:
		revise(markers.KindAborted)
	case lifecycle.OverBudget:
		w.bot(2, markers.Marker{Kind: markers.KindOverBudget, TaskID: tHeld, Mode: dispatch.ModeRevise, Issue: 1, Branch: tBranch}, "💸 Over budget.")
	default:
		w.t.Fatalf("no PR state %q", s)
	}
	return w.thread(2, true)
}

func strp(s string) *string { return &s }

func (w *world) thread(n int, isPR bool) thread {
	gh, _ := w.hub.Repo(tInst, tRepo)
	return thread{gh: gh, installation: tInst, repo: w.repo.GitHubRepo(), number: n, isPR: isPR, sender: tWriter}
}

// fire delivers ev to t as the writer, from a comment of theirs.
func (w *world) fire(t thread, kind lifecycle.Event) lifecycle.Case {
	w.t.Helper()
	t.commentID = w.repo.AddComment(t.number, tWriter, "(the writer's comment)")
	trigger := commentTrigger(t.commentID)
	var ev event
	switch kind {
	case lifecycle.Label:
		ev = event{kind: kind, trigger: "d-label"}
	case lifecycle.Mention:
		ev = event{kind: kind, text: "use a map", trigger: trigger}
	case lifecycle.Review:
		ev = event{kind: kind, trigger: "review-7"}
	case lifecycle.Push:
		ev = event{kind: kind, trigger: "push-0123abc"}
	case lifecycle.ChecksFailed:
		ev = w.checksFailed(t)
	case lifecycle.Typo:
		ev = commandEvent(nil, &commands.CommandError{Msg: "`/aprove` is not a command. Did you mean `/approve`?"}, trigger)
	default:
		cmd := &commands.Command{Name: strings.TrimPrefix(string(kind), "/")}
		if kind == lifecycle.Revise {
			cmd.Text = "use a map"
		}
		ev = commandEvent(cmd, nil, trigger)
	}
	c, err := w.b.on(w.ctx, t, ev)
	if err != nil {
		w.t.Fatalf("%s: %v\n%s", kind, err, w.logs.String())
	}
	return c
}

// effects says what the bot did since the world was set up: the runs it
// submitted, the replies it posted, the branch it updated, the runs it
// cancelled and the review batch it opened.
func (w *world) effects(before int, cancels string) string {
	var out []string
	for _, s := range w.backend.Specs()[before:] {
		out = append(out, "run:"+string(s.Order.Mode))
	}
	if w.repo.Updates() > 0 {
		out = append(out, "update")
	}
	if cancels != "" && w.backend.Cancels(cancels) > 0 {
		out = append(out, "cancel")
	}
	if w.backend.LockHolder("batch/"+dispatch.LockKey(tRepo, 2)) != "" {
		out = append(out, "batch")
	}
	if w.backend.LockHolder(ciWaitKey(tRepo, 2)) != "" {
		out = append(out, "ciwait")
	}
	for _, line := range strings.Split(w.logs.String(), "\n") {
		var l struct{ Reply string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Reply != "" && l.Reply != "github/ack" {
			out = append(out, "reply:"+strings.TrimPrefix(l.Reply, "github/"))
		}
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, "+")
}

// The grids: what the bot does, by event (row) and state (column, in the
// order of lifecycle.IssueStates and PRStates), in the worlds above.
var (
	issueGrid = map[lifecycle.Event][]string{
		//                   idle                     queued                   planning                     plan posted              executing                    done                        failed                      aborted     over budget
		lifecycle.Label:    {"run:plan", "reply:busy", "-", "-", "-", "run:plan", "run:plan", "run:plan", "run:plan"},
		lifecycle.Mention:  {"run:plan", "reply:busy", "reply:busy", "run:plan", "reply:busy", "run:plan", "run:plan", "run:plan", "run:plan"},
		lifecycle.Plan:     {"run:plan", "reply:busy", "reply:busy", "run:plan", "reply:busy", "run:plan", "run:plan", "run:plan", "run:plan"},
		lifecycle.Approve:  {"reply:no_plan", "reply:no_plan", "reply:plan_in_progress", "run:execute", "reply:busy", "run:execute", "run:execute", "run:execute", "run:plan"},
		lifecycle.Revise:   {"run:plan", "reply:busy", "reply:plan_in_progress", "run:plan", "reply:busy", "run:plan", "run:plan", "run:plan", "run:plan"},
		lifecycle.Abort:    {"reply:nothing_to_abort", "reply:queue_aborted", "cancel+reply:abort_requested", "reply:nothing_to_abort", "cancel+reply:abort_requested", "reply:nothing_to_abort", "reply:nothing_to_abort", "reply:nothing_to_abort", "reply:nothing_to_abort"},
		lifecycle.Retry:    {"reply:no_earlier_run", "reply:no_earlier_run", "reply:busy", "run:plan", "reply:busy", "run:execute", "run:execute", "run:execute", "run:plan"},
		lifecycle.Continue: {"reply:no_earlier_run", "reply:no_earlier_run", "reply:nothing_to_continue", "reply:nothing_to_continue", "reply:busy", "run:continue", "run:continue", "run:continue", "reply:nothing_to_continue"},
		lifecycle.Rebase:   {"reply:wrong_place", "reply:wrong_place", "reply:wrong_place", "reply:wrong_place", "reply:wrong_place", "reply:wrong_place", "reply:wrong_place", "reply:wrong_place", "reply:wrong_place"},
		lifecycle.Preview:  {"reply:wrong_place", "reply:wrong_place", "reply:wrong_place", "reply:wrong_place", "reply:wrong_place", "reply:wrong_place", "reply:wrong_place", "reply:wrong_place", "reply:wrong_place"},
		lifecycle.Status:   {"-", "reply:status", "reply:status", "reply:status", "reply:status", "reply:status", "reply:status", "reply:status", "reply:status"},
		lifecycle.Typo:     {"reply:command_error", "reply:command_error", "reply:command_error", "reply:command_error", "reply:command_error", "reply:command_error", "reply:command_error", "reply:command_error", "reply:command_error"},
	}
	prGrid = map[lifecycle.Event][]string{
		//                   not ours                 PR open          queued           revising         rebasing         failed           aborted          over budget
		lifecycle.Mention:      {"reply:mention_other_pr", "batch", "batch", "batch", "batch", "batch", "batch", "batch"},
		lifecycle.Review:       {"-", "batch", "batch", "batch", "batch", "batch", "batch", "batch"},
		lifecycle.Revise:       {"reply:wrong_place", "batch", "batch", "batch", "batch", "batch", "batch", "batch"},
		lifecycle.Rebase:       {"reply:wrong_place", "update+reply:branch_updated", "update+reply:branch_updated", "update+reply:branch_updated", "update+reply:branch_updated", "update+reply:branch_updated", "update+reply:branch_updated", "update+reply:branch_updated"},
		lifecycle.Push:         {"-", "update", "update", "update", "update", "update", "update", "update"},
		lifecycle.ChecksFailed: {"-", "run:revise", "ciwait", "ciwait", "ciwait", "run:revise", "-", "run:revise"},
		lifecycle.Abort:        {"reply:nothing_to_abort", "reply:nothing_to_abort", "reply:queue_aborted", "cancel+reply:abort_requested", "cancel+reply:abort_requested", "reply:nothing_to_abort", "reply:nothing_to_abort", "reply:nothing_to_abort"},
		lifecycle.Retry:        {"reply:wrong_place", "run:revise", "reply:busy", "reply:busy", "reply:busy", "run:revise", "run:revise", "run:revise"},
		lifecycle.Continue:     {"reply:wrong_place", "run:continue", "reply:busy", "reply:busy", "reply:busy", "run:continue", "run:continue", "run:continue"},
		lifecycle.Preview:      {"reply:wrong_place", "run:preview+reply:preview", "run:preview+reply:preview", "run:preview+reply:preview", "run:preview+reply:preview", "run:preview+reply:preview", "run:preview+reply:preview", "run:preview+reply:preview"},
		lifecycle.Plan:         {"reply:wrong_place", "reply:wrong_place", "reply:wrong_place", "reply:wrong_place", "reply:wrong_place", "reply:wrong_place", "reply:wrong_place", "reply:wrong_place"},
		lifecycle.Approve:      {"reply:wrong_place", "reply:wrong_place", "reply:wrong_place", "reply:wrong_place", "reply:wrong_place", "reply:wrong_place", "reply:wrong_place", "reply:wrong_place"},
		lifecycle.Status:       {"-", "-", "reply:status", "reply:status", "reply:status", "reply:status", "reply:status", "reply:status"},
		lifecycle.Typo:         {"reply:command_error", "reply:command_error", "reply:command_error", "reply:command_error", "reply:command_error", "reply:command_error", "reply:command_error", "reply:command_error"},
	}
)

// Every event in every state of an issue, and of a pull request, through
// the handlers, on an in-memory GitHub: what the bot does matches the
// grid, the state it observed is the column's, and the issue or PR then
// shows the state the table said it would be in.
func TestTableStateByEvent(t *testing.T) {
	t.Parallel()
	places := []struct {
		place  lifecycle.Place
		events []lifecycle.Event
		states []lifecycle.State
		grid   map[lifecycle.Event][]string
		in     func(*world, lifecycle.State) thread
	}{
		{lifecycle.OnIssue, lifecycle.IssueEvents, lifecycle.IssueStates, issueGrid, (*world).inIssue},
		{lifecycle.OnPR, lifecycle.PREvents, lifecycle.PRStates, prGrid, (*world).inPR},
	}
	for _, p := range places {
		for _, e := range p.events {
			want, ok := p.grid[e]
			if !ok {
				continue // slot free and restart are not webhook events (lifecycle's TestQueueAndRestartRows)
			}
			for i, s := range p.states {
				t.Run(fmt.Sprintf("%s/%s/%s", p.place, e, s), func(t *testing.T) {
					t.Parallel()
					w := newWorld(t)
					checkCell(t, w, p.place, p.in(w, s), s, e, want[i])
				})
			}
		}
	}
}

func checkCell(t *testing.T, w *world, p lifecycle.Place, th thread, s lifecycle.State, e lifecycle.Event, want string) {
	t.Helper()
	sc, err := w.b.observe(w.ctx, th)
	if err != nil {
		t.Fatal(err)
	}
	if sc.state != s {
		t.Fatalf("observed %q, want %q", sc.state, s)
	}
	labelsBefore := w.repo.Labels(th.number)
	before := len(w.backend.Specs())
	c := w.fire(th, e)
	if got := w.effects(before, sc.holder); got != want {
		t.Errorf("%s in %s: the bot did %s, want %s (the table: %s)\n%s", e, s, got, want, c.Do, w.logs.String())
	}
	labels := w.repo.Labels(th.number)
	switch {
	case c.Do.Starts():
		specs := w.backend.Specs()
		if len(specs) == before {
			return
		}
		next := lifecycle.RunState(p, specs[len(specs)-1].Order.Mode)
		if !slices.Contains(labels, next.Label()) {
			t.Errorf("after the start of a %s run, labels %v; want %s", specs[len(specs)-1].Order.Mode, labels, next.Label())
		}
	case c.Next != "":
		if l := c.Next.Label(); l != "" && !slices.Contains(labels, l) || l == "" && hasStateLabel(labels) {
			t.Errorf("the table says %s, the labels are %v", c.Next, labels)
		}
	default:
		if !slices.Equal(labels, labelsBefore) {
			t.Errorf("labels changed from %v to %v, but the state did not", labelsBefore, labels)
		}
	}
	if n := stateLabels(labels); n > 1 {
		t.Errorf("%d state labels: %v", n, labels)
	}
}

func hasStateLabel(labels []string) bool { return stateLabels(labels) > 0 }

func stateLabels(labels []string) int {
	n := 0
	for _, l := range labels {
		if slices.Contains(lifecycle.Labels, l) {
			n++
		}
	}
	return n
}

// The runs whose end the run table decides, and the worlds they end in.
const tRun = "T-0000A004"

// ran makes tRun, a run of mode, hold its issue or PR as acknowledged,
// and returns where it runs.
func (w *world) ran(mode dispatch.Mode) int {
	n, branch := 1, ""
	switch mode {
	case dispatch.ModeRevise, dispatch.ModeRebase:
		w.inPR(lifecycle.PROpen)
		n, branch = 2, tBranch
	case dispatch.ModeReview:
		w.inPR(lifecycle.PROpen)
		n = 2
	case dispatch.ModeFix:
		w.inPR(lifecycle.PROpen)
		n, branch = 2, tBranch
	case dispatch.ModeSuggest:
		w.inPR(lifecycle.PROpen)
		n = 2
	case dispatch.ModeExecute, dispatch.ModeContinue:
		w.planPosted()
		branch = tBranch
	}
	w.bot(n, markers.Marker{Kind: markers.KindAck, TaskID: tRun, Mode: mode, Issue: 1, Branch: branch, Attempt: 1}, "Started.")
	w.hold(n, tRun, mode, branch)
	return n
}

// end is how a run ends in the run grid's columns.
type end struct {
	status    dispatch.Status
	attempt   int
	aborted   bool
	noCommits bool
}

var (
	endRows = []end{
		{status: dispatch.StatusCompleted, attempt: 1},
		{status: dispatch.StatusCompleted, attempt: 1, noCommits: true},
		{status: dispatch.StatusHung, attempt: 1},
		{status: dispatch.StatusInterrupted, attempt: 1},
		{status: dispatch.StatusInterrupted, attempt: 2},
		{status: dispatch.StatusCompleted, attempt: 1, aborted: true},
	}
	// runGrid: by mode, what the bot does as the run ends: completed,
	// completed without commits, failed, interrupted with a continue left
	// (SANDBOX_MAX_CONTINUES 1), interrupted again, aborted.
	runGrid = map[dispatch.Mode][]string{
		dispatch.ModePlan:     {"reply:plan_comment", "reply:plan_comment", "reply:failure", "run:plan", "reply:failure", "reply:aborted"},
		dispatch.ModeExecute:  {"reply:pr_opened", "reply:no_changes", "reply:failure", "run:continue", "reply:failure", "reply:aborted"},
		dispatch.ModeContinue: {"reply:pr_opened", "reply:no_changes", "reply:failure", "run:continue", "reply:failure", "reply:aborted"},
		dispatch.ModeTask:     {"reply:task_done", "reply:task_done", "reply:failure", "run:task", "reply:failure", "reply:aborted"},
		dispatch.ModeRevise:   {"reply:done", "reply:done", "reply:failure", "run:revise", "reply:failure", "reply:aborted"},
		dispatch.ModeRebase:   {"reply:done", "reply:done", "reply:failure", "run:rebase", "reply:failure", "reply:aborted"},
		dispatch.ModeSuggest:  {"reply:fixed", "reply:fixed", "reply:failure", "run:suggest", "reply:failure", "reply:aborted"},
		dispatch.ModeFix:      {"reply:fixed", "reply:fixed", "reply:failure", "run:fix", "reply:failure", "reply:aborted"},
		dispatch.ModeReview:   {"reply:review", "reply:review", "reply:failure", "run:review", "reply:failure", "reply:aborted"},
	}
)

// Every mode of run, every way it ends: the follower posts what the run
// table says, the issue or PR shows the state it says, and a resumed run
// takes the lock over.
func TestRunTableModeByEnd(t *testing.T) {
	t.Parallel()
	for _, kind := range lifecycle.RunKinds {
		mode := kind.Mode
		if kind.Aside {
			continue // a preview's end edits its comment: TestPreviewOfAPullRequest
		}
		for i, e := range endRows {
			t.Run(fmt.Sprintf("%s/%s-%d", mode, e.status, i), func(t *testing.T) {
				t.Parallel()
				w := newWorld(t)
				n := w.ran(mode)
				before := len(w.backend.Specs())
				res := &dispatch.Result{SchemaVersion: dispatch.ResultVersion, TaskID: tRun, Mode: mode, Status: e.status, Plan: "1. Do it.", PRSummary: "Did it."}
				if mode.WritesCode() {
					res.Branch = tBranch
				}
				if !e.noCommits && mode.WritesCode() {
					res.HeadSHA, res.Commits = "0123abc", []dispatch.Commit{{SHA: "0123abc", Message: "Do it"}}
				}
				if e.aborted {
					w.b.Runs.MarkAborted(tRun, tWriter)
				}
				meta := dispatch.Meta{TaskID: tRun, Mode: mode, Repo: tRepo, Number: n, InstallationID: tInst, Attempt: e.attempt}
				if mode == dispatch.ModeSuggest || mode == dispatch.ModeReview {
					meta.HeadSHA = strings.Repeat("a", 40) // the pull request's head it was started on
				}
				gh, _ := w.hub.Repo(tInst, tRepo)
				if err := w.b.ends.finish(w.ctx, gh, meta, res, w.b.Runs.Progress(w.ctx, gh, meta)); err != nil {
					t.Fatalf("%v\n%s", err, w.logs.String())
				}
				if got := w.effects(before, ""); got != runGrid[mode][i] {
					t.Errorf("the bot did %s, want %s\n%s", got, runGrid[mode][i], w.logs.String())
				}
				c := lifecycle.DecideEnd(mode, lifecycle.EndOf(e.status, e.aborted), lifecycle.Facts{AttemptsLeft: e.attempt <= 1, NoCommits: len(res.Commits) == 0})
				labels := w.repo.Labels(n)
				if l := c.Next.Label(); l != "" && !slices.Contains(labels, l) || l == "" && hasStateLabel(labels) || stateLabels(labels) > 1 {
					t.Errorf("the run table says %s, the labels are %v", c.Next, labels)
				}
				if c.Do == lifecycle.Resume {
					if holder := w.backend.LockHolder(dispatch.LockKey(tRepo, n)); holder == tRun || holder == "" {
						t.Errorf("the lock is held by %q; the continuation takes it over", holder)
					}
				}
			})
		}
	}
}

// A label write GitHub refuses for a passing reason is tried again; one
// it keeps refusing is returned (and logged), not only logged, and the
// result is still posted.
func TestStateLabelIsRetriedThenReported(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	gh, _ := w.hub.Repo(tInst, tRepo)
	w.hub.FailNext("AddLabels", hubtest.ServerError())
	if err := w.b.c.setState(w.ctx, gh, 1, lifecycle.Planning); err != nil {
		t.Fatalf("one refusal must be retried: %v", err)
	}
	w.hub.FailNext("RemoveLabel", hubtest.ServerError(), hubtest.ServerError(), hubtest.ServerError())
	err := w.b.c.setState(w.ctx, gh, 1, lifecycle.PlanPosted)
	if err == nil || !strings.Contains(err.Error(), "plan posted") {
		t.Fatalf("a refusal that lasts must be reported, got %v", err)
	}
	// The new state's label went on before the old one was to come off:
	// the issue never shows none.
	if labels := w.repo.Labels(1); !slices.Contains(labels, lifecycle.LabelAwaitingApproval) {
		t.Errorf("labels %v", labels)
	}
	if err := w.b.c.setState(w.ctx, gh, 1, lifecycle.PlanPosted); err != nil {
		t.Fatal(err)
	}
	if labels := w.repo.Labels(1); !slices.Equal(labels, []string{lifecycle.LabelAwaitingApproval}) {
		t.Errorf("the next write shows one state label; got %v", labels)
	}
}

// Two replicas handling the same kind of trigger on one issue at once:
// one run starts, the other replica answers busy, and the issue ends with
// one state label (labels are written only under the issue's lock).
func TestTwoReplicasLeaveOneStateLabel(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	other, err := NewBase(Wiring{Hub: w.hub, Settings: tableSettings(), Backend: w.backend, Templates: tTemplates})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Stop)
	var wg sync.WaitGroup
	for i, b := range []*Base{w.b, other} {
		wg.Go(func() {
			th := w.thread(1, false)
			th.commentID = w.repo.AddComment(1, tWriter, "/plan")
			if _, err := b.on(w.ctx, th, commandEvent(&commands.Command{Name: "plan"}, nil, commentTrigger(th.commentID))); err != nil {
				t.Errorf("replica %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if n := len(w.backend.Specs()); n != 1 {
		t.Errorf("%d runs started, want 1", n)
	}
	if labels := w.repo.Labels(1); !slices.Equal(labels, []string{lifecycle.LabelPlanning}) {
		t.Errorf("labels %v, want only %s", labels, lifecycle.LabelPlanning)
	}
}
