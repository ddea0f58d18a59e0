package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/app/githubtest"
	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker/dockertest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad/nomadtest"
	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// The whole loop as a user meets it: the real bot binary, the fake GitHub
// (API and git over HTTP), the docker backend running the real sandbox
// image in the caps profile, the runner inside it driving the real
// OpenCode against the scripted model.

// e2eRepo is unique per test process: task ids derive from the repository
// and comment ids (which the fake numbers the same way every run), so a
// sandbox left by an interrupted earlier run cannot be mistaken for this
// run's.
var e2eRepo = fmt.Sprintf("octo-org/demo%d", time.Now().UnixNano()%1e6)

const (
	e2eSecret      = "e2e-secret"
	e2eWriter      = "alice"
	e2eOAuthID     = "Iv1.e2e"
	e2eOAuthSecret = "e2e-oauth-secret"
)

// loop is one end-to-end environment.
type loop struct {
	t     *testing.T
	gh    *githubtest.Server
	model *modeltest.Server
	// anthropic is the scripted Anthropic model, when the loop has one.
	anthropic *modeltest.AnthropicServer
	bin       string
	dataDir   string
	env       []string
	bot       *botProcess
	// hostEnv runs OpenCode on the host against model (load tests' floors).
	hostEnv []string
	// addr, when set, is where every start of the bot listens: a restarted
	// bot answers where the browser's pages point.
	addr string
}

func newLoop(t *testing.T, script []modeltest.Turn) *loop {
	t.Helper()
	return newLoopOn(t, script, nil)
}

// newLoopOn starts the loop with extra bot environment (another backend).
func newLoopOn(t *testing.T, script []modeltest.Turn, backendEnv func(img string) []string) *loop {
	t.Helper()
	return startLoop(t, loopOptions{script: script, backendEnv: backendEnv, sandboxYML: `validate:
  greeting: grep -q hello greet.txt
`, files: map[string]string{"README.md": "# demo\n"}})
}

// loopOptions shape one end-to-end environment.
type loopOptions struct {
	// script is the scripted OpenAI-compatible model's (OpenCode's);
	// anthropic, when set, starts the scripted Anthropic model too, which
	// the bot serves through the sandbox's model gateway (Claude Code).
	script    []modeltest.Turn
	anthropic *modeltest.AnthropicScript
	// harness and model of .sandbox.yml: OpenCode on the scripted model
	// when empty.
	harness, model string
	// sandboxYML is added to the repository's .sandbox.yml after the
	// harness, model and limits; files are the repository's other files.
	sandboxYML string
	files      map[string]string
	// repoFiles, when set, gives every file of the repository instead,
	// .sandbox.yml included.
	repoFiles func(*modeltest.Server) map[string]string
	// operatorOpenCode serves the scripted model as the operator's
	// provider: named in the bot's OPENCODE_CONFIG and SANDBOX_PROVIDERS,
	// reached through the sandbox's model gateway, where the repository
	// does not name it (a task run has no repository).
	operatorOpenCode bool
	// env is added to the bot's environment; backendEnv too, given the
	// sandbox image (another backend).
	env []string
	// hostAllow are host ports the sandboxes may reach besides the fake
	// GitHub's and the scripted models' (SANDBOX_HOST_ALLOW).
	hostAllow  []string
	backendEnv func(img string) []string
	// signIn serves the bot's pages on its public listener behind the
	// fake GitHub's OAuth sign-in, at an address that stays the bot's
	// across restarts.
	signIn bool
	// onBridge has the bot listen on the Docker bridge's gateway (where
	// sandboxes could reach it, were it not fenced off) instead of
	// loopback.
	onBridge bool
}

// newLoopWith starts the loop on a repository of the files repoFiles
// returns (its .sandbox.yml included), plus an opencode.json naming the
// scripted model.
func newLoopWith(t *testing.T, script []modeltest.Turn, backendEnv func(img string) []string, repoFiles func(*modeltest.Server) map[string]string) *loop {
	t.Helper()
	return startLoop(t, loopOptions{script: script, backendEnv: backendEnv, repoFiles: repoFiles})
}

