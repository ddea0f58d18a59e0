package runner

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// The approved plan names the files and areas it will change (the plan
// prompt asks for a "Files" section); the bot keeps that list with the
// plan and hands it to every run that implements it. After the agent's
// work the runner compares the change with it: each entry with the files
// it covers, and every changed file outside it with the agent's one-line
// reason (the prompts ask for an "Outside the approved plan" section).

// Bounds of what a plan's list may hold (the bot keeps it in a marker).
const (
	maxPlanFiles    = 100
	maxPlanPathLen  = 200
	maxPlanNoteLen  = 200
	maxOutsideFiles = 200
)

var (
	headingRE  = regexp.MustCompile(`^\s*(?:#{1,6}\s+|\*\*)(.+?)(?:\*\*)?:?\s*$`)
	bulletRE   = regexp.MustCompile(`^\s*(?:[-*+]|\d+[.)])\s+(.*)$`)
	backtickRE = regexp.MustCompile("`([^`]+)`")
	plainPath  = regexp.MustCompile(`^([A-Za-z0-9_.\-/*]+[/.][A-Za-z0-9_.\-/*]*)`)
)

// ParsePlanFiles reads the "Files" section of a plan: each bullet's first
// code span (or leading path) is an entry, the rest its note.
func ParsePlanFiles(plan string) []dispatch.PlanFile {
	var out []dispatch.PlanFile
	seen := map[string]bool{}
	for _, b := range sectionBullets(plan, func(h string) bool {
		h = strings.ToLower(h)
		return strings.Contains(h, "file") && !strings.Contains(h, "outside")
	}) {
		path, note := bulletPath(b)
		path = strings.TrimPrefix(strings.TrimSpace(path), "./")
		if path == "" || len(path) > maxPlanPathLen || seen[path] || strings.Contains(path, "..") || strings.HasPrefix(path, "/") {
			continue
		}
		seen[path] = true
		out = append(out, dispatch.PlanFile{Path: path, Note: clipString(note, maxPlanNoteLen)})
		if len(out) == maxPlanFiles {
			break
		}
	}
	return out
}

// sectionBullets are the bullets under the first heading want accepts,
// up to the next heading.
func sectionBullets(text string, want func(string) bool) []string {
	var out []string
	in := false
	for _, line := range strings.Split(text, "\n") {
		if m := headingRE.FindStringSubmatch(line); m != nil && !bulletRE.MatchString(line) {
			if in {
				break
			}
			in = want(m[1])
			continue
		}
		if m := bulletRE.FindStringSubmatch(line); in && m != nil {
			out = append(out, m[1])
		}
	}
	return out
}

// bulletPath splits a bullet into its path and the text after it.
func bulletPath(b string) (string, string) {
	if m := backtickRE.FindStringSubmatchIndex(b); m != nil {
		return b[m[2]:m[3]], trimNote(b[m[1]:])
	}
	if m := plainPath.FindStringSubmatch(b); m != nil {
		return m[1], trimNote(b[len(m[1]):])
	}
	return "", ""
}

func trimNote(s string) string {
	return strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(s), "—–-:"))
}

// covers reports whether a plan entry names file: the file itself, a
// directory above it (with or without a trailing slash), or a glob.
func covers(entry, file string) bool {
	entry = strings.TrimSuffix(entry, "/**")
	if strings.ContainsAny(entry, "*?[{") {
		ok, _ := doublestar.Match(entry, file)
		return ok
	}
	entry = strings.TrimSuffix(entry, "/")
	return file == entry || strings.HasPrefix(file, entry+"/")
}

// outsideReasons reads an agent's "Outside the approved plan" section:
// file → its one-line reason.
func outsideReasons(text string, into map[string]string) {
	for _, b := range sectionBullets(text, func(h string) bool {
		return strings.Contains(strings.ToLower(h), "outside the")
	}) {
		if path, note := bulletPath(b); path != "" && note != "" {
			into[strings.TrimPrefix(path, "./")] = clipString(note, maxPlanNoteLen)
		}
	}
}

