package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

func sandboxRunner(t *testing.T) string { return testenv.BuildCommand(t, "sandbox-runner") }

// quickstart makes the example project `sandbox-agent quickstart` writes,
// with overrides committed on top.
func quickstart(t *testing.T, override map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "calc")
	if err := writeQuickstart(dir); err != nil {
		t.Fatal(err)
	}
	if len(override) > 0 {
		for name, content := range override {
			os.WriteFile(filepath.Join(dir, name), []byte(content), 0o755)
		}
		runtest.Git(t, dir, "add", "--all")
		runtest.Git(t, dir, "commit", "--quiet", "-m", "test overrides")
	}
	return dir
}

type cliRun struct {
	code           int
	stdout, stderr string
}

// errNoEngine plays a machine without Docker: runCLI's default, so tests
// of the CLI's own logic run on the process backend everywhere.
var errNoEngine = errors.New("test: playing a machine without a Docker engine")

func runCLI(t *testing.T, env []string, interactive bool, stdin string, args ...string) cliRun {
	t.Helper()
	return runCLIOn(t, func(c *cli) { c.dockerAvailable = func(context.Context) error { return errNoEngine } }, env, interactive, stdin, args...)
}

// runCLIOn runs the CLI after setup adjusts it (nil: the real engine).
func runCLIOn(t *testing.T, setup func(*cli), env []string, interactive bool, stdin string, args ...string) cliRun {
	t.Helper()
	var stdout, stderr bytes.Buffer
	c := newCLI(strings.NewReader(stdin), &stdout, &stderr, env)
	c.interactive = interactive
	if setup != nil {
		setup(c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	code := c.run(ctx, args)
	r := cliRun{code: code, stdout: stdout.String(), stderr: stderr.String()}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
		}
	})
	return r
}

func openCodeEnv(t *testing.T, script []modeltest.Turn) ([]string, *modeltest.Server) {
	t.Helper()
	bin := testenv.NPMBin(t, "opencode")
	srv := modeltest.Start(t, script)
	return append(runtest.OpenCodeEnv(t, srv), "SANDBOX_OPENCODE_BIN="+bin), srv
}

func branches(t *testing.T, repo string) []string {
	out := runtest.Git(t, repo, "branch", "--list", "agent/*", "--format=%(refname:short)")
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}

// The README's quick start without a terminal: the plan is made, shown,
// executed right away and kept in the receipt; the branch is pushed to the
// local repository.
func TestCreateQuickStart(t *testing.T) {
	t.Parallel()
	plan := "## Plan\n\n1. Add `NOTES.md` describing `add.sh`."
	env, srv := openCodeEnv(t, []modeltest.Turn{
		{Text: plan, Usage: modeltest.Usage{PromptTokens: 800, CompletionTokens: 60}},
		{ToolCalls: []modeltest.ToolCall{{Name: "write", Args: map[string]any{"filePath": "NOTES.md", "content": "# Notes\n\n`sh add.sh A B` prints A+B.\n"}}}, Usage: modeltest.Usage{PromptTokens: 1000, CompletionTokens: 90}},
		{Text: "Added NOTES.md.", Usage: modeltest.Usage{PromptTokens: 1100, CompletionTokens: 10}},
	})
	repo := quickstart(t, nil)
	data := t.TempDir()
	r := runCLI(t, env, false, "", "create", "--repo", repo, "--task", "Document add.sh\n\nWrite NOTES.md explaining how to use add.sh.",
		"--harness", "opencode", "--model", modeltest.ProviderID+"/"+modeltest.ModelID, "--data-dir", data, "--runner", sandboxRunner(t))
	if r.code != exitOK {
		t.Fatalf("exit %d", r.code)
	}
	if !strings.Contains(r.stdout, plan) || !strings.Contains(r.stdout, "execute T-") || !strings.Contains(r.stdout, ": completed") {
		t.Fatalf("stdout does not show the plan and the completed run:\n%s", r.stdout)
	}
	for _, want := range []string{processWarning, "WARNING: no sandbox", "no Docker engine (" + errNoEngine.Error(), "executing the plan", "[agent] tool write", "[push] pushed agent/"} {
		if !strings.Contains(r.stderr, want) {
			t.Fatalf("stderr lacks %q", want)
		}
	}
	bs := branches(t, repo)
	if len(bs) != 1 || !strings.HasPrefix(bs[0], "agent/t-") || !strings.HasSuffix(bs[0], "-document-add-sh") {
		t.Fatalf("branches = %v", bs)
	}
	if got := runtest.Git(t, repo, "show", bs[0]+":NOTES.md"); !strings.Contains(got, "prints A+B") {
		t.Fatalf("NOTES.md = %q", got)
	}
	// The receipt the summary points at has the plan in it.
	i := strings.Index(r.stdout, "receipt:  ")
	path := strings.TrimSpace(strings.SplitN(r.stdout[i+len("receipt:  "):], "\n", 2)[0])
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	res, err := dispatch.ParseResult(b)
	if err != nil {
		t.Fatal(err)
	}
	if res.Plan != plan || res.Status != dispatch.StatusCompleted || res.Validation[0].Name != "test" || !res.Validation[0].Passed {
		t.Fatalf("receipt = %+v", res)
	}
	// The execute run resumed the plan's agent session: the model saw the
	// plan conversation again, and the receipt says so.
	if s := res.Session; s == nil || !s.Resumed || !strings.HasPrefix(s.Note, "resumed from plan T-") {
		t.Fatalf("receipt's session = %+v, want resumed", res.Session)
	}
	if reqs := srv.ScriptedRequests(); len(reqs) != 3 || !strings.Contains(reqs[1].Messages[1].Content, "Do not implement anything yet") {
		t.Fatalf("the execute request does not continue the plan conversation (%d requests)", len(reqs))
	}
}

