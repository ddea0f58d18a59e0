package sandboxcfg

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
)

// Limits is what the server operator allows a repository to ask for, the way
// Atlantis's server-side repo config bounds atlantis.yaml. Zero values of
// the lists mean "no restriction"; the numeric ceilings left at zero take
// their defaults (WithDefaults) in the bot.
type Limits struct {
	// MaxBudgetUSD is the ceiling of a run's budget (max_budget_usd,
	// --budget).
	MaxBudgetUSD float64 `yaml:"max_budget_usd,omitempty" json:"max_budget_usd,omitempty"`
	// MaxTimeoutMinutes is the ceiling of a run's timeout
	// (timeout_minutes, --timeout).
	MaxTimeoutMinutes int `yaml:"max_timeout_minutes,omitempty" json:"max_timeout_minutes,omitempty"`
	// MaxAttempts caps the execute runs one approval starts (attempts in
	// .sandbox.yml, /approve --attempts).
	MaxAttempts int `yaml:"max_attempts,omitempty" json:"max_attempts,omitempty"`
	// AllowedHarnesses, when set, are the only harnesses a repository may
	// name.
	AllowedHarnesses []string `yaml:"allowed_harnesses,omitempty" json:"allowed_harnesses,omitempty"`
	// AllowedImages are path.Match patterns, e.g. "postgres:*" or "ghcr.io/acme/*".
	AllowedImages []string `yaml:"allowed_images,omitempty" json:"allowed_images,omitempty"`
	// AllowedModels, when set, are the patterns a repository's model must
	// match.
	AllowedModels []string `yaml:"allowed_models,omitempty" json:"allowed_models,omitempty"`
	// AllowedOverrides lists the top-level keys a repository may set; empty
	// means all. Keys set by a repository outside this list are errors, not
	// silently dropped, so nobody wonders why a setting has no effect.
	AllowedOverrides []string `yaml:"allowed_overrides,omitempty" json:"allowed_overrides,omitempty"`
	// MaxCPU (millicores: 4000 is 4 CPUs) and MaxMemoryMB are the
	// ceilings of a sandbox's resources, and what a run that asks for
	// none gets on the docker backend.
	MaxCPU      int `yaml:"max_cpu,omitempty" json:"max_cpu,omitempty"`
	MaxMemoryMB int `yaml:"max_memory_mb,omitempty" json:"max_memory_mb,omitempty"`
	// AllowSupabase false refuses supabase: true.
	AllowSupabase *bool `yaml:"allow_supabase,omitempty" json:"allow_supabase,omitempty"`
	// PidsLimit is the number of processes one sandbox may have, its inner
	// containers included (docker --pids-limit, Nomad pids_limit).
	PidsLimit int `yaml:"pids_limit,omitempty" json:"pids_limit,omitempty"`
	// NetworkAllow is the ceiling of network.allow (same entry syntax): a
	// repository's entries must each fall inside one of these, and a
	// coding sandbox whose configuration sets none gets this list.
	NetworkAllow []string `yaml:"network_allow,omitempty" json:"network_allow,omitempty"`
	// AllowCIFix false refuses ci.fix; MaxCIFixAttempts is the ceiling of
	// ci.fix_attempts (and the value of a configuration that sets none,
	// when it is below the default).
	AllowCIFix       *bool `yaml:"allow_ci_fix,omitempty" json:"allow_ci_fix,omitempty"`
	MaxCIFixAttempts int   `yaml:"max_ci_fix_attempts,omitempty" json:"max_ci_fix_attempts,omitempty"`
	// OutsiderReports strict is the ceiling of reports.outsiders: an issue
	// by someone without write access reaches the agent as "Issue #N"
	// only, whatever a repository says ("" or quoted: no ceiling).
	OutsiderReports string `yaml:"outsider_reports,omitempty" json:"outsider_reports,omitempty"`
}

// Flags are one-off settings from a command comment or the CLI
// (`/approve --budget 3`). Zero values mean "not given".
type Flags struct {
	BudgetUSD      float64
	TimeoutMinutes int
	Model          string
	Harness        string
	// Attempts is --attempts of /approve (0: the configuration's).
	Attempts int
}

// Layer is one .sandbox.yml in the stack between the server's defaults and
// the flags, e.g. the organisation's `.github` file beneath the repository's.
// Name is where it came from, for error messages and Origins.
type Layer struct {
	Name   string
	Config *Config
}

