package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/mattn/go-isatty"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/docker"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

// maxPlanRounds bounds plan revisions, as the bot's /revise does.
const maxPlanRounds = 5

// Exit codes.
const (
	exitOK      = 0
	exitNotDone = 1 // the run ended without completing; the receipt says why
	exitUsage   = 2 // bad flags or configuration; nothing ran
)

// Environment variables the CLI reads.
const (
	envRunner     = "SANDBOX_RUNNER_BIN"
	envDataDir    = "SANDBOX_DATA_DIR"
	envGlobalFile = "SANDBOX_AGENT_CONFIG"
	envTokenVar   = "GITHUB_TOKEN"
	envImage      = "SANDBOX_IMAGE"
	envIsolation  = "SANDBOX_ISOLATION"
	// envDenyNetworks names networks no sandbox may reach (the bot's own
	// SANDBOX_DENY_NETWORKS): "10.0.0.0/8,10.1.2.3:5432".
	envDenyNetworks = "SANDBOX_DENY_NETWORKS"
	// envHostAllow lists the host ports sandboxes may reach through the
	// host wall (the bot's SANDBOX_HOST_ALLOW): "10.0.0.1:3000".
	envHostAllow = "SANDBOX_HOST_ALLOW"
	envProviders = "SANDBOX_PROVIDERS"
	envOpenCode  = "OPENCODE_CONFIG"
)

// defaultImage is what deploy/sandbox/build --local tags.
const defaultImage = "sandbox-bot/sandbox:local"

// defaultPassEnv are the provider keys handed to a sandbox when set.
var defaultPassEnv = []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENROUTER_API_KEY"}

// cli is one invocation of sandbox-agent: it reads the command and its
// flags, resolves the configuration (config.go), brings the backend up
// (backend.go), and hands the runs to runs (run.go), which follow them on
// the terminal.
type cli struct {
	stdin          *bufio.Reader
	stdout, stderr io.Writer
	env            []string
	// interactive is whether a person answers on stdin and reads stdout.
	interactive bool
	// self is how the user ran this program, for the commands it suggests.
	self string
	// dockerAvailable and imageExists probe the engine; tests replace them
	// to play a machine without one.
	dockerAvailable func(ctx context.Context) error
	imageExists     func(ctx context.Context, ref string) error
}

func newCLI(stdin io.Reader, stdout, stderr io.Writer, env []string) *cli {
	tty := func(f any) bool {
		file, ok := f.(*os.File)
		return ok && (isatty.IsTerminal(file.Fd()) || isatty.IsCygwinTerminal(file.Fd()))
	}
	return &cli{
		stdin:           bufio.NewReader(stdin),
		stdout:          stdout,
		stderr:          stderr,
		env:             env,
		interactive:     tty(stdin) && tty(stdout),
		self:            "sandbox-agent",
		dockerAvailable: docker.Available,
		imageExists:     dockerImageExists,
	}
}

func (c *cli) getenv(k string) string {
	for i := len(c.env) - 1; i >= 0; i-- {
		if strings.HasPrefix(c.env[i], k+"=") {
			return c.env[i][len(k)+1:]
		}
	}
	return ""
}

const usage = `sandbox-agent runs the sandbox-bot agent on a git repository from your terminal.

Commands:
  create    plan, then implement a task on a new branch agent/<task-id>-<slug>
  continue  resume an interrupted task on its branch (--task-id, --target-branch)
  revise    apply feedback on an existing branch (--target-branch, --feedback)
  rebase    rebase a branch onto its base, the agent resolving conflicts
  task      non-coding work: artifacts instead of a branch
  validate  check a .sandbox.yml and print the resolved configuration
  quickstart [DIR]  write an example project to try it on (default ./calc)

Run 'sandbox-agent <command> -h' for its flags.
`

func (c *cli) run(ctx context.Context, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(c.stderr, usage)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "validate":
		return c.validate(rest)
	case "quickstart":
		return c.quickstart(rest)
	}
	spec, ok := runCommands()[cmd]
	if !ok {
		fmt.Fprintf(c.stderr, "sandbox-agent: unknown command %q\n\n%s", cmd, usage)
		return exitUsage
	}
	o, err := c.parse(cmd, spec, rest)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintf(c.stderr, "sandbox-agent %s: %v\n", cmd, err)
		return exitUsage
	}
	return c.execute(ctx, spec, o)
}

