package runner

import (
	"context"
	"fmt"
	"strings"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/runner/depscan"
)

// depState keeps the last dependency report, per head.
type depState struct {
	head string
	deps *dispatch.Dependencies
}

// dependencies compares the manifests the change touches between the base
// and head, read on the runner's side; nil when the change touches none.
func (r *run) dependencies(ctx context.Context, head string) *dispatch.Dependencies {
	if r.git == nil || !r.pushes {
		return nil
	}
	if r.deps.head == head {
		return r.deps.deps
	}
	changed, err := r.changedFiles(ctx, head)
	if err != nil {
		r.log.Warn().Err(err).Msg("dependencies: could not list the changed files")
		return nil
	}
	var deps dispatch.Dependencies
	want := depscan.Want{}
	for _, f := range changed {
		eco := depscan.Ecosystem(f)
		if eco == "" {
			continue
		}
		texts, err := r.git.Blobs(ctx, r.baseSHA+":"+f, head+":"+f)
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
	if len(deps.Changes) == 0 && len(deps.Errors) == 0 {
		r.deps = depState{head: head}
		return nil
	}
	r.advisories(&deps, want)
	r.deps = depState{head: head, deps: &deps}
	return &deps
}

// advisories looks the new versions up in the operator's OSV database.
func (r *run) advisories(deps *dispatch.Dependencies, want depscan.Want) {
	if r.opts.OSVDir == "" {
		deps.AdvisoryDB = "none configured"
		return
	}
	if len(want) == 0 {
		deps.AdvisoryDB = "no new pinned versions to look up"
		return
	}
	db, err := depscan.Load(r.opts.OSVDir, want)
	if err != nil {
		deps.AdvisoryDB = "unreadable: " + clipString(err.Error(), 200)
		r.log.Warn().Err(err).Msg("dependencies: the OSV database could not be read")
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
func (r *run) advisoriesCheck() (checkRun, bool) {
	if r.opts.OSVDir == "" {
		return checkRun{}, false
	}
	c := checkRun{Check: builtinCheck(dispatch.CheckAdvisories, "known advisories (OSV) of the dependency versions the change adds"), Passed: true}
	head, err := r.git.Head(r.work)
	if err != nil {
		return c, false
	}
	deps := r.dependencies(r.work, head)
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
