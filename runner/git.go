package runner

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
//
// Git is the parts put together (newGit), each one side of that boundary
// doing one thing: the checkout's work tree and commits (gitTree), reading
// its history (gitHistory), reading the mirror from the runner's side
// (gitMirror), and the network: clone, fetch, push (gitRemote). It adds
// nothing of its own; what it offers is gitSeam.
type Git struct {
	*gitTree
	*gitHistory
	*gitMirror
	*gitRemote
}

// gitSeam is the runner's git seam: what the run's stages ask of the
// checkout and its mirror, all of it through Git.
type gitSeam interface {
	// The checkout's work tree and commits, as the agent (gitTree).
	Env() []string
	Checkout(ctx context.Context, branch, start string) error
	RevParse(ctx context.Context, rev string) (string, error)
	Head(ctx context.Context) (string, error)
	Dirty(ctx context.Context) ([]string, error)
	Untracked(ctx context.Context) ([]string, error)
	CommitAll(ctx context.Context, msg string) (string, error)
	CommitPaths(ctx context.Context, msg string, paths ...string) (string, error)
	Conflicts(ctx context.Context) ([]string, error)
	RebaseInProgress() bool
	Exclude(patterns ...string) error
	// The checkout's history (gitHistory).
	Log(ctx context.Context, from, head string) ([]dispatch.Commit, error)
	History(ctx context.Context, from string, max int) (string, error)
	DiffStats(ctx context.Context, base, head string) (dispatch.DiffStats, error)
	IsAncestor(ctx context.Context, a, b string) (bool, error)
	// The mirror and the agent's commits, read as the runner (gitMirror).
	RemoteDefault(ctx context.Context) (string, error)
	RemoteBranch(ctx context.Context, branch string) (string, error)
	Inspect(ctx context.Context, args ...string) (string, error)
	InspectStream(ctx context.Context, read func(io.Reader) error, args ...string) error
	InspectStreamIn(ctx context.Context, stdin io.Reader, read func(io.Reader) error, args ...string) error
	Blobs(ctx context.Context, specs ...string) ([][]byte, error)
	// The remote, as the runner with the token (gitRemote).
	Clone(ctx context.Context, url string) error
	FetchPRHead(ctx context.Context, ref string) (string, error)
	Push(ctx context.Context, sha, branch, lease string) error
}

var _ gitSeam = (*Git)(nil)

// gitConf is what the parts of a Git are made from.
type gitConf struct {
	dir    string // the agent's checkout
	mirror string // the runner's bare mirror
	// env is the environment of git on the agent's side; shared is the
	// part the agent and the checks get as well; netEnv is the runner's.
	env    []string
	shared []string
	netEnv []string
	// helper is the credential helper script; empty without a token file.
	helper string
	agent  *AgentUser
	red    *Redactor
}

// newGit puts a Git together from its parts, each given what it uses.
func newGit(c gitConf) *Git {
	tree := &gitTree{Dir: c.dir, env: c.env, shared: c.shared, agent: c.agent, red: c.red}
	// The agent's objects, read as data by the runner's git.
	objects := filepath.Join(c.dir, ".git", "objects")
	return &Git{
		gitTree:    tree,
		gitHistory: &gitHistory{tree: tree, red: c.red},
		gitMirror:  &gitMirror{dir: c.mirror, env: c.netEnv, objects: objects, red: c.red},
		gitRemote:  &gitRemote{mirror: c.mirror, env: c.netEnv, helper: c.helper, tree: tree, red: c.red},
	}
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
	c := gitConf{
		dir: p.Dir, mirror: filepath.Join(p.State, "mirror.git"),
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
		c.helper = filepath.Join(p.Private, "git-credential-sandbox")
		script := "#!/bin/sh\n" +
			"# git credential helper of sandbox-runner: answers `get` with the token\n" +
			"# read from the token file now, so a refreshed token works mid-run.\n" +
			"[ \"$1\" = get ] || exit 0\n" +
			"token=$(cat " + shellQuote(abs) + ") || exit 1\n" +
			"printf 'username=x-access-token\\npassword=%s\\n' \"$token\"\n"
		if err := os.WriteFile(c.helper, []byte(script), 0o700); err != nil {
			return nil, fmt.Errorf("git: write credential helper: %w", err)
		}
	}
	return newGit(c), nil
}

// execGit runs git in dir with env, as the agent when as is set, and
// returns its stdout. The error carries git's stderr, redacted by red.
func execGit(ctx context.Context, red *Redactor, dir string, env []string, as *AgentUser, stdin io.Reader, args ...string) (string, error) {
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
		return stdout.String(), &GitError{Args: red.String(strings.Join(args, " ")), Output: red.String(tail(msg, 2000)), Err: err}
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
