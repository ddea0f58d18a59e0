package runner_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
)

// Fake credentials shaped like real ones: an AWS access key id and a
// high-entropy token (no real key is ever in a test).
const (
	fakeAWSKey = "AKIAZ7XQ3MRT5LW2KVNB"
	fakeToken  = "9f8Kq2LmX7vB4nR1tY6wZ3pJ0sD5hG8c"
)

// countingAgent is a command agent that runs first on its first pass and
// then on every later one (the repairs); pass n's prompt is kept in
// count.n (the returned path is count).
func countingAgent(t *testing.T, e *runEnv, first, then string) (sandboxcfg.Config, string) {
	count := filepath.Join(t.TempDir(), "count")
	e.opts.Environ = append(e.opts.Environ, "COUNT="+count)
	return commandCfg(`n=$(cat "$COUNT" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$COUNT"; cat > "$COUNT.$n"
if [ "$n" = 1 ]; then ` + first + `; else ` + then + `; fi
echo "pass $n"`), count
}

// remoteHistory is every commit's patch of the pushed branch, to prove a
// value never reached it.
func remoteHistory(t *testing.T, remote *runtest.Remote, branch string) string {
	return runtest.Git(t, remote.Dir, "log", "-p", "main.."+branch)
}

// The agent commits an AWS key and a token: the push is held, the repair
// removes them, and the unpushed commits are rewritten into one, so that
// the branch's history never held them.
func TestSecretScanRepairsBeforeAnyPush(t *testing.T) {
	t.Parallel()
	remote := runtest.NewRemote(t, projectFiles())
	e := newRunEnv(t, nil)
	cfg, count := countingAgent(t, e,
		`printf 'const awsKey = "`+fakeAWSKey+`"\n' > cfg.go; printf 'x = 1\nSESSION_TOKEN = "`+fakeToken+`"\n' > settings.py`,
		`printf 'const awsKey = os.Getenv("AWS_KEY")\n' > cfg.go; printf 'x = 1\nSESSION_TOKEN = os.environ["SESSION_TOKEN"]\n' > settings.py`)
	o := order(t, remote.URL, dispatch.ModeExecute, cfg)
	res := run(t, e, o)
	wantStatus(t, res, dispatch.StatusCompleted)
	hist := remoteHistory(t, remote, o.TargetBranch)
	if strings.Contains(hist, fakeAWSKey) || strings.Contains(hist, fakeToken) {
		t.Fatalf("a secret reached the branch's history:\n%s", hist)
	}
	if got, _ := remote.File(t, o.TargetBranch, "cfg.go"); !strings.Contains(got, "Getenv") {
		t.Fatalf("cfg.go on the branch = %q", got)
	}
	ss := res.SecretScan
	if ss == nil || ss.Repaired != 2 || ss.Squashed != 1 || len(ss.Findings) != 0 || ss.Commits < 2 {
		t.Fatalf("secret_scan = %+v", ss)
	}
	c := checkByName(res, dispatch.CheckSecrets)
	if c == nil || !c.Passed || c.Attempts != 2 {
		t.Fatalf("validation %+v", res.Validation)
	}
	if len(res.Repairs) != 1 || !res.Repairs[0].Fixed || res.Repairs[0].FailedChecks[0] != dispatch.CheckSecrets {
		t.Fatalf("repairs %+v", res.Repairs)
	}
	if len(res.Commits) != 1 || res.Commits[0].SHA != remote.SHA(t, o.TargetBranch) {
		t.Fatalf("commits %+v, branch at %s", res.Commits, remote.SHA(t, o.TargetBranch))
	}
	p, _ := os.ReadFile(count + ".2")
	if !strings.Contains(string(p), "- aws-access-token (") || !strings.Contains(string(p), "AWS platforms.) at cfg.go:1") || !strings.Contains(string(p), "generic-api-key") ||
		strings.Contains(string(p), fakeAWSKey) || strings.Contains(string(p), fakeToken) {
		t.Fatalf("the repair prompt must name rule and place, never the value:\n%q", p)
	}
	assertNoValue(t, o.OutputDir, e)
}