// startLoop starts the fake GitHub with the repository, the scripted
// models and the bot.
func startLoop(t *testing.T, o loopOptions) *loop {
	t.Helper()
	img := testenv.SandboxImage(t)
	gw := dockertest.Gateway(t)
	gh := githubtest.New(t, githubtest.Options{Listen: gw + ":0"})
	model, err := modeltest.New(gw+":0", o.script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(model.Close)
	l := &loop{t: t, gh: gh, model: model, bin: buildBot(t)}
	harness, modelName := cmp.Or(o.harness, "opencode"), cmp.Or(o.model, model.OpenCodeModel())
	files := map[string]string{}
	maps.Copy(files, o.files)
	if harness == "opencode" && !o.operatorOpenCode {
		// The repository's own opencode.json names the model provider:
		// here the scripted one, reachable from the sandbox on the bridge.
		provider := model.OpenCodeConfig()
		delete(provider, "model")
		opencodeJSON, _ := json.MarshalIndent(provider, "", "  ")
		files["opencode.json"] = string(opencodeJSON)
	}
	if o.repoFiles != nil {
		maps.Copy(files, o.repoFiles(model))
	} else {
		files[".sandbox.yml"] = fmt.Sprintf("name: demo\nharness: %s\nmodel: %s\nmax_budget_usd: 2\ntimeout_minutes: 15\ninactivity_timeout: 300\n%s", harness, modelName, o.sandboxYML)
	}
	gh.AddRepo(e2eRepo, 7, files)
	gh.SetPermission(e2eRepo, e2eWriter, "write")
	dataDir, err := os.MkdirTemp("", "sandbox-bot-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeAll(dataDir) })
	t.Cleanup(func() { removeSandboxes(t, img, dataDir) })
	l.dataDir = dataDir
	l.env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"GITHUB_V3_API_URL=" + gh.URL(), "GITHUB_WEB_URL=" + gh.WebURL(), "GITHUB_APP_INTEGRATION_ID=1", "GITHUB_APP_WEBHOOK_SECRET=" + e2eSecret,
		"GITHUB_APP_PRIVATE_KEY=" + testKey(t), "SANDBOX_BACKEND=docker", "SANDBOX_ISOLATION=" + testIsolation(t),
		"SANDBOX_IMAGE=" + img, "SANDBOX_DATA_DIR=" + dataDir, "SANDBOX_PROGRESS_INTERVAL=1s",
		"SANDBOX_LOG_LEVEL=debug", "SANDBOX_SHUTDOWN_TIMEOUT=5s",
	}
	if o.anthropic != nil {
		// The operator's Anthropic provider, served to the sandbox by its
		// model gateway with the key from the bot's environment.
		a, err := modeltest.NewAnthropic(gw+":0", *o.anthropic)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(a.Close)
		l.anthropic = a
		l.env = append(l.env, "E2E_ANTHROPIC_KEY=e2e-anthropic-key",
			"SANDBOX_PROVIDERS=anthropic=http://"+a.Addr()+",E2E_ANTHROPIC_KEY,anthropic")
	}
	if o.operatorOpenCode {
		path := filepath.Join(t.TempDir(), "opencode.json")
		if err := os.WriteFile(path, []byte(model.OpenCodeConfigBehindGateway()), 0o644); err != nil {
			t.Fatal(err)
		}
		l.env = append(l.env, "OPENCODE_CONFIG="+path, "E2E_SCRIPTED_KEY=modeltest-key",
			"SANDBOX_PROVIDERS="+modeltest.ProviderID+"="+model.URL+",E2E_SCRIPTED_KEY")
	}
	if o.signIn {
		host := "127.0.0.1"
		if o.onBridge {
			host = gw
		}
		ln, err := net.Listen("tcp", host+":0")
		if err != nil {
			t.Fatal(err)
		}
		l.addr = ln.Addr().String()
		ln.Close()
		gh.SetOAuthApp(e2eOAuthID, e2eOAuthSecret)
		l.env = append(l.env, "SANDBOX_PUBLIC_URL=http://"+l.addr, "GITHUB_OAUTH_CLIENT_ID="+e2eOAuthID, "GITHUB_OAUTH_CLIENT_SECRET="+e2eOAuthSecret)
	}
	// The host wall lets the sandboxes reach exactly the test's servers
	// on the bridge: the fake GitHub (API and git) and the scripted models.
	allow := append([]string{strings.TrimPrefix(strings.TrimSuffix(gh.URL(), "/"), "http://"), model.Addr()}, o.hostAllow...)
	if l.anthropic != nil {
		allow = append(allow, l.anthropic.Addr())
	}
	l.env = append(l.env, "SANDBOX_HOST_ALLOW="+strings.Join(allow, ","))
	l.env = append(l.env, o.env...)
	if o.backendEnv != nil {
		l.env = append(l.env, o.backendEnv(img)...)
	}
	l.bot = l.startBot()
	return l
}

// testIsolation is the profile the loops' bots run sandboxes in: caps,
// or SANDBOX_TEST_ISOLATION's (gvisor), so that any of these tests can be
// run behind gVisor by hand; a test's own SANDBOX_ISOLATION wins.
func testIsolation(t *testing.T) string {
	t.Helper()
	iso := cmp.Or(os.Getenv("SANDBOX_TEST_ISOLATION"), string(dispatch.IsolationCaps))
	if _, err := dispatch.ParseIsolation(iso); err != nil {
		t.Fatalf("SANDBOX_TEST_ISOLATION: %v", err)
	}
	if iso == string(dispatch.IsolationGVisor) {
		testenv.Runsc(t)
	}
	return iso
}

// removeSandboxes removes the sandboxes a test's bot left on the engine, as
// the bot's follower would have. The bot stops with the test and its runs
// go on (a restarted bot would reconcile them): one left would run on into
// the next test, and hold its container's name, which the next test's run
// of the same mode needs (a task id comes from the repository, the issue
// and the triggering comment, the same in every test of this package).
func removeSandboxes(t *testing.T, img, dataDir string) {
	b, err := docker.New(docker.Options{Image: img, DataDir: dataDir})
	if err != nil {
		t.Errorf("remove the test's sandboxes: %v", err)
		return
	}
	ctx := context.WithoutCancel(t.Context())
	runs, err := b.List(ctx)
	if err != nil {
		t.Errorf("list the test's sandboxes: %v", err)
		return
	}
	for _, r := range runs {
		if err := b.Cleanup(ctx, r.Meta.TaskID); err != nil {
			t.Errorf("remove the sandbox of %s: %v", r.Meta.TaskID, err)
		}
	}
}

// removeAll deletes a data dir whose task directories may hold files the
// inner daemon created as root; the backend's Cleanup normally does this.
func removeAll(dir string) {
	if err := os.RemoveAll(dir); err != nil {
		_ = exec.Command("rm", "-rf", dir).Run()
	}
}

type botProcess struct {
	cmd  *exec.Cmd
	addr string
	logs *syncBuffer
	done chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (l *loop) startBot() *botProcess {
	l.t.Helper()
	return l.startBotAt(l.addr)
}

// startReplica starts another replica of the bot beside the running one,
// listening on an address of its own: the same settings (the backend, the
// store) with env added.
func (l *loop) startReplica(env ...string) *botProcess {
	l.t.Helper()
	return l.startBotAt("", env...)
}

// startBotAt starts the bot listening on addr (a free port when ""), with
// env added to the loop's settings.
func (l *loop) startBotAt(addr string, env ...string) *botProcess {
	l.t.Helper()
	if addr == "" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			l.t.Fatal(err)
		}
		addr = ln.Addr().String()
		ln.Close()
	}
	p := &botProcess{addr: addr, logs: &syncBuffer{}, done: make(chan error, 1)}
	p.cmd = exec.Command(l.bin)
	p.cmd.Env = append(append(append([]string(nil), l.env...), env...), "SANDBOX_LISTEN="+addr, "SANDBOX_ADMIN_LISTEN=127.0.0.1:0")
	p.cmd.Stderr = p.logs
	p.cmd.Stdout = p.logs
	if err := p.cmd.Start(); err != nil {
		l.t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	l.t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(10 * time.Second):
				_ = p.cmd.Process.Kill()
			}
		}
		if l.t.Failed() {
			l.t.Logf("bot log (%s):\n%s", addr, tail(p.logs.String(), 80))
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
			resp.Body.Close()
			return p
		}
		time.Sleep(50 * time.Millisecond)
	}
	l.t.Fatalf("bot did not answer /healthz:\n%s", p.logs.String())
	return nil
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (l *loop) deliver(event, delivery string, body []byte) {
	l.t.Helper()
	if code := githubtest.Deliver(l.t, "http://"+l.bot.addr+"/api/github/hook", event, delivery, body, githubtest.Sign(body, e2eSecret)); code != http.StatusOK {
		l.t.Fatalf("%s delivery answered %d", event, code)
	}
}

