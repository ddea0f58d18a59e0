package main

import (
	"bytes"
	"fmt"
	"image"
	"image/png"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/app/githubtest"
	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// The whole life of a UI task, as a person meets it, through the real bot
// binary, the real sandbox image (runner and agent as two users), the real
// agent CLI on a scripted model and Debian's Chromium: a labeled issue on
// a repository with a dev server → a plan for which the agent used the
// browser → /approve → an execute run that resumes the plan's session →
// screenshots in a media commit, shown in the PR body while the branch tip
// stays clean → two inline review comments a second apart → one revise
// run → a reply on each thread → a push to the base branch that conflicts
// with the PR → a rebase run whose agent resolves the conflict.

// uiBackground is the page's background: a screenshot whose most common
// colour is this one shows the page, not a blank or an error page.
var uiBackground = [3]uint8{0x3a, 0x7b, 0xd5}

// uiPage is page.html with heading h and footer f; the lines between keep
// the two far enough apart that git applies a change of one after a change
// of the other.
func uiPage(h, f string) string {
	return fmt.Sprintf(`<!doctype html>
<html>
<head><title>Demo</title></head>
<body style="background:#%02x%02x%02x;margin:0;color:#fff;font:32px sans-serif">
<h1>%s</h1>
<p>one</p>
<p>two</p>
<p>three</p>
<p>four</p>
<p>five</p>
<footer>%s</footer>
</body>
</html>
`, uiBackground[0], uiBackground[1], uiBackground[2], h, f)
}

const (
	uiCanary   = "Greeting canary 4242"
	uiPlanText = "UI-PLAN-7Q: 1. In `page.html`, change the heading to `Hello, reviewers`. 2. Nothing else."
	uiDevPort  = 5173
)

// uiRepo is the repository: a dev server that serves page.html, one route
// to screenshot, and a check the agent's change must pass.
func uiRepo() (string, map[string]string) {
	yml := fmt.Sprintf(`dev:
  command: node server.js
  port: %d
  routes: [/]
validate:
  heading: grep -q reviewers page.html
`, uiDevPort)
	return yml, map[string]string{
		"README.md": "# demo\n",
		"server.js": "const fs = require('fs');\n" +
			"require('http').createServer((q, s) => { s.setHeader('content-type', 'text/html'); s.end(fs.readFileSync('page.html')); })" +
			".listen(process.env.PORT || " + fmt.Sprint(uiDevPort) + ", '127.0.0.1');\n",
		"page.html": uiPage(uiCanary, "footer"),
	}
}

// uiOpenCodeScript is the OpenCode side: plan (browser, then the plan),
// execute, revise and rebase, two turns each but the plan's three.
func uiOpenCodeScript() []modeltest.Turn {
	call := func(name string, args map[string]any) modeltest.Turn {
		return modeltest.Turn{ToolCalls: []modeltest.ToolCall{{Name: name, Args: args}}, Usage: usage(400, 20)}
	}
	return []modeltest.Turn{
		// plan: the agent looks at the running page first
		call("browser_navigate_page", map[string]any{"type": "url", "url": fmt.Sprintf("http://127.0.0.1:%d/", uiDevPort)}),
		call("browser_take_snapshot", map[string]any{}),
		{Text: uiPlanText, Usage: usage(900, 60)},
		// execute (resumed)
		{ToolCalls: []modeltest.ToolCall{write("page.html", uiPage("Hello, reviewers", "footer"))}, Usage: usage(1500, 40)},
		{Text: "Changed the heading to Hello, reviewers.", Usage: usage(1700, 20)},
		// revise: both inline comments in one run
		{ToolCalls: []modeltest.ToolCall{write("page.html", uiPage("Hello, reviewers", "Thanks for reviewing"))}, Usage: usage(1800, 40)},
		{Text: "Addressed both review comments: a footer that thanks reviewers.", Usage: usage(1900, 20)},
		// rebase: the heading conflicts with the base's new one
		{ToolCalls: []modeltest.ToolCall{write("page.html", uiPage("Hello, reviewers (v2)", "footer"))}, Usage: usage(1000, 40)},
		{Text: "Resolved the conflict in page.html.", Usage: usage(1100, 20)},
	}
}

// TestE2EUITaskLife: the whole life with OpenCode on the Docker backend,
// in the caps profile, or behind gVisor with SANDBOX_TEST_ISOLATION=gvisor
// (CI runs TestE2EUISessionAndMediaGVisor behind gVisor instead: half the
// runs, the same sandbox features).
func TestE2EUITaskLife(t *testing.T) {
	yml, files := uiRepo()
	l := startLoop(t, loopOptions{script: uiOpenCodeScript(), sandboxYML: yml, files: files,
		env: []string{"SANDBOX_REVIEW_BATCH_WINDOW=4s"}})
	defer wantSandboxesIn(t, l, dispatch.Isolation(testIsolation(t)), 4)
	n, pr := uiPlanApprovePR(t, l)
	wantOpenCodeResumedPlan(t, l.model)
	wantMedia(t, l, pr)

	// Two inline comments a second apart: one revise run with both, and a
	// reply in each thread.
	head := l.gh.BranchSHA(e2eRepo, pr.PR.Head)
	first := l.inlineComment(pr.Number, "page.html", 11, "The footer should thank reviewers.")
	// The scenario, not a wait: a person's second comment a second later.
	time.Sleep(time.Second)
	second := l.inlineComment(pr.Number, "page.html", 11, "And keep the heading as it is.")
	l.gh.WaitFor(5*time.Minute, "a reply on both review threads", func() bool {
		return len(l.replies(pr.Number)) == 2
	})
	replied := map[int64]bool{}
	for _, r := range l.replies(pr.Number) {
		replied[r.InReplyTo] = true
	}
	if !replied[first] || !replied[second] {
		t.Fatalf("the bot replied to %v, want %d and %d", replied, first, second)
	}
	if runs := l.submitted("revise"); runs != 1 {
		t.Fatalf("two inline comments a second apart started %d revise runs, want 1", runs)
	}
	if got, _ := l.gh.FileAt(e2eRepo, pr.PR.Head, "page.html"); !strings.Contains(got, "Thanks for reviewing") || l.gh.BranchSHA(e2eRepo, pr.PR.Head) == head {
		t.Fatalf("the revise run did not push the footer:\n%s", got)
	}
	reviseReq := l.model.ScriptedRequests()[5]
	for _, want := range []string{"The footer should thank reviewers.", "And keep the heading as it is."} {
		if !strings.Contains(reviseReq.LastUser(), want) {
			t.Errorf("the revise run's prompt lacks %q:\n%s", want, reviseReq.LastUser())
		}
	}

	// A push to main that changes the heading too: GitHub cannot update
	// the branch, so the bot starts a rebase run and its agent resolves
	// the conflict.
	base := l.gh.CommitFile(e2eRepo, "main", "page.html", uiPage(uiCanary+" (v2)", "footer"), "Version 2 of the heading")
	l.push("main", base)
	l.gh.WaitFor(5*time.Minute, "the PR rebased onto the new main", func() bool {
		return l.gh.IsAncestor(e2eRepo, base, l.gh.BranchSHA(e2eRepo, pr.PR.Head))
	})
	got, _ := l.gh.FileAt(e2eRepo, pr.PR.Head, "page.html")
	if !strings.Contains(got, "Hello, reviewers (v2)") || !strings.Contains(got, "Thanks for reviewing") {
		t.Fatalf("after the rebase page.html must hold the resolution and the revise's footer:\n%s", got)
	}
	if runs := l.submitted("rebase"); runs != 1 {
		t.Fatalf("rebase runs: %d, want 1", runs)
	}
	if files := l.gh.TreeFiles(e2eRepo, l.gh.BranchSHA(e2eRepo, pr.PR.Head)); hasMedia(files) {
		t.Fatalf("the rebased branch tip carries the review media: %v", files)
	}
	if strings.ContainsRune(l.gh.Issue(e2eRepo, pr.Number).Body, 0x1b) || strings.ContainsRune(l.gh.Issue(e2eRepo, n).Body, 0x1b) {
		t.Error("a terminal escape reached GitHub")
	}
}

// uiPlanApprovePR labels an issue, waits for the plan, approves it and
// waits for the PR; it checks the plan run used the browser and changed
// nothing.
func uiPlanApprovePR(t *testing.T, l *loop) (int, githubtest.Issue) {
	t.Helper()
	n := l.gh.AddIssue(e2eRepo, e2eWriter, "Greet reviewers", "Change the page's heading to greet reviewers.")
	l.label(n)
	planComment := l.waitComment(n, "## 📋 Plan", 5*time.Minute)
	if !strings.Contains(planComment, "UI-PLAN-7Q") {
		t.Fatalf("plan comment lacks the model's plan:\n%s", planComment)
	}
	if got, _ := l.gh.FileAt(e2eRepo, "main", "page.html"); strings.Contains(got, "Hello, reviewers") {
		t.Fatal("the plan run changed the repository")
	}
	l.command(n, "/approve")
	l.waitComment(n, "🚀 Opened", 5*time.Minute)
	prs := l.gh.PullRequests(e2eRepo)
	if len(prs) != 1 {
		t.Fatalf("want 1 PR, got %d", len(prs))
	}
	pr := prs[0]
	if got, _ := l.gh.FileAt(e2eRepo, pr.PR.Head, "page.html"); !strings.Contains(got, "Hello, reviewers") {
		t.Fatalf("branch %s: page.html lacks the change:\n%s", pr.PR.Head, got)
	}
	if !strings.Contains(pr.Body, "resumed from the plan run") {
		t.Errorf("the PR body's session row does not say the plan's session was resumed:\n%s", pr.Body)
	}
	if strings.ContainsRune(pr.Body, 0x1b) {
		t.Errorf("the PR body holds a terminal escape:\n%q", pr.Body)
	}
	return n, pr
}

// wantOpenCodeResumedPlan: the execute run's first request to the model
// carries the plan run's history: the page the agent read in the browser
// and the plan it wrote.
func wantOpenCodeResumedPlan(t *testing.T, m *modeltest.Server) {
	t.Helper()
	reqs := m.ScriptedRequests()
	if len(reqs) < 4 {
		t.Fatalf("scripted requests: %d, want at least 4", len(reqs))
	}
	var history strings.Builder
	for _, msg := range reqs[3].Messages {
		history.WriteString(msg.Role + ": " + msg.Content + "\n")
	}
	for _, want := range []string{uiCanary, "UI-PLAN-7Q"} {
		if !strings.Contains(history.String(), want) {
			t.Errorf("the execute run's first model request lacks %q from the plan's session:\n%s", want, history.String())
		}
	}
}

var mediaLink = regexp.MustCompile(`!\[[^\]]*\]\(([^)\s]+)\)`)

// wantMedia: the PR body shows screenshots from a media commit that is an
// ancestor of the head, whose pixels are the page, while the branch tip
// holds no media.
func wantMedia(t *testing.T, l *loop, pr githubtest.Issue) {
	t.Helper()
	body := l.gh.Issue(e2eRepo, pr.Number).Body
	if !strings.Contains(body, "### Screenshots") {
		t.Fatalf("the PR body has no screenshots:\n%s", body)
	}
	links := mediaLink.FindAllStringSubmatch(body, -1)
	if len(links) == 0 {
		t.Fatalf("the PR body has no image links:\n%s", body)
	}
	head := l.gh.BranchSHA(e2eRepo, pr.PR.Head)
	var desktop bool
	for _, m := range links {
		url := m[1]
		sha := regexp.MustCompile(`/raw/([0-9a-f]{40})/`).FindStringSubmatch(url)
		if sha == nil {
			t.Fatalf("image %s is not at a commit", url)
		}
		if sha[1] == head || !l.gh.IsAncestor(e2eRepo, sha[1], head) {
			t.Fatalf("image %s: its commit must be the media commit, an ancestor of the head %s", url, head)
		}
		// As a reviewer signed in to GitHub sees it.
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Authorization", "token e2e-reviewer")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("image %s: %d", url, resp.StatusCode)
		}
		if !strings.HasSuffix(url, ".png") {
			continue
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("image %s: %v", url, err)
		}
		if c := dominant(img); c != uiBackground {
			t.Errorf("screenshot %s: its most common colour is %x, not the page's background %x", url, c, uiBackground)
		}
		if img.Bounds().Dx() == 1280 {
			desktop = true
		}
	}
	if !desktop {
		t.Errorf("no desktop-width screenshot among %d images", len(links))
	}
	if hasMedia(l.gh.TreeFiles(e2eRepo, head)) {
		t.Fatalf("the branch tip carries the review media")
	}
}

