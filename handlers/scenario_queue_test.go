package handlers_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad/nomadtest"
)

// capTwo is the server configuration of the queue scenarios.
var capTwo = map[string]string{"SANDBOX_MAX_RUNS": "2"}

// firstReply waits for the bot's answer to issue n's label: the
// acknowledgement of a started run or the reply that it is queued.
func firstReply(h *harness, n int) string {
	h.t.Helper()
	return h.waitComment(n, fmt.Sprintf("the bot's answer on #%d", n), func(c string) bool {
		return strings.Contains(c, `"kind":"ack"`) || strings.Contains(c, `"kind":"queued"`)
	})
}

// countMarked counts the bot's comments on #n carrying a marker of kind.
func countMarked(h *harness, n int, kind string) int {
	c := 0
	for _, body := range h.botComments(n) {
		if strings.Contains(body, `"kind":"`+kind+`"`) {
			c++
		}
	}
	return c
}

func labelled(h *harness, n int, label string) bool {
	return slices.Contains(h.gh.Issue(testRepo, n).Labels, label)
}

// labelInTurn labels the issues one after another, each once the bot has
// answered the one before, so their order in the queue is the order here;
// deliver sends each label to a replica of the caller's choosing.
func labelInTurn(h *harness, issues []int, deliver func(i, n int)) {
	h.t.Helper()
	for i, n := range issues {
		deliver(i, n)
		firstReply(h, n)
	}
}

// assertQueued checks that the issues wait with agent:queued and were told
// their places, 1 first.
func assertQueued(t *testing.T, h *harness, issues []int) {
	t.Helper()
	for i, n := range issues {
		reply := firstReply(h, n)
		if !strings.Contains(reply, `"kind":"queued"`) {
			t.Errorf("#%d: answered %q, want the queued reply", n, reply)
			continue
		}
		want := "next in line"
		if i > 0 {
			want = fmt.Sprintf("%d in line (%d ahead)", i+1, i)
		}
		if !strings.Contains(reply, want) || !strings.Contains(reply, "at most 2 in all at once") {
			t.Errorf("#%d: queued reply does not say %q under a cap of 2:\n%s", n, want, reply)
		}
		if !labelled(h, n, "agent:queued") || labelled(h, n, "agent:planning") {
			t.Errorf("#%d: labels %v, want agent:queued alone", n, h.gh.Issue(testRepo, n).Labels)
		}
	}
}

// planDone is a finished plan run's receipt.
func planDone(taskID string) *dispatch.Result {
	return &dispatch.Result{TaskID: taskID, Mode: dispatch.ModePlan, Status: dispatch.StatusCompleted, Plan: "1. Do it."}
}

// liveRuns counts the runs the backend has not seen end.
func liveRuns(t *testing.T, b dispatch.Backend) int {
	t.Helper()
	runs, err := b.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range runs {
		if !r.State.Ended() {
			n++
		}
	}
	return n
}

func newIssues(h *harness, n int) []int {
	var out []int
	for i := range n {
		out = append(out, h.gh.AddIssue(testRepo, writer, fmt.Sprintf("Task %d", i+1), ""))
	}
	return out
}

// The bot's runs of issues on the memory backend, by issue, in the order
// they were submitted.
func submittedIssues(h *harness) []int {
	var out []int
	for _, s := range h.backend.Specs() {
		out = append(out, s.Meta.Number)
	}
	return out
}

