package runner

import (
	"context"
	"fmt"
	"strings"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/runner/depscan"
)

// depCheck reads the dependency changes of a run that pushes, and checks
// their versions against the operator's OSV database; a value of its own,
// built once the checkout knows its base. The nil *depCheck is a run that
// pushes nothing: no report, no check.
type depCheck struct {
	change change
	// osvDir is the operator's offline OSV database; empty, changes are
	// listed without advisories.
	osvDir string
	log    zerolog.Logger
	// head and deps are the last report, per head.
	head string
	deps *dispatch.Dependencies
}

// dependencies compares the manifests the change touches between the base
// and head, read on the runner's side; nil when the change touches none.
func (d *depCheck) dependencies(ctx context.Context, head string) *dispatch.Dependencies {
	if d == nil {
		return nil
	}
	if d.head == head {
		return d.deps
	}
	changed, err := d.change.files(ctx, head)
	if err != nil {
		d.log.Warn().Err(err).Msg("dependencies: could not list the changed files")
		return nil
	}
	var deps dispatch.Dependencies
	want := depscan.Want{}
	for _, f := range changed {
		eco := depscan.Ecosystem(f)
		if eco == "" {
			continue
		}
		texts, err := d.change.git.Blobs(ctx, d.change.baseSHA+":"+f, head+":"+f)
		if err != nil {
			deps.Errors = append(deps.Errors, clipString(fmt.Sprintf("%s: %v", f, err), 300))
			continue
		}
		before, err1 := depscan.Parse(f, texts[0])
		after, err2 := depscan.Parse(f, texts[1])
		if err := firstErr(err1, err2); err != nil {
			deps.Errors = append(deps.Errors, clipString(fmt.Sprintf("%s: %v", f, err), 300))
			continue
		}
		deps.Changes = append(deps.Changes, depscan.Diff(eco, f, before, after)...)
		for name, vs := range depscan.NewVersions(before, after) {
			if want[eco] == nil {
				want[eco] = map[string][]string{}
			}
			want[eco][name] = append(want[eco][name], vs...)
		}
	}
	d.head, d.deps = head, nil
	if len(deps.Changes) == 0 && len(deps.Errors) == 0 {
		return nil
	}
	d.advisories(&deps, want)
	d.deps = &deps
	return &deps
}

// advisories looks the new versions up in the operator's OSV database.
func (d *depCheck) advisories(deps *dispatch.Dependencies, want depscan.Want) {
	if d.osvDir == "" {
		deps.AdvisoryDB = "none configured"
		return
	}
	if len(want) == 0 {
		deps.AdvisoryDB = "no new pinned versions to look up"
		return
	}
	db, err := depscan.Load(d.osvDir, want)
	if err != nil {
		deps.AdvisoryDB = "unreadable: " + clipString(err.Error(), 200)
		d.log.Warn().Err(err).Msg("dependencies: the OSV database could not be read")
		return
	}
	deps.AdvisoryDB = fmt.Sprintf("OSV, %d advisories", db.Entries)
	for eco, names := range want {
		for name, vs := range names {
			for _, v := range vs {
				deps.Advisories = append(deps.Advisories, db.Advisories(eco, name, v)...)
			}
		}
	}
}

// advisoriesCheck is the built-in check of known advisories; it runs only
// with an OSV database.
func (d *depCheck) check(ctx context.Context) (checkRun, bool) {
	if d == nil || d.osvDir == "" {
		return checkRun{}, false
	}
	c := checkRun{Check: builtinCheck(dispatch.CheckAdvisories, "known advisories (OSV) of the dependency versions the change adds"), Passed: true}
	head, err := d.change.git.Head(ctx)
	if err != nil {
		return c, false
	}
	deps := d.dependencies(ctx, head)
	if deps == nil || len(deps.Advisories) == 0 {
		return c, true
	}
	c.Passed = false
	var b strings.Builder
	b.WriteString("These dependency versions your change adds have known advisories in the operator's OSV database:\n")
	for _, a := range deps.Advisories {
		fmt.Fprintf(&b, "- %s: %s %s (%s)", a.ID, a.Name, a.Version, a.Ecosystem)
		if a.Summary != "" {
			fmt.Fprintf(&b, ": %s", clipString(a.Summary, 200))
		}
		if a.Fixed != "" {
			fmt.Fprintf(&b, "; fixed in %s", a.Fixed)
		}
		b.WriteString("\n")
	}
	b.WriteString("Use versions without them (the fixed ones), in the manifest and its lock file alike, or do without the dependency.")
	c.Tail = b.String()
	return c, true
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
