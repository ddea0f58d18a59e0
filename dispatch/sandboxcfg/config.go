// Package sandboxcfg is the model of a repository's .sandbox.yml: strict
// parsing with file:line:column errors, validation, layering (repo file, org
// default, server limits, one-off command flags) and the JSON Schema that
// editors use to check the file.
//
// A Config is one layer as written; ResolveLayers makes the Resolved
// configuration a run uses, which travels to the sandbox inside the work
// order, so the runner and the bot never disagree on what a field means
// (resolved.go says the stages).
package sandboxcfg

// Config is the validated content of one .sandbox.yml (or of the server's
// defaults): a layer, where what is not set is absent. Field order here is
// the order of the generated JSON Schema and of the documentation.
type Config struct {
	// Name of the project, shown in receipts.
	Name string `yaml:"name,omitempty" json:"name,omitempty" desc:"Project name shown in receipts."`
	// Mode is coding (a repo, DinD, PRs) or task (no repo, artifacts only).
	Mode string `yaml:"mode,omitempty" json:"mode,omitempty" desc:"coding (default) works on the repository and opens a PR; task runs non-coding work and returns artifacts." enum:"coding,task"`
	// Branch is the base branch PRs target; empty means the repo's default branch.
	Branch string `yaml:"branch,omitempty" json:"branch,omitempty" desc:"Base branch the agent branches from and PRs target. Default: the repository's default branch."`

	Harness string `yaml:"harness,omitempty" json:"harness,omitempty" desc:"Agent harness." enum:"opencode,claude-code,command"`
	Model   string `yaml:"model,omitempty" json:"model,omitempty" desc:"Model passed to the harness, e.g. anthropic/claude-sonnet-4-5 for opencode."`
	// Command is the program run by the command harness (sh -c).
	Command string `yaml:"command,omitempty" json:"command,omitempty" desc:"Program run by the command harness through sh -c; it may print NDJSON events."`

	MaxBudgetUSD      float64 `yaml:"max_budget_usd,omitempty" json:"max_budget_usd,omitempty" desc:"Cost ceiling for one run in US dollars; the agent is stopped when it is passed." min:"0"`
	TimeoutMinutes    int     `yaml:"timeout_minutes,omitempty" json:"timeout_minutes,omitempty" desc:"Wall-clock limit for one run; work is pushed and the run ends with status timeout." min:"1"`
	InactivitySeconds int     `yaml:"inactivity_timeout,omitempty" json:"inactivity_timeout,omitempty" desc:"Seconds without an agent event before the watchdog stops it (status hung). Default 180." min:"1"`
	// Attempts is how many execute runs an approved plan starts; the
	// project's own checks pick the one the PR carries.
	Attempts int `yaml:"attempts,omitempty" json:"attempts,omitempty" desc:"Execute runs started from one approved plan, each in its own sandbox and branch; the PR carries the one that passed the checks with the least change (/approve --attempts N overrides). Default 1, at most the server's limits.max_attempts." min:"1"`

	Services map[string]Service `yaml:"services,omitempty" json:"services,omitempty" desc:"Containers started inside the sandbox before the agent runs. Their addresses are available as {name} placeholders."`
	Supabase bool               `yaml:"supabase,omitempty" json:"supabase,omitempty" desc:"Start the Supabase local stack inside the sandbox; its addresses become {supabase_*} placeholders."`
	Env      map[string]string  `yaml:"env,omitempty" json:"env,omitempty" desc:"Environment for setup, agent and checks. ${VAR} takes a secret given to the run; {service} takes a service address."`

	Lifecycle Lifecycle            `yaml:"lifecycle,omitempty" json:"lifecycle,omitempty" desc:"Commands run around the agent."`
	Cache     Cache                `yaml:"cache,omitempty" json:"cache,omitzero" desc:"The setup cache: what lifecycle.setup produced, saved after setup on the base branch and restored instead of running setup while its key matches."`
	Validate  Checks               `yaml:"validate,omitempty" json:"validate,omitempty" desc:"Checks run after the agent, in file order: name: command, or name: {command, timeout_seconds}."`
	Dev       Dev                  `yaml:"dev,omitempty" json:"dev,omitempty" desc:"Dev server started for screenshots and recordings."`
	PR        PR                   `yaml:"pr,omitempty" json:"pr,omitempty" desc:"How the pull request is opened."`
	MCP       map[string]MCPServer `yaml:"mcp,omitempty" json:"mcp,omitempty" desc:"MCP servers made available to the agent."`
	Skills    []string             `yaml:"skills,omitempty" json:"skills,omitempty" desc:"Paths (in the repo) of skill files given to the agent."`
	Plan      Plan                 `yaml:"plan,omitempty" json:"plan,omitempty" desc:"Planning and approval."`
	Repair    Repair               `yaml:"repair,omitempty" json:"repair,omitempty" desc:"Repair attempts after failing checks."`
	Network   Network              `yaml:"network,omitempty" json:"network,omitempty" desc:"Egress policy of the sandbox."`
	Review    Review               `yaml:"review,omitempty" json:"review,omitempty" desc:"The reviewer's pass: after validation a fresh read-only agent session reads the issue, the approved plan and the diff and writes a short review into the PR body. It never changes the code."`
	Secrets   Secrets              `yaml:"secrets,omitempty" json:"secrets,omitempty" desc:"The secret scan of every commit before it is pushed."`
	Resources Resources            `yaml:"resources,omitempty" json:"resources,omitempty" desc:"Resources requested for the sandbox, within the server's limits."`
	CI        CI                   `yaml:"ci,omitempty" json:"ci,omitzero" desc:"What the bot does when the repository's own checks (Actions workflows, other apps' check runs, commit statuses) fail on the agent's pull request."`
	Reports   Reports              `yaml:"reports,omitempty" json:"reports,omitzero" desc:"What of an issue written by someone without write access reaches the agent once a writer vouched for it."`
	Budgets   Budgets              `yaml:"budgets,omitempty" json:"budgets,omitzero" desc:"Monthly budgets, lowered (never raised) from the server's: a run is admitted only when its budget fits what is left this month."`
	// Routines are read from the default branch's file (and the
	// organisation's) by the scheduler; they take no part in a run's
	// configuration.
	Routines Routines `yaml:"routines,omitempty" json:"routines,omitempty" desc:"Work the bot starts by itself, read from the default branch's file and the organisation's: on a schedule or when the default branch's checks fail, it opens an issue whose plan waits for /approve. A bad entry is reported on the commit that brought it (a failing check run) and never stops the others."`
}

