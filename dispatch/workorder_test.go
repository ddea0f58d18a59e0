package dispatch_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

// order is a valid work order of mode.
func order(mode dispatch.Mode) dispatch.WorkOrder {
	o := dispatch.WorkOrder{
		SchemaVersion: dispatch.WorkOrderVersion,
		TaskID:        "T-0123ABCD",
		Mode:          mode,
		Attempt:       1,
		Task:          dispatch.TaskText{Title: "Add a toggle", Body: "Please."},
		Config:        sandboxcfg.MustResolve(sandboxcfg.Config{}),
		OutputDir:     "/sandbox/out",
	}
	if mode != dispatch.ModeTask {
		o.Repo, o.Number, o.CloneURL, o.BaseBranch = "acme/web", 42, "https://github.com/acme/web.git", "main"
	}
	if mode.WritesCode() {
		o.TargetBranch = dispatch.BranchName(o.TaskID, o.Task.Title)
	}
	if mode == dispatch.ModeExecute {
		o.Plan = "1. Add it."
	}
	if mode == dispatch.ModePreview {
		o.Source, o.Config.Dev.Command, o.Config.Dev.Port = dispatch.SourcePath, "npm run dev", 3000
	}
	if mode == dispatch.ModeReview || mode == dispatch.ModeSuggest {
		o.PR = &dispatch.PRReview{HeadRef: "refs/pull/42/head", HeadSHA: "0123456789012345678901234567890123456789"}
	}
	return o
}

func TestWorkOrderValidForEveryMode(t *testing.T) {
	t.Parallel()
	for _, m := range dispatch.Modes {
		o := order(m)
		if err := o.Validate(); err != nil {
			t.Errorf("%s: %v", m, err)
		}
	}
}

// Every problem is reported, each naming the field a person has to fix.
func TestWorkOrderErrorsNameTheField(t *testing.T) {
	t.Parallel()
	notRequired := false
	cases := []struct {
		name  string
		mode  dispatch.Mode
		spoil func(*dispatch.WorkOrder)
		field string
	}{
		{"schema version", dispatch.ModePlan, func(o *dispatch.WorkOrder) { o.SchemaVersion = 99 }, "schema_version 99"},
		{"task id", dispatch.ModePlan, func(o *dispatch.WorkOrder) { o.TaskID = "T-12" }, `task_id "T-12"`},
		{"mode", dispatch.ModePlan, func(o *dispatch.WorkOrder) { o.Mode = "deploy" }, `mode "deploy"`},
		{"clone url", dispatch.ModeRevise, func(o *dispatch.WorkOrder) { o.CloneURL = "" }, "clone_url is required"},
		{"target branch", dispatch.ModeRebase, func(o *dispatch.WorkOrder) { o.TargetBranch = "" }, "target_branch is required in rebase mode"},
		{"plan", dispatch.ModeExecute, func(o *dispatch.WorkOrder) { o.Plan = " \n" }, "plan is required in execute mode"},
		{"output dir", dispatch.ModeTask, func(o *dispatch.WorkOrder) { o.OutputDir = "" }, "output_dir is required"},
	}
	for _, c := range cases {
		o := order(c.mode)
		c.spoil(&o)
		err := o.Validate()
		if err == nil || !strings.Contains(err.Error(), c.field) || !strings.HasPrefix(err.Error(), "work order: ") {
			t.Errorf("%s: Validate() = %v, want a work order error naming %q", c.name, err, c.field)
		}
	}

	// Not required where the mode has no use for it.
	o := order(dispatch.ModeTask)
	o.CloneURL, o.TargetBranch = "", ""
	if err := o.Validate(); err != nil {
		t.Errorf("task mode without a repository: %v", err)
	}
	o = order(dispatch.ModePlan)
	o.TargetBranch = ""
	if err := o.Validate(); err != nil {
		t.Errorf("plan mode without a target branch: %v", err)
	}
	o = order(dispatch.ModeExecute)
	o.Plan, o.Config.Plan.Required = "", notRequired
	if err := o.Validate(); err != nil {
		t.Errorf("execute without a plan where plan.required is false: %v", err)
	}

	// All at once: one error lists every field.
	o = dispatch.WorkOrder{Mode: dispatch.ModeExecute, Config: sandboxcfg.MustResolve(sandboxcfg.Config{})}
	err := o.Validate()
	if err == nil {
		t.Fatal("an empty execute order is valid")
	}
	for _, field := range []string{"schema_version", "task_id", "clone_url", "target_branch", "plan", "output_dir"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error %q does not name %s", err, field)
		}
	}
}

