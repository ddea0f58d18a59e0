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
	"strconv"
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
	envProviders  = "SANDBOX_PROVIDERS"
	envOpenCode   = "OPENCODE_CONFIG"
)

// defaultImage is what deploy/sandbox/build --local tags.
const defaultImage = "sandbox-bot/sandbox:local"

// defaultPassEnv are the provider keys handed to a sandbox when set.
var defaultPassEnv = []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENROUTER_API_KEY"}

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
	var mode dispatch.Mode
	switch cmd {
	case "create":
		mode = dispatch.ModeExecute
	case "continue":
		mode = dispatch.ModeContinue
	case "revise":
		mode = dispatch.ModeRevise
	case "rebase":
		mode = dispatch.ModeRebase
	case "task":
		mode = dispatch.ModeTask
	case "validate":
		return c.validate(rest)
	case "quickstart":
		return c.quickstart(rest)
	default:
		fmt.Fprintf(c.stderr, "sandbox-agent: unknown command %q\n\n%s", cmd, usage)
		return exitUsage
	}
	o, err := c.parse(cmd, mode, rest)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintf(c.stderr, "sandbox-agent %s: %v\n", cmd, err)
		return exitUsage
	}
	return c.execute(ctx, o)
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
	cfg       *sandboxcfg.Config
	sources   []string
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

func (c *cli) flagSet(cmd string, f *flags) *flag.FlagSet {
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
	fs.StringVar(&f.isolation, "isolation", "", "docker isolation: privileged, or caps for hosts that refuse privileged containers (default $"+envIsolation+", else privileged)")
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
	switch cmd {
	case "create":
		fs.BoolVar(&f.yes, "yes", false, "execute the first plan without asking, even on a terminal")
	case "continue":
		fs.StringVar(&f.taskID, "task-id", "", "the interrupted task's id (T-XXXXXXXX)")
		fs.StringVar(&f.target, "target-branch", "", "the branch the task was working on")
		fs.StringVar(&f.plan, "plan", "", "the approved plan (@FILE reads a file)")
	case "revise":
		fs.StringVar(&f.target, "target-branch", "", "the branch to revise")
		fs.StringVar(&f.feedback, "feedback", "", "the review feedback (@FILE reads a file)")
	case "rebase":
		fs.StringVar(&f.target, "target-branch", "", "the branch to rebase")
	}
	return fs
}