// A secret the repairs do not remove: nothing is pushed, and the receipt
// says which rule matched where, never the value.
func TestSecretScanRefusesThePush(t *testing.T) {
	t.Parallel()
	remote := runtest.NewRemote(t, projectFiles())
	e := newRunEnv(t, nil)
	cfg, _ := countingAgent(t, e, `printf 'const awsKey = "`+fakeAWSKey+`"\n' > cfg.go`, `echo "I keep it" > /dev/null`)
	o := order(t, remote.URL, dispatch.ModeExecute, cfg)
	res := run(t, e, o)
	wantStatus(t, res, dispatch.StatusFailed)
	if sha := remote.SHA(t, o.TargetBranch); sha != "" {
		t.Fatalf("the branch was pushed (%s)", sha)
	}
	if res.Error == nil || !strings.Contains(res.Error.Message, "aws-access-token at cfg.go:1") || !strings.Contains(res.Error.Message, "Nothing was pushed") {
		t.Fatalf("error = %+v", res.Error)
	}
	ss := res.SecretScan
	if ss == nil || len(ss.Findings) != 1 || ss.Findings[0].Rule != "aws-access-token" || ss.Findings[0].File != "cfg.go" || ss.Findings[0].Line != 1 {
		t.Fatalf("secret_scan = %+v", ss)
	}
	if res.HeadSHA != "" || len(res.Commits) != 0 {
		t.Fatalf("the receipt names commits that were not pushed: head %q, %+v", res.HeadSHA, res.Commits)
	}
	assertNoValue(t, o.OutputDir, e)
}

// assertNoValue checks that no receipt, log or progress line holds the
// fake credentials.
func assertNoValue(t *testing.T, out string, e *runEnv) {
	t.Helper()
	for _, v := range []string{fakeAWSKey, fakeToken} {
		if hits := grepTree(t, out, v); len(hits) > 0 {
			t.Fatalf("%s found in %v", v, hits)
		}
		if strings.Contains(e.log.String(), v) || strings.Contains(e.progress.String(), v) {
			t.Fatalf("%s found in the runner's log or progress", v)
		}
	}
}

// A repository's allowlist (.gitleaksignore on the base) accepts a
// finding: reported, not blocking. One the agent adds itself does not.
func TestSecretScanHonoursTheBasesAllowlistOnly(t *testing.T) {
	t.Parallel()
	files := projectFiles()
	files[".gitleaksignore"] = "testdata/key.go:aws-access-token:1\n"
	remote := runtest.NewRemote(t, files)
	e := newRunEnv(t, nil)
	cfg := commandCfg(`cat > /dev/null; mkdir -p testdata; printf 'const k = "` + fakeAWSKey + `"\n' > testdata/key.go
printf 'const k = "` + fakeAWSKey + `"\n' > live.go; printf 'live.go:aws-access-token:1\n' >> .gitleaksignore; echo done`)
	cfg.Repair.Attempts = new(int)
	o := order(t, remote.URL, dispatch.ModeExecute, cfg)
	res := run(t, e, o)
	wantStatus(t, res, dispatch.StatusFailed)
	ss := res.SecretScan
	if ss == nil || len(ss.Findings) != 1 || ss.Findings[0].File != "live.go" || len(ss.Allowed) != 1 || ss.Allowed[0].File != "testdata/key.go" || ss.Allowed[0].Allowlist != ".gitleaksignore" {
		b, _ := json.Marshal(ss)
		t.Fatalf("secret_scan = %s", b)
	}
}