// Origins says, for each top-level key of a resolved configuration that
// something set, which layer set it last: "server defaults", a layer's
// Name, "flags", or "server limits" (network.allow from the ceiling). Keys
// nothing set have their built-in defaults and are absent.
type Origins map[string]string

// Origin names of the layers that are not files.
const (
	OriginServer = "server defaults"
	OriginFlags  = "flags"
	OriginLimits = "server limits"
)

// Resolve layers a configuration: server defaults, then the repository (or
// org default) file, then flags; and checks the result against the limits.
// repoFile names the source for error messages.
func Resolve(serverDefaults Config, repo *Config, repoFile string, flags Flags, limits Limits) (Resolved, error) {
	c, _, err := ResolveLayers(serverDefaults, []Layer{{Name: repoFile, Config: repo}}, flags, limits)
	return c, err
}

// ResolveLayers is Resolve over any number of file layers, lowest first
// (nil Configs are skipped), and also says which layer set each key. Every
// file layer is bound by limits.AllowedOverrides: an organisation's file is
// no more trusted than a repository's. It is the one way to a Resolved
// configuration.
func ResolveLayers(serverDefaults Config, layers []Layer, flags Flags, limits Limits) (Resolved, Origins, error) {
	var errs Errors
	origins := Origins{}
	for _, key := range setKeys(&serverDefaults) {
		origins[key] = OriginServer
	}
	// The server's defaults are shared by every concurrent Resolve: copy
	// what merge writes to (maps).
	c := serverDefaults
	c.Services = maps.Clone(serverDefaults.Services)
	c.Env = maps.Clone(serverDefaults.Env)
	c.MCP = maps.Clone(serverDefaults.MCP)
	c.Validate = append(Checks(nil), serverDefaults.Validate...)
	for _, l := range layers {
		if l.Config == nil {
			continue
		}
		for _, key := range setKeys(l.Config) {
			if len(limits.AllowedOverrides) > 0 && !slices.Contains(limits.AllowedOverrides, key) {
				errs = append(errs, &FieldError{File: l.Name, Field: key, Msg: fmt.Sprintf("the server does not let repositories set this (allowed: %s)", strings.Join(limits.AllowedOverrides, ", "))})
			}
			origins[key] = l.Name
		}
		merge(&c, l.Config)
	}
	flags.apply(&c, origins)
	if len(limits.NetworkAllow) > 0 && len(c.Network.Allow) == 0 && c.Mode != ModeTask {
		c.Network.Allow = slices.Clone(limits.NetworkAllow)
		origins["network"] = OriginLimits
	}
	for _, key := range limits.boundTrust(&c) {
		origins[key] = OriginLimits
	}
	if err := c.Verify(); err != nil {
		errs = append(errs, err.(Errors)...)
	}
	r := resolve(&c)
	// A value over a limit is reported against the file that set it; one
	// no file set (a flag, a server default) against the topmost file.
	file := ""
	for _, l := range layers {
		if l.Config != nil || file == "" {
			file = l.Name
		}
	}
	for _, e := range limits.check(&r, file) {
		key, _, _ := strings.Cut(e.Field, ".")
		key, _, _ = strings.Cut(key, "[")
		if o := origins[key]; slices.ContainsFunc(layers, func(l Layer) bool { return l.Config != nil && l.Name == o }) {
			e.File = o
		}
		errs = append(errs, e)
	}
	if len(errs) > 0 {
		return Resolved{}, nil, errs
	}
	return r, origins, nil
}

// apply sets the flags given over c, each key's origin the flags.
func (f Flags) apply(c *Config, origins Origins) {
	flag := func(set bool, key string) {
		if set {
			origins[key] = OriginFlags
		}
	}
	if f.BudgetUSD > 0 {
		c.MaxBudgetUSD = f.BudgetUSD
	}
	flag(f.BudgetUSD > 0, "max_budget_usd")
	if f.TimeoutMinutes > 0 {
		c.TimeoutMinutes = f.TimeoutMinutes
	}
	flag(f.TimeoutMinutes > 0, "timeout_minutes")
	if f.Model != "" {
		c.Model = f.Model
	}
	flag(f.Model != "", "model")
	if f.Harness != "" {
		c.Harness = f.Harness
	}
	flag(f.Harness != "", "harness")
	if f.Attempts > 0 {
		c.Attempts = f.Attempts
	}
	flag(f.Attempts > 0, "attempts")
}