func hasMedia(files map[string]string) bool {
	for p := range files {
		if strings.HasPrefix(p, ".sandbox/media/") {
			return true
		}
	}
	return false
}

// dominant is an image's most common colour.
func dominant(img image.Image) [3]uint8 {
	count := map[[3]uint8]int{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 4 {
		for x := b.Min.X; x < b.Max.X; x += 4 {
			r, g, bl, _ := img.At(x, y).RGBA()
			count[[3]uint8{uint8(r >> 8), uint8(g >> 8), uint8(bl >> 8)}]++
		}
	}
	var best [3]uint8
	for c, n := range count {
		if n > count[best] {
			best = c
		}
	}
	return best
}

// inlineComment adds a writer's inline comment on the PR and delivers its
// event; it returns the comment's id.
func (l *loop) inlineComment(pr int, path string, line int, body string) int64 {
	l.t.Helper()
	review := l.gh.AddReview(e2eRepo, pr, e2eWriter, "COMMENTED", "")
	id := l.gh.AddReviewComment(e2eRepo, pr, review, e2eWriter, path, line, body)
	iss := l.gh.Issue(e2eRepo, pr)
	l.deliver("pull_request_review_comment", fmt.Sprintf("inline-%d", id), l.gh.Payload("pull_request_review_comment.created", e2eRepo, e2eWriter, func(m map[string]any) {
		m["comment"] = map[string]any{"id": id, "pull_request_review_id": review, "body": body, "path": path, "line": line,
			"diff_hunk": "@@ -1 +1 @@", "created_at": time.Now().UTC().Format(time.RFC3339), "user": map[string]any{"login": e2eWriter, "type": "User"}}
		p := m["pull_request"].(map[string]any)
		p["number"] = pr
		p["head"] = map[string]any{"ref": iss.PR.Head}
		p["base"] = map[string]any{"ref": "main"}
	}))
	return id
}

// replies are the bot's replies in the review threads of pr.
func (l *loop) replies(pr int) []*githubtest.ReviewComment {
	var out []*githubtest.ReviewComment
	for _, c := range l.gh.Issue(e2eRepo, pr).PR.ReviewComments {
		if c.User == githubtest.AppLogin && c.InReplyTo != 0 {
			out = append(out, c)
		}
	}
	return out
}

// push delivers the push event of branch moving to sha.
func (l *loop) push(branch, sha string) {
	l.t.Helper()
	l.deliver("push", "push-"+sha, l.gh.Payload("push", e2eRepo, e2eWriter, func(m map[string]any) {
		m["ref"] = "refs/heads/" + branch
		m["after"] = sha
		m["deleted"] = false
	}))
}

// submitted counts the runs of mode the bot submitted.
func (l *loop) submitted(mode string) int {
	n := 0
	for _, line := range strings.Split(l.bot.logs.String(), "\n") {
		if strings.Contains(line, `"message":"run submitted"`) && strings.Contains(line, `"mode":"`+mode+`"`) {
			n++
		}
	}
	return n
}

// uiClaudeCodeScript is the Claude Code side of the plan and the execute
// run: the browser's tools are mcp__browser__<tool>, and the edit is a
// shell command (Claude Code's Write wants an absolute path, which is the
// sandbox's to choose).
func uiClaudeCodeScript() modeltest.AnthropicScript {
	use := func(name string, in map[string]any) modeltest.AnthropicTurn {
		return modeltest.AnthropicTurn{ToolUses: []modeltest.AnthropicToolUse{{Name: name, Input: in}}, Usage: modeltest.AnthropicUsage{InputTokens: 400, OutputTokens: 20}}
	}
	return modeltest.AnthropicScript{Turns: []modeltest.AnthropicTurn{
		use("mcp__browser__navigate_page", map[string]any{"type": "url", "url": fmt.Sprintf("http://127.0.0.1:%d/", uiDevPort)}),
		use("mcp__browser__take_snapshot", map[string]any{}),
		{Text: uiPlanText, Usage: modeltest.AnthropicUsage{InputTokens: 900, OutputTokens: 60}},
		use("Bash", map[string]any{"command": "cat > page.html <<'EOF'\n" + uiPage("Hello, reviewers", "footer") + "EOF", "description": "Change the heading"}),
		{Text: "Changed the heading to Hello, reviewers.", Usage: modeltest.AnthropicUsage{InputTokens: 1700, OutputTokens: 20}},
	}}
}

// TestE2EUISessionAndMediaClaudeCode: the session and media parts of the
// life with Claude Code, whose provider the bot serves through the
// sandbox's model gateway.
func TestE2EUISessionAndMediaClaudeCode(t *testing.T) {
	yml, files := uiRepo()
	script := uiClaudeCodeScript()
	l := startLoop(t, loopOptions{anthropic: &script, harness: "claude-code", model: modeltest.AnthropicModelID, sandboxYML: yml, files: files})
	_, pr := uiPlanApprovePR(t, l)
	reqs := l.anthropic.ScriptedRequests()
	if len(reqs) < 4 {
		t.Fatalf("scripted requests: %d, want at least 4", len(reqs))
	}
	var history strings.Builder
	for _, m := range reqs[3].Messages {
		for _, b := range m.Blocks {
			history.WriteString(m.Role + " " + b.Type + ": " + b.Text + "\n")
		}
	}
	for _, want := range []string{uiCanary, "UI-PLAN-7Q"} {
		if !strings.Contains(history.String(), want) {
			t.Errorf("the execute run's first model request lacks %q from the plan's session:\n%s", want, history.String())
		}
	}
	wantMedia(t, l, pr)
}

// TestE2EUISessionAndMediaGVisor: the UI task's plan and execute runs
// through the bot on the Docker backend with every sandbox behind gVisor's
// kernel (SANDBOX_ISOLATION=gvisor): the dev server, the agent's browser
// in the plan, the execute run resuming the plan's session, screenshots in
// the media commit. The whole life (review batch, rebase) behind gVisor:
// SANDBOX_TEST_ISOLATION=gvisor go test -run '^TestE2EUITaskLife$'.
func TestE2EUISessionAndMediaGVisor(t *testing.T) {
	testenv.Runsc(t)
	l := uiSessionAndMedia(t, dispatch.IsolationGVisor, nil)
	wantSandboxesIn(t, l, dispatch.IsolationGVisor, 2)
}

// uiSessionAndMedia runs the UI task's plan and execute runs in profile
// iso (on the backend backendEnv names, Docker when nil) and checks the
// browser, the resumed session and the media.
func uiSessionAndMedia(t *testing.T, iso dispatch.Isolation, backendEnv func(string) []string) *loop {
	t.Helper()
	yml, files := uiRepo()
	l := startLoop(t, loopOptions{script: uiOpenCodeScript()[:5], sandboxYML: yml, files: files, backendEnv: backendEnv,
		env: []string{"SANDBOX_ISOLATION=" + string(iso)}})
	_, pr := uiPlanApprovePR(t, l)
	wantOpenCodeResumedPlan(t, l.model)
	wantMedia(t, l, pr)
	return l
}

// TestE2ENomadUISessionAndMedia: the session and media parts through the
// Nomad backend, whose fake runs each job on the real engine as Nomad's
// docker driver would: the plan's session leaves its allocation for
// Variables and comes back in the execute job.
func TestE2ENomadUISessionAndMedia(t *testing.T) { nomadUISessionAndMedia(t, dispatch.IsolationCaps) }

// TestE2ENomadUISessionAndMediaGVisor: the same with the jobs' sandboxes
// behind gVisor (the job's runtime, which the fake's docker driver passes
// to the engine as Nomad's does).
func TestE2ENomadUISessionAndMediaGVisor(t *testing.T) {
	testenv.Runsc(t)
	nomadUISessionAndMedia(t, dispatch.IsolationGVisor)
}

func nomadUISessionAndMedia(t *testing.T, iso dispatch.Isolation) {
	fake, onNomad := nomadFake(t)
	uiSessionAndMedia(t, iso, onNomad)
	if fake.Jobs() != 2 {
		t.Errorf("want 2 Nomad jobs (plan, execute), got %d", fake.Jobs())
	}
	c, err := fake.Client("")
	if err != nil {
		t.Fatal(err)
	}
	jobs, _, err := c.Jobs().List(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		rt, _ := fake.Job(j.Namespace, j.ID).TaskGroups[0].Tasks[0].Config["runtime"].(string)
		if (rt == dispatch.GVisorRuntime) != (iso == dispatch.IsolationGVisor) {
			t.Errorf("job %s asks for runtime %q in the %s profile", j.ID, rt, iso)
		}
	}
}

// wantSandboxesIn: the bot started at least n sandboxes, each in profile
// iso, by its own log.
func wantSandboxesIn(t *testing.T, l *loop, iso dispatch.Isolation, n int) {
	t.Helper()
	if t.Failed() {
		return // the count of a run cut short says nothing more
	}
	var started, in int
	for _, line := range strings.Split(l.bot.logs.String(), "\n") {
		if strings.Contains(line, `"message":"sandbox started"`) {
			started++
			if strings.Contains(line, `"isolation":"`+string(iso)+`"`) {
				in++
			}
		}
	}
	if started < n || in != started {
		t.Errorf("the bot started %d sandboxes, %d of them %s; want at least %d, all %s", started, in, iso, n, iso)
	}
}
