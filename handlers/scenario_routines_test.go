package handlers_test

import (
	"bytes"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/app/githubtest"
	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// routineClock is the file both replicas read as now (SANDBOX_CLOCK_FILE).
type routineClock struct {
	t    *testing.T
	path string
	now  time.Time
}

func newRoutineClock(t *testing.T, start time.Time) *routineClock {
	c := &routineClock{t: t, path: filepath.Join(t.TempDir(), "now")}
	c.set(start)
	return c
}

func (c *routineClock) set(now time.Time) {
	c.t.Helper()
	c.now = now
	tmp := c.path + ".tmp"
	if err := os.WriteFile(tmp, []byte(now.Format(time.RFC3339Nano)), 0o600); err != nil {
		c.t.Fatal(err)
	}
	if err := os.Rename(tmp, c.path); err != nil {
		c.t.Fatal(err)
	}
}

func (c *routineClock) advance(d time.Duration) { c.set(c.now.Add(d)) }

const routinesYML = `routines:
  - name: sweep
    schedule: "* * * * *"
    task: |
      Sweep the TODO comments.
      Turn each into an issue or a fix.
  - name: broken
    schedule: "61 * * * *"
    task: never runs
`

// routineHarness is two replicas on one fake GitHub, one backend and one
// clock, both knowing the repository's routines.
func routineHarness(t *testing.T, start time.Time) (*harness, *harness, *routineClock) {
	t.Helper()
	clock := newRoutineClock(t, start)
	env := map[string]string{"SANDBOX_CLOCK_FILE": clock.path}
	h := newHarness(t, map[string]string{".sandbox.yml": defaultSandboxYML + routinesYML, "main.go": "package main\n"}, env)
	other := &harness{t: t, gh: h.gh, backend: h.backend, logs: &bytes.Buffer{}, data: t.TempDir()}
	other.start(env)
	for _, r := range []*harness{h, other} {
		h.gh.WaitFor(10*time.Second, "a replica knows the routine sweep", func() bool { return hasRoutine(r, "sweep") })
	}
	return h, other, clock
}

func hasRoutine(h *harness, name string) bool {
	for _, v := range h.srv.Routines(h.t.Context(), testRepo) {
		if v.Name == name && v.LastTick != "" {
			return true
		}
	}
	return false
}

// routineIssues are the issues the routine opened.
func routineIssues(h *harness, name string) []githubtest.Issue {
	return h.gh.IssuesLabeled(testRepo, "routine:"+name)
}

// waitTick waits until the routine's book shows tick claimed and its
// result recorded (no longer busy).
func waitTick(h *harness, name, tick, result string) dispatch.RoutineState {
	h.t.Helper()
	var st dispatch.RoutineState
	h.gh.WaitFor(10*time.Second, "routine "+name+" at tick "+tick+": "+result, func() bool {
		book, err := dispatch.ReadRoutines(h.t.Context(), h.backend, testRepo)
		st = book[name]
		return err == nil && st.Tick == tick && st.Busy == 0 && strings.HasPrefix(st.Result, result)
	})
	return st
}

// A routine every minute, two replicas on one backend and one clock: each
// tick opens one issue in all, by the App, labeled agent and
// routine:sweep, whose plan starts once; while it is open the next ticks
// open none and say so on it once; closing it lets the next tick open
// one. The bad routine beside it is reported on its commit, file, line and
// column, and stops nothing.
func TestRoutineTickOpensOneIssueAcrossReplicas(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 11, 29, 9, 0, 30, 0, time.UTC)
	h, _, clock := routineHarness(t, start)

	head := h.gh.BranchSHA(testRepo, "main")
	h.gh.WaitFor(10*time.Second, "the failing check run of the bad routine", func() bool {
		return slices.ContainsFunc(h.gh.CheckRuns(testRepo), func(c githubtest.CheckRun) bool { return c.Name == "sandbox-agent routines" })
	})
	var checks []githubtest.CheckRun
	for _, c := range h.gh.CheckRuns(testRepo) {
		if c.Name == "sandbox-agent routines" {
			checks = append(checks, c)
		}
	}
	if len(checks) != 1 || checks[0].HeadSHA != head || checks[0].Conclusion != "failure" {
		t.Fatalf("check runs of the bad routine: %+v; want one failing on %s", checks, head)
	}
	line := strings.Count(defaultSandboxYML, "\n") + 8
	if a := checks[0].Annotations; len(a) != 1 || a[0].Path != ".sandbox.yml" || a[0].Line != line || a[0].Column != 15 ||
		!strings.Contains(a[0].Message, "routines[1].schedule") || !strings.Contains(checks[0].Summary, ".sandbox.yml:"+strconv.Itoa(line)+":15") {
		t.Errorf("the check run's annotations %+v and summary %q; want .sandbox.yml line %d column 15", a, checks[0].Summary, line)
	}

	clock.advance(35 * time.Second) // 9:01:05
	st := waitTick(h, "sweep", "2026-11-29T09:01", "opened #")
	issues := routineIssues(h, "sweep")
	if len(issues) != 1 || issues[0].Number != st.Issue {
		t.Fatalf("after the first tick: issues %+v, book %+v; want one", issues, st)
	}
	iss := issues[0]
	if iss.User != githubtest.AppLogin || !slices.Contains(iss.Labels, "agent") || iss.Title != "sweep: Sweep the TODO comments." ||
		!strings.HasPrefix(iss.Body, "Sweep the TODO comments.\nTurn each into an issue or a fix.") || !strings.Contains(iss.Body, "tick 2026-11-29T09:01") {
		t.Errorf("the routine's issue: %+v", iss)
	}
	specs := h.waitSubmitted(1)
	if o := specs[0].Order; o.Mode != dispatch.ModePlan || !strings.Contains(o.Task.Body, "Sweep the TODO comments.") || o.Task.Title != iss.Title {
		t.Errorf("the plan run: mode %s, task %+v; want a plan of the routine's task as the App wrote it", o.Mode, o.Task)
	}

	for _, tick := range []string{"2026-11-29T09:02", "2026-11-29T09:03"} {
		clock.advance(time.Minute)
		waitTick(h, "sweep", tick, "skipped: #")
	}
	h.idle()
	if n := len(routineIssues(h, "sweep")); n != 1 || len(h.backend.Specs()) != 1 {
		t.Fatalf("while the issue is open: %d issues, %d runs; want 1 and 1", n, len(h.backend.Specs()))
	}
	var notes int
	for _, c := range h.botComments(iss.Number) {
		if strings.Contains(c, "still open") {
			notes++
		}
	}
	if notes != 1 {
		t.Errorf("%d notes of skipped ticks on #%d; want one", notes, iss.Number)
	}

	// The operator's dashboard lists the routine: its next tick, its last
	// run and what came of it.
	// (This replica's next tick is set when its own wake has run, which
	// may be after the other replica acted on the tick.)
	want := "<td>sweep</td><td><code>* * * * *</code> UTC</td><td>2026-11-29 09:04</td><td>2026-11-29 09:03</td><td>skipped: #" + strconv.Itoa(iss.Number) + " is still open</td>"
	var page string
	h.gh.WaitFor(10*time.Second, "the dashboard's Routines table", func() bool {
		rec := httptest.NewRecorder()
		h.srv.AdminHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/dashboard", nil))
		page = rec.Body.String()
		return strings.Contains(page, `<table id="routines">`) && strings.Contains(page, want)
	})

	h.gh.CloseIssue(testRepo, iss.Number)
	clock.advance(time.Minute)
	st = waitTick(h, "sweep", "2026-11-29T09:04", "opened #")
	if issues := routineIssues(h, "sweep"); len(issues) != 2 || issues[1].Number != st.Issue {
		t.Errorf("after closing the first: issues %+v; want a second", issues)
	}
	h.waitSubmitted(2)
}