const processWarning = "NO isolation"

// On a terminal: the plan is revised once with feedback, in the same agent
// session, then executed.
func TestCreateInteractiveRevision(t *testing.T) {
	t.Parallel()
	env, srv := openCodeRunEnvCLI(t)
	repo := quickstart(t, nil)
	r := runCLI(t, env, true, "r\nAlso mention subtraction is not supported.\ne\n",
		"create", "--repo", repo, "--task", "Document add.sh", "--harness", "opencode", "--model", modeltest.ProviderID+"/"+modeltest.ModelID,
		"--data-dir", t.TempDir(), "--runner", sandboxRunner(t))
	if r.code != exitOK {
		t.Fatalf("exit %d", r.code)
	}
	reqs := srv.ScriptedRequests()
	if len(reqs) != 4 {
		t.Fatalf("scripted requests = %d, want 4", len(reqs))
	}
	second := reqs[1]
	if !strings.Contains(second.LastUser(), "Also mention subtraction is not supported.") {
		t.Fatalf("revision prompt lacks the feedback: %s", second.LastUser())
	}
	// Same session: the revision request carries the first plan.
	var sawFirstPlan bool
	for _, m := range second.Messages {
		sawFirstPlan = sawFirstPlan || (m.Role == "assistant" && strings.Contains(m.Content, "Plan v1"))
	}
	if !sawFirstPlan {
		t.Fatal("the revision did not continue the plan's agent session")
	}
	if !strings.Contains(r.stdout, "\x1b[1m") || !strings.Contains(r.stdout, "[e]xecute this plan, [r]evise it") {
		t.Fatalf("no rendered plan or prompt on the terminal:\n%q", r.stdout)
	}
	bs := branches(t, repo)
	if len(bs) != 1 {
		t.Fatalf("branches = %v", bs)
	}
	if got := runtest.Git(t, repo, "show", bs[0]+":NOTES.md"); !strings.Contains(got, "no subtraction") {
		t.Fatalf("NOTES.md = %q", got)
	}
}

func openCodeRunEnvCLI(t *testing.T) ([]string, *modeltest.Server) {
	return openCodeEnv(t, []modeltest.Turn{
		{Text: "## Plan v1\n\n1. Add NOTES.md.", Usage: modeltest.Usage{PromptTokens: 800, CompletionTokens: 60}},
		{Text: "## Plan v2\n\n1. Add NOTES.md, saying subtraction is not supported.", Usage: modeltest.Usage{PromptTokens: 900, CompletionTokens: 60}},
		{ToolCalls: []modeltest.ToolCall{{Name: "write", Args: map[string]any{"filePath": "NOTES.md", "content": "# Notes\n\nAdds; no subtraction.\n"}}}, Usage: modeltest.Usage{PromptTokens: 1000, CompletionTokens: 90}},
		{Text: "Added NOTES.md.", Usage: modeltest.Usage{PromptTokens: 1100, CompletionTokens: 10}},
	})
}

func commandProject(t *testing.T, script string) string {
	return quickstart(t, map[string]string{".sandbox.yml": "harness: command\ncommand: |\n" + indent(script) + "validate:\n  test: sh test.sh\n"})
}

func indent(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString("  " + l + "\n")
	}
	return b.String()
}