// The work order is JSON on both sides: what the bot writes, the runner
// reads back unchanged, and it never holds the token itself.
func TestWorkOrderJSONRoundTrip(t *testing.T) {
	t.Parallel()
	o := order(dispatch.ModeExecute)
	o.Task.Comments = []dispatch.Comment{{Author: "alice", Body: "Use {{ .Theme }} literally."}}
	o.TokenFile = dispatch.TokenPath
	o.SecretEnv = []string{"API_KEY"}
	o.Config = sandboxcfg.MustResolve(sandboxcfg.Config{Name: "web", Harness: "command", Command: "true"})
	raw, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{fmt.Sprintf(`"schema_version":%d`, dispatch.WorkOrderVersion), `"task_id":"T-0123ABCD"`, `"token_file":"/sandbox/secrets/token"`, `"output_dir":"/sandbox/out"`} {
		if !strings.Contains(string(raw), key) {
			t.Errorf("work order JSON lacks %s: %s", key, raw)
		}
	}
	var back dispatch.WorkOrder
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if back.Task.Comments[0].Body != o.Task.Comments[0].Body || back.Config.Command != "true" || back.Plan != o.Plan {
		t.Errorf("round trip changed the order: %+v", back)
	}
	if err := back.Validate(); err != nil {
		t.Error(err)
	}
}

func TestResultRoundTripKeepsEveryStatus(t *testing.T) {
	t.Parallel()
	for _, st := range []dispatch.Status{
		dispatch.StatusCompleted, dispatch.StatusFailed, dispatch.StatusInterrupted,
		dispatch.StatusTimeout, dispatch.StatusBudgetExceeded, dispatch.StatusHung,
	} {
		dir := t.TempDir()
		in := &dispatch.Result{TaskID: "T-0123ABCD", Mode: dispatch.ModeExecute, Status: st,
			TokenUsage: dispatch.TokenUsage{Input: 10, Output: 5, TotalCostUSD: 0.25, Steps: 2}}
		if st != dispatch.StatusCompleted {
			in.Error = &dispatch.RunError{Message: "stopped: " + string(st)}
		}
		if err := dispatch.WriteResult(dir, in); err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(filepath.Join(dir, dispatch.ResultFile))
		if err != nil {
			t.Fatal(err)
		}
		// Empty lists are written as [] so readers in other languages
		// need no null checks.
		for _, key := range []string{`"commits": []`, `"validation": []`, `"repairs": []`, `"screenshot_paths": []`, `"recording_paths": []`} {
			if !strings.Contains(string(raw), key) {
				t.Errorf("%s: result.json lacks %s", st, key)
			}
		}
		out, err := dispatch.ParseResult(raw)
		if err != nil {
			t.Fatalf("%s: %v", st, err)
		}
		if out.Status != st || out.SchemaVersion != dispatch.ResultVersion || out.TaskID != in.TaskID || out.TokenUsage != in.TokenUsage {
			t.Errorf("%s: read back %+v", st, out)
		}
		if (out.Error == nil) != (in.Error == nil) {
			t.Errorf("%s: error %+v, wrote %+v", st, out.Error, in.Error)
		}
		if left, _ := filepath.Glob(filepath.Join(dir, ".result-*")); len(left) != 0 {
			t.Errorf("%s: temporary files left: %v", st, left)
		}
	}
}

func TestParseResultRejectsOtherSchemasAndBadJSON(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		`{"schema_version":2,"task_id":"T-0123ABCD","status":"completed"}`: "schema_version 2",
		`{"task_id":"T-0123ABCD","status":"completed"}`:                    "schema_version 0",
		`{"schema_version":1,`: "decode result.json",
		`not json`:             "decode result.json",
	} {
		if _, err := dispatch.ParseResult([]byte(raw)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseResult(%s) = %v, want an error naming %q", raw, err, want)
		}
	}
}

func TestParseProgress(t *testing.T) {
	t.Parallel()
	p, ok := dispatch.ParseProgress([]byte(`{"event":"progress","task_id":"T-0123ABCD","stage":"push","message":"pushed","branch":"agent/x","head_sha":"abc"}`))
	if !ok || p.Stage != "push" || p.Branch != "agent/x" || p.HeadSHA != "abc" {
		t.Errorf("progress line = %+v, %v", p, ok)
	}
	for _, line := range []string{``, `plain log line`, `{"level":"info","message":"runner started"}`, `{"event":"progress"`, ` {"event":"progress"}`} {
		if _, ok := dispatch.ParseProgress([]byte(line)); ok {
			t.Errorf("%q taken for a progress line", line)
		}
	}
}

func TestTokenUsageAdd(t *testing.T) {
	t.Parallel()
	u := dispatch.TokenUsage{Input: 1, Output: 2, Reasoning: 3, CacheRead: 4, CacheWrite: 5, TotalCostUSD: 0.5, Steps: 1}
	u.Add(dispatch.TokenUsage{Input: 10, Output: 20, Reasoning: 30, CacheRead: 40, CacheWrite: 50, TotalCostUSD: 0.25, Steps: 2})
	if want := (dispatch.TokenUsage{Input: 11, Output: 22, Reasoning: 33, CacheRead: 44, CacheWrite: 55, TotalCostUSD: 0.75, Steps: 3}); u != want {
		t.Errorf("sum = %+v, want %+v", u, want)
	}
}
