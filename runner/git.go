package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/dotenv"
)

// Git runs git for one checkout, on two sides of a trust boundary.
//
// The checkout (Dir) belongs to the agent: every git command that reads or
// writes it runs as the agent's user, because its .git/config and hooks are
// the agent's to write (core.fsmonitor, core.hooksPath, diff.external...)
// and would run code as whoever runs git there. Its origin is the mirror,
// which the agent can read but not write: it has no remote it could push to.
//
// The network side is a bare mirror the runner owns (stateDir/mirror.git):
// clone, fetch and push run there as the runner, with the runner's own
// configuration. A push names the agent's commit by sha and reads its
// objects from the checkout through GIT_ALTERNATE_OBJECT_DIRECTORIES, which
// is object data only: nothing of the agent's configuration is read by a
// process that can read the token. Authentication is a credential helper
// that reads the token file on every call: the token is never in a URL, an
// argument, an environment variable or a config file, and a token the bot
// refreshed mid-run is used at once.
type Git struct {
	Dir    string
	mirror string
	// env is the environment of git on the agent's side; shared is the
	// part the agent and the checks get as well; netEnv is the runner's.
	env    []string
	shared []string
	netEnv []string
	// helper is the credential helper script; empty without a token file.
	helper string
	agent  *AgentUser
	red    *Redactor
	// head is HEAD as last read (githead.go).
	head headCache
}

// gitPaths are where gitSetup puts things.
type gitPaths struct {
	State   string // readable by the agent: the git identity file, the mirror
	Private string // the runner's only: the credential helper
	Dir     string // the agent's checkout
}

// gitSetup writes the runner's git configuration and returns a Git. The
// identity goes in a system-level file (GIT_CONFIG_SYSTEM, i.e. what `git
// config --system` writes) that also includes the image's /etc/gitconfig,
// so the agent's own commits get the same identity. runnerEnv is the
// runner's environment, agentBase the agent's (without the runner's
// secrets).
func gitSetup(p gitPaths, runnerEnv, agentBase []string, tokenFile, name, email string, agent *AgentUser, red *Redactor) (*Git, error) {
	sysFile := filepath.Join(p.State, "gitconfig")
	strip := func(env []string) []string {
		return dotenv.Without(env, "GIT_CONFIG_SYSTEM", "GIT_DIR", "GIT_WORK_TREE", "GIT_ASKPASS", "SSH_ASKPASS", "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_OBJECT_DIRECTORY")
	}
	ours := []string{"GIT_CONFIG_SYSTEM=" + sysFile, "GIT_TERMINAL_PROMPT=0", "GIT_EDITOR=true"}
	// What the agent and the checks get too: the identity, no prompts, no
	// editor that would wait for a person.
	shared := append(strip(agentBase), ours...)
	// The runner parses git's output, so its own calls run untranslated.
	g := &Git{
		Dir: p.Dir, mirror: filepath.Join(p.State, "mirror.git"),
		env:    append(append([]string(nil), shared...), "LC_ALL=C"),
		shared: shared,
		netEnv: append(append(strip(runnerEnv), ours...), "LC_ALL=C"),
		agent:  agent, red: red,
	}
	// The file `git config --system` would write, written at once: the
	// runner starts several git processes per step and each spawn counts
	// in its overhead over the agent.
	var conf strings.Builder
	if _, err := os.Stat("/etc/gitconfig"); err == nil {
		conf.WriteString("[include]\n\tpath = /etc/gitconfig\n")
	}
	fmt.Fprintf(&conf, "[user]\n\tname = %s\n\temail = %s\n", gitQuote(name), gitQuote(email))
	conf.WriteString("[init]\n\tdefaultBranch = main\n[advice]\n\tdetachedHead = false\n[safe]\n\tdirectory = *\n")
	// The checkout and the mirror live as long as the sandbox: housekeeping
	// (`git gc --auto`, `git maintenance run --auto` after commits, fetches
	// and pushes) would only spend the run's CPU on repositories about to
	// be thrown away.
	conf.WriteString("[gc]\n\tauto = 0\n[maintenance]\n\tauto = false\n")
	if err := os.WriteFile(sysFile, []byte(conf.String()), 0o644); err != nil {
		return nil, fmt.Errorf("git: write %s: %w", sysFile, err)
	}
	if tokenFile != "" {
		abs, err := filepath.Abs(tokenFile)
		if err != nil {
			return nil, err
		}
		g.helper = filepath.Join(p.Private, "git-credential-sandbox")
		script := "#!/bin/sh\n" +
			"# git credential helper of sandbox-runner: answers `get` with the token\n" +
			"# read from the token file now, so a refreshed token works mid-run.\n" +
			"[ \"$1\" = get ] || exit 0\n" +
			"token=$(cat " + shellQuote(abs) + ") || exit 1\n" +
			"printf 'username=x-access-token\\npassword=%s\\n' \"$token\"\n"
		if err := os.WriteFile(g.helper, []byte(script), 0o700); err != nil {
			return nil, fmt.Errorf("git: write credential helper: %w", err)
		}
	}
	return g, nil
}