// Cap of 2 with 5 labeled issues: 2 run, 3 wait with agent:queued and
// their place, and start in order as slots free.
func TestQueueCapStartsInOrder(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, capTwo)
	issues := newIssues(h, 5)
	labelInTurn(h, issues, func(i, n int) { h.label(n, writer, fmt.Sprintf("d-queue-%d", i)) })
	if got := submittedIssues(h); !slices.Equal(got, issues[:2]) {
		t.Fatalf("submitted runs of %v, want the first two issues %v", got, issues[:2])
	}
	assertQueued(t, h, issues[2:])
	if v := adminMetric(t, h, "sandbox_bot_queue_length"); v != "3" {
		t.Errorf("sandbox_bot_queue_length = %s with three runs waiting", v)
	}
	// /status on a waiting run says it waits, and where, not that it runs.
	waiting := h.backend.LockHolder(dispatch.LockKey(testRepo, issues[3]))
	h.comment(issues[3], reader, "/status")
	h.waitComment(issues[3], "/status of a queued run", func(c string) bool {
		return strings.Contains(c, "The plan run `"+waiting+"` is waiting for a slot here: 2 in line") && !strings.Contains(c, "is running here")
	})
	for i := range 3 {
		done := h.backend.Specs()[i]
		h.backend.Finish(done.Order.TaskID, planDone(done.Order.TaskID))
		specs := h.waitSubmitted(3 + i)
		if got := submittedIssues(h); !slices.Equal(got, issues[:3+i]) {
			t.Fatalf("after %d runs ended, runs of %v; want %v", i+1, got, issues[:3+i])
		}
		next := specs[2+i].Meta.Number
		h.waitComment(next, "the queued run's acknowledgement", func(c string) bool { return strings.Contains(c, `"kind":"ack"`) })
		if !labelled(h, next, "agent:planning") || labelled(h, next, "agent:queued") {
			t.Errorf("#%d started: labels %v, want agent:planning instead of agent:queued", next, h.gh.Issue(testRepo, next).Labels)
		}
		if n := liveRuns(t, h.backend); n > 2 {
			t.Fatalf("%d runs live under a cap of 2", n)
		}
	}
	h.idle()
	if v := adminMetric(t, h, "sandbox_bot_queue_length"); v != "0" {
		t.Errorf("sandbox_bot_queue_length = %s once every run started", v)
	}
	// Every run's wait is observed: two found a slot free, three waited.
	if v := adminMetric(t, h, "sandbox_bot_queue_wait_seconds_count"); v != "5" {
		t.Errorf("sandbox_bot_queue_wait_seconds_count = %s, want 5", v)
	}
	if got := len(h.backend.Specs()); got != 5 {
		t.Errorf("%d runs submitted in all, want 5", got)
	}
	for _, n := range issues {
		if c := countMarked(h, n, "ack"); c != 1 {
			t.Errorf("#%d has %d acknowledgements, want 1", n, c)
		}
	}
	// What is left are the slots of the two runs still going.
	q, _ := h.backend.ReadQueue(t.Context())
	if len(q) != 2 || q[0].Waiting() || q[1].Waiting() || q[0].Number != issues[3] || q[1].Number != issues[4] {
		t.Errorf("the queue holds %+v; want the claimed slots of #%d and #%d", q, issues[3], issues[4])
	}
}

// The queue outlives the bot: a new Server over the same backend state
// starts the waiting runs in order as the earlier ones end, also those
// that ended while it was down.
func TestQueueSurvivesRestart(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, capTwo)
	issues := newIssues(h, 5)
	labelInTurn(h, issues, func(i, n int) { h.label(n, writer, fmt.Sprintf("d-restart-%d", i)) })
	assertQueued(t, h, issues[2:])
	h.stop()
	first := h.backend.Specs()[0]
	h.backend.Finish(first.Order.TaskID, planDone(first.Order.TaskID))
	h.start(capTwo)
	h.waitSubmitted(3)
	if got := submittedIssues(h); !slices.Equal(got, issues[:3]) {
		t.Fatalf("after the restart, runs of %v; want %v", got, issues[:3])
	}
	h.waitComment(issues[0], "the plan of the run that ended while the bot was down", func(c string) bool { return strings.Contains(c, `"kind":"plan"`) })
	h.stop()
	h.start(capTwo)
	second := h.backend.Specs()[1]
	h.backend.Finish(second.Order.TaskID, planDone(second.Order.TaskID))
	h.waitSubmitted(4)
	if got := submittedIssues(h); !slices.Equal(got, issues[:4]) {
		t.Fatalf("after a second restart, runs of %v; want %v", got, issues[:4])
	}
	h.idle()
	if n := liveRuns(t, h.backend); n != 2 {
		t.Errorf("%d runs live, want 2", n)
	}
	if !labelled(h, issues[4], "agent:queued") {
		t.Errorf("#%d still waits: labels %v", issues[4], h.gh.Issue(testRepo, issues[4]).Labels)
	}
}