// Dependencies an agent adds to a Go module and an npm lock file are
// listed with versions; with an OSV database naming the npm version,
// validation fails and the repair moves to the fixed one.
func TestDependenciesAndAdvisories(t *testing.T) {
	t.Parallel()
	files := projectFiles()
	files["go.mod"] = "module example.com/calc\n\ngo 1.22\n"
	files["web/package-lock.json"] = `{"lockfileVersion":3,"packages":{"":{"name":"web"}}}`
	remote := runtest.NewRemote(t, files)
	e := newRunEnv(t, nil)
	osv := t.TempDir()
	if err := os.WriteFile(filepath.Join(osv, "GHSA-test-0001.json"), []byte(`{"id":"GHSA-test-0001","summary":"left-pad pads wrong",
"affected":[{"package":{"ecosystem":"npm","name":"left-pad"},"ranges":[{"type":"SEMVER","events":[{"introduced":"0"},{"fixed":"1.3.1"}]}]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	e.opts.OSVDir = osv
	lock := func(v string) string {
		return `{"lockfileVersion":3,"packages":{"":{"name":"web"},"node_modules/left-pad":{"version":"` + v + `"}}}`
	}
	cfg, count := countingAgent(t, e,
		`printf 'module example.com/calc\n\ngo 1.22\n\nrequire github.com/google/uuid v1.6.0\n' > go.mod; printf '%s' '`+lock("1.3.0")+`' > web/package-lock.json`,
		`printf '%s' '`+lock("1.3.1")+`' > web/package-lock.json`)
	o := order(t, remote.URL, dispatch.ModeExecute, cfg)
	res := run(t, e, o)
	wantStatus(t, res, dispatch.StatusCompleted)
	d := res.Dependencies
	if d == nil || len(d.Changes) != 2 || len(d.Advisories) != 0 || !strings.HasPrefix(d.AdvisoryDB, "OSV, 1 advisories") {
		b, _ := json.Marshal(d)
		t.Fatalf("dependencies = %s", b)
	}
	got := d.Changes[0].Name + "@" + d.Changes[0].To + " " + d.Changes[1].Name + "@" + d.Changes[1].To
	if got != "github.com/google/uuid@v1.6.0 left-pad@1.3.1" || d.Changes[0].Change != dispatch.DepAdded {
		t.Fatalf("changes %q", got)
	}
	c := checkByName(res, dispatch.CheckAdvisories)
	if c == nil || !c.Passed || c.Attempts != 2 || len(res.Repairs) != 1 {
		t.Fatalf("validation %+v, repairs %+v", res.Validation, res.Repairs)
	}
	if p, _ := os.ReadFile(count + ".2"); !strings.Contains(string(p), "GHSA-test-0001: left-pad 1.3.0 (npm): left-pad pads wrong; fixed in 1.3.1") {
		t.Fatalf("the repair prompt:\n%s", p)
	}
}

// The change against the approved plan's files: covered entries, a file
// outside with the agent's reason; with plan.strict the outside file goes
// to repair, which undoes it.
func TestPlanScope(t *testing.T) {
	t.Parallel()
	for _, strict := range []bool{false, true} {
		remote := runtest.NewRemote(t, projectFiles())
		e := newRunEnv(t, nil)
		cfg, count := countingAgent(t, e,
			`echo notes > NOTES.md; mkdir -p docs; echo x > docs/a.md; echo y > extra.txt; printf 'Done.\n\n## Outside the approved plan\n- `+"`extra.txt`"+` — the build needed it\n'`,
			`rm -f extra.txt`)
		cfg.Plan.Strict = &strict
		o := order(t, remote.URL, dispatch.ModeExecute, cfg)
		o.PlanFiles = []dispatch.PlanFile{{Path: "NOTES.md", Note: "the notes"}, {Path: "docs/"}, {Path: "src/**/*.go"}}
		res := run(t, e, o)
		wantStatus(t, res, dispatch.StatusCompleted)
		ps := res.PlanScope
		if ps == nil || len(ps.Items) != 3 || strings.Join(ps.Items[0].Changed, ",") != "NOTES.md" || strings.Join(ps.Items[1].Changed, ",") != "docs/a.md" || len(ps.Items[2].Changed) != 0 {
			b, _ := json.Marshal(ps)
			t.Fatalf("strict=%v: plan_scope = %s", strict, b)
		}
		if !strict {
			if len(ps.Outside) != 1 || ps.Outside[0].File != "extra.txt" || ps.Outside[0].Reason != "the build needed it" || len(res.Repairs) != 0 {
				t.Fatalf("outside %+v, repairs %+v", ps.Outside, res.Repairs)
			}
			continue
		}
		if len(ps.Outside) != 0 || len(res.Repairs) != 1 || res.Repairs[0].FailedChecks[0] != dispatch.CheckPlanScope {
			t.Fatalf("strict: outside %+v, repairs %+v", ps.Outside, res.Repairs)
		}
		if _, ok := remote.File(t, o.TargetBranch, "extra.txt"); ok {
			t.Fatal("strict: extra.txt is on the branch")
		}
		if p, _ := os.ReadFile(count + ".2"); !strings.Contains(string(p), "- extra.txt") {
			t.Fatalf("strict: the repair prompt:\n%s", p)
		}
	}
}

// A plan run pushes nothing, so it makes no scanner and its receipt has no
// scan; the plan's Files section becomes plan_files.
func TestPlanRunNamesItsFilesAndScansNothing(t *testing.T) {
	t.Parallel()
	remote := runtest.NewRemote(t, projectFiles())
	e := newRunEnv(t, nil)
	cfg := commandCfg("cat > /dev/null; printf 'Add notes.\\n\\n## Files\\n- `NOTES.md` — the notes\\n- `docs/` — a page\\n- src/**/*.go: tests\\n\\n## Risks\\n- `none` at all\\n'")
	o := order(t, remote.URL, dispatch.ModePlan, cfg)
	o.Plan = ""
	res := run(t, e, o)
	wantStatus(t, res, dispatch.StatusCompleted)
	if res.SecretScan != nil || res.Dependencies != nil || res.PlanScope != nil || res.Review != nil {
		t.Fatalf("a plan run reported checks: %+v %+v %+v %+v", res.SecretScan, res.Dependencies, res.PlanScope, res.Review)
	}
	want := []dispatch.PlanFile{{Path: "NOTES.md", Note: "the notes"}, {Path: "docs/", Note: "a page"}, {Path: "src/**/*.go", Note: "tests"}}
	if len(res.PlanFiles) != 3 || res.PlanFiles[0] != want[0] || res.PlanFiles[1] != want[1] || res.PlanFiles[2] != want[2] {
		t.Fatalf("plan_files = %+v", res.PlanFiles)
	}
}