// Env is the environment the agent and checks get for git: the identity,
// but not the credential helper (the agent does not push).
func (g *Git) Env() []string { return g.shared }

// run runs git in dir (g.Dir when empty) as the agent and returns trimmed
// stdout. The error carries git's stderr, redacted.
func (g *Git) run(ctx context.Context, dir string, args ...string) (string, error) {
	out, err := g.raw(ctx, dir, args...)
	return strings.TrimSpace(out), err
}

// raw is run without trimming (porcelain output starts with a space).
func (g *Git) raw(ctx context.Context, dir string, args ...string) (string, error) {
	if dir == "" {
		dir = g.Dir
	}
	return g.exec(ctx, dir, g.env, g.agent, nil, args...)
}

func (g *Git) exec(ctx context.Context, dir string, env []string, as *AgentUser, stdin io.Reader, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	as.apply(cmd)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = strings.TrimSpace(stdout.String())
		}
		return stdout.String(), &GitError{Args: g.red.String(strings.Join(args, " ")), Output: g.red.String(tail(msg, 2000)), Err: err}
	}
	return stdout.String(), nil
}

// GitError is a failed git command.
type GitError struct {
	Args   string
	Output string
	Err    error
}

func (e *GitError) Error() string {
	if e.Output == "" {
		return fmt.Sprintf("git %s: %v", e.Args, e.Err)
	}
	return fmt.Sprintf("git %s: %v: %s", e.Args, e.Err, e.Output)
}

func (e *GitError) Unwrap() error { return e.Err }

// Checkout makes branch point at start and checks it out.
func (g *Git) Checkout(ctx context.Context, branch, start string) error {
	_, err := g.run(ctx, "", "checkout", "--quiet", "-B", branch, start)
	return err
}

// RevParse resolves a revision to a sha.
func (g *Git) RevParse(ctx context.Context, rev string) (string, error) {
	return g.run(ctx, "", "rev-parse", "--verify", "--quiet", rev+"^{commit}")
}

// Dirty lists changed and untracked (not ignored) paths.
func (g *Git) Dirty(ctx context.Context) ([]string, error) {
	out, err := g.raw(ctx, "", "status", "--porcelain", "--untracked-files=all")
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if len(l) > 3 {
			paths = append(paths, l[3:])
		}
	}
	return paths, nil
}

// CommitAll stages everything and commits it; it returns the new sha, or ""
// when there was nothing to commit. Hooks are skipped: a repository's
// pre-commit hook must not decide whether the agent's work is saved.
func (g *Git) CommitAll(ctx context.Context, msg string) (string, error) {
	dirty, err := g.Dirty(ctx)
	if err != nil || len(dirty) == 0 {
		return "", err
	}
	if _, err := g.run(ctx, "", "add", "--all"); err != nil {
		return "", err
	}
	if _, err := g.run(ctx, "", "commit", "--quiet", "--no-verify", "--allow-empty-message", "-m", msg); err != nil {
		return "", err
	}
	return g.Head(ctx)
}

// CommitPaths commits only paths (the media commit must not sweep up
// anything else); "" when they hold no change.
func (g *Git) CommitPaths(ctx context.Context, msg string, paths ...string) (string, error) {
	if _, err := g.run(ctx, "", append([]string{"add", "--all", "--"}, paths...)...); err != nil {
		return "", err
	}
	if _, err := g.run(ctx, "", "diff", "--cached", "--quiet"); err == nil {
		return "", nil
	}
	if _, err := g.run(ctx, "", "commit", "--quiet", "--no-verify", "-m", msg); err != nil {
		return "", err
	}
	return g.Head(ctx)
}