// /abort on an issue whose run waits takes it out of the queue: nothing
// starts for it when a slot frees.
func TestAbortQueuedRun(t *testing.T) {
	t.Parallel()
	env := map[string]string{"SANDBOX_MAX_RUNS_PER_REPO": "1"}
	h := newHarness(t, nil, env)
	issues := newIssues(h, 2)
	labelInTurn(h, issues, func(i, n int) { h.label(n, writer, fmt.Sprintf("d-abortq-%d", i)) })
	if !strings.Contains(firstReply(h, issues[1]), "1 per repository") {
		t.Fatalf("#%d was not queued under the repository's cap: %q", issues[1], firstReply(h, issues[1]))
	}
	h.comment(issues[1], writer, "/abort")
	h.waitComment(issues[1], "the reply to /abort", func(c string) bool { return strings.Contains(c, "out of the queue") })
	h.gh.WaitFor(5*time.Second, "agent:queued removed", func() bool { return !labelled(h, issues[1], "agent:queued") })
	if q, err := h.backend.ReadQueue(t.Context()); err != nil || len(q) != 1 || q[0].Number != issues[0] {
		t.Fatalf("queue after /abort = %+v, %v; want only #%d's slot", q, err, issues[0])
	}
	// The reply and the label are written under the issue's lock, which is
	// released after them.
	h.released(issues[1])
	first := h.backend.Specs()[0]
	h.backend.Finish(first.Order.TaskID, planDone(first.Order.TaskID))
	h.waitComment(issues[0], "the plan", func(c string) bool { return strings.Contains(c, `"kind":"plan"`) })
	h.idle()
	if got := submittedIssues(h); !slices.Equal(got, issues[:1]) {
		t.Errorf("runs of %v; the aborted queued run must not start", got)
	}
	// The issue can be labelled again and queues a fresh run.
	if q, _ := h.backend.ReadQueue(t.Context()); len(q) != 0 {
		t.Errorf("queue not empty once every run ended: %+v", q)
	}
}

// replica is a second bot on the same fake GitHub and backend state.
func replica(t *testing.T, h *harness, b dispatch.Backend, env map[string]string) *harness {
	t.Helper()
	r := &harness{t: t, gh: h.gh, backend: h.backend, logs: &bytes.Buffer{}, data: t.TempDir()}
	r.startWith(b, env)
	return r
}

