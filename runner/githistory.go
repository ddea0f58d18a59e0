package runner

import (
	"context"
	"errors"
	"os/exec"
	"regexp"
	"strconv"
	"strings"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// gitHistory reads the checkout's history: its commits, their diff
// against the base, which commit comes before which. Like the work tree,
// it is read as the agent.
type gitHistory struct {
	tree *gitTree
	red  *Redactor
}

// Log returns the commits in from..head, oldest first.
func (h *gitHistory) Log(ctx context.Context, from, head string) ([]dispatch.Commit, error) {
	rng := head
	if from != "" {
		rng = from + ".." + head
	}
	out, err := h.tree.run(ctx, "", "log", "--reverse", "--format=%H%x00%s", rng)
	if err != nil {
		return nil, err
	}
	var commits []dispatch.Commit
	for _, l := range strings.Split(out, "\n") {
		sha, subject, ok := strings.Cut(l, "\x00")
		if ok {
			commits = append(commits, dispatch.Commit{SHA: sha, Message: h.red.String(subject)})
		}
	}
	return commits, nil
}

// History is a readable log of from..HEAD for prompts.
func (h *gitHistory) History(ctx context.Context, from string, max int) (string, error) {
	return h.tree.run(ctx, "", "log", "--stat", "--format=commit %h%n%s%n%n%b", "-n", strconv.Itoa(max), from+"..HEAD")
}

var shortstat = regexp.MustCompile(`(\d+) files? changed(?:, (\d+) insertions?\(\+\))?(?:, (\d+) deletions?\(-\))?`)

// DiffStats compares head with base.
func (h *gitHistory) DiffStats(ctx context.Context, base, head string) (dispatch.DiffStats, error) {
	out, err := h.tree.run(ctx, "", "diff", "--shortstat", base+"..."+head)
	if err != nil {
		return dispatch.DiffStats{}, err
	}
	m := shortstat.FindStringSubmatch(out)
	if m == nil {
		return dispatch.DiffStats{}, nil
	}
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	return dispatch.DiffStats{FilesChanged: atoi(m[1]), Insertions: atoi(m[2]), Deletions: atoi(m[3])}, nil
}

// IsAncestor reports whether a is an ancestor of b.
func (h *gitHistory) IsAncestor(ctx context.Context, a, b string) (bool, error) {
	_, err := h.tree.run(ctx, "", "merge-base", "--is-ancestor", a, b)
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 1 {
		return false, nil
	}
	return err == nil, err
}