func TestCreateAbort(t *testing.T) {
	t.Parallel()
	repo := commandProject(t, `echo "## Plan"; echo "do things"`)
	r := runCLI(t, runtest.HermeticEnv(t.TempDir()), true, "a\n", "create", "--repo", repo, "--task", "Things", "--data-dir", t.TempDir(), "--runner", sandboxRunner(t))
	if r.code != exitNotDone || !strings.Contains(r.stdout, "Aborted") {
		t.Fatalf("exit %d", r.code)
	}
	if bs := branches(t, repo); len(bs) != 0 {
		t.Fatalf("an aborted create made branches %v", bs)
	}
}

// Continue, revise and rebase reach the runner with their flags; the
// command harness plays the agent.
func TestContinueReviseRebase(t *testing.T) {
	testenv.Long(t, "five whole runs through the CLI (about 4.5 s of CPU)")
	t.Parallel()
	repo := commandProject(t, `if [ -n "$SANDBOX_READ_ONLY" ]; then echo plan; exit 0; fi
echo "$(date +%s%N)" >> LOG.md; echo "worked"`)
	env := runtest.HermeticEnv(t.TempDir())
	data := t.TempDir()
	run := func(args ...string) cliRun {
		return runCLI(t, env, false, "", append(args, "--repo", repo, "--data-dir", data, "--runner", sandboxRunner(t))...)
	}
	r := run("create", "--task", "Log things")
	if r.code != exitOK {
		t.Fatalf("create: exit %d", r.code)
	}
	branch := branches(t, repo)[0]
	taskID := strings.ToUpper(branch[len("agent/") : len("agent/")+len("T-00000000")])
	if r := run("continue", "--task-id", taskID, "--target-branch", branch, "--task", "Log things"); r.code != exitOK {
		t.Fatalf("continue: exit %d", r.code)
	}
	if r := run("revise", "--target-branch", branch, "--feedback", "more logs"); r.code != exitOK {
		t.Fatalf("revise: exit %d", r.code)
	}
	if n := strings.Count(runtest.Git(t, repo, "show", branch+":LOG.md"), "\n"); n != 2 {
		t.Fatalf("LOG.md has %d lines after create, continue and revise, want 3", n+1)
	}
	// Move main on, then rebase the branch onto it.
	os.WriteFile(filepath.Join(repo, "CHANGELOG.md"), []byte("v2\n"), 0o644)
	runtest.Git(t, repo, "add", "CHANGELOG.md")
	runtest.Git(t, repo, "commit", "--quiet", "-m", "changelog")
	if r := run("rebase", "--target-branch", branch); r.code != exitOK {
		t.Fatalf("rebase: exit %d", r.code)
	}
	if _, err := runtest.GitErr(repo, "merge-base", "--is-ancestor", "main", branch); err != nil {
		t.Fatalf("the branch is not on top of main after rebase: %v", err)
	}
	if r := run("continue", "--task-id", "nope", "--target-branch", branch); r.code != exitUsage || !strings.Contains(r.stderr, "is not a task id") {
		t.Fatalf("bad --task-id: exit %d", r.code)
	}
}

func TestTaskCommand(t *testing.T) {
	t.Parallel()
	project := filepath.Join(t.TempDir(), "sandbox.yml")
	os.WriteFile(project, []byte("mode: task\nharness: command\ncommand: echo '# Summary' > summary.md; echo Summarised.\n"), 0o644)
	r := runCLI(t, runtest.HermeticEnv(t.TempDir()), false, "", "task", "--project", project, "--task", "Summarise the week", "--data-dir", t.TempDir(), "--runner", sandboxRunner(t))
	if r.code != exitOK {
		t.Fatalf("exit %d", r.code)
	}
	i := strings.Index(r.stdout, "artifact: ")
	if i < 0 {
		t.Fatalf("no artifact listed:\n%s", r.stdout)
	}
	path := strings.TrimSpace(strings.SplitN(r.stdout[i+len("artifact: "):], "\n", 2)[0])
	if b, err := os.ReadFile(path); err != nil || string(b) != "# Summary\n" {
		t.Fatalf("artifact %s = %q, %v", path, b, err)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, ".sandbox.yml"), []byte("harness: opencode\nvalidate:\n  test: go test ./...\nmax_budget_usd: lots\n"), 0o644)
	r := runCLI(t, nil, false, "", "validate", "--project", dir)
	want := filepath.Join(dir, ".sandbox.yml") + ":4:17: max_budget_usd: expected a number"
	if r.code != exitNotDone || !strings.Contains(r.stderr, want) {
		t.Fatalf("exit %d, stderr %q; want %q", r.code, r.stderr, want)
	}
	r = runCLI(t, nil, false, "", "validate", "--project", "quickstart")
	if r.code != exitOK || !strings.Contains(r.stdout, "check test: sh test.sh") {
		t.Fatalf("exit %d:\n%s", r.code, r.stdout)
	}
	r = runCLI(t, nil, false, "", "create", "--task", "x", "--project", dir, "--repo", t.TempDir())
	if r.code != exitUsage || !strings.Contains(r.stderr, "is not a git repository") {
		t.Fatalf("create outside a repository: exit %d, %q", r.code, r.stderr)
	}
	if r := runCLI(t, nil, false, "", "frobnicate"); r.code != exitUsage {
		t.Fatalf("unknown command: exit %d", r.code)
	}
}