// Service is one container started on the sandbox's inner network.
type Service struct {
	Image       string            `yaml:"image" json:"image" desc:"Image reference, pulled (or loaded from cache) inside the sandbox." required:"true"`
	Command     []string          `yaml:"command,omitempty" json:"command,omitempty" desc:"Overrides the image's command."`
	Env         map[string]string `yaml:"env,omitempty" json:"env,omitempty" desc:"Environment of the service container."`
	Ports       []int             `yaml:"ports,omitempty" json:"ports,omitempty" desc:"Ports the service listens on; the first is the one {name} resolves to."`
	Healthcheck *Healthcheck      `yaml:"healthcheck,omitempty" json:"healthcheck,omitempty" desc:"How readiness is probed. Default: TCP on the first port."`
}

// Healthcheck says how to know a service is ready. Exactly one of TCP, HTTP
// and Command is set after validation.
type Healthcheck struct {
	TCP            int      `yaml:"tcp,omitempty" json:"tcp,omitempty" desc:"Port to open a TCP connection to."`
	HTTP           string   `yaml:"http,omitempty" json:"http,omitempty" desc:"Path (or port:path) answered with 2xx/3xx when ready, e.g. /health or 8080:/health."`
	Command        []string `yaml:"command,omitempty" json:"command,omitempty" desc:"Command run in the service container (docker exec); exit 0 means ready."`
	TimeoutSeconds int      `yaml:"timeout_seconds,omitempty" json:"timeout_seconds,omitempty" desc:"How long to wait for readiness in total. Default 60."`
}

// Lifecycle holds commands run around the agent.
type Lifecycle struct {
	Setup []string `yaml:"setup,omitempty" json:"setup,omitempty" desc:"Shell commands run in the repo after services are healthy and before the agent."`
}

// Check is one validation step.
type Check struct {
	Name           string `yaml:"-" json:"name"`
	Command        string `yaml:"command" json:"command" desc:"Shell command; exit 0 passes." required:"true"`
	TimeoutSeconds int    `yaml:"timeout_seconds,omitempty" json:"timeout_seconds,omitempty" desc:"Limit for this check. Default 600."`
}

// Checks keeps validate entries in file order, because people write them in
// the order they want them run (lint before a slow test suite).
type Checks []Check

// Dev describes the dev server used for screenshots.
type Dev struct {
	Command string   `yaml:"command,omitempty" json:"command,omitempty" desc:"Command that starts the dev server."`
	Port    int      `yaml:"port,omitempty" json:"port,omitempty" desc:"Port it listens on."`
	Routes  []string `yaml:"routes,omitempty" json:"routes,omitempty" desc:"Paths to screenshot, e.g. / and /settings."`
	// PreviewSecrets are the only pass-through secrets a /preview sandbox
	// gets (it serves code an agent wrote); the bot reads them from the
	// base branch's file, never the pull request's.
	PreviewSecrets []string `yaml:"preview_secrets,omitempty" json:"preview_secrets,omitempty" desc:"Names of the bot's pass-through secrets (SANDBOX_PASS_ENV) a /preview of a pull request gets in its environment, for ${VAR} in env; none when unset. Read from the base branch's file, never the pull request's; provider keys never reach a preview."`
}

