package runner_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/gitserve/gitservetest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
)

// These tests drive the pipeline with the command harness: a shell script
// is the agent. They cover the git, env, setup and stop paths quickly; the
// OpenCode tests cover the same pipeline with the real agent CLI.

func commandCfg(script string) sandboxcfg.Config {
	return sandboxcfg.Config{Harness: "command", Command: script}
}

func TestCommandExecuteCommitsAndPushes(t *testing.T) {
	t.Parallel()
	remote := runtest.NewRemote(t, projectFiles())
	cfg := commandCfg(`cat > /dev/null
echo '{"type":"step_start"}'
printf '# Notes\n\nadd.sh adds two numbers.\n' > NOTES.md
echo '{"type":"tool_use","tool":"write","input":{"filePath":"NOTES.md"}}'
echo '{"type":"step_finish","tokens":{"input":1200,"output":300},"cost_usd":0.25}'
echo 'Added NOTES.md.'`)
	cfg.Validate = checks("test", "sh test.sh", "notes", "test -s NOTES.md")
	e := newRunEnv(t, nil)
	o := order(t, remote.URL, dispatch.ModeExecute, cfg)
	res := run(t, e, o)
	wantStatus(t, res, dispatch.StatusCompleted)

	if got, ok := remote.File(t, o.TargetBranch, "NOTES.md"); !ok || !strings.Contains(got, "adds two numbers") {
		t.Fatalf("NOTES.md on the pushed branch = %q, %v", got, ok)
	}
	if res.HeadSHA != remote.SHA(t, o.TargetBranch) {
		t.Fatalf("head_sha %s, remote branch at %s", res.HeadSHA, remote.SHA(t, o.TargetBranch))
	}
	if len(res.Commits) != 1 || !strings.HasPrefix(res.Commits[0].Message, "Add notes") {
		t.Fatalf("commits = %+v", res.Commits)
	}
	if who := runtest.Git(t, remote.Dir, "log", "-1", "--format=%an <%ae>", o.TargetBranch); who != "sandbox-bot <sandbox-bot@users.noreply.github.com>" {
		t.Fatalf("commit author = %q", who)
	}
	if res.DiffStats != (dispatch.DiffStats{FilesChanged: 1, Insertions: 3}) {
		t.Fatalf("diff_stats = %+v", res.DiffStats)
	}
	if tu := res.TokenUsage; tu.Input != 1200 || tu.Output != 300 || tu.TotalCostUSD != 0.25 || tu.Steps != 1 {
		t.Fatalf("token_usage = %+v", tu)
	}
	if len(res.Validation) != 2 || !res.Validation[0].Passed || res.Validation[0].Attempts != 1 || res.Validation[1].Name != "notes" {
		t.Fatalf("validation = %+v", res.Validation)
	}
	if res.PRSummary != "Added NOTES.md." || res.Plan != o.Plan {
		t.Fatalf("pr_summary = %q, plan = %q", res.PRSummary, res.Plan)
	}
	ps := progressLines(t, e.progress.String())
	last := ps[len(ps)-1]
	if last.Stage != "done" || last.Status != dispatch.StatusCompleted || last.HeadSHA != res.HeadSHA {
		t.Fatalf("last progress = %+v", last)
	}
	var pushed bool
	for _, p := range ps {
		pushed = pushed || (p.Stage == "push" && p.Branch == o.TargetBranch)
	}
	if !pushed {
		t.Fatal("no push progress line")
	}
}