func (l Limits) check(c *Resolved, file string) Errors {
	var errs Errors
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{File: file, Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if l.MaxBudgetUSD > 0 && c.MaxBudgetUSD > l.MaxBudgetUSD {
		bad("max_budget_usd", "$%.2f is over the server ceiling of $%.2f", c.MaxBudgetUSD, l.MaxBudgetUSD)
	}
	if l.MaxTimeoutMinutes > 0 && c.TimeoutMinutes > l.MaxTimeoutMinutes {
		bad("timeout_minutes", "%d is over the server ceiling of %d", c.TimeoutMinutes, l.MaxTimeoutMinutes)
	}
	if l.MaxAttempts > 0 && c.Attempts > l.MaxAttempts {
		bad("attempts", "%d is over the server ceiling of %d", c.Attempts, l.MaxAttempts)
	}
	if len(l.AllowedHarnesses) > 0 && !slices.Contains(l.AllowedHarnesses, c.Harness) {
		bad("harness", "%q is not allowed on this server (allowed: %s)", c.Harness, strings.Join(l.AllowedHarnesses, ", "))
	}
	if len(l.AllowedModels) > 0 && c.Model != "" && !matchAny(l.AllowedModels, c.Model) {
		bad("model", "%q is not allowed on this server (allowed: %s)", c.Model, strings.Join(l.AllowedModels, ", "))
	}
	if len(l.AllowedImages) > 0 {
		for _, name := range slices.Sorted(maps.Keys(c.Services)) {
			if img := c.Services[name].Image; !matchAny(l.AllowedImages, img) {
				bad("services."+name+".image", "%q is not allowed on this server (allowed: %s)", img, strings.Join(l.AllowedImages, ", "))
			}
		}
	}
	if l.MaxCPU > 0 && c.Resources.CPU > l.MaxCPU {
		bad("resources.cpu", "%d is over the server ceiling of %d", c.Resources.CPU, l.MaxCPU)
	}
	if l.MaxMemoryMB > 0 && c.Resources.MemoryMB > l.MaxMemoryMB {
		bad("resources.memory_mb", "%d is over the server ceiling of %d", c.Resources.MemoryMB, l.MaxMemoryMB)
	}
	if c.Supabase && l.AllowSupabase != nil && !*l.AllowSupabase {
		bad("supabase", "the Supabase stack is not allowed on this server")
	}
	l.checkTrust(c, bad)
	return append(errs, l.checkNetworkCeiling(c, file)...)
}

func matchAny(patterns []string, s string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, s); ok || p == s {
			return true
		}
	}
	return false
}

// merge copies every field over sets onto c. Maps merge key by key so a repo
// can add one env var without restating the server's.
func merge(c, over *Config) {
	mergeRun(c, over)
	mergeSections(c, over)
}

// mergeRun merges the top-level values: what runs and its bounds.
func mergeRun(c, over *Config) {
	if over.Name != "" {
		c.Name = over.Name
	}
	if over.Mode != "" {
		c.Mode = over.Mode
	}
	if over.Branch != "" {
		c.Branch = over.Branch
	}
	if over.Harness != "" {
		c.Harness = over.Harness
	}
	if over.Model != "" {
		c.Model = over.Model
	}
	if over.Command != "" {
		c.Command = over.Command
	}
	if over.MaxBudgetUSD != 0 {
		c.MaxBudgetUSD = over.MaxBudgetUSD
	}
	if over.TimeoutMinutes != 0 {
		c.TimeoutMinutes = over.TimeoutMinutes
	}
	if over.InactivitySeconds != 0 {
		c.InactivitySeconds = over.InactivitySeconds
	}
	if over.Attempts != 0 {
		c.Attempts = over.Attempts
	}
}

