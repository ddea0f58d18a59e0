package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad"
	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// The live page of a run and its preview, as people meet them: the real
// bot on the docker backend, the real image, OpenCode on the scripted
// model, Debian's Chromium signed in through the fake GitHub's OAuth.

// liveBrowser starts headless Chromium; each call to its second value
// opens a tab in a browser context of its own (its own cookies).
func liveBrowser(t *testing.T, flags ...chromedp.ExecAllocatorOption) (context.Context, func() context.Context) {
	t.Helper()
	bin := testenv.Chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-dev-shm-usage", true))
	opts = append(opts, flags...)
	alloc, cancel := chromedp.NewExecAllocator(t.Context(), opts...)
	t.Cleanup(cancel)
	root, cancelRoot := chromedp.NewContext(alloc)
	t.Cleanup(cancelRoot)
	if err := chromedp.Do(root); err != nil {
		t.Fatalf("start Chromium %s: %v", bin, err)
	}
	return root, func() context.Context {
		ctx, cancel := chromedp.NewContext(root, chromedp.WithNewBrowserContext())
		t.Cleanup(cancel)
		return ctx
	}
}

// signedIn opens url in tab as login, signing in through the fake GitHub;
// it returns the HTTP status of the page it lands on.
func (l *loop) signedIn(tab context.Context, login, url string) int64 {
	l.t.Helper()
	l.gh.SignInAs(login)
	resp, err := chromedp.Run(tab, chromedp.NavigateResponse(url))
	if err != nil {
		l.t.Fatalf("%s opens %s: %v", login, url, err)
	}
	// The load event can reach chromedp before the new document's
	// execution context does; until it has, an evaluation goes to the old
	// page's context and fails. Wait for the new one.
	if _, err := evaluate[string](tab, `document.readyState`, 10*time.Second); err != nil {
		l.t.Fatalf("%s opens %s: the page never answers: %v", login, url, err)
	}
	return resp.Status
}

// contextGone is chromedp's error for an evaluation sent to a page's
// execution context that a navigation has just replaced.
func contextGone(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "Cannot find context with specified id") ||
		strings.Contains(msg, "Execution context was destroyed") ||
		strings.Contains(msg, "Inspected target navigated or closed")
}