func TestRenderMarkdown(t *testing.T) {
	t.Parallel()
	md := "## Plan\n\n- change **add.sh**\n- run `sh test.sh`\n\n```sh\nsh test.sh\n```"
	if renderMarkdown(md, false) != md {
		t.Fatal("without a terminal the markdown must stay as it is")
	}
	got := renderMarkdown(md, true)
	for _, want := range []string{ansiBold + ansiUnderline + "Plan" + ansiReset, "• change " + ansiBold + "add.sh" + ansiReset, ansiCyan + "sh test.sh" + ansiReset, ansiDim + "    sh test.sh" + ansiReset} {
		if !strings.Contains(got, want) {
			t.Fatalf("rendered plan lacks %q:\n%q", want, got)
		}
	}
	if strings.Contains(got, "```") {
		t.Fatal("code fences left in the rendering")
	}
}

// A remote repository by URL: its .sandbox.yml is read from a shallow
// clone, and the branch is pushed back to it.
func TestCreateAgainstRemoteURL(t *testing.T) {
	t.Parallel()
	remote := runtest.NewRemote(t, map[string]string{
		".sandbox.yml": "harness: command\ncommand: |\n  if [ -n \"$SANDBOX_READ_ONLY\" ]; then echo '## Plan'; exit 0; fi\n  echo remote > REMOTE.md; echo done\nvalidate:\n  remote: grep -q remote REMOTE.md\n",
	})
	r := runCLI(t, runtest.HermeticEnv(t.TempDir()), false, "", "create", "--repo", remote.URL, "--task", "Mark the remote", "--data-dir", t.TempDir(), "--runner", sandboxRunner(t))
	if r.code != exitOK {
		t.Fatalf("exit %d", r.code)
	}
	if !strings.Contains(r.stderr, "configuration from "+remote.URL+"/.sandbox.yml") {
		t.Fatalf("the remote's .sandbox.yml was not used:\n%s", r.stderr)
	}
	out := runtest.Git(t, remote.Dir, "for-each-ref", "--format=%(refname:short)", "refs/heads/agent/")
	if !strings.HasSuffix(out, "-mark-the-remote") {
		t.Fatalf("branches on the remote: %q", out)
	}
	if got, _ := remote.File(t, out, "REMOTE.md"); got != "remote" {
		t.Fatalf("REMOTE.md = %q", got)
	}
}

// validate --org layers an organisation's file beneath the project's and
// says which file set each key.
func TestValidateOrgLayer(t *testing.T) {
	dir := t.TempDir()
	org := filepath.Join(dir, "org.yml")
	os.WriteFile(org, []byte("model: org/model\nmax_budget_usd: 3\nvalidate:\n  lint: make lint\n"), 0o644)
	project := filepath.Join(dir, ".sandbox.yml")
	os.WriteFile(project, []byte("harness: opencode\nmodel: repo/model\n"), 0o644)
	r := runCLI(t, []string{"XDG_CONFIG_HOME=" + dir}, false, "", "validate", "--org", org, "--project", dir)
	if r.code != exitOK {
		t.Fatalf("exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		`harness opencode, model "repo/model", budget $3.00`,
		"check lint: make lint",
		"  harness            " + project,
		"  model              " + project,
		"  max_budget_usd     " + org,
		"  validate           " + org,
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("validate output lacks %q:\n%s", want, r.stdout)
		}
	}
	os.WriteFile(org, []byte("max_budget_usd: lots\n"), 0o644)
	if r := runCLI(t, []string{"XDG_CONFIG_HOME=" + dir}, false, "", "validate", "--org", org, "--project", dir); r.code != exitNotDone || !strings.Contains(r.stderr, org+":1:17: max_budget_usd") {
		t.Errorf("a bad org file: exit %d, %q", r.code, r.stderr)
	}
}
