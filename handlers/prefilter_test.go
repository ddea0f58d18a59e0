package handlers_test

import (
	"strconv"
	"testing"

	"github.com/rs/zerolog"
	"github.com/valyala/fastjson"

	"github.com/sandbox-bot/sandbox-bot/app/githubtest"
	"github.com/sandbox-bot/sandbox-bot/handlers/webhook"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// The intake drops, before any worker sees them, the deliveries that
// webhook.Adapters.MayAct says no handler acts on. That is only right
// while it is never narrower than the handlers. So every example of every event the
// bot handles in @octokit/webhooks-examples, pointed at a repository the
// fake knows and varied the ways the handlers look at (the trigger label,
// a command, a writer, another App, an agent branch, a base-branch push,
// the bot's check run), is sorted by the filter; each one it drops is then
// given to the handler itself, which must return without error and
// without a single request to GitHub or a run.
func TestPreFilterDropsOnlyWhatHandlersIgnore(t *testing.T) {
	testenv.Long(t, "runs every @octokit/webhooks-examples payload through the handlers (about 7 s)")
	t.Parallel()
	index := githubtest.Examples(t)
	h := newHarness(t, nil, nil)
	base := h.srv.Base()
	variants := prefilterVariants(base.TriggerLabel, base.CheckName)
	ctx := zerolog.Nop().WithContext(t.Context())

	var p fastjson.Parser
	h.idle() // the start's own reads (the routines of every repository) are done
	start := len(h.gh.Requests())
	hooks := webhook.New(base.Entry())
	for _, handler := range hooks.Handlers() {
		for _, event := range handler.Handles() {
			kept, dropped := 0, 0
			for i, example := range index[event] {
				for name, mutate := range variants {
					for _, sender := range []string{writer, reader, "other-app[bot]"} {
						payload := h.gh.PayloadFrom(example, testRepo, sender, mutate)
						v, err := p.ParseBytes(payload)
						if err != nil {
							t.Fatal(err)
						}
						if hooks.MayAct(event, v) {
							kept++
							continue
						}
						dropped++
						what := event + " example " + strconv.Itoa(i) + " (" + name + ", sender " + sender + ")"
						before, runs := len(h.gh.Requests()), len(h.backend.Specs())
						if err := handler.Handle(ctx, event, "prefilter-"+strconv.Itoa(dropped), payload); err != nil {
							t.Errorf("%s: the pre-filter drops it, but the handler returned %v", what, err)
						}
						if reqs := h.gh.Requests()[before:]; len(reqs) > 0 {
							t.Errorf("%s: the pre-filter drops it, but the handler called GitHub: %s %s", what, reqs[0].Method, reqs[0].Path)
						}
						if got := len(h.backend.Specs()); got != runs {
							t.Errorf("%s: the pre-filter drops it, but the handler started a run", what)
						}
					}
				}
			}
			t.Logf("%s: %d examples; the pre-filter keeps %d variants and drops %d", event, len(index[event]), kept, dropped)
			if event != "installation" && event != "installation_repositories" && (kept == 0 || dropped == 0) {
				t.Errorf("%s: the pre-filter keeps %d variants and drops %d: want some of each, or this test checks nothing", event, kept, dropped)
			}
		}
	}
	// Nothing a dropped event's handler left running calls GitHub later.
	h.idle()
	if reqs := h.gh.Requests()[start:]; len(reqs) > 0 {
		t.Errorf("after the dropped events, GitHub got %d requests, first %s %s", len(reqs), reqs[0].Method, reqs[0].Path)
	}
}

// prefilterVariants are the ways a recorded example is changed before the
// filter and the handler see it: each touches what some handler tests.
func prefilterVariants(label, checkName string) map[string]func(map[string]any) {
	set := func(m map[string]any, key string, kv ...any) {
		obj, ok := m[key].(map[string]any)
		if !ok {
			return
		}
		for i := 0; i+1 < len(kv); i += 2 {
			obj[kv[i].(string)] = kv[i+1]
		}
	}
	one := map[string]func(map[string]any){
		"trigger label": func(m map[string]any) { set(m, "label", "name", label) },
		"command": func(m map[string]any) {
			set(m, "comment", "body", "/plan")
			set(m, "review", "body", "/revise add tests")
		},
		"changes requested": func(m map[string]any) {
			set(m, "review", "state", "changes_requested", "body", "please add tests")
		},
		"agent branch": func(m map[string]any) {
			if pr, ok := m["pull_request"].(map[string]any); ok {
				set(pr, "head", "ref", "agent/T-0A1B2C3D-fix")
			}
			set(m, "check_suite", "head_branch", "agent/T-0A1B2C3D-fix")
			if _, ok := m["branches"].([]any); ok {
				m["branches"] = []any{map[string]any{"name": "agent/T-0A1B2C3D-fix"}}
			}
		},
		"failed": func(m map[string]any) {
			set(m, "check_suite", "status", "completed", "conclusion", "failure")
			if _, ok := m["sha"]; ok {
				m["state"] = "failure"
			}
		},
		"base push":  func(m map[string]any) { m["ref"], m["deleted"] = "refs/heads/main", false },
		"agent push": func(m map[string]any) { m["ref"] = "refs/heads/agent/T-0A1B2C3D-fix" },
		"bot check": func(m map[string]any) {
			set(m, "check_run", "name", checkName, "external_id", "T-0A1B2C3D:octo-org/hello#1:plan")
		},
	}
	out := map[string]func(map[string]any){"as recorded": nil}
	all := []func(map[string]any){}
	for name, f := range one {
		out[name] = f
		all = append(all, f)
	}
	out["all at once"] = func(m map[string]any) {
		for _, f := range all {
			f(m)
		}
	}
	return out
}