// Untracked lists untracked, not ignored files.
func (g *Git) Untracked(ctx context.Context) ([]string, error) {
	out, err := g.raw(ctx, "", "ls-files", "-z", "--others", "--exclude-standard")
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, p := range strings.Split(out, "\x00") {
		if p != "" {
			paths = append(paths, p)
		}
	}
	return paths, nil
}

// Log returns the commits in from..head, oldest first.
func (g *Git) Log(ctx context.Context, from, head string) ([]dispatch.Commit, error) {
	rng := head
	if from != "" {
		rng = from + ".." + head
	}
	out, err := g.run(ctx, "", "log", "--reverse", "--format=%H%x00%s", rng)
	if err != nil {
		return nil, err
	}
	var commits []dispatch.Commit
	for _, l := range strings.Split(out, "\n") {
		sha, subject, ok := strings.Cut(l, "\x00")
		if ok {
			commits = append(commits, dispatch.Commit{SHA: sha, Message: g.red.String(subject)})
		}
	}
	return commits, nil
}

// History is a readable log of from..HEAD for prompts.
func (g *Git) History(ctx context.Context, from string, max int) (string, error) {
	return g.run(ctx, "", "log", "--stat", "--format=commit %h%n%s%n%n%b", "-n", strconv.Itoa(max), from+"..HEAD")
}

var shortstat = regexp.MustCompile(`(\d+) files? changed(?:, (\d+) insertions?\(\+\))?(?:, (\d+) deletions?\(-\))?`)

// DiffStats compares head with base.
func (g *Git) DiffStats(ctx context.Context, base, head string) (dispatch.DiffStats, error) {
	out, err := g.run(ctx, "", "diff", "--shortstat", base+"..."+head)
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

// Conflicts lists unmerged paths.
func (g *Git) Conflicts(ctx context.Context) ([]string, error) {
	out, err := g.run(ctx, "", "diff", "--name-only", "--diff-filter=U")
	if err != nil || out == "" {
		return nil, err
	}
	return strings.Split(out, "\n"), nil
}

// RebaseInProgress reports whether a rebase stopped midway.
func (g *Git) RebaseInProgress() bool {
	for _, d := range []string{"rebase-merge", "rebase-apply"} {
		if _, err := os.Stat(filepath.Join(g.Dir, ".git", d)); err == nil {
			return true
		}
	}
	return false
}

// IsAncestor reports whether a is an ancestor of b.
func (g *Git) IsAncestor(ctx context.Context, a, b string) (bool, error) {
	_, err := g.run(ctx, "", "merge-base", "--is-ancestor", a, b)
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 1 {
		return false, nil
	}
	return err == nil, err
}

// Exclude adds gitignore patterns to .git/info/exclude, for files the
// sandbox itself makes in the checkout (.env with resolved secrets, check
// byproducts) that must never be committed, without touching the
// repository's .gitignore.
func (g *Git) Exclude(patterns ...string) error {
	p := filepath.Join(g.Dir, ".git", "info", "exclude")
	text := strings.Join(patterns, "\n") + "\n"
	if g.agent != nil {
		// The checkout is the agent's: the runner cannot write in it.
		cmd := exec.Command("sh", "-c", `mkdir -p "$(dirname "$0")" && cat >> "$0"`, p)
		cmd.Env = g.env
		g.agent.apply(cmd)
		cmd.Stdin = strings.NewReader(text)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("append to %s as %s: %w: %s", p, g.agent.Name, err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString(text)
	return err
}

// literalPattern is a gitignore pattern matching exactly path from the top.
func literalPattern(path string) string {
	var b strings.Builder
	b.WriteByte('/')
	for _, r := range path {
		if strings.ContainsRune(`*?[]\!#`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// gitQuote quotes a git config value.
func gitQuote(s string) string {
	s = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
	return `"` + s + `"`
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

var urlUserinfo = regexp.MustCompile(`://[^/@]+@`)

// redactURL drops credentials someone put in a clone URL against advice.
func redactURL(u string) string { return urlUserinfo.ReplaceAllString(u, "://"+Redacted+"@") }

// tail keeps the last n bytes of s, cut at a line start when possible.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	if i := strings.IndexByte(s, '\n'); i >= 0 && i < len(s)-1 {
		s = s[i+1:]
	}
	return "…\n" + s
}