func TestEnvLayersAndSetup(t *testing.T) {
	t.Parallel()
	files := projectFiles()
	files[".env"] = "FROM_DOTENV=dotenv\nOVERRIDDEN=dotenv\n# a comment\nexport QUOTED=\"two\\nlines\"\n"
	files[".gitignore"] = ".env.local\n"
	remote := runtest.NewRemote(t, files)
	dir := t.TempDir()
	dump := filepath.Join(dir, "env.txt")
	services := filepath.Join(dir, "services.json")
	os.WriteFile(services, []byte(`{"redis":"10.1.2.3:6379"}`), 0o644)
	envFile := filepath.Join(dir, "cli.env")
	os.WriteFile(envFile, []byte("FROM_FILE=cli\nOVERRIDDEN=cli\n"), 0o644)

	cfg := commandCfg(`for v in FROM_YAML FROM_DOTENV FROM_FILE OVERRIDDEN API REDIS_URL QUOTED; do printf '%s=%s\n' $v "$(printenv $v)"; done > "$DUMP"; echo "## Plan"; echo "keep it"`)
	cfg.Env = map[string]string{
		"FROM_YAML":  "yaml",
		"OVERRIDDEN": "yaml",
		"API":        "key=${MY_SECRET}",
		"REDIS_URL":  "redis://{redis}/0",
	}
	cfg.Services = map[string]sandboxcfg.Service{"redis": {Image: "redis:7", Ports: []int{6379}}}
	// Setup may leave files behind (an install, a generated .env.local);
	// plan mode's clean-tree check is about what the agent changes.
	cfg.Lifecycle.Setup = []string{
		"printf 'OVERRIDDEN=local\\n' > .env.local",
		"mkdir -p build && echo generated > build/out.txt",
		"echo setup says $API",
	}
	e := newRunEnv(t, nil)
	e.opts.Environ = append(e.opts.Environ, "MY_SECRET=s3cr3t-value-42", "DUMP="+dump)
	e.opts.ServicesFile = services
	e.opts.EnvFile = envFile
	o := order(t, remote.URL, dispatch.ModePlan, cfg)
	o.SecretEnv = []string{"MY_SECRET"}
	res := run(t, e, o)
	wantStatus(t, res, dispatch.StatusCompleted)
	b, err := os.ReadFile(dump)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{
		"FROM_YAML=yaml", "FROM_DOTENV=dotenv", "FROM_FILE=cli",
		"OVERRIDDEN=cli", // --env-file comes last
		"API=key=s3cr3t-value-42",
		"REDIS_URL=redis://10.1.2.3:6379/0",
		"QUOTED=two\nlines",
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("agent env lacks %q:\n%s", want, got)
		}
	}
	if !strings.Contains(res.Plan, "keep it") {
		t.Fatalf("plan = %q", res.Plan)
	}
	if strings.Contains(e.log.String(), "s3cr3t-value-42") || strings.Contains(e.progress.String(), "s3cr3t-value-42") {
		t.Fatal("a secret value reached the log or progress")
	}
}

func TestEnvPrecedenceOfRepoFiles(t *testing.T) {
	t.Parallel()
	files := projectFiles()
	files[".env"] = "A=dotenv\nB=dotenv\n"
	files[".env.local"] = "B=local\n"
	remote := runtest.NewRemote(t, files)
	dump := filepath.Join(t.TempDir(), "env.txt")
	cfg := commandCfg(`env | grep -E '^(A|B|C)=' | sort > "$DUMP"; echo plan`)
	cfg.Env = map[string]string{"A": "yaml", "B": "yaml", "C": "yaml"}
	e := newRunEnv(t, nil)
	e.opts.Environ = append(e.opts.Environ, "DUMP="+dump)
	res := run(t, e, order(t, remote.URL, dispatch.ModePlan, cfg))
	wantStatus(t, res, dispatch.StatusCompleted)
	b, _ := os.ReadFile(dump)
	if string(b) != "A=dotenv\nB=local\nC=yaml\n" {
		t.Fatalf("env = %q, want YAML < .env < .env.local", b)
	}
}

func TestInvalidWorkOrderLeavesFailedReceipt(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t, nil)
	o := order(t, "", dispatch.ModeExecute, commandCfg("true"))
	res := run(t, e, o)
	wantStatus(t, res, dispatch.StatusFailed)
	if !strings.Contains(res.Error.Message, "clone_url is required") {
		t.Fatalf("error = %q", res.Error.Message)
	}
}

