package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
)

// receiptPath is the path the summary's receipt line prints.
func receiptPath(t *testing.T, stdout string) string {
	t.Helper()
	i := strings.LastIndex(stdout, "receipt:  ")
	if i < 0 {
		t.Fatalf("no receipt line in:\n%s", stdout)
	}
	return strings.TrimSpace(strings.SplitN(stdout[i+len("receipt:  "):], "\n", 2)[0])
}

func readReceipt(t *testing.T, path string) *dispatch.Result {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	res, err := dispatch.ParseResult(b)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// checkQuickstartRun asserts what the README promises after
// `sandbox-agent create --repo DIR --task "Document add.sh"`: the plan, a
// pushed agent/ branch with NOTES.md, and the receipt's path.
func checkQuickstartRun(t *testing.T, r cliRun, repo string) *dispatch.Result {
	t.Helper()
	if r.code != exitOK {
		t.Fatalf("create: exit %d", r.code)
	}
	for _, want := range []string{"## Plan", "Add `NOTES.md` explaining how to use `add.sh`", "execute T-", ": completed",
		"summary:  Added NOTES.md documenting add.sh", "check:    test passed", "see it:   git -C " + repo + " log -p -n 1 agent/"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if !strings.Contains(r.stderr, "no terminal to ask: executing the plan") {
		t.Fatalf("stderr does not say the plan is executed without asking:\n%s", r.stderr)
	}
	bs := branches(t, repo)
	if len(bs) != 1 || !strings.HasSuffix(bs[0], "-document-add-sh") {
		t.Fatalf("branches = %v", bs)
	}
	if got := runtest.Git(t, repo, "show", bs[0]+":NOTES.md"); !strings.Contains(got, "adds two integers") || !strings.Contains(got, "    5\n") {
		t.Fatalf("NOTES.md = %q", got)
	}
	if got := runtest.Git(t, repo, "status", "--porcelain"); got != "" {
		t.Fatalf("the working tree of %s changed: %q", repo, got)
	}
	res := readReceipt(t, receiptPath(t, r.stdout))
	if res.Status != dispatch.StatusCompleted || res.Branch != bs[0] || !strings.Contains(res.Plan, "## Plan") || len(res.Validation) != 1 || !res.Validation[0].Passed {
		t.Fatalf("receipt = %+v", res)
	}
	return res
}

// The README's first command on a machine without Docker: quickstart
// writes the example, create falls back to the process backend loudly,
// plans, executes, pushes.
func TestQuickstartOnProcessBackend(t *testing.T) {
	t.Parallel()
	repo := filepath.Join(t.TempDir(), "calc")
	env := runtest.HermeticEnv(t.TempDir())
	r := runCLI(t, env, false, "", "quickstart", repo)
	if r.code != exitOK || !strings.Contains(r.stdout, `sandbox-agent create --repo `+repo+` --task "Document add.sh"`) {
		t.Fatalf("quickstart: exit %d:\n%s", r.code, r.stdout)
	}
	if log := runtest.Git(t, repo, "log", "--format=%an <%ae>|%s"); log != "sandbox-agent <sandbox-agent@localhost>|calc: an example project for sandbox-agent" {
		t.Fatalf("git log = %q", log)
	}
	if fi, err := os.Stat(filepath.Join(repo, ".sandbox", "demo-agent.sh")); err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Fatalf("demo agent: %v, %v", fi, err)
	}
	r = runCLI(t, env, false, "", "create", "--repo", repo, "--task", "Document add.sh", "--data-dir", t.TempDir(), "--runner", sandboxRunner(t))
	for _, want := range []string{"WARNING: no sandbox", "no Docker engine", processWarning} {
		if !strings.Contains(r.stderr, want) {
			t.Fatalf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	checkQuickstartRun(t, r, repo)
}

func TestQuickstartRefusesAFullDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "keep.txt"), []byte("mine"), 0o644)
	r := runCLI(t, nil, false, "", "quickstart", dir)
	if r.code != exitNotDone || !strings.Contains(r.stderr, "exists and is not empty") {
		t.Fatalf("exit %d, %q", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "keep.txt")); string(b) != "mine" {
		t.Fatal("quickstart touched an existing directory")
	}
	if r := runCLI(t, nil, false, "", "quickstart", "a", "b"); r.code != exitUsage {
		t.Fatalf("two directories: exit %d", r.code)
	}
}
