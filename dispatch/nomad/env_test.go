package nomad

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// Secrets given to every sandbox travel in the run's Variable and reach the
// task through an env template; the job itself never holds a value.
func TestSandboxEnvIsRenderedFromTheVariable(t *testing.T) {
	t.Parallel()
	o := Options{Image: "sandbox:test", Env: map[string]string{"ANTHROPIC_API_KEY": "sk-canary-123", "HTTPS_PROXY": "http://proxy:3128"}}
	if err := o.setDefaults(); err != nil {
		t.Fatal(err)
	}
	spec := dispatch.RunSpec{
		Meta: dispatch.Meta{TaskID: "T-0000ABCD", Mode: dispatch.ModeExecute, Repo: "o/r", Number: 1},
		Order: dispatch.WorkOrder{SchemaVersion: dispatch.WorkOrderVersion, TaskID: "T-0000ABCD", Mode: dispatch.ModeExecute,
			CloneURL: "https://github.com/o/r.git", TargetBranch: "agent/x", Plan: "p", TimeoutMinutes: 10},
		Token: "ghs_canary",
	}
	job, err := BuildJob(o, spec)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(job)
	if strings.Contains(string(b), "sk-canary-123") || strings.Contains(string(b), "ghs_canary") {
		t.Fatal("a secret value is in the job")
	}
	var tmpl string
	for _, tp := range job.TaskGroups[0].Tasks[0].Templates {
		if tp.Envvars != nil && *tp.Envvars {
			tmpl = *tp.EmbeddedTmpl
		}
	}
	want := `{{ with nomadVar "nomad/jobs/` + *job.ID + `" }}` +
		"ANTHROPIC_API_KEY={{ .env_ANTHROPIC_API_KEY | toJSON }}\nHTTPS_PROXY={{ .env_HTTPS_PROXY | toJSON }}\n{{ end }}"
	if tmpl != want {
		t.Fatalf("env template:\n%s\nwant:\n%s", tmpl, want)
	}
	bad := Options{Image: "x", Env: map[string]string{"BAD-NAME": "v"}}
	if err := bad.setDefaults(); err == nil || !strings.Contains(err.Error(), `"BAD-NAME"`) {
		t.Errorf("invalid names must be refused, got %v", err)
	}
	multi := Options{Image: "x", Env: map[string]string{"K": "a\nb"}}
	if err := multi.setDefaults(); err == nil || !strings.Contains(err.Error(), "newline") {
		t.Errorf("values with newlines must be refused, got %v", err)
	}
}