func (l *loop) label(n int) {
	iss := l.gh.Issue(e2eRepo, n)
	l.deliver("issues", fmt.Sprintf("label-%d-%d", n, time.Now().UnixNano()), l.gh.Payload("issues.labeled", e2eRepo, e2eWriter, func(m map[string]any) {
		m["label"] = map[string]any{"name": "agent"}
		m["issue"] = map[string]any{"number": n, "title": iss.Title, "body": iss.Body, "user": map[string]any{"login": iss.User}}
	}))
}

func (l *loop) command(n int, body string) {
	id := l.gh.AddComment(e2eRepo, n, e2eWriter, body)
	l.deliver("issue_comment", fmt.Sprintf("comment-%d", id), l.gh.Payload("issue_comment.created", e2eRepo, e2eWriter, func(m map[string]any) {
		iss := map[string]any{"number": n, "title": l.gh.Issue(e2eRepo, n).Title, "body": l.gh.Issue(e2eRepo, n).Body}
		if l.gh.Issue(e2eRepo, n).PR != nil {
			// GitHub marks a pull request's conversation so.
			iss["pull_request"] = map[string]any{"url": fmt.Sprintf("%srepos/%s/pulls/%d", l.gh.URL(), e2eRepo, n)}
		}
		m["issue"] = iss
		m["comment"] = map[string]any{"id": id, "body": body, "user": map[string]any{"login": e2eWriter, "type": "User"}}
	}))
}

