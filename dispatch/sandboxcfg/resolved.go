package sandboxcfg

import (
	"cmp"
	"fmt"
	"maps"
)

// The configuration comes in three stages:
//
//   - Config is one layer as written (a .sandbox.yml, the server's
//     defaults): what it does not set is its zero value, or nil where zero
//     means something (plan.required: false, repair.attempts: 0).
//   - Resolved is the configuration a run uses: the layers merged, the
//     flags over them, the defaults filled in and the server's ceilings
//     checked, once, by ResolveLayers (resolve below is the one place that
//     knows a default). Nothing in it is unset and it holds no pointers.
//   - Its JSON is the wire form the work order carries to the sandbox,
//     where the runner and the init read it as it is: they apply no
//     defaults of their own.
//
// A field added to Config is added to Resolved too, with its default in
// resolve and its way back in layer; TestResolvedCarriesEveryConfigField
// fails until it is.

// Resolved is the configuration a run uses (see the stages above).
type Resolved struct {
	Name              string  `json:"name,omitempty"`
	Mode              string  `json:"mode"`
	Branch            string  `json:"branch,omitempty"`
	Harness           string  `json:"harness"`
	Model             string  `json:"model,omitempty"`
	Command           string  `json:"command,omitempty"`
	MaxBudgetUSD      float64 `json:"max_budget_usd"`
	TimeoutMinutes    int     `json:"timeout_minutes"`
	InactivitySeconds int     `json:"inactivity_timeout"`
	// Attempts is how many execute runs an approval starts; 0 (unset)
	// and 1 are one run, as before attempts existed (NumAttempts).
	Attempts  int                        `json:"attempts,omitempty"`
	Services  map[string]ResolvedService `json:"services,omitempty"`
	Supabase  bool                       `json:"supabase,omitempty"`
	Env       map[string]string          `json:"env,omitempty"`
	Lifecycle Lifecycle                  `json:"lifecycle,omitzero"`
	// Validate are the checks in file order, each with its timeout.
	Validate  Checks               `json:"validate,omitempty"`
	Dev       Dev                  `json:"dev,omitzero"`
	PR        PR                   `json:"pr,omitzero"`
	MCP       map[string]MCPServer `json:"mcp,omitempty"`
	Skills    []string             `json:"skills,omitempty"`
	Plan      ResolvedPlan         `json:"plan"`
	Repair    ResolvedRepair       `json:"repair"`
	Network   Network              `json:"network,omitzero"`
	Resources Resources            `json:"resources,omitzero"`
	Cache     ResolvedCache        `json:"cache"`
	Review    ResolvedReview       `json:"review"`
	Secrets   Secrets              `json:"secrets,omitzero"`
	CI        ResolvedCI           `json:"ci"`
	Reports   ResolvedReports      `json:"reports"`
	// Budgets are the lowest monthly budgets the layers set (0: none).
	Budgets Budgets `json:"budgets,omitzero"`
}

// ResolvedReview is the reviewer's pass.
type ResolvedReview struct {
	Enabled     bool    `json:"enabled"`
	Model       string  `json:"model,omitempty"`
	BudgetShare float64 `json:"budget_share"`
	// Auto: every writer's non-draft pull request is reviewed (review.auto).
	Auto bool `json:"auto,omitempty"`
}

