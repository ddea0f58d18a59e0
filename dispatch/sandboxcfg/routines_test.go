package sandboxcfg_test

import (
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

// A bad routine is reported with its line and column and leaves the other
// routines, and the rest of the file, usable.
func TestRoutinesBadEntryNeverStopsTheOthers(t *testing.T) {
	file := `harness: opencode
routines:
  - name: nightly
    schedule: "0 3 * * *"
    timezone: America/New_York
    task: Sweep the TODOs.
  - name: broken
    schedule: "61 * * * *"
    task: never
  - name: zoned
    schedule: "@daily"
    timezone: Mars/Olympus
    task: never
  - name: red
    on: main_ci_failed
    task: Fix the default branch.
  - name: nightly
    schedule: "0 4 * * *"
    task: a second nightly
  - name: Bad Name
    schedule: "0 4 * * *"
    task: x
  - name: both
    schedule: "0 4 * * *"
    on: main_ci_failed
    task: x
  - name: typo
    schedul: "0 4 * * *"
    task: x
`
	c, err := sandboxcfg.Parse(".sandbox.yml", []byte(file))
	if err != nil {
		t.Fatalf("Parse failed on bad routines: %v", err)
	}
	if names := routineNames(c.Routines); names != "nightly red" {
		t.Errorf("Parse kept routines %q, want the valid ones: nightly red", names)
	}
	got, errs := sandboxcfg.ParseRoutines(".sandbox.yml", []byte(file))
	if names := routineNames(got); names != "nightly red" {
		t.Errorf("ParseRoutines kept %q, want nightly red", names)
	}
	want := []string{
		`.sandbox.yml:8:15: routines[1].schedule: not a five-field cron line`,
		`.sandbox.yml:12:15: routines[2].timezone: not an IANA time zone`,
		`.sandbox.yml:17:11: routines[4].name: another routine is named "nightly"`,
		`.sandbox.yml:20:11: routines[5].name: routine names are lower-case`,
		`.sandbox.yml:25:9: routines[6].on: a routine has a schedule or an on, not both`,
		`.sandbox.yml:28:5: routines[7].schedul: unknown field (did you mean "schedule"?)`,
	}
	if len(errs) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(want), errs)
	}
	for i, w := range want {
		if !strings.HasPrefix(errs[i].Error(), w) {
			t.Errorf("error %d = %q, want it to start %q", i, errs[i], w)
		}
	}
}

// A file that is broken elsewhere still gives its routines; a syntax error
// gives its line.
func TestRoutinesReadApartFromTheRestOfTheFile(t *testing.T) {
	got, errs := sandboxcfg.ParseRoutines(".sandbox.yml", []byte("harnes: x\nroutines:\n  - {name: a, schedule: '* * * * *', task: t}\n"))
	if len(errs) != 0 || routineNames(got) != "a" {
		t.Errorf("ParseRoutines = %v, %v; want routine a and no error", got, errs)
	}
	_, errs = sandboxcfg.ParseRoutines(".sandbox.yml", []byte("routines:\n  - name: [\n"))
	if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), ".sandbox.yml:") {
		t.Errorf("syntax error = %v, want one error with its place", errs)
	}
}

// An organisation's routine applies where the repository has none of the
// same name and its repositories list names it (or is empty).
func TestRoutinesForRepo(t *testing.T) {
	org := sandboxcfg.Routines{{Name: "deps"}, {Name: "docs", Repositories: []string{"Web"}}, {Name: "mine"}}
	own := sandboxcfg.Routines{{Name: "mine", Task: "own"}}
	if got := routineNames(sandboxcfg.ForRepo(org, own, "web")); got != "mine deps docs" {
		t.Errorf("web: %q", got)
	}
	if got := routineNames(sandboxcfg.ForRepo(org, own, "api")); got != "mine deps" {
		t.Errorf("api: %q", got)
	}
}

func routineNames(rs sandboxcfg.Routines) string {
	var n []string
	for _, r := range rs {
		n = append(n, r.Name)
	}
	return strings.Join(n, " ")
}