// waitComment waits for a bot comment on #n containing substr.
func (l *loop) waitComment(n int, substr string, timeout time.Duration) string {
	l.t.Helper()
	var found string
	l.gh.WaitFor(timeout, "a bot comment containing "+substr, func() bool {
		for _, c := range l.gh.Issue(e2eRepo, n).Comments {
			if c.User == githubtest.AppLogin && strings.Contains(c.Body, substr) {
				found = c.Body
				return true
			}
		}
		return false
	})
	return found
}

func usage(in, out int64) modeltest.Usage {
	return modeltest.Usage{PromptTokens: in, CompletionTokens: out}
}

func write(path, content string) modeltest.ToolCall {
	return modeltest.ToolCall{Name: "write", Args: map[string]any{"filePath": path, "content": content}}
}

const plan = "1. Create `greet.txt` containing `hello`.\n2. Nothing else."

// greetScript is the model's side of the label → plan → approve → PR loop.
func greetScript() []modeltest.Turn {
	return []modeltest.Turn{
		// plan run
		{Text: plan, Usage: usage(1000, 60)},
		// execute run
		{ToolCalls: []modeltest.ToolCall{write("greet.txt", "hello\n")}, Usage: usage(1500, 40)},
		{Text: "Added greet.txt, which says hello.", Usage: usage(1700, 20)},
	}
}