func TestSetupFailure(t *testing.T) {
	t.Parallel()
	remote := runtest.NewRemote(t, projectFiles())
	cfg := commandCfg("echo never runs > ran.txt")
	cfg.Lifecycle.Setup = []string{"true", "echo cannot install deps; exit 3"}
	res := run(t, newRunEnv(t, nil), order(t, remote.URL, dispatch.ModeExecute, cfg))
	wantStatus(t, res, dispatch.StatusFailed)
	if msg := res.Error.Message; !strings.Contains(msg, "lifecycle.setup[1]") || !strings.Contains(msg, "cannot install deps") {
		t.Fatalf("error = %q", msg)
	}
	if remote.SHA(t, dispatch.BranchName(taskID, "Add notes")) != "" {
		t.Fatal("a branch was pushed although the agent never ran")
	}
}

func TestTimeoutPushesWork(t *testing.T) {
	t.Parallel()
	remote := runtest.NewRemote(t, projectFiles())
	cfg := commandCfg(`echo started > WORK.md; echo '{"type":"step_start"}'; sleep 60`)
	e := newRunEnv(t, nil)
	// The timeout covers clone and setup too: it must leave the agent
	// time to write its file even on a busy machine (start to first event
	// took 1.7-3.4 s at a load average of 31), and the agent sleeps
	// a minute, so the timeout still ends the run. Every second of it is
	// a second this package's tests hold a parallel slot idle.
	e.opts.Timeout = 10 * time.Second
	o := order(t, remote.URL, dispatch.ModeExecute, cfg)
	res := run(t, e, o)
	wantStatus(t, res, dispatch.StatusTimeout)
	if _, ok := remote.File(t, o.TargetBranch, "WORK.md"); !ok {
		t.Fatal("the work in progress was not pushed on timeout")
	}
	if res.Error.Diagnostic == nil || res.Error.Diagnostic.LastEventType != "step_start" {
		t.Fatalf("error = %+v", res.Error)
	}
	if !strings.HasPrefix(res.Commits[len(res.Commits)-1].Message, "WIP: Add notes (timeout)") {
		t.Fatalf("commits = %+v", res.Commits)
	}
}

func TestWatchdogStopsSilentCommand(t *testing.T) {
	// Not parallel: it measures time, and a busy machine stretches it.
	remote := runtest.NewRemote(t, projectFiles())
	marker := filepath.Join(t.TempDir(), "grandchild-alive")
	pidFile := filepath.Join(t.TempDir(), "grandchild-pid")
	// The grandchild would outlive a kill of the shell alone.
	cfg := commandCfg(`echo draft > DRAFT.md
echo '{"type":"step_start"}'
echo '{"type":"step_finish","tokens":{"input":10,"output":5},"cost_usd":0.01}'
echo '{"type":"step_start"}'
sh -c 'echo $$ > ` + pidFile + `; sleep 4; touch ` + marker + `' &
sleep 60`)
	cfg.InactivitySeconds = 1
	e := newRunEnv(t, nil)
	e.opts.StartupGrace = 0
	o := order(t, remote.URL, dispatch.ModeExecute, cfg)
	res := run(t, e, o)
	wantStatus(t, res, dispatch.StatusHung)
	d := res.Error.Diagnostic
	if d == nil || d.LastEventType != "step_start" || d.CurrentStep != 2 || d.CompletedSteps != 1 || d.CostSoFarUSD != 0.01 || d.IdleSeconds < 1 {
		t.Fatalf("diagnostic = %+v", d)
	}
	if _, ok := remote.File(t, o.TargetBranch, "DRAFT.md"); !ok {
		t.Fatal("work not pushed after the watchdog stopped the agent")
	}
	// The grandchild is gone (not merely quiet): it can never write its
	// marker.
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("the grandchild never started: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatalf("grandchild pid %q: %v", raw, err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for processAlive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the agent's background child (pid %d) survived the watchdog", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the agent's background child survived the watchdog")
	}
}