// planScope compares changed with the plan's entries.
func planScope(entries []dispatch.PlanFile, changed []string, reasons map[string]string, strict bool) *dispatch.PlanScope {
	ps := &dispatch.PlanScope{Strict: strict}
	for _, e := range entries {
		item := dispatch.PlanItem{Path: e.Path, Note: e.Note}
		for _, f := range changed {
			if covers(e.Path, f) {
				item.Changed = append(item.Changed, f)
			}
		}
		ps.Items = append(ps.Items, item)
	}
	for _, f := range changed {
		if !slices.ContainsFunc(entries, func(e dispatch.PlanFile) bool { return covers(e.Path, f) }) && len(ps.Outside) < maxOutsideFiles {
			ps.Outside = append(ps.Outside, dispatch.OutsideChange{File: f, Reason: reasons[f]})
		}
	}
	return ps
}

// change is what a run's branch changes against its base, read on the
// runner's side (the mirror, never the agent's checkout). The run's media
// directory is left out: the bot's own commit, not the agent's change.
type change struct {
	git     *Git
	baseSHA string
	media   string // the run's media directory (mediaDir)
}

// files are the paths head changes against the base.
func (c change) files(ctx context.Context, head string) ([]string, error) {
	out, err := c.git.Inspect(ctx, "diff", "--name-only", "-z", "--no-renames", "--no-relative", c.baseSHA, head)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, f := range strings.Split(out, "\x00") {
		if f != "" && !strings.HasPrefix(f, c.media+"/") {
			files = append(files, f)
		}
	}
	return files, nil
}

// scopeCheck compares an implementing run's change with the approved
// plan's files, and with plan.strict fails the change outside them; a
// value of its own, built once the checkout knows its base. The nil
// *scopeCheck is a run without a plan to compare with.
type scopeCheck struct {
	change change
	files  []dispatch.PlanFile
	strict bool
	// reasons are the agent's reasons for files outside the plan, filled
	// as its passes end (outsideReasons).
	reasons map[string]string
	// masked shows a file's name as the receipt may (the secret scan's
	// masking).
	masked func(string) string
	log    zerolog.Logger
}

// compare compares head with the approved plan's files.
func (p *scopeCheck) compare(ctx context.Context, head string) *dispatch.PlanScope {
	if p == nil {
		return nil
	}
	changed, err := p.change.files(ctx, head)
	if err != nil {
		p.log.Warn().Err(err).Msg("plan scope: could not list the changed files")
		return nil
	}
	// A secret the scan found in a file's name stays out of every list of
	// the change's files.
	for i, f := range changed {
		changed[i] = p.masked(f)
	}
	return planScope(p.files, changed, p.reasons, p.strict)
}

// check is the built-in check of plan.strict: no change outside the plan's
// files.
func (p *scopeCheck) check(ctx context.Context) (checkRun, bool) {
	if p == nil || !p.strict {
		return checkRun{}, false
	}
	c := checkRun{Check: builtinCheck(dispatch.CheckPlanScope, "plan.strict: only the files the approved plan names"), Passed: true}
	head, err := p.change.git.Head(ctx)
	if err != nil {
		return c, false
	}
	ps := p.compare(ctx, head)
	if ps == nil || len(ps.Outside) == 0 {
		return c, true
	}
	c.Passed = false
	var b strings.Builder
	b.WriteString("This repository's .sandbox.yml sets plan.strict: the change may touch only the files the approved plan names. These are outside it:\n")
	for _, o := range ps.Outside {
		fmt.Fprintf(&b, "- %s\n", o.File)
	}
	base := p.change.baseSHA
	fmt.Fprintf(&b, "Undo your changes to them (`git checkout %s -- FILE`, or delete a file you added), and do the work within the plan's files: ", base[:min(12, len(base))])
	var names []string
	for _, e := range p.files {
		names = append(names, e.Path)
	}
	b.WriteString(strings.Join(clipList(names, 30), ", "))
	c.Tail = b.String()
	return c, true
}