// /run weekly-deps by a writer, delivered to both replicas (and again to
// the first): one new issue, even while the routine's last is open, and
// one answer; a name no routine has gets the list of those there are.
func TestRunStartsARoutineOnceAcrossReplicas(t *testing.T) {
	t.Parallel()
	files := map[string]string{".sandbox.yml": defaultSandboxYML + `routines:
  - name: weekly-deps
    schedule: "0 6 * * 1"
    timezone: Europe/Berlin
    task: Update the dependencies.
`, "main.go": "package main\n"}
	clock := newRoutineClock(t, time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC))
	env := map[string]string{"SANDBOX_CLOCK_FILE": clock.path}
	h := newHarness(t, files, env)
	other := &harness{t: t, gh: h.gh, backend: h.backend, logs: &bytes.Buffer{}, data: t.TempDir()}
	other.start(env)
	n := h.gh.AddIssue(testRepo, writer, "Chores", "")
	for round := 1; round <= 2; round++ {
		id, payload := h.commentEvent(n, writer, "/run weekly-deps")
		for _, r := range []*harness{h, other, h} {
			r.deliver("issue_comment", "run-"+strconv.FormatInt(id, 10), payload)
		}
		h.idle()
		other.idle()
		if issues := routineIssues(h, "weekly-deps"); len(issues) != round {
			t.Fatalf("after /run number %d: %d issues; want %d", round, len(issues), round)
		}
		h.waitSubmitted(round)
	}
	var started int
	for _, c := range h.botComments(n) {
		if strings.Contains(c, "The routine `weekly-deps` started") {
			started++
		}
	}
	if started != 2 {
		t.Errorf("%d answers to two /run; want 2:\n%v", started, h.botComments(n))
	}
	h.comment(n, writer, "/run nightly")
	h.waitComment(n, "the answer to an unknown routine", func(c string) bool {
		return strings.Contains(c, "There is no routine `nightly`") && strings.Contains(c, "`weekly-deps`")
	})
	h.comment(n, writer, "/status")
	h.idle()
	// /status says nothing where the bot never ran; on the routine's
	// issue it names the routines.
	first := routineIssues(h, "weekly-deps")[0].Number
	h.gh.WaitFor(10*time.Second, "the next tick scheduled", func() bool {
		v := h.srv.Routines(t.Context(), testRepo)
		return len(v) == 1 && v[0].Next.Equal(time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC))
	})
	h.comment(first, writer, "/status")
	h.waitComment(first, "/status naming the routines", func(c string) bool {
		return strings.Contains(c, "Routines here: `weekly-deps` (0 6 * * 1 Europe/Berlin, next 2026-11-30 05:00 UTC)")
	})
	// A reader cannot start a routine.
	h.comment(n, reader, "/run weekly-deps")
	h.idle()
	if issues := routineIssues(h, "weekly-deps"); len(issues) != 2 {
		t.Errorf("a reader's /run opened an issue: %d", len(issues))
	}
}