// PR says how the pull request is opened.
type PR struct {
	Labels    []string `yaml:"labels,omitempty" json:"labels,omitempty" desc:"Labels added to the PR."`
	Draft     bool     `yaml:"draft,omitempty" json:"draft,omitempty" desc:"Open the PR as a draft."`
	Reviewers []string `yaml:"reviewers,omitempty" json:"reviewers,omitempty" desc:"Users (or org/team) asked for review."`
}

// MCPServer is one Model Context Protocol server: a local command or a URL.
type MCPServer struct {
	Command []string          `yaml:"command,omitempty" json:"command,omitempty" desc:"Local server command."`
	URL     string            `yaml:"url,omitempty" json:"url,omitempty" desc:"Remote server URL."`
	Env     map[string]string `yaml:"env,omitempty" json:"env,omitempty" desc:"Environment of the local server."`
}

// Plan controls the approval gate.
type Plan struct {
	// Required is a pointer because absence means "the default (true)",
	// which is different from an explicit false.
	Required *bool `yaml:"required,omitempty" json:"required,omitempty" desc:"Post a plan and wait for /approve before changing code. Default true."`
	// Strict is a pointer so that a repository can turn off what an
	// organisation's default turned on.
	Strict *bool `yaml:"strict,omitempty" json:"strict,omitempty" desc:"A changed file the approved plan does not name fails validation and goes to repair. Default false: such files are listed under Outside the approved plan."`
}

// Review is the opt-in reviewer's pass.
type Review struct {
	Enabled     *bool   `yaml:"enabled,omitempty" json:"enabled,omitempty" desc:"Run the reviewer's pass after validation. Default false."`
	Model       string  `yaml:"model,omitempty" json:"model,omitempty" desc:"Model of the reviewer's session (the harness's model name). Default: the run's model."`
	BudgetShare float64 `yaml:"budget_share,omitempty" json:"budget_share,omitempty" desc:"Share of max_budget_usd the reviewer may spend. Default 0.1." min:"0" max:"1"`
	Auto        *bool   `yaml:"auto,omitempty" json:"auto,omitempty" desc:"Review every pull request a person with write access opens or marks ready for review (not drafts, not the App's own), once per head, as /review does. Never a pull request by someone without write access. Read from the base branch. Default false."`
}

// Secrets configures the secret scan.
type Secrets struct {
	Allow []SecretAllow `yaml:"allow,omitempty" json:"allow,omitempty" desc:"Findings the repository accepts: reported in the PR, never blocking. Read from the base branch's .sandbox.yml, never from the agent's change."`
}

// SecretAllow accepts the findings of one rule, or of every rule, in the
// files one glob matches.
type SecretAllow struct {
	Path string `yaml:"path" json:"path" desc:"Glob of repository paths (** for any depth), e.g. testdata/** or docs/*.md." required:"true"`
	Rule string `yaml:"rule,omitempty" json:"rule,omitempty" desc:"The scanner's rule id (e.g. aws-access-token, generic-api-key); empty accepts every rule."`
}

// Repair controls the repair loop after failing checks.
type Repair struct {
	Attempts     *int    `yaml:"attempts,omitempty" json:"attempts,omitempty" desc:"Repair attempts after failing checks. Default 2; 0 disables repair." min:"0" max:"5"`
	BudgetShare  float64 `yaml:"budget_share,omitempty" json:"budget_share,omitempty" desc:"Share of max_budget_usd reserved for repairs. Default 0.2." min:"0" max:"1"`
	MinBudgetUSD float64 `yaml:"min_budget_usd,omitempty" json:"min_budget_usd,omitempty" desc:"Lower bound of the repair budget in dollars. Default 1." min:"0"`
}

// Network is the sandbox egress policy.
type Network struct {
	Allow []string `yaml:"allow,omitempty" json:"allow,omitempty" desc:"Hosts, *.domain, IP addresses or CIDR networks, each with an optional :port (443 and 80 otherwise), the sandbox may reach through its filtering proxy; a name never reaches a private address unless the address is listed too. Empty means no proxy: only the default deny list (link-local, the bot, Nomad) applies."`
}

// Resources requested for the sandbox.
type Resources struct {
	CPU      int `yaml:"cpu,omitempty" json:"cpu,omitempty" desc:"CPU in MHz (Nomad) or millicores share." min:"0"`
	MemoryMB int `yaml:"memory_mb,omitempty" json:"memory_mb,omitempty" desc:"Memory in MB." min:"0"`
}

// Defaults a resolved configuration has where no layer set a value
// (resolve, in resolved.go, is the one place that applies them).
const (
	DefaultHarness           = "opencode"
	DefaultMaxBudgetUSD      = 5.0
	DefaultTimeoutMinutes    = 60
	DefaultInactivitySeconds = 180
	DefaultRepairAttempts    = 2
	DefaultRepairShare       = 0.2
	DefaultRepairMinUSD      = 1.0
	DefaultReviewShare       = 0.1
	DefaultCheckTimeout      = 600
	DefaultHealthTimeout     = 60
	ModeCoding               = "coding"
	ModeTask                 = "task"
)
