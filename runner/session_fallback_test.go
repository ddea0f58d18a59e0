package runner_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/agentsession"
	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// Whatever keeps the plan's session from being resumed, the execute run
// starts a fresh session with the whole task and the plan in its prompt,
// and its receipt says why. The command harness is the agent: it keeps
// the prompt it was given.
func TestExecuteFallsBackToAFreshSession(t *testing.T) {
	t.Parallel()
	good, err := agentsession.Encode(agentsession.Manifest{TaskID: "T-9A8B7C6D", Harness: "opencode", ID: "ses_1", Dir: "/w/repo",
		RepoID: 42, PlanSHA256: agentsession.PlanDigest("1. PLAN-IN-PROMPT: write NOTES.md.")}, []byte("{}"))
	if err != nil {
		t.Fatal(err)
	}
	// A hostile plan agent cannot change the manifest (the runner writes
	// it), but an archive can come from elsewhere: a transferred issue's
	// plan run in another repository, or a session that wrote another plan.
	bound := func(repo int64, plan string) *dispatch.SessionHandoff {
		return &dispatch.SessionHandoff{FromTask: "T-9A8B7C6D", Archive: good, RepoID: repo, PlanSHA256: plan}
	}
	cases := []struct {
		name    string
		session *dispatch.SessionHandoff
		note    string
	}{
		{"none handed over", nil, "fresh: no plan session was handed over"},
		{"backend cannot carry it", &dispatch.SessionHandoff{FromTask: "T-9A8B7C6D", Missing: "the nomad backend does not carry agent sessions"},
			"fresh: the nomad backend does not carry agent sessions"},
		{"archive missing", &dispatch.SessionHandoff{FromTask: "T-9A8B7C6D"}, "fresh: the plan run T-9A8B7C6D left no session archive"},
		{"corrupt archive", &dispatch.SessionHandoff{FromTask: "T-9A8B7C6D", Archive: []byte("\x1f\x8bnot really gzip")},
			"fresh: the session archive does not read: not gzip"},
		{"other harness", &dispatch.SessionHandoff{FromTask: "T-9A8B7C6D", Archive: good}, "fresh: the plan ran with opencode, this run uses command"},
		{"another repository", bound(7, agentsession.PlanDigest("1. PLAN-IN-PROMPT: write NOTES.md.")),
			"fresh: the plan's session was made in another repository (id 42, this run's is 7)"},
		{"another plan", bound(42, agentsession.PlanDigest("1. Something people never approved.")),
			"fresh: the session archive is not the session that wrote the approved plan"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Each case is a whole run on real git (~0.7 s of CPU); the
			// fast tier keeps the first and the last, the full suite all.
			if i != 0 && i != len(cases)-1 {
				testenv.Long(t, "one more whole run on real git")
			}
			t.Parallel()
			remote := runtest.NewRemote(t, projectFiles())
			e := newRunEnv(t, nil)
			promptFile := filepath.Join(t.TempDir(), "prompt.txt")
			o := order(t, remote.URL, dispatch.ModeExecute, commandCfg(`cat > "`+promptFile+`"
echo notes > NOTES.md
echo 'Wrote NOTES.md.'`))
			o.Plan = "1. PLAN-IN-PROMPT: write NOTES.md."
			o.Session = tc.session
			res := run(t, e, o)
			wantStatus(t, res, dispatch.StatusCompleted)
			if s := res.Session; s == nil || s.Resumed || !strings.HasPrefix(s.Note, tc.note) {
				t.Fatalf("session = %+v, want not resumed, note %q", s, tc.note)
			}
			prompt, err := os.ReadFile(promptFile)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"Implement the following task", "Write NOTES.md describing add.sh.", "PLAN-IN-PROMPT"} {
				if !strings.Contains(string(prompt), want) {
					t.Fatalf("fresh prompt lacks %q:\n%s", want, prompt)
				}
			}
		})
	}
}