// ResolvedService is a service with its healthcheck decided: the one it
// names, TCP on its first port when it names none, or none (Healthcheck's
// Kind is "") for a service without ports, which is ready once it runs.
type ResolvedService struct {
	Image       string            `json:"image"`
	Command     []string          `json:"command,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	Ports       []int             `json:"ports,omitempty"`
	Healthcheck Healthcheck       `json:"healthcheck"`
}

// ResolvedPlan is the approval gate.
type ResolvedPlan struct {
	Required bool `json:"required"`
	Strict   bool `json:"strict,omitempty"`
}

// ResolvedRepair is the repair loop after failing checks.
type ResolvedRepair struct {
	Attempts     int     `json:"attempts"`
	BudgetShare  float64 `json:"budget_share"`
	MinBudgetUSD float64 `json:"min_budget_usd"`
}

// Kind is the probe a healthcheck asks for: "tcp", "http", "command", or
// "" when it names none.
func (h Healthcheck) Kind() string {
	switch {
	case h.TCP != 0:
		return "tcp"
	case h.HTTP != "":
		return "http"
	case len(h.Command) > 0:
		return "command"
	}
	return ""
}

// RepairBudget is what repairs may spend of a run's budget: its share,
// never less than the minimum.
func (r *Resolved) RepairBudget(budget float64) float64 {
	return max(budget*r.Repair.BudgetShare, r.Repair.MinBudgetUSD)
}

// resolve fills in every default of c, a merged and verified layer: the
// one place that knows them.
func resolve(c *Config) Resolved {
	r := Resolved{
		Name: c.Name, Mode: cmp.Or(c.Mode, ModeCoding), Branch: c.Branch,
		Harness: cmp.Or(c.Harness, DefaultHarness), Model: c.Model, Command: c.Command,
		MaxBudgetUSD:      cmp.Or(c.MaxBudgetUSD, DefaultMaxBudgetUSD),
		TimeoutMinutes:    cmp.Or(c.TimeoutMinutes, DefaultTimeoutMinutes),
		InactivitySeconds: cmp.Or(c.InactivitySeconds, DefaultInactivitySeconds),
		Attempts:          c.Attempts,
		Supabase:          c.Supabase, Env: maps.Clone(c.Env), Lifecycle: c.Lifecycle, Dev: c.Dev, PR: c.PR,
		MCP: maps.Clone(c.MCP), Skills: c.Skills, Network: c.Network, Resources: c.Resources,
		Plan:  ResolvedPlan{Required: c.Plan.Required == nil || *c.Plan.Required, Strict: c.Plan.Strict != nil && *c.Plan.Strict},
		Cache: c.Cache.resolve(),
		Review: ResolvedReview{Enabled: c.Review.Enabled != nil && *c.Review.Enabled, Model: c.Review.Model,
			BudgetShare: cmp.Or(c.Review.BudgetShare, DefaultReviewShare), Auto: c.Review.Auto != nil && *c.Review.Auto},
		Secrets: Secrets{Allow: c.Secrets.Allow},
		CI:      c.CI.resolve(), Reports: c.Reports.resolve(), Budgets: c.Budgets,
		Repair: ResolvedRepair{
			Attempts:     DefaultRepairAttempts,
			BudgetShare:  cmp.Or(c.Repair.BudgetShare, DefaultRepairShare),
			MinBudgetUSD: cmp.Or(c.Repair.MinBudgetUSD, DefaultRepairMinUSD),
		},
	}
	if c.Repair.Attempts != nil {
		r.Repair.Attempts = *c.Repair.Attempts
	}
	for _, ch := range c.Validate {
		ch.TimeoutSeconds = cmp.Or(ch.TimeoutSeconds, DefaultCheckTimeout)
		r.Validate = append(r.Validate, ch)
	}
	for name, s := range c.Services {
		if r.Services == nil {
			r.Services = map[string]ResolvedService{}
		}
		rs := ResolvedService{Image: s.Image, Command: s.Command, Env: s.Env, Ports: s.Ports}
		if s.Healthcheck != nil {
			rs.Healthcheck = *s.Healthcheck
		} else if len(s.Ports) > 0 {
			rs.Healthcheck.TCP = s.Ports[0]
		}
		rs.Healthcheck.TimeoutSeconds = cmp.Or(rs.Healthcheck.TimeoutSeconds, DefaultHealthTimeout)
		r.Services[name] = rs
	}
	return r
}

// layer is r as a layer that sets everything, for checking it again
// (Check) and for showing it.
func (r *Resolved) layer() Config {
	required, attempts, strict, review, auto := r.Plan.Required, r.Repair.Attempts, r.Plan.Strict, r.Review.Enabled, r.Review.Auto
	c := Config{
		Name: r.Name, Mode: r.Mode, Branch: r.Branch, Harness: r.Harness, Model: r.Model, Command: r.Command,
		MaxBudgetUSD: r.MaxBudgetUSD, TimeoutMinutes: r.TimeoutMinutes, InactivitySeconds: r.InactivitySeconds, Attempts: r.Attempts,
		Supabase: r.Supabase, Env: r.Env, Lifecycle: r.Lifecycle, Validate: r.Validate, Dev: r.Dev, PR: r.PR,
		MCP: r.MCP, Skills: r.Skills, Network: r.Network, Resources: r.Resources,
		Cache:   r.Cache.layer(),
		Plan:    Plan{Required: &required, Strict: &strict},
		Review:  Review{Enabled: &review, Model: r.Review.Model, BudgetShare: r.Review.BudgetShare, Auto: &auto},
		Secrets: r.Secrets,
		CI:      r.CI.layer(), Reports: r.Reports.layer(), Budgets: r.Budgets,
		Repair: Repair{Attempts: &attempts, BudgetShare: r.Repair.BudgetShare, MinBudgetUSD: r.Repair.MinBudgetUSD},
	}
	for name, s := range r.Services {
		if c.Services == nil {
			c.Services = map[string]Service{}
		}
		svc := Service{Image: s.Image, Command: s.Command, Env: s.Env, Ports: s.Ports}
		if s.Healthcheck.Kind() != "" {
			hc := s.Healthcheck
			svc.Healthcheck = &hc
		}
		c.Services[name] = svc
	}
	return c
}

// Check verifies a resolved configuration that came over the wire: what
// a file may say, and that nothing is left unset.
func (r *Resolved) Check() error {
	c := r.layer()
	errs := c.validate("", nil)
	bad := func(field, msg string) { errs = append(errs, &FieldError{Field: field, Msg: msg}) }
	if r.Mode == "" || r.Harness == "" {
		bad("mode, harness", "unset: the configuration was not resolved")
	}
	if r.MaxBudgetUSD <= 0 || r.TimeoutMinutes <= 0 || r.InactivitySeconds <= 0 {
		bad("max_budget_usd, timeout_minutes, inactivity_timeout", "must be positive")
	}
	for _, ch := range r.Validate {
		if ch.TimeoutSeconds <= 0 {
			bad("validate."+ch.Name+".timeout_seconds", "must be positive")
		}
	}
	for name, s := range r.Services {
		if s.Healthcheck.TimeoutSeconds <= 0 {
			bad("services."+name+".healthcheck.timeout_seconds", "must be positive")
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// Resolve is c alone resolved: no server defaults, no flags, no limits
// (the command line's files; tests).
func (c Config) Resolve() (Resolved, error) {
	r, _, err := ResolveLayers(Config{}, []Layer{{Name: FileName, Config: &c}}, Flags{}, Limits{})
	return r, err
}

// MustResolve is Config.Resolve for configurations known to be valid
// (tests); an invalid one panics, naming what is wrong.
func MustResolve(c Config) Resolved {
	r, err := c.Resolve()
	if err != nil {
		panic(fmt.Sprintf("sandboxcfg.MustResolve: %v", err))
	}
	return r
}

// NumAttempts is how many execute runs an approval of r starts: 1 unless
// attempts (or --attempts) asks for more.
func (r *Resolved) NumAttempts() int { return max(r.Attempts, 1) }