// options are one invocation's resolved inputs.
type options struct {
	cmd       string
	mode      dispatch.Mode
	repo      string // clone URL (file:// for a local repository)
	repoLabel string // what to show: the path or URL given
	base      string
	target    string
	taskID    string
	task      dispatch.TaskText
	plan      string
	feedback  string
	cfg       *sandboxcfg.Resolved
	sources   []string
	// orgFile is an organisation's .sandbox.yml, beneath the repository's.
	orgFile   string
	backend   string
	dataDir   string
	runner    string
	runnerErr error
	envFile   string
	token     string
	yes       bool
	image     string
	isolation dispatch.Isolation
	// isolationChosen: set by flag or environment, so never overridden.
	isolationChosen bool
	// passEnv are the variables (provider keys) given to a sandbox and
	// redacted as secrets.
	passEnv []string
	// providers are --provider's (and $SANDBOX_PROVIDERS') model providers
	// for the sandbox's model gateway.
	providers []dispatch.ModelProvider
	// outDir is where a run's result.json and artifacts are on this host.
	outDir func(taskID string) string
	// afterRun runs once the result is read (the docker backend keeps the
	// receipt and removes the rest).
	afterRun func(taskID string)
}

type flags struct {
	project, repo, base, task, taskID, target, plan, feedback string
	backend, dataDir, runner, envFile, tokenFile, model       string
	harness, image, isolation, passEnv                        string
	providers                                                 []dispatch.ModelProvider
	budget                                                    float64
	timeout                                                   time.Duration
	yes                                                       bool
}