func (c *cli) parse(cmd string, mode dispatch.Mode, args []string) (*options, error) {
	var f flags
	fs := c.flagSet(cmd, &f)
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
	switch cmd {
	case "create", "task":
		if o.task.Title == "" {
			return nil, errors.New("--task is required")
		}
	case "continue":
		if !dispatch.ValidTaskID(f.taskID) {
			return nil, fmt.Errorf("--task-id %q is not a task id (T-XXXXXXXX, printed by create)", f.taskID)
		}
		o.taskID = f.taskID
		if f.target == "" {
			return nil, errors.New("--target-branch is required")
		}
		if o.task.Title == "" {
			o.task.Title = "Continue " + f.target
		}
	case "revise":
		if f.target == "" || strings.TrimSpace(o.feedback) == "" {
			return nil, errors.New("--target-branch and --feedback are required")
		}
		if o.task.Title == "" {
			o.task.Title = "Revise " + f.target
		}
	case "rebase":
		if f.target == "" {
			return nil, errors.New("--target-branch is required")
		}
		if o.task.Title == "" {
			o.task.Title = "Rebase " + f.target
		}
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
	o.cfg, o.sources, err = c.loadConfig(o, f.project, flagsLayer)
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

// loadConfig layers, lowest first: the repository's .sandbox.yml, the
// --project file, the global file under the user's config directory, then
// the flags. Each file is parsed strictly, so errors carry file:line:col.
func (c *cli) loadConfig(o *options, project string, fl sandboxcfg.Flags) (*sandboxcfg.Config, []string, error) {
	type layer struct {
		file string
		data []byte
	}
	var layers []layer
	if o.repo != "" {
		file, data, err := repoConfig(o.repo)
		if err != nil {
			return nil, nil, err
		}
		if data != nil {
			layers = append(layers, layer{file, data})
		}
	}
	if project != "" {
		p := project
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			p = filepath.Join(p, sandboxcfg.FileName)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, nil, fmt.Errorf("--project: %w", err)
		}
		layers = append(layers, layer{p, data})
	}
	if g := c.globalFile(); g != "" {
		if data, err := os.ReadFile(g); err == nil {
			layers = append(layers, layer{g, data})
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, nil, fmt.Errorf("global config %s: %w", g, err)
		}
	}
	cfg := sandboxcfg.Config{}
	var sources []string
	for _, l := range layers {
		parsed, err := sandboxcfg.Parse(l.file, l.data)
		if err != nil {
			return nil, nil, err
		}
		next, err := sandboxcfg.Resolve(cfg, parsed, l.file, sandboxcfg.Flags{}, sandboxcfg.Limits{})
		if err != nil {
			return nil, nil, err
		}
		cfg = *next
		sources = append(sources, l.file)
	}
	final, err := sandboxcfg.Resolve(cfg, nil, "", fl, sandboxcfg.Limits{})
	if err != nil {
		return nil, nil, err
	}
	return final, sources, nil
}

func (c *cli) globalFile() string {
	if g := c.getenv(envGlobalFile); g != "" {
		return g
	}
	dir := c.getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home := c.getenv("HOME")
		if home == "" {
			return ""
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "sandbox-agent", sandboxcfg.FileName)
}

// repoConfig reads the repository's .sandbox.yml: from the working tree of
// a local repository, or from a shallow clone of a remote one.
func repoConfig(url string) (string, []byte, error) {
	if dir, ok := strings.CutPrefix(url, "file://"); ok {
		if out, err := exec.Command("git", "-C", dir, "rev-parse", "--is-bare-repository").Output(); err == nil && strings.TrimSpace(string(out)) == "false" {
			p := filepath.Join(dir, sandboxcfg.FileName)
			b, err := os.ReadFile(p)
			if errors.Is(err, os.ErrNotExist) {
				return p, nil, nil
			}
			return p, b, err
		}
	}
	tmp, err := os.MkdirTemp("", "sandbox-agent-config-")
	if err != nil {
		return "", nil, err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command("git", "clone", "--quiet", "--depth=1", "--no-checkout", url, tmp)
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", nil, fmt.Errorf("read %s from %s: %v: %s", sandboxcfg.FileName, url, err, strings.TrimSpace(string(out)))
	}
	b, err := exec.Command("git", "-C", tmp, "show", "HEAD:"+sandboxcfg.FileName).Output()
	if err != nil {
		return url + "/" + sandboxcfg.FileName, nil, nil
	}
	return url + "/" + sandboxcfg.FileName, b, nil
}

func (c *cli) dataDir(flagValue string) (string, error) {
	d := flagValue
	if d == "" {
		d = c.getenv(envDataDir)
	}
	if d == "" {
		tmp, err := os.MkdirTemp("", "sandbox-agent-")
		if err != nil {
			return "", err
		}
		return tmp, nil
	}
	return filepath.Abs(d)
}

func (c *cli) findRunner(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	if v := c.getenv(envRunner); v != "" {
		return v, nil
	}
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "sandbox-runner")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath("sandbox-runner"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("sandbox-runner not found: install it next to sandbox-agent, put it on PATH, or pass --runner (go build -o bin/ ./cmd/...)")
}

func (c *cli) execute(ctx context.Context, o *options) int {
	b, done, err := c.newBackend(ctx, o)
	if err != nil {
		fmt.Fprintf(c.stderr, "sandbox-agent: %v\n", err)
		return exitUsage
	}
	defer done()
	if b.Name() == "docker" {
		fmt.Fprintf(c.stderr, "sandbox-agent: workspace %s (receipts stay there; sandboxes are removed after each run)\n", o.dataDir)
	} else {
		fmt.Fprintf(c.stderr, "sandbox-agent: workspace %s (runs, receipts and logs stay there)\n", o.dataDir)
	}
	if len(o.sources) > 0 {
		fmt.Fprintf(c.stderr, "sandbox-agent: configuration from %s\n", strings.Join(o.sources, ", "))
	}
	switch o.cmd {
	case "create":
		return c.create(ctx, b, o)
	default:
		order := c.order(o, o.mode, "")
		if o.taskID != "" {
			// Each run is its own task in the backend; the interrupted
			// task is what this one continues.
			fmt.Fprintf(c.stderr, "sandbox-agent: continuing %s on %s as run %s\n", o.taskID, o.target, order.TaskID)
			order.Attempt = 2
		}
		res, code := c.runOne(ctx, b, o, order)
		if res != nil {
			c.report(o, order, res)
		}
		return code
	}
}

// create plans (when plan.required, the default), lets a person on a
// terminal execute, revise or abort, then executes the approved plan.
func (c *cli) create(ctx context.Context, b dispatch.Backend, o *options) int {
	plan := ""
	if o.cfg.PlanRequired() {
		var feedback string
		for round := 1; ; round++ {
			po := c.order(o, dispatch.ModePlan, "")
			po.Plan, po.Feedback = plan, feedback
			res, code := c.runOne(ctx, b, o, po)
			if res == nil || res.Status != dispatch.StatusCompleted {
				if res != nil {
					c.report(o, po, res)
				}
				return code
			}
			plan = res.Plan
			fmt.Fprintf(c.stdout, "\n%s\n", renderMarkdown(plan, c.interactive))
			if !c.interactive || o.yes {
				fmt.Fprintln(c.stderr, "sandbox-agent: no terminal to ask: executing the plan (it is kept in the receipt)")
				break
			}
			choice, text, err := c.ask(round)
			if err != nil {
				fmt.Fprintf(c.stderr, "sandbox-agent: %v\n", err)
				return exitUsage
			}
			if choice == "abort" {
				fmt.Fprintln(c.stdout, "Aborted; nothing was changed.")
				return exitNotDone
			}
			if choice == "execute" {
				break
			}
			feedback = text
		}
	}
	eo := c.order(o, dispatch.ModeExecute, "")
	eo.Plan = plan
	res, code := c.runOne(ctx, b, o, eo)
	if res != nil {
		c.report(o, eo, res)
	}
	return code
}

// ask offers the choices after a plan; revise is offered while rounds
// remain.
func (c *cli) ask(round int) (string, string, error) {
	for {
		if round < maxPlanRounds {
			fmt.Fprintf(c.stdout, "[e]xecute this plan, [r]evise it with feedback (round %d of %d), or [a]bort? ", round, maxPlanRounds)
		} else {
			fmt.Fprint(c.stdout, "[e]xecute this plan or [a]bort (no revision rounds left)? ")
		}
		line, err := c.stdin.ReadString('\n')
		if err != nil && line == "" {
			return "", "", errors.New("no answer on stdin")
		}
		switch strings.ToLower(strings.TrimSpace(line)) {
		case "e", "execute", "y", "yes":
			return "execute", "", nil
		case "a", "abort", "q", "quit":
			return "abort", "", nil
		case "r", "revise":
			if round >= maxPlanRounds {
				continue
			}
			fmt.Fprint(c.stdout, "Feedback (one line): ")
			fb, err := c.stdin.ReadString('\n')
			if strings.TrimSpace(fb) == "" {
				if err != nil {
					return "", "", errors.New("no feedback on stdin")
				}
				continue
			}
			return "revise", strings.TrimSpace(fb), nil
		}
	}
}

// order builds a work order for o in mode; taskID is derived when empty.
func (c *cli) order(o *options, mode dispatch.Mode, taskID string) dispatch.WorkOrder {
	if taskID == "" {
		// Unique per run: every plan round and the execution are their own
		// task in the backend, like the bot's runs of one issue.
		taskID = dispatch.NewTaskID("local/"+o.repoLabel, 0, mode, o.taskID+strconv.FormatInt(time.Now().UnixNano(), 36)+strconv.Itoa(os.Getpid()))
	}
	w := dispatch.WorkOrder{
		SchemaVersion:  dispatch.WorkOrderVersion,
		TaskID:         taskID,
		Mode:           mode,
		Attempt:        1,
		CloneURL:       o.repo,
		BaseBranch:     o.base,
		TargetBranch:   o.target,
		Task:           o.task,
		Plan:           o.plan,
		Feedback:       o.feedback,
		Config:         *o.cfg,
		BudgetUSD:      o.cfg.MaxBudgetUSD,
		TimeoutMinutes: o.cfg.TimeoutMinutes,
		OutputDir:      "set-by-the-backend",
		SecretEnv:      o.passEnv,
	}
	if mode == dispatch.ModeExecute && w.TargetBranch == "" {
		w.TargetBranch = dispatch.BranchName(taskID, o.task.Title)
	}
	if mode == dispatch.ModeTask {
		w.CloneURL = ""
	}
	return w
}

// runOne submits order and follows it to the end, printing progress. ^C
// cancels the run: the runner pushes and writes its interrupted receipt.
func (c *cli) runOne(ctx context.Context, b dispatch.Backend, o *options, order dispatch.WorkOrder) (*dispatch.Result, int) {
	spec := dispatch.RunSpec{
		Meta:  dispatch.Meta{TaskID: order.TaskID, Mode: order.Mode, Repo: order.Repo, Attempt: 1},
		Order: order,
	}
	if strings.HasPrefix(order.CloneURL, "http") {
		// Delivered as the run's 0600 token file, never in the work order.
		spec.Token = o.token
	}
	fmt.Fprintf(c.stderr, "sandbox-agent: %s run %s\n", order.Mode, order.TaskID)
	if _, err := b.Submit(context.WithoutCancel(ctx), spec); err != nil {
		fmt.Fprintf(c.stderr, "sandbox-agent: %v\n", err)
		return nil, exitUsage
	}
	cancelled := false
	for {
		_, err := b.Wait(ctx, order.TaskID, func(p dispatch.Progress) {
			line := fmt.Sprintf("  [%s] %s", p.Stage, p.Message)
			if p.CostUSD > 0 {
				line += fmt.Sprintf("  ($%.4f)", p.CostUSD)
			}
			fmt.Fprintln(c.stderr, line)
		})
		if err == nil {
			break
		}
		if ctx.Err() != nil && !cancelled {
			cancelled = true
			fmt.Fprintln(c.stderr, "sandbox-agent: stopping the run; the work so far is pushed...")
			if err := b.Cancel(context.WithoutCancel(ctx), order.TaskID); err != nil {
				fmt.Fprintf(c.stderr, "sandbox-agent: %v\n", err)
			}
			ctx = context.WithoutCancel(ctx)
			continue
		}
		fmt.Fprintf(c.stderr, "sandbox-agent: %v\n", err)
		return nil, exitNotDone
	}
	res, err := b.Result(context.WithoutCancel(ctx), order.TaskID)
	if err != nil {
		fmt.Fprintf(c.stderr, "sandbox-agent: %v (the run's files are in %s)\n", err, filepath.Dir(o.outDir(order.TaskID)))
		return nil, exitNotDone
	}
	if o.afterRun != nil {
		o.afterRun(order.TaskID)
	}
	if res.Status != dispatch.StatusCompleted {
		return res, exitNotDone
	}
	return res, exitOK
}

// report prints the receipt's essentials and where the full one is.
func (c *cli) report(o *options, order dispatch.WorkOrder, res *dispatch.Result) {
	w := c.stdout
	fmt.Fprintf(w, "\n%s %s: %s\n", res.Mode, res.TaskID, res.Status)
	if res.Error != nil {
		fmt.Fprintf(w, "  why:      %s\n", res.Error.Message)
		if d := res.Error.Diagnostic; d != nil {
			fmt.Fprintf(w, "  agent:    last event %s, step %d (%d done), $%.4f spent\n", d.LastEventType, d.CurrentStep, d.CompletedSteps, d.CostSoFarUSD)
		}
	}
	if s := strings.TrimSpace(res.PRSummary); s != "" {
		fmt.Fprintf(w, "  summary:  %s\n", strings.ReplaceAll(s, "\n", "\n            "))
	}
	if res.HeadSHA != "" {
		fmt.Fprintf(w, "  branch:   %s at %.12s, pushed to %s\n", res.Branch, res.HeadSHA, o.repoLabel)
		fmt.Fprintf(w, "  changes:  %d file(s), +%d -%d in %d commit(s)\n", res.DiffStats.FilesChanged, res.DiffStats.Insertions, res.DiffStats.Deletions, len(res.Commits))
		if len(res.Commits) > 0 && !strings.Contains(o.repoLabel, "://") && !strings.HasPrefix(o.repoLabel, "git@") {
			fmt.Fprintf(w, "  see it:   git -C %s log -p -n %d %s\n", shellQuote(o.repoLabel), len(res.Commits), res.Branch)
		}
	}
	tu := res.TokenUsage
	took := time.Duration(res.DurationSeconds * float64(time.Second))
	if took < 10*time.Second {
		took = took.Round(time.Millisecond) // a quick run must not read as 0s
	} else {
		took = took.Round(time.Second)
	}
	if tu.TotalCostUSD == 0 && tu.Input == 0 && tu.Output == 0 && tu.Steps == 0 {
		// A command agent that reports no usage: zeros would read as a
		// measurement.
		fmt.Fprintf(w, "  usage:    none reported by the agent, %s\n", took)
	} else {
		fmt.Fprintf(w, "  usage:    $%.4f, %d input + %d output tokens, %d steps, %s\n", tu.TotalCostUSD, tu.Input, tu.Output, tu.Steps, took)
	}
	for _, ch := range res.Validation {
		mark := "passed"
		if !ch.Passed {
			mark = "FAILED"
		}
		fmt.Fprintf(w, "  check:    %s %s (%d run(s))\n", ch.Name, mark, ch.Attempts)
	}
	if len(res.Repairs) > 0 {
		fmt.Fprintf(w, "  repairs:  %d\n", len(res.Repairs))
	}
	for _, a := range res.Artifacts {
		fmt.Fprintf(w, "  artifact: %s\n", filepath.Join(o.outDir(res.TaskID), a))
	}
	fmt.Fprintf(w, "  receipt:  %s\n", filepath.Join(o.outDir(res.TaskID), dispatch.ResultFile))
	if res.Status == dispatch.StatusInterrupted || res.Status == dispatch.StatusTimeout {
		fmt.Fprintf(w, "  resume:   sandbox-agent continue --repo %s --task-id %s --target-branch %s --task %q\n", o.repoLabel, res.TaskID, res.Branch, order.Task.Title)
	}
}

// validate checks the configuration layers and prints the result.
func (c *cli) validate(args []string) int {
	fs := flag.NewFlagSet("sandbox-agent validate", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	project := fs.String("project", "", "a .sandbox.yml, or a directory holding one")
	repo := fs.String("repo", "", "a repository whose .sandbox.yml to check too")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	o := &options{}
	if *repo != "" {
		u, err := cloneURL(*repo)
		if err != nil {
			fmt.Fprintf(c.stderr, "sandbox-agent validate: %v\n", err)
			return exitUsage
		}
		o.repo = u
	}
	if *project == "" && *repo == "" {
		*project = "."
	}
	cfg, sources, err := c.loadConfig(o, *project, sandboxcfg.Flags{})
	if err != nil {
		fmt.Fprintf(c.stderr, "%v\n", err)
		return exitNotDone
	}
	fmt.Fprintf(c.stdout, "ok: %s\n", strings.Join(sources, ", "))
	fmt.Fprintf(c.stdout, "  harness %s, model %q, budget $%.2f, timeout %dm, inactivity %ds\n", cfg.Harness, cfg.Model, cfg.MaxBudgetUSD, cfg.TimeoutMinutes, cfg.InactivitySeconds)
	fmt.Fprintf(c.stdout, "  plan required: %v, repair attempts: %d (budget $%.2f)\n", cfg.PlanRequired(), cfg.RepairAttempts(), cfg.RepairBudgetUSD())
	for _, ch := range cfg.Validate {
		fmt.Fprintf(c.stdout, "  check %s: %s (timeout %ds)\n", ch.Name, ch.Command, ch.TimeoutSeconds)
	}
	for _, s := range cfg.Lifecycle.Setup {
		fmt.Fprintf(c.stdout, "  setup: %s\n", s)
	}
	return exitOK
}