func TestCancelMeansInterrupted(t *testing.T) {
	t.Parallel()
	remote := runtest.NewRemote(t, projectFiles())
	e := newRunEnv(t, nil)
	cfg := commandCfg(`echo half > HALF.md; echo '{"type":"step_start"}'; sleep 60`)
	o := order(t, remote.URL, dispatch.ModeExecute, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// Cancel once the agent has written its file: that is SIGTERM
		// mid-run (cmd/sandbox-runner cancels the context on SIGTERM).
		for {
			// Its content, not only its name: the shell creates the file
			// before it writes to it.
			if b, err := os.ReadFile(filepath.Join(e.opts.WorkDir, "repo", "HALF.md")); err == nil && string(b) == "half\n" {
				cancel()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	res := runCtx(t, ctx, e, o)
	wantStatus(t, res, dispatch.StatusInterrupted)
	if got, ok := remote.File(t, o.TargetBranch, "HALF.md"); !ok || got != "half" {
		t.Fatalf("HALF.md on the remote = %q, %v", got, ok)
	}
	if res.HeadSHA != remote.SHA(t, o.TargetBranch) {
		t.Fatal("receipt head_sha is not what was pushed")
	}
}

// The token reaches git only through the credential helper, which reads the
// file on every use: a token the bot refreshes mid-run is the one the final
// push uses, and neither token lands anywhere the run writes.
func TestTokenThroughCredentialHelper(t *testing.T) {
	t.Parallel()
	const tokenA, tokenB = "ghs_CANARYtokenAAAAAAAAAAAAAAAAAAAAAA", "ghs_CANARYtokenBBBBBBBBBBBBBBBBBBBBBB"
	remote := runtest.NewRemote(t, projectFiles())
	secrets := t.TempDir()
	tokenFile := filepath.Join(secrets, "token")
	os.WriteFile(tokenFile, []byte(tokenA+"\n"), 0o600)
	refreshed := filepath.Join(secrets, "refreshed")
	srv := gitservetest.Serve(t, remote.Dir, gitservetest.Options{Allow: func(user, pass string) bool {
		if _, err := os.Stat(refreshed); err == nil {
			return pass == tokenB
		}
		return pass == tokenA
	}})
	// The "agent" plays the bot refreshing the token mid-run. It is told
	// the token file's path in its script: the runner keeps any variable
	// naming the token file out of the agent's environment.
	envDump := filepath.Join(t.TempDir(), "agent-env")
	cfg := commandCfg(`env > ` + envDump + `; echo work > WORK.md; printf '%s\n' "$NEW_TOKEN" > ` + tokenFile + `; touch "$REFRESHED"; echo done`)
	e := newRunEnv(t, nil)
	e.opts.Environ = append(e.opts.Environ, "NEW_TOKEN="+tokenB, "TOKEN_FILE="+tokenFile, "REFRESHED="+refreshed, "GITHUB_TOKEN="+tokenA)
	o := order(t, srv.URL, dispatch.ModeExecute, cfg)
	o.TokenFile = tokenFile
	res := run(t, e, o)
	wantStatus(t, res, dispatch.StatusCompleted)
	if _, ok := remote.File(t, o.TargetBranch, "WORK.md"); !ok {
		t.Fatal("not pushed")
	}
	dumped, err := os.ReadFile(envDump)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"TOKEN_FILE=", "GITHUB_TOKEN=", tokenFile, tokenA} {
		if strings.Contains(string(dumped), bad) {
			t.Errorf("the agent's environment holds %q", bad)
		}
	}
	authed, rejected, pushes := srv.Counts()
	if authed == 0 || rejected == 0 || pushes == 0 {
		t.Fatalf("auth counts: %d authenticated, %d rejected, %d pushes; want all > 0", authed, rejected, pushes)
	}
	for _, tok := range []string{tokenA, tokenB} {
		for _, root := range []string{filepath.Dir(e.opts.WorkDir), o.OutputDir, e.home} {
			if hits := grepTree(t, root, tok); len(hits) > 0 {
				t.Fatalf("token found in %v", hits)
			}
		}
		if strings.Contains(e.log.String()+e.progress.String(), tok) {
			t.Fatal("token in the log or progress")
		}
	}
}

func TestContinueResumesBranch(t *testing.T) {
	t.Parallel()
	remote := runtest.NewRemote(t, projectFiles())
	branch := dispatch.BranchName(taskID, "Add notes")
	wip := remote.Commit(t, branch, "main", map[string]string{"NOTES.md": "# Notes\n(unfinished)\n"}, "WIP: Add notes (interrupted)")
	promptOut := filepath.Join(t.TempDir(), "prompt.txt")
	cfg := commandCfg(`cat > "$PROMPT_OUT"; printf '# Notes\n\nadd.sh adds.\n' > NOTES.md; echo finished`)
	e := newRunEnv(t, nil)
	e.opts.Environ = append(e.opts.Environ, "PROMPT_OUT="+promptOut)
	o := order(t, remote.URL, dispatch.ModeContinue, cfg)
	o.Attempt = 2
	res := run(t, e, o)
	wantStatus(t, res, dispatch.StatusCompleted)
	prompt, _ := os.ReadFile(promptOut)
	if !strings.Contains(string(prompt), "WIP: Add notes (interrupted)") || !strings.Contains(string(prompt), "git log main..HEAD") {
		t.Fatalf("continue prompt does not show the branch history:\n%s", prompt)
	}
	subjects := remote.Subjects(t, "main.."+branch)
	if len(subjects) != 2 || !strings.HasPrefix(subjects[0], "Continue: Add notes") || remote.SHA(t, branch+"~1") != wip {
		t.Fatalf("branch history = %v (a continue run must build on the pushed WIP)", subjects)
	}
	if len(res.Commits) != 1 {
		t.Fatalf("commits = %+v, want only this run's", res.Commits)
	}
}

func TestReviseAppliesFeedback(t *testing.T) {
	t.Parallel()
	remote := runtest.NewRemote(t, projectFiles())
	branch := dispatch.BranchName(taskID, "Add notes")
	remote.Commit(t, branch, "main", map[string]string{"NOTES.md": "notes\n"}, "Add notes")
	promptOut := filepath.Join(t.TempDir(), "prompt.txt")
	cfg := commandCfg(`cat > "$PROMPT_OUT"; echo "# Notes" > NOTES.md; echo "Retitled."`)
	e := newRunEnv(t, nil)
	e.opts.Environ = append(e.opts.Environ, "PROMPT_OUT="+promptOut)
	o := order(t, remote.URL, dispatch.ModeRevise, cfg)
	o.Feedback = "Please use a markdown title in NOTES.md."
	res := run(t, e, o)
	wantStatus(t, res, dispatch.StatusCompleted)
	prompt, _ := os.ReadFile(promptOut)
	if !strings.Contains(string(prompt), "> Please use a markdown title") {
		t.Fatalf("revise prompt lacks the feedback:\n%s", prompt)
	}
	if got, _ := remote.File(t, branch, "NOTES.md"); got != "# Notes" {
		t.Fatalf("NOTES.md = %q", got)
	}
	if res.PRSummary != "Retitled." {
		t.Fatalf("summary = %q", res.PRSummary)
	}
}

func TestReviseWithoutBranchFails(t *testing.T) {
	t.Parallel()
	remote := runtest.NewRemote(t, projectFiles())
	res := run(t, newRunEnv(t, nil), order(t, remote.URL, dispatch.ModeRevise, commandCfg("true")))
	wantStatus(t, res, dispatch.StatusFailed)
	if !strings.Contains(res.Error.Message, "does not exist on the remote") {
		t.Fatalf("error = %q", res.Error.Message)
	}
}

func TestRebaseWithConflictResolvedByAgent(t *testing.T) {
	t.Parallel()
	remote := runtest.NewRemote(t, projectFiles())
	branch := dispatch.BranchName(taskID, "Add notes")
	remote.Commit(t, branch, "main", map[string]string{"README.md": "# calc\n\nAdds two numbers, quickly.\n"}, "Describe speed")
	oldHead := remote.SHA(t, branch)
	mainHead := remote.Commit(t, "main", "", map[string]string{"README.md": "# calc\n\nAdds integers.\n", "LICENSE": "MIT\n"}, "Clarify README")
	promptOut := filepath.Join(t.TempDir(), "prompt.txt")
	cfg := commandCfg(`cat > "$PROMPT_OUT"; printf '# calc\n\nAdds two integers, quickly.\n' > README.md; echo "README: kept both."`)
	cfg.Validate = checks("test", "sh test.sh")
	e := newRunEnv(t, nil)
	e.opts.Environ = append(e.opts.Environ, "PROMPT_OUT="+promptOut)
	o := order(t, remote.URL, dispatch.ModeRebase, cfg)
	res := run(t, e, o)
	wantStatus(t, res, dispatch.StatusCompleted)
	prompt, _ := os.ReadFile(promptOut)
	if !strings.Contains(string(prompt), "- README.md") {
		t.Fatalf("rebase prompt does not list the conflict:\n%s", prompt)
	}
	newHead := remote.SHA(t, branch)
	if newHead == oldHead || remote.SHA(t, branch+"~1") != mainHead {
		t.Fatalf("branch %s not rebased onto main %s", newHead, mainHead)
	}
	if got, _ := remote.File(t, branch, "README.md"); !strings.Contains(got, "Adds two integers, quickly.") {
		t.Fatalf("README.md = %q", got)
	}
	if _, ok := remote.File(t, branch, "LICENSE"); !ok {
		t.Fatal("the base's new file is missing after the rebase")
	}
	if c := checkByName(res, "test"); c == nil || !c.Passed {
		t.Fatalf("validation after rebase = %+v", res.Validation)
	}
}

func TestRebaseLeftMarkersFails(t *testing.T) {
	t.Parallel()
	remote := runtest.NewRemote(t, projectFiles())
	branch := dispatch.BranchName(taskID, "Add notes")
	remote.Commit(t, branch, "main", map[string]string{"README.md": "branch\n"}, "Branch change")
	oldHead := remote.SHA(t, branch)
	remote.Commit(t, "main", "", map[string]string{"README.md": "main\n"}, "Main change")
	res := run(t, newRunEnv(t, nil), order(t, remote.URL, dispatch.ModeRebase, commandCfg(`echo "I give up"`)))
	wantStatus(t, res, dispatch.StatusFailed)
	if !strings.Contains(res.Error.Message, "left conflict markers in README.md") {
		t.Fatalf("error = %q", res.Error.Message)
	}
	if remote.SHA(t, branch) != oldHead {
		t.Fatal("a failed rebase changed the remote branch")
	}
}

func TestTaskModeArtifacts(t *testing.T) {
	t.Parallel()
	cfg := commandCfg(`mkdir -p charts; echo '# Report' > report.md; echo png > charts/a.png; echo "Wrote the report."`)
	cfg.Mode = sandboxcfg.ModeTask
	cfg.Validate = checks("report", "grep -q Report report.md")
	o := order(t, "", dispatch.ModeTask, cfg)
	o.CloneURL, o.TargetBranch, o.BaseBranch = "", "", ""
	res := run(t, newRunEnv(t, nil), o)
	wantStatus(t, res, dispatch.StatusCompleted)
	if strings.Join(res.Artifacts, ",") != "artifacts/charts/a.png,artifacts/report.md" {
		t.Fatalf("artifacts = %v", res.Artifacts)
	}
	if b, _ := os.ReadFile(filepath.Join(o.OutputDir, "artifacts", "report.md")); string(b) != "# Report\n" {
		t.Fatalf("report.md = %q", b)
	}
	if res.PRSummary != "Wrote the report." || len(res.Commits) != 0 {
		t.Fatalf("result = %+v", res)
	}
}

func TestMalformedAgentLinesAreSkipped(t *testing.T) {
	t.Parallel()
	remote := runtest.NewRemote(t, projectFiles())
	cfg := commandCfg(`echo '{"type":"step_finish","cost_usd":0.5'
echo '{"type":"mystery"}'
echo x > X.md
echo '{"type":"step_finish","tokens":{"input":1,"output":1},"cost_usd":0.5}'
echo ok`)
	res := run(t, newRunEnv(t, nil), order(t, remote.URL, dispatch.ModeExecute, cfg))
	wantStatus(t, res, dispatch.StatusCompleted)
	if res.TokenUsage.TotalCostUSD != 0.5 || res.TokenUsage.Steps != 1 {
		t.Fatalf("usage = %+v", res.TokenUsage)
	}
}

func TestReceiptIsValidJSONWithAllFields(t *testing.T) {
	t.Parallel()
	remote := runtest.NewRemote(t, projectFiles())
	o := order(t, remote.URL, dispatch.ModePlan, commandCfg(`echo "## Plan"`))
	run(t, newRunEnv(t, nil), o)
	b, _ := os.ReadFile(filepath.Join(o.OutputDir, dispatch.ResultFile))
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"schema_version", "task_id", "mode", "status", "duration_seconds", "commits", "diff_stats", "validation", "repairs", "token_usage", "screenshot_paths", "recording_paths"} {
		if _, ok := m[k]; !ok {
			t.Errorf("result.json lacks %s", k)
		}
	}
}

// Work in progress reaches the remote while the agent is still working:
// the periodic push commits a checkpoint and pushes it.
func TestPeriodicPush(t *testing.T) {
	// Not parallel: it measures time, and a busy machine stretches it.
	remote := runtest.NewRemote(t, projectFiles())
	seen := filepath.Join(t.TempDir(), "seen-on-remote")
	branch := dispatch.BranchName(taskID, "Add notes")
	// The agent writes, then waits until its work shows up on the remote
	// (or gives up after 20s), and records what it saw.
	cfg := commandCfg(`echo step one > STEP1.md
for i in $(seq 1 200); do
  if git --git-dir="$REMOTE" show "$BRANCH:STEP1.md" > "$SEEN" 2>/dev/null; then break; fi
  sleep 0.1
done
echo step two > STEP2.md
echo done`)
	e := newRunEnv(t, nil)
	e.opts.PushInterval = 300 * time.Millisecond
	e.opts.Environ = append(e.opts.Environ, "REMOTE="+remote.Dir, "BRANCH="+branch, "SEEN="+seen)
	res := run(t, e, order(t, remote.URL, dispatch.ModeExecute, cfg))
	wantStatus(t, res, dispatch.StatusCompleted)
	if b, err := os.ReadFile(seen); err != nil || string(b) != "step one\n" {
		t.Fatalf("the agent never saw its first step on the remote mid-run: %q, %v", b, err)
	}
	if !strings.HasPrefix(res.Commits[0].Message, "WIP: checkpoint of "+taskID) {
		t.Fatalf("commits = %+v", res.Commits)
	}
	if _, ok := remote.File(t, branch, "STEP2.md"); !ok {
		t.Fatal("the final work was not pushed")
	}
}

// Files the checks leave behind are not committed with the agent's work.
func TestCheckByproductsAreNotCommitted(t *testing.T) {
	t.Parallel()
	remote := runtest.NewRemote(t, projectFiles())
	count := filepath.Join(t.TempDir(), "count")
	cfg := commandCfg(`n=$(cat "$COUNT" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$COUNT"; echo "v$n" > NOTES.md; echo "wrote v$n"`)
	cfg.Validate = checks("test", `mkdir -p .cache && echo cov > coverage.out && echo x > .cache/x && grep -q v2 NOTES.md`)
	e := newRunEnv(t, nil)
	e.opts.Environ = append(e.opts.Environ, "COUNT="+count)
	o := order(t, remote.URL, dispatch.ModeExecute, cfg)
	res := run(t, e, o)
	wantStatus(t, res, dispatch.StatusCompleted)
	if len(res.Repairs) != 1 || !res.Repairs[0].Fixed || len(res.Commits) != 2 {
		t.Fatalf("repairs %+v, commits %+v", res.Repairs, res.Commits)
	}
	for _, f := range []string{"coverage.out", ".cache/x"} {
		if _, ok := remote.File(t, o.TargetBranch, f); ok {
			t.Fatalf("the check's byproduct %s was committed", f)
		}
	}
	if got, _ := remote.File(t, o.TargetBranch, "NOTES.md"); got != "v2" {
		t.Fatalf("NOTES.md = %q", got)
	}
}

// processAlive reports whether pid runs; a zombie waiting for its reaper
// counts as gone.
func processAlive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