// mergeSections merges the sections: maps entry by entry, lists whole.
func mergeSections(c, over *Config) {
	mergeMap(&c.Services, over.Services)
	if over.Supabase {
		c.Supabase = true
	}
	mergeMap(&c.Env, over.Env)
	if len(over.Lifecycle.Setup) > 0 {
		c.Lifecycle = over.Lifecycle
	}
	if len(over.Validate) > 0 {
		c.Validate = append(Checks(nil), over.Validate...)
	}
	if over.Dev.Command != "" || over.Dev.Port != 0 || len(over.Dev.Routes) > 0 || len(over.Dev.PreviewSecrets) > 0 {
		c.Dev = over.Dev
	}
	if len(over.PR.Labels) > 0 || over.PR.Draft || len(over.PR.Reviewers) > 0 {
		c.PR = over.PR
	}
	mergeMap(&c.MCP, over.MCP)
	if len(over.Skills) > 0 {
		c.Skills = over.Skills
	}
	c.Plan.merge(over.Plan)
	c.Review.merge(over.Review)
	if len(over.Secrets.Allow) > 0 {
		c.Secrets.Allow = append([]SecretAllow(nil), over.Secrets.Allow...)
	}
	c.Repair.merge(over.Repair)
	if len(over.Network.Allow) > 0 {
		c.Network = over.Network
	}
	c.Cache.merge(over.Cache)
	c.CI.merge(over.CI)
	c.Reports.merge(over.Reports)
	c.Budgets.lower(over.Budgets)
	c.Resources.merge(over.Resources)
}

// mergeMap sets over's entries in *m, made when over has one and *m is
// nil.
func mergeMap[V any](m *map[string]V, over map[string]V) {
	for k, v := range over {
		if *m == nil {
			*m = map[string]V{}
		}
		(*m)[k] = v
	}
}

// merge applies a higher layer's plan keys over p, key by key.
func (p *Plan) merge(over Plan) {
	if over.Required != nil {
		p.Required = over.Required
	}
	if over.Strict != nil {
		p.Strict = over.Strict
	}
}

// merge applies a higher layer's review keys over r, key by key.
func (r *Review) merge(over Review) {
	if over.Enabled != nil {
		r.Enabled = over.Enabled
	}
	if over.Model != "" {
		r.Model = over.Model
	}
	if over.BudgetShare != 0 {
		r.BudgetShare = over.BudgetShare
	}
	if over.Auto != nil {
		r.Auto = over.Auto
	}
}

// merge applies a higher layer's repair keys over r, key by key.
func (r *Repair) merge(over Repair) {
	if over.Attempts != nil {
		r.Attempts = over.Attempts
	}
	if over.BudgetShare != 0 {
		r.BudgetShare = over.BudgetShare
	}
	if over.MinBudgetUSD != 0 {
		r.MinBudgetUSD = over.MinBudgetUSD
	}
}

// merge applies a higher layer's resources over r, key by key.
func (r *Resources) merge(over Resources) {
	if over.CPU != 0 {
		r.CPU = over.CPU
	}
	if over.MemoryMB != 0 {
		r.MemoryMB = over.MemoryMB
	}
}

// setKeys lists the top-level yaml keys a file set, for the override check.
func setKeys(c *Config) []string {
	var keys []string
	add := func(set bool, k string) {
		if set {
			keys = append(keys, k)
		}
	}
	add(c.Name != "", "name")
	add(c.Mode != "", "mode")
	add(c.Branch != "", "branch")
	add(c.Harness != "", "harness")
	add(c.Model != "", "model")
	add(c.Command != "", "command")
	add(c.MaxBudgetUSD != 0, "max_budget_usd")
	add(c.TimeoutMinutes != 0, "timeout_minutes")
	add(c.InactivitySeconds != 0, "inactivity_timeout")
	add(c.Attempts != 0, "attempts")
	add(len(c.Services) > 0, "services")
	add(c.Supabase, "supabase")
	add(len(c.Env) > 0, "env")
	add(len(c.Lifecycle.Setup) > 0, "lifecycle")
	add(len(c.Validate) > 0, "validate")
	add(c.Dev.Command != "" || c.Dev.Port != 0 || len(c.Dev.Routes) > 0 || len(c.Dev.PreviewSecrets) > 0, "dev")
	add(len(c.PR.Labels) > 0 || c.PR.Draft || len(c.PR.Reviewers) > 0, "pr")
	add(len(c.MCP) > 0, "mcp")
	add(len(c.Skills) > 0, "skills")
	add(c.Plan.Required != nil || c.Plan.Strict != nil, "plan")
	add(c.Review.Enabled != nil || c.Review.Model != "" || c.Review.BudgetShare != 0 || c.Review.Auto != nil, "review")
	add(len(c.Secrets.Allow) > 0, "secrets")
	add(c.Repair != (Repair{}), "repair")
	add(len(c.Network.Allow) > 0, "network")
	add(c.Cache.set(), "cache")
	add(c.Resources != (Resources{}), "resources")
	add(c.CI.set(), "ci")
	add(c.Reports.set(), "reports")
	add(c.Budgets.set(), "budgets")
	return keys
}