// The bot stopped across two ticks of a routine every minute: at its start
// one catch-up issue opens, not one per missed tick.
func TestRoutineMissedTicksRunOnceAtStart(t *testing.T) {
	t.Parallel()
	h, other, clock := routineHarness(t, time.Date(2026, 11, 29, 9, 0, 30, 0, time.UTC))
	clock.advance(35 * time.Second)
	st := waitTick(h, "sweep", "2026-11-29T09:01", "opened #")
	h.gh.CloseIssue(testRepo, st.Issue)
	h.idle()
	other.idle()
	h.stop()
	other.stop()
	clock.advance(2 * time.Minute) // 9:03:05: 9:02 and 9:03 missed
	h.start(map[string]string{"SANDBOX_CLOCK_FILE": clock.path})
	waitTick(h, "sweep", "2026-11-29T09:03", "opened #")
	h.idle()
	if issues := routineIssues(h, "sweep"); len(issues) != 2 || !strings.Contains(issues[1].Body, "tick 2026-11-29T09:03") {
		t.Errorf("after the stop: %d issues; want the first and one catch-up for 9:03", len(issues))
	}
}

// on: main_ci_failed: the default branch's head fails a check: one issue
// with the failing check, its annotation and the failing line of its log,
// and its plan; the same failure redelivered, to the other replica, and on
// a later head: still one; a green head opens nothing.
func TestRedDefaultBranchGetsOneIssue(t *testing.T) {
	t.Parallel()
	files := map[string]string{".sandbox.yml": defaultSandboxYML + `routines:
  - name: red-main
    on: main_ci_failed
    task: The default branch's checks fail. Find why and fix it.
`, "main.go": "package main\n"}
	h := newHarness(t, files, nil)
	other := h.replica()
	h.gh.WaitFor(10*time.Second, "both replicas know red-main", func() bool {
		return len(h.srv.Routines(t.Context(), testRepo)) == 1 && len(other.srv.Routines(t.Context(), testRepo)) == 1
	})
	head := h.gh.BranchSHA(testRepo, "main")
	suite := h.failingJob(head, "main", "test")
	for i, r := range []*harness{h, other, h} {
		r.deliver("check_suite", "d-red-"+strconv.Itoa(i%2), suite)
	}
	h.idle()
	other.idle()
	issues := routineIssues(h, "red-main")
	if len(issues) != 1 {
		t.Fatalf("%d issues for one failing head; want 1\n%s", len(issues), h.logs.String())
	}
	body := issues[0].Body
	for _, want := range []string{"The default branch's checks fail.", "#### `test` (failure): workflow CI, step Run ./check.sh",
		"- `greet.txt:1` want hello", "greeting: want hello, got hullo", "the default branch's checks failed"} {
		if !strings.Contains(body, want) {
			t.Errorf("the issue's body lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "\x1b") {
		t.Error("the issue's body holds a terminal escape")
	}
	spec := h.waitSubmitted(1)[0]
	if !strings.Contains(spec.Order.Task.Body, "greeting: want hello, got hullo") {
		t.Errorf("the plan run's task lacks the failing line: %q", spec.Order.Task.Body)
	}
	// A later head fails the same check while the issue is open.
	later := h.gh.CommitFile(testRepo, "main", "notes.txt", "more\n", "More notes")
	h.deliver("check_suite", "d-red-later", h.failingJob(later, "main", "test"))
	h.idle()
	if n := len(routineIssues(h, "red-main")); n != 1 || len(h.backend.Specs()) != 1 {
		t.Errorf("the same failure on a later head: %d issues, %d runs; want 1 and 1", n, len(h.backend.Specs()))
	}
	// Closed, a new failure on a newer head opens the next one.
	h.gh.CloseIssue(testRepo, issues[0].Number)
	newest := h.gh.CommitFile(testRepo, "main", "notes.txt", "even more\n", "Even more notes")
	h.deliver("check_suite", "d-red-newest", h.failingJob(newest, "main", "lint"))
	h.idle()
	if n := len(routineIssues(h, "red-main")); n != 2 {
		t.Errorf("a failure after the issue was closed: %d issues; want 2", n)
	}
}

// The organisation's .github/.sandbox.yml declares routines for every
// repository, or the ones it lists; a repository's own routine of the same
// name wins; a push to .github reads them again for every repository.
func TestOrgRoutinesApplyToItsRepositories(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t, githubtest.Options{})
	gh.AddRepo("octo-org/.github", testInstallation, map[string]string{".sandbox.yml": `routines:
  - name: docs
    schedule: "@weekly"
    task: Check the docs.
  - name: deps
    schedule: "@daily"
    task: Org deps.
  - name: only-api
    schedule: "@daily"
    task: x
    repositories: [api]
`})
	h := newHarnessOn(t, gh, map[string]string{".sandbox.yml": defaultSandboxYML + "routines:\n  - {name: deps, schedule: '0 5 * * *', task: Own deps.}\n"}, nil)
	names := func() string {
		var out []string
		for _, v := range h.srv.Routines(t.Context(), testRepo) {
			out = append(out, v.Name+"="+v.Schedule)
		}
		return strings.Join(out, " ")
	}
	h.gh.WaitFor(10*time.Second, "the org's routines", func() bool { return names() == "deps=0 5 * * * docs=@weekly" })
	sha := h.gh.CommitFile("octo-org/.github", "main", ".sandbox.yml", "routines:\n  - {name: lint, schedule: '@hourly', task: Lint.}\n", "One routine")
	h.deliver("push", "d-org-push", h.gh.Payload("push", "octo-org/.github", writer, func(m map[string]any) {
		m["ref"], m["after"] = "refs/heads/main", sha
	}))
	h.gh.WaitFor(10*time.Second, "the org's routines at its new head", func() bool { return names() == "deps=0 5 * * * lint=@hourly" })
}
