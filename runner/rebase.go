package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// rebase brings the branch onto the latest base, giving conflicts to the
// agent, then validates and force-pushes with a lease.
func (r *run) rebase() error {
	up, err := r.ws.git.IsAncestor(r.work, "origin/"+r.ws.baseBranch, "HEAD")
	if err != nil {
		return err
	}
	if up {
		r.prog.emit(dispatch.Progress{Stage: "rebase", Message: "already up to date with " + r.ws.baseBranch})
		return nil
	}
	r.prog.emit(dispatch.Progress{Stage: "rebase", Message: "rebasing onto " + r.ws.baseBranch})
	_, rerr := r.ws.git.run(r.work, "", "rebase", "origin/"+r.ws.baseBranch)
	const maxRounds = 20
	for round := 1; rerr != nil; round++ {
		conflicts, err := r.ws.git.Conflicts(r.work)
		if err != nil {
			return err
		}
		if len(conflicts) == 0 {
			return fmt.Errorf("rebase onto %s: %w", r.ws.baseBranch, rerr)
		}
		if round > maxRounds {
			return failed("rebase still conflicts after %d rounds of resolution", maxRounds)
		}
		r.prog.emit(dispatch.Progress{Stage: "rebase", Message: fmt.Sprintf("conflicts in %s", strings.Join(clipList(conflicts, 5), ", "))})
		data := r.promptData()
		data.Conflicts = conflicts
		data.Continuing = r.ag.session != ""
		prompt, err := render(r.opts.Templates, r.spec.prompt, data)
		if err != nil {
			return err
		}
		out, aerr := r.ag.agent(agentSpec{Stage: "rebase", Prompt: prompt, SessionID: r.ag.session})
		if aerr != nil {
			return aerr
		}
		if !out.OK() {
			return failed("resolving rebase conflicts: %s", out.Problem())
		}
		if left := filesWithMarkers(r.ws.dir, conflicts); len(left) > 0 {
			return failed("the agent left conflict markers in %s", strings.Join(left, ", "))
		}
		if _, err := r.ws.git.run(r.work, "", "add", "--all"); err != nil {
			return err
		}
		_, rerr = r.ws.git.run(r.work, "", "-c", "core.editor=true", "rebase", "--continue")
	}
	r.log.Info().Msg("rebase done")
	if err := r.validateAndRepair(true); err != nil {
		return err
	}
	return r.br.push(r.work)
}

// filesWithMarkers returns the files that still hold conflict markers.
func filesWithMarkers(dir string, files []string) []string {
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "<<<<<<< ") || strings.HasPrefix(l, ">>>>>>> ") || l == "=======" {
				out = append(out, f)
				break
			}
		}
	}
	return out
}