func TestE2ELabelPlanApprovePR(t *testing.T) {
	labelPlanApprovePR(t, newLoop(t, greetScript()))
}

// The same loop with sandboxes as Nomad batch jobs: the bot talks to a fake
// Nomad agent through the real api client, and the fake runs each job the
// way Nomad's docker driver would, on the real engine.
func TestE2ENomadLabelPlanApprovePR(t *testing.T) {
	fake, onNomad := nomadFake(t)
	l := newLoopOn(t, greetScript(), onNomad)
	labelPlanApprovePR(t, l)
	// Both sandboxes ran in their namespace, where the bot's alloc-exec
	// applies; its own state stayed in its own.
	if ids := fake.JobIDs(nomad.DefaultNamespace); fake.Jobs() != 2 || len(ids) != 2 {
		t.Errorf("want 2 Nomad jobs (plan, execute) in namespace %s, got %d: %v", nomad.DefaultNamespace, fake.Jobs(), ids)
	}
	if kept, there := fake.Vars("default", nomad.SessionPrefix), fake.Vars(nomad.DefaultNamespace, "sandbox-bot/"); len(kept) == 0 || len(there) != 0 {
		t.Errorf("the bot's state: the plan's session in its namespace %v, in the sandboxes' %v", kept, there)
	}
	if v := fake.Vars("default", "nomad/jobs/"); len(v) != 0 {
		t.Errorf("token Variables in the bot's namespace, where no sandbox reads them: %v", v)
	}
}