// newNomadFake is a fake Nomad agent for one test.
func newNomadFake(t *testing.T) *nomadtest.Server {
	t.Helper()
	fake, err := nomadtest.New(nomadtest.Options{Heartbeat: 50 * time.Millisecond, Namespaces: []string{nomad.DefaultNamespace}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	return fake
}

// nomadBackendOn is a Nomad backend on the fake agent: one per bot.
func nomadBackendOn(t *testing.T, fake *nomadtest.Server) *nomad.Backend {
	t.Helper()
	c, err := fake.Client("")
	if err != nil {
		t.Fatal(err)
	}
	b, err := nomad.New(nomad.Options{Client: c, Image: "sandbox-bot/sandbox:test", Logger: zerolog.Nop(), LogDrain: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// Two bots on one Nomad agent share the queue through its Variables:
// labels go to both, no run starts twice, and the waiting runs start in
// the order they were queued, whichever bot sees a slot free.
func TestQueueAcrossReplicasOnNomad(t *testing.T) {
	t.Parallel()
	fake := newNomadFake(t)
	h := newHarness(t, nil, nil)
	h.stop()
	b1, b2 := nomadBackendOn(t, fake), nomadBackendOn(t, fake)
	h.startWith(b1, capTwo)
	h2 := replica(t, h, b2, capTwo)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("bot 1 log:\n%s\nbot 2 log:\n%s", h.logs.String(), h2.logs.String())
		}
	})
	bots := []*harness{h, h2}
	issues := newIssues(h, 5)
	labelInTurn(h, issues, func(i, n int) { bots[i%2].label(n, writer, fmt.Sprintf("d-replica-%d", i)) })
	assertQueued(t, h, issues[2:])

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	started := func() []int {
		runs, err := b1.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []int
		for _, r := range runs {
			out = append(out, r.Meta.Number)
		}
		slices.Sort(out)
		return out
	}
	taskOf := map[int]string{}
	for _, r := range mustList(t, ctx, b1) {
		taskOf[r.Meta.Number] = r.Meta.TaskID
	}
	for i := range 3 {
		n := issues[i]
		finishOnFake(t, ctx, fake, taskOf[n])
		want := issues[:3+i]
		h.gh.WaitFor(15*time.Second, fmt.Sprintf("runs of %v on the agent", want), func() bool {
			got := started()
			return slices.Equal(got, want) || len(got) > len(want)
		})
		if got := started(); !slices.Equal(got, want) {
			t.Fatalf("after %d runs ended, runs of %v; want %v (in queue order)", i+1, got, want)
		}
		for _, r := range mustList(t, ctx, b1) {
			taskOf[r.Meta.Number] = r.Meta.TaskID
		}
		if n := liveRuns(t, b1); n > 2 {
			t.Fatalf("%d runs live under a cap of 2", n)
		}
	}
	for _, bot := range bots {
		bot.idle()
	}
	if got := fake.Jobs(); got != 5 {
		t.Errorf("%d jobs registered for 5 issues", got)
	}
	for _, n := range issues {
		h.waitComment(n, "the acknowledgement", func(c string) bool { return strings.Contains(c, `"kind":"ack"`) })
		if c := countMarked(h, n, "ack"); c != 1 {
			t.Errorf("#%d has %d acknowledgements, want 1 (a run started twice?)", n, c)
		}
	}
}

func mustList(t *testing.T, ctx context.Context, b dispatch.Backend) []dispatch.RunStatus {
	t.Helper()
	runs, err := b.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return runs
}

// startOnFake starts the allocation of job on the fake agent and returns
// it with its alloc/data directory, where the runner leaves result.json.
func startOnFake(t *testing.T, ctx context.Context, fake *nomadtest.Server, job string) (alloc, data string) {
	t.Helper()
	alloc, err := fake.WaitAlloc(ctx, nomad.DefaultNamespace, job)
	if err != nil {
		t.Fatal(err)
	}
	if err := fake.StartAlloc(alloc); err != nil {
		t.Fatal(err)
	}
	data = filepath.Join(fake.AllocDir(alloc), "alloc", "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	return alloc, data
}

// finishOnFake plays a plan run to its end on the fake agent, leaving a
// completed receipt.
func finishOnFake(t *testing.T, ctx context.Context, fake *nomadtest.Server, taskID string) {
	t.Helper()
	alloc, data := startOnFake(t, ctx, fake, nomad.JobID(nomad.DefaultJobPrefix, taskID, dispatch.ModePlan))
	if err := dispatch.WriteResult(data, planDone(taskID)); err != nil {
		t.Fatal(err)
	}
	if err := fake.FinishAlloc(alloc, 0); err != nil {
		t.Fatal(err)
	}
}

// Runs queued under caps the operator has since lifted start when the bot
// comes back without them.
func TestQueuedRunsStartWhenCapsAreLifted(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, map[string]string{"SANDBOX_MAX_RUNS_PER_INSTALLATION": "1"})
	issues := newIssues(h, 3)
	labelInTurn(h, issues, func(i, n int) { h.label(n, writer, fmt.Sprintf("d-lifted-%d", i)) })
	if got := submittedIssues(h); !slices.Equal(got, issues[:1]) {
		t.Fatalf("runs of %v under a cap of 1, want %v", got, issues[:1])
	}
	h.stop()
	h.start(nil)
	h.waitSubmitted(3)
	if got := submittedIssues(h); !slices.Equal(got, issues) {
		t.Fatalf("runs of %v once the cap is lifted, want %v in order", got, issues)
	}
	h.idle()
	for _, n := range issues[1:] {
		if labelled(h, n, "agent:queued") || !labelled(h, n, "agent:planning") {
			t.Errorf("#%d: labels %v, want agent:planning", n, h.gh.Issue(testRepo, n).Labels)
		}
	}
}