// settled runs act in ctx, trying again while the page's execution
// context is being replaced (see contextGone), until ctx is done; any
// other error ends it at once.
func settled[T any](ctx context.Context, act chromedp.Action[T]) (T, error) {
	for {
		v, err := chromedp.Run(ctx, act)
		if !contextGone(err) {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// evaluate runs expr in tab (see settled), for at most timeout.
func evaluate[T any](tab context.Context, expr string, timeout time.Duration) (T, error) {
	ctx, cancel := context.WithTimeout(tab, timeout)
	defer cancel()
	return settled(ctx, chromedp.Evaluate[T](expr))
}

// waitJS waits until expr is true in tab (see settled).
func waitJS(t *testing.T, tab context.Context, what, expr string, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, timeout)
	defer cancel()
	if _, err := settled(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(timeout))); err != nil {
		text, _ := evaluate[string](tab, `document.body ? document.body.innerText : ''`, 5*time.Second)
		t.Fatalf("waiting for %s: %v\npage:\n%s", what, err, text)
	}
}

var taskIDInAck = regexp.MustCompile(`"kind":"ack","task":"(T-[0-9A-F]{8})"`)

// ackedTask is the task id of the newest acknowledgement on issue n.
func (l *loop) ackedTask(n int) string {
	l.t.Helper()
	var id string
	for _, c := range l.gh.Issue(e2eRepo, n).Comments {
		if m := taskIDInAck.FindStringSubmatch(c.Body); m != nil {
			id = m[1]
		}
	}
	if id == "" {
		l.t.Fatalf("no acknowledgement with a task id on #%d", n)
	}
	return id
}

// liveGate is a gate for the scripted model's last turn and its release.
func liveGate(t *testing.T) (chan struct{}, func()) {
	gate := make(chan struct{})
	released := false
	release := func() {
		if !released {
			released = true
			close(gate)
		}
	}
	t.Cleanup(release)
	return gate, release
}

// liveScript: the agent opens the running page in its browser (the
// screencast shows it), reads the file, and waits at gate, alive with its
// dev server up, until the test has looked at what it wants to.
func liveScript(gate chan struct{}) []modeltest.Turn {
	return []modeltest.Turn{
		{ToolCalls: []modeltest.ToolCall{{Name: "browser_navigate_page", Args: map[string]any{"type": "url", "url": fmt.Sprintf("http://127.0.0.1:%d/", uiDevPort)}}}, Usage: usage(400, 20)},
		{ToolCalls: []modeltest.ToolCall{{Name: "read", Args: map[string]any{"filePath": "page.html"}}}, Usage: usage(400, 20)},
		{Text: uiPlanText, Usage: usage(900, 60), Gate: gate},
	}
}

// watchLiveRun labels an issue and has alice, a writer, watch its plan run
// in tab: the acknowledgement links the live page, whose stages and tool
// calls arrive without a reload, the agent's browser is cast to it (the
// frame's pixels are the dev server's page), and the running app opens
// through the bot. shots saves docs/operating.md's pictures.
func (l *loop) watchLiveRun(alice context.Context, shots bool) (n int, task string, _ context.Context) {
	t := l.t
	t.Helper()
	base := "http://" + l.addr
	n = l.gh.AddIssue(e2eRepo, e2eWriter, "Greet people", "Look at the page, then plan.")
	l.label(n)
	ack := l.waitComment(n, "Planning this issue", 30*time.Second)
	task = l.ackedTask(n)
	if want := base + "/runs/" + task; !strings.Contains(ack, want) {
		t.Errorf("the acknowledgement does not link to the live page %s:\n%s", want, ack)
	}

	// alice opens the page before the agent has done anything and watches.
	if st := l.signedIn(alice, "alice", base+"/runs/"+task); st != http.StatusOK {
		t.Fatalf("alice gets %d for her run's live page", st)
	}
	if _, err := chromedp.Run(alice, chromedp.Evaluate[bool](`window.notReloaded = true`)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, alice, "the agent's tool calls on the page", `Array.from(document.querySelectorAll('li.step.tool')).some(li =>
		li.querySelector('code.tool').textContent === 'read' && li.querySelector('.args').textContent.includes('page.html')) &&
		Array.from(document.querySelectorAll('li.step.tool code.tool')).some(c => c.textContent === 'browser_navigate_page')`, 3*time.Minute)
	waitJS(t, alice, "the figures so far (two scripted turns' tokens, two tool calls)", `+document.getElementById('tokens').textContent >= 840 &&
		+document.getElementById('tool-calls').textContent >= 2`, time.Minute)
	waitJS(t, alice, "the stages and the preview link", `['clone','agent'].every(s => document.querySelector('li.stage[data-stage="'+s+'"]')) &&
		!document.getElementById('preview-link').hidden`, time.Minute)
	if ok, _ := chromedp.Run(alice, chromedp.Evaluate[bool](`window.notReloaded === true`)); !ok {
		t.Fatal("the page was reloaded: lines must arrive on the open page")
	}
	// The agent's browser, cast to the page: a frame whose pixels are the
	// dev server's page (its background colour is the commonest).
	waitJS(t, alice, "a frame of the agent's browser", `window.liveFrames > 0 && document.getElementById('screencast').naturalWidth > 0`, time.Minute)
	rgb, err := chromedp.Run(alice, chromedp.Evaluate[[]int](commonestColour))
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range uiBackground {
		if len(rgb) != 3 || rgb[i] < int(c)-20 || rgb[i] > int(c)+20 {
			t.Fatalf("the screencast's commonest colour is %v; want the page's background %v", rgb, uiBackground)
		}
	}
	if shots {
		shot(t, alice, "live-page.png")
	}

	// The running app, through the bot, in a tab of alice's.
	preview := base + "/runs/" + task + "/preview/"
	if st := l.signedIn(alice, "alice", preview); st != http.StatusOK {
		t.Fatalf("the preview answers %d while the run lives", st)
	}
	if body, _ := chromedp.Run(alice, chromedp.Evaluate[string](`document.body.innerText`)); !strings.Contains(body, uiCanary) {
		t.Fatalf("the preview shows %q, want the dev server's page with %q", body, uiCanary)
	}
	if shots {
		shot(t, alice, "preview.png")
	}
	return n, task, alice
}

// TestE2ELivePageAndPreview: a writer watches a plan run on its live page
// as it happens, opens the running app through the bot, keeps watching
// across a restart of the bot, and sees the receipt at the end; a reader
// of another repository gets a 404 and an anonymous visitor the sign-in.
// The bot keeps the run's record in PostgreSQL: once the sandbox is
// removed, a second replica sharing the database shows every line the page
// showed live (numbered the same, each once, across the restart) and the
// receipt, downloads the whole transcript and lists the run on its
// dashboard.
func TestE2ELivePageAndPreview(t *testing.T) {
	gate, release := liveGate(t)
	yml, files := uiRepo()
	l := startLoop(t, loopOptions{signIn: true, sandboxYML: yml, files: files, script: liveScript(gate),
		env: []string{"SANDBOX_DATABASE_URL=" + testenv.Postgres(t)}})
	other := "octo-org/elsewhere"
	l.gh.AddRepo(other, 7, map[string]string{"README.md": "# other\n"})
	l.gh.SetPermission(other, "bob", "read")
	l.gh.SetPermission(e2eRepo, "carol", "read")
	base := "http://" + l.addr
	_, tab := liveBrowser(t)

	// The anonymous visitor is sent to sign in.
	anon := tab()
	l.gh.SignInAs("")
	if _, err := chromedp.Run(anon, chromedp.NavigateResponse(base+"/runs/T-00000000")); err != nil {
		t.Fatal(err)
	}
	if u, _ := chromedp.Run(anon, chromedp.Evaluate[string](`location.href`)); !strings.Contains(u, "/login/oauth/authorize") {
		t.Errorf("an anonymous visitor of a live page lands on %s, want GitHub's sign-in", u)
	}

	n, task, alice := l.watchLiveRun(tab(), true)
	preview := base + "/runs/" + task + "/preview/"

	// bob reads another repository only; carol reads this one.
	if st := l.signedIn(tab(), "bob", base+"/runs/"+task); st != http.StatusNotFound {
		t.Errorf("bob, who reads another repository, gets %d for the live page; want 404", st)
	}
	if st := l.signedIn(tab(), "bob", preview); st != http.StatusNotFound {
		t.Errorf("bob gets %d for the preview; want 404", st)
	}
	carol := tab()
	if st := l.signedIn(carol, "carol", base+"/runs/"+task); st != http.StatusOK {
		t.Errorf("carol, a reader of the repository, gets %d; want 200", st)
	}

	// The bot dies and comes back mid-run: carol's open page, showing the
	// lines so far, goes on from the last of them.
	waitJS(t, carol, "carol's page showing the run's lines so far", `Object.keys(window.liveArrivals).length > 0`, time.Minute)
	seen, _ := chromedp.Run(carol, chromedp.Evaluate[int](`Object.keys(window.liveArrivals).length`))
	if err := l.bot.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-l.bot.done
	l.bot = l.startBot()
	release()
	waitJS(t, carol, "the rest of the run and its receipt after the restart", fmt.Sprintf(`Object.keys(window.liveArrivals).length > %d &&
		!!document.querySelector('li.stage[data-stage="done"]') && !document.getElementById('receipt').hidden &&
		document.getElementById('state').textContent === 'ended'`, seen), 3*time.Minute)

	// After the run, no preview.
	l.waitComment(n, "## 📋 Plan", 2*time.Minute)
	if st := l.signedIn(alice, "alice", preview); st != http.StatusNotFound {
		t.Errorf("the preview answers %d after the run; want 404", st)
	}
	// The ended run's page shows its receipt.
	if st := l.signedIn(alice, "alice", base+"/runs/"+task); st != http.StatusOK {
		t.Fatalf("the ended run's page answers %d", st)
	}
	waitJS(t, alice, "the receipt of the ended run", `!document.getElementById('receipt').hidden &&
		document.getElementById('r-status').textContent === 'completed'`, time.Minute)

	// The sandbox is removed; a second replica shows the run's record.
	watched := pageLines(t, carol)
	wholeAndOnce(t, "carol's page, open across the restart", seqsOf(watched))
	l.waitContainerGone(task)
	l.recordOnReplica(alice, l.startReplica().addr, task, watched)
}

// TestE2ENomadLivePageAndPreview: the same on the Nomad backend, whose
// fake runs the job on the real engine as Nomad's docker driver would: the
// page reads the allocation's log, and the bot reaches the dev server and
// the screencast through the allocation's exec API (`sandbox-runner pipe`
// to the init's socket), here with a preview domain (the running app at a
// host of its own); after the run, no preview.
//
// The replicas keep the run's record in PostgreSQL and purge finished jobs:
// once Nomad has forgotten the job, a second replica (its own data
// directory) shows every line and the receipt.
func TestE2ENomadLivePageAndPreview(t *testing.T) {
	fake, onNomad := nomadFake(t)
	gate, release := liveGate(t)
	yml, files := uiRepo()
	purge := filepath.Join(t.TempDir(), "sandbox-bot.yml")
	if err := os.WriteFile(purge, []byte("nomad:\n  purge: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l := startLoop(t, loopOptions{signIn: true, sandboxYML: yml, files: files, script: liveScript(gate), backendEnv: onNomad,
		env: []string{"SANDBOX_PREVIEW_DOMAIN=" + previewDomain, "SANDBOX_DATABASE_URL=" + testenv.Postgres(t), "SANDBOX_CONFIG=" + purge}})
	tab := previewOriginBrowser(t, l.addr)
	n, task, alice := l.watchLiveRun(tab(), false)
	// With a preview domain the running app is at a host of its own.
	if u, _ := evaluate[string](alice, `location.hostname`, 5*time.Second); !strings.HasSuffix(u, "."+previewDomain) {
		t.Errorf("the preview is at %s, want a host of its own under %s", u, previewDomain)
	}
	// A second tab of alice's keeps the run's page open to its end.
	witness := tab()
	if st := l.signedIn(witness, "alice", "http://"+l.addr+"/runs/"+task); st != http.StatusOK {
		t.Fatalf("the live page answers %d", st)
	}
	execs := 0
	for _, c := range fake.Calls() {
		if strings.HasSuffix(c.Path, "/exec") && strings.Contains(c.Query, "pipe") {
			execs++
		}
	}
	if execs == 0 {
		t.Fatal("the preview and the screencast did not go through the allocation's exec API")
	}
	release()
	l.waitComment(n, "## 📋 Plan", 2*time.Minute)
	if st := l.signedIn(alice, "alice", "http://"+l.addr+"/runs/"+task+"/preview/"); st != http.StatusNotFound {
		t.Errorf("the preview answers %d after the run; want 404", st)
	}
	if st := l.signedIn(alice, "alice", "http://"+l.addr+"/runs/"+task); st != http.StatusOK {
		t.Fatalf("the ended run's page answers %d", st)
	}
	waitJS(t, alice, "the receipt of the ended run", `!document.getElementById('receipt').hidden &&
		document.getElementById('r-status').textContent === 'completed'`, time.Minute)

	// Nomad forgets the job; a second replica shows the run's record.
	waitJS(t, witness, "the run's end on the page kept open", `document.getElementById('state').textContent === 'ended'`, time.Minute)
	watched := pageLines(t, witness)
	wholeAndOnce(t, "the page kept open", seqsOf(watched))
	job := "sandbox-" + strings.ToLower(task) + "-plan"
	l.gh.WaitFor(time.Minute, "the job purged from Nomad", func() bool { return fake.Job(nomad.DefaultNamespace, job) == nil })
	l.recordOnReplica(alice, l.startReplica("SANDBOX_DATA_DIR="+t.TempDir()).addr, task, watched)
}

// shot saves what tab shows as name under $SANDBOX_SCREENSHOTS, when set:
// docs/operating.md's pictures come from this run (a hand-run, not every CI run).
func shot(t *testing.T, tab context.Context, name string) {
	t.Helper()
	dir := os.Getenv("SANDBOX_SCREENSHOTS")
	if dir == "" {
		return
	}
	if err := chromedp.Do(tab, chromedp.EmulateViewport(1000, 900)); err != nil {
		t.Fatal(err)
	}
	png, err := chromedp.Run(tab, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// commonestColour is the commonest colour of the screencast's frame, in
// buckets of 8 per channel (a JPEG's colours wander a little).
const commonestColour = `(() => {
  const img = document.getElementById('screencast');
  const c = document.createElement('canvas');
  c.width = img.naturalWidth; c.height = img.naturalHeight;
  const x = c.getContext('2d');
  x.drawImage(img, 0, 0);
  const d = x.getImageData(0, 0, c.width, c.height).data, counts = {};
  for (let i = 0; i < d.length; i += 16) {
    const k = (d[i] >> 3) + ',' + (d[i+1] >> 3) + ',' + (d[i+2] >> 3);
    counts[k] = (counts[k] || 0) + 1;
  }
  let best = '0,0,0', n = 0;
  for (const k in counts) if (counts[k] > n) { n = counts[k]; best = k; }
  return best.split(',').map(v => v * 8 + 4);
})()`