// nomadFake starts a fake Nomad agent that runs jobs on the real engine,
// with ACLs on and the sandbox namespace created as docs/operating.md says, and
// returns it with the bot settings that use it: the bot's token holds
// deploy/nomad/sandbox-bot.policy.hcl, the policy an operator applies.
func nomadFake(t *testing.T) (*nomadtest.Server, func(string) []string) {
	t.Helper()
	testenv.Docker(t)
	policy, err := nomadtest.ReadPolicy(filepath.Join(testenv.ModuleRoot(t), "deploy", "nomad", "sandbox-bot.policy.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	const botToken = "e2e-sandbox-bot-workload-identity"
	// AllowRuntimes: the client's allow_runtimes of deploy/nomad/client.hcl.
	fake, err := nomadtest.New(nomadtest.Options{Heartbeat: time.Second,
		// NodeAddr: the node's own address, as a Nomad client on this
		// machine would fingerprint it (the host wall denies it).
		Driver: nomadtest.DockerDriver{ExtraArgs: []string{"--add-host", "host.docker.internal:host-gateway"}, AllowRuntimes: []string{"runc", "runsc"},
			NodeAddr: cmp.Or(otherHostAddr(t), "127.0.0.1")},
		Namespaces: []string{nomad.DefaultNamespace}, ACLToken: "e2e-nomad-management", ACL: map[string]*nomadtest.Policy{botToken: policy}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	return fake, func(string) []string {
		return []string{"NOMAD_ADDR=" + fake.URL, "NOMAD_TOKEN=" + botToken, "SANDBOX_BACKEND=nomad"}
	}
}

func labelPlanApprovePR(t *testing.T, l *loop) {
	n := l.gh.AddIssue(e2eRepo, e2eWriter, "Greet people", "Create greet.txt saying hello.")
	start := time.Now()
	l.label(n)
	l.waitComment(n, "Planning this issue", 30*time.Second)
	planComment := l.waitComment(n, "## 📋 Plan", 3*time.Minute)
	planAt := time.Since(start)
	if !strings.Contains(planComment, "Create `greet.txt` containing `hello`.") {
		t.Fatalf("plan comment lacks the model's plan:\n%s", planComment)
	}
	if _, ok := l.gh.FileAt(e2eRepo, "main", "greet.txt"); ok {
		t.Fatal("the plan run changed the repository")
	}

	approveAt := time.Now()
	l.command(n, "/approve")
	linked := l.waitComment(n, "🚀 Opened", 3*time.Minute)
	prAt := time.Since(approveAt)
	prs := l.gh.PullRequests(e2eRepo)
	if len(prs) != 1 {
		t.Fatalf("want 1 PR, got %d\n%s", len(prs), linked)
	}
	pr := prs[0]
	content, ok := l.gh.FileAt(e2eRepo, pr.PR.Head, "greet.txt")
	if !ok || content != "hello\n" {
		t.Fatalf("branch %s: greet.txt = %q (exists %v)", pr.PR.Head, content, ok)
	}
	// The receipt carries the figures the runner measured: OpenCode's cost
	// for the scripted usage at the scripted prices, steps, validation.
	wantCost := (float64(1500+1700)*modeltest.InputPricePerM + float64(40+20)*modeltest.OutputPricePerM) / 1e6
	for _, want := range []string{
		"Added greet.txt, which says hello.", "Closes #1", "| `greeting` | ✅ passed | 1 |",
		fmt.Sprintf("| Cost | $%.2f |", wantCost), "| Tokens | 3200 in · 60 out", "| Steps | 2 |", "approved plan",
	} {
		if !strings.Contains(pr.Body, want) {
			t.Errorf("PR body lacks %q:\n%s", want, pr.Body)
		}
	}
	l.gh.WaitFor(30*time.Second, "completed check run", func() bool {
		for _, c := range l.gh.CheckRuns(e2eRepo) {
			if c.HeadSHA == l.gh.BranchSHA(e2eRepo, pr.PR.Head) && c.Conclusion == "success" {
				return true
			}
		}
		return false
	})
	// Two sandboxes, two tokens narrowed to the one repository: the plan
	// run's reads, the execute run's writes, both revoked once their runs
	// ended. The bot's own installation token (unnarrowed) never leaves
	// the bot.
	var sandboxTokens, perms []string
	for _, tok := range l.gh.Tokens() {
		if len(tok.Repositories) > 0 {
			sandboxTokens = append(sandboxTokens, tok.Value)
			perms = append(perms, tok.Permissions["contents"])
			if len(tok.Repositories) != 1 || len(tok.Permissions) != 1 {
				t.Errorf("sandbox token must be one repository, contents only: %v %v", tok.Repositories, tok.Permissions)
			}
		}
	}
	if slices.Sort(perms); strings.Join(perms, ",") != "read,write" {
		t.Errorf("want one narrowed token per run, contents:read for the plan and :write for the execute run; got %v", perms)
	}
	l.gh.WaitRevoked(30*time.Second, sandboxTokens...)
	for _, tok := range l.gh.Tokens() {
		if strings.Contains(l.bot.logs.String(), tok.Value) || strings.Contains(pr.Body, tok.Value) {
			t.Fatal("an installation token reached the bot's log or the PR body")
		}
	}
	t.Logf("label → plan comment: %s; /approve → PR: %s", planAt.Round(time.Millisecond), prAt.Round(time.Millisecond))
	logStages(t, l.bot.logs.String())
}

// logStages splits each run's time into stages from the bot's log (its own
// lines and the runner's progress lines it relays): the bot's share is
// dispatch (webhook received → run submitted) and report (runner done →
// result posted); the rest is the sandbox's.
func logStages(t *testing.T, logs string) {
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	type mark struct {
		at    time.Time
		label string
	}
	var received time.Time
	runs := map[string][]mark{}
	var order []string
	for sc.Scan() {
		var e struct {
			Time    time.Time `json:"time"`
			Message string    `json:"message"`
			Stage   string    `json:"stage"`
			TaskID  string    `json:"task_id"`
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Time.IsZero() {
			continue
		}
		switch {
		case e.Message == "Received webhook event":
			received = e.Time
		case e.Message == "run submitted":
			order = append(order, e.TaskID)
			runs[e.TaskID] = []mark{{received, "webhook"}, {e.Time, "submitted"}}
		case e.Message == "progress" && len(runs[e.TaskID]) > 0:
			if last := runs[e.TaskID][len(runs[e.TaskID])-1]; last.label != e.Stage {
				runs[e.TaskID] = append(runs[e.TaskID], mark{e.Time, e.Stage})
			}
		case e.Message == "result posted" && len(runs[e.TaskID]) > 0:
			runs[e.TaskID] = append(runs[e.TaskID], mark{e.Time, "reported"})
		}
	}
	for _, id := range order {
		m := runs[id]
		var parts []string
		var bot time.Duration
		for i := 1; i < len(m); i++ {
			d := m[i].at.Sub(m[i-1].at)
			parts = append(parts, fmt.Sprintf("%s→%s %s", m[i-1].label, m[i].label, d.Round(time.Millisecond)))
			if m[i].label == "submitted" || m[i].label == "reported" {
				bot += d
			}
		}
		t.Logf("%s total %s, bot's own share %s: %s", id, m[len(m)-1].at.Sub(m[0].at).Round(time.Millisecond), bot.Round(time.Millisecond), strings.Join(parts, ", "))
	}
}

func TestE2EBotRestartedMidRunStillPostsResult(t *testing.T) {
	l := newLoop(t, []modeltest.Turn{
		{Text: plan, Usage: usage(1000, 60), Delay: 3 * time.Second},
	})
	n := l.gh.AddIssue(e2eRepo, e2eWriter, "Greet people", "Create greet.txt saying hello.")
	l.label(n)
	l.waitComment(n, "Planning this issue", 30*time.Second)
	// The bot dies between dispatch and completion.
	if err := l.bot.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-l.bot.done
	// The sandbox runs on and ends while the bot is down: its receipt
	// appears in the task directory.
	l.model.WaitServed(t.Context(), 1)
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if done, _ := filepath.Glob(filepath.Join(l.dataDir, "tasks", "*", "out", dispatch.ResultFile)); len(done) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sandbox left no result.json within 3 minutes of the model's answer")
		}
		time.Sleep(50 * time.Millisecond)
	}
	l.bot = l.startBot()
	c := l.waitComment(n, "## 📋 Plan", 3*time.Minute)
	if !strings.Contains(c, "greet.txt") {
		t.Fatalf("plan comment after restart:\n%s", c)
	}
}

func TestE2EAbortDuringExecute(t *testing.T) {
	l := newLoop(t, []modeltest.Turn{
		{Text: plan, Usage: usage(1000, 60)},
		{ToolCalls: []modeltest.ToolCall{write("greet.txt", "hello\n")}, Usage: usage(1500, 40)},
		{Stall: true}, // the agent hangs after its first edit
	})
	n := l.gh.AddIssue(e2eRepo, e2eWriter, "Greet people", "Create greet.txt saying hello.")
	l.label(n)
	l.waitComment(n, "## 📋 Plan", 3*time.Minute)
	l.command(n, "/approve")
	l.waitComment(n, "Implementing the approved plan", 30*time.Second)
	if err := l.model.WaitServed(t.Context(), 3); err != nil {
		t.Fatal(err)
	}
	l.command(n, "/abort")
	c := l.waitComment(n, "was aborted by", 2*time.Minute)
	if !strings.Contains(c, "by @alice") {
		t.Errorf("aborted comment:\n%s", c)
	}
	// The runner pushed what the agent had done before it stopped.
	var branch string
	for _, m := range l.gh.Issue(e2eRepo, n).Comments {
		if i := strings.Index(m.Body, `"branch":"`); i >= 0 && strings.Contains(m.Body, `"kind":"ack","task"`) && strings.Contains(m.Body, `"mode":"execute"`) {
			branch = strings.SplitN(m.Body[i+len(`"branch":"`):], `"`, 2)[0]
		}
	}
	if got, ok := l.gh.FileAt(e2eRepo, branch, "greet.txt"); !ok || got != "hello\n" {
		t.Errorf("after /abort, branch %q must hold the work done so far; greet.txt %q", branch, got)
	}
	if len(l.gh.PullRequests(e2eRepo)) != 0 {
		t.Error("an aborted run must not open a PR")
	}
}