func (c *cli) flagSet(cmd string, spec runCommand, f *flags) *flag.FlagSet {
	fs := flag.NewFlagSet("sandbox-agent "+cmd, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.StringVar(&f.project, "project", "", "a .sandbox.yml, or a directory holding one, layered over the repository's")
	if cmd != "task" {
		fs.StringVar(&f.repo, "repo", ".", "the repository: a local path or a clone URL")
		fs.StringVar(&f.base, "base", "", "base branch (default: .sandbox.yml branch, else the remote's default)")
	}
	fs.StringVar(&f.task, "task", "", "the task: first line is the title, the rest the body (@FILE reads a file)")
	fs.StringVar(&f.backend, "backend", "auto", "where the runner runs: docker (a sandbox container), process (no isolation), or auto: docker when the engine and the image are there")
	fs.StringVar(&f.image, "image", "", "the sandbox image (default $"+envImage+", else "+defaultImage+")")
	fs.StringVar(&f.isolation, "isolation", "", "docker isolation: privileged, caps for hosts that refuse privileged containers, or gvisor for gVisor's kernel between the sandbox and the host (the runtime runsc; default $"+envIsolation+", else privileged)")
	fs.StringVar(&f.passEnv, "pass-env", "", "comma-separated variables given to the sandbox as secrets (default: those of "+strings.Join(defaultPassEnv, ", ")+" that are set)")
	fs.Func("provider", "a model provider for the sandbox's model gateway, NAME=BASE_URL[,KEY_ENV[,API]] (repeatable; API openai or anthropic); its key reaches the gateway only, never the agent", func(v string) error {
		p, err := dispatch.ParseProvider(v)
		if err != nil {
			return err
		}
		f.providers = append(f.providers, p)
		return nil
	})
	fs.StringVar(&f.dataDir, "data-dir", "", "where runs keep their files (default $"+envDataDir+", else a new temporary directory)")
	fs.StringVar(&f.runner, "runner", "", "the sandbox-runner binary (default $"+envRunner+", next to this binary, or on PATH)")
	fs.StringVar(&f.envFile, "env-file", "", "a .env file applied after every other environment layer")
	fs.StringVar(&f.tokenFile, "token-file", "", "file holding a token for an HTTPS remote (default $"+envTokenVar+")")
	fs.StringVar(&f.model, "model", "", "model for the harness, e.g. anthropic/claude-sonnet-4-5")
	fs.StringVar(&f.harness, "harness", "", "opencode, claude-code or command")
	fs.Float64Var(&f.budget, "budget", 0, "cost ceiling in dollars")
	fs.DurationVar(&f.timeout, "timeout", 0, "wall-clock limit, e.g. 30m")
	if spec.flags != nil {
		spec.flags(fs, f)
	}
	return fs
}

func (c *cli) parse(cmd string, spec runCommand, args []string) (*options, error) {
	mode := spec.mode
	var f flags
	fs := c.flagSet(cmd, spec, &f)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q (quote the task and pass it with --task)", fs.Args())
	}
	o := &options{cmd: cmd, mode: mode, backend: f.backend, base: f.base, target: f.target, envFile: f.envFile, yes: f.yes}
	var err error
	if err := c.dockerOptions(o, f); err != nil {
		return nil, err
	}
	text, err := readArg("--task", f.task)
	if err != nil {
		return nil, err
	}
	if o.plan, err = readArg("--plan", f.plan); err != nil {
		return nil, err
	}
	if o.feedback, err = readArg("--feedback", f.feedback); err != nil {
		return nil, err
	}
	o.task = taskText(text)
	if err := spec.check(o, f); err != nil {
		return nil, err
	}
	if mode != dispatch.ModeTask {
		o.repoLabel = f.repo
		if o.repo, err = cloneURL(f.repo); err != nil {
			return nil, err
		}
	}
	flagsLayer := sandboxcfg.Flags{BudgetUSD: f.budget, Model: f.model, Harness: f.harness}
	if f.timeout > 0 {
		flagsLayer.TimeoutMinutes = int((f.timeout + time.Minute - 1) / time.Minute)
	}
	// The token is read first: a remote's .sandbox.yml may need it.
	tokenFile := f.tokenFile
	if tokenFile != "" {
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		o.token = strings.TrimSpace(string(b))
	} else {
		o.token = c.getenv(envTokenVar)
	}
	o.cfg, o.sources, _, err = c.loadConfig(o, f.project, flagsLayer)
	if err != nil {
		return nil, err
	}
	if mode == dispatch.ModeTask {
		o.cfg.Mode = sandboxcfg.ModeTask
	}
	if o.dataDir, err = c.dataDir(f.dataDir); err != nil {
		return nil, err
	}
	// Only the process backend runs sandbox-runner here; a docker sandbox
	// has its own.
	o.runner, o.runnerErr = c.findRunner(f.runner)
	return o, nil
}

// readArg returns v, or the content of the file when v is @FILE.
func readArg(name, v string) (string, error) {
	if !strings.HasPrefix(v, "@") {
		return v, nil
	}
	b, err := os.ReadFile(v[1:])
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", name, v, err)
	}
	return string(b), nil
}

// taskText splits a task into its title (first line) and body.
func taskText(s string) dispatch.TaskText {
	s = strings.TrimSpace(s)
	title, body, _ := strings.Cut(s, "\n")
	return dispatch.TaskText{Title: strings.TrimSpace(strings.TrimLeft(title, "# ")), Body: strings.TrimSpace(body)}
}

// cloneURL turns a local path into a file:// URL of its repository's top
// level; URLs pass through.
func cloneURL(repo string) (string, error) {
	if strings.Contains(repo, "://") || strings.HasPrefix(repo, "git@") {
		return repo, nil
	}
	abs, err := filepath.Abs(repo)
	if err != nil {
		return "", err
	}
	out, err := exec.Command("git", "-C", abs, "rev-parse", "--show-toplevel").Output()
	if err != nil {
		// A bare repository has no top level but is a fine remote.
		if out, berr := exec.Command("git", "-C", abs, "rev-parse", "--is-bare-repository").Output(); berr == nil && strings.TrimSpace(string(out)) == "true" {
			return "file://" + abs, nil
		}
		return "", fmt.Errorf("--repo %s is not a git repository (give a path inside one, or a clone URL)", repo)
	}
	return "file://" + strings.TrimSpace(string(out)), nil
}
