package sandboxcfg_test

import (
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

func mustParse(t *testing.T, src string) *sandboxcfg.Config {
	t.Helper()
	c, err := sandboxcfg.Parse(".sandbox.yml", []byte(src))
	if err != nil {
		t.Fatalf("Parse:\n%s\n%v", src, err)
	}
	return c
}

// withDefaults is c resolved alone, for building expected values.
func withDefaults(c sandboxcfg.Config) sandboxcfg.Resolved { return sandboxcfg.MustResolve(c) }

func TestResolveLayers(t *testing.T) {
	t.Parallel()
	server := sandboxcfg.Config{
		Model:        "anthropic/claude-haiku-4-5",
		MaxBudgetUSD: 4,
		Env:          map[string]string{"A": "server", "B": "server"},
		Validate:     sandboxcfg.Checks{{Name: "lint", Command: "make lint"}},
		Plan:         sandboxcfg.Plan{Required: ptr(true)},
		Repair:       sandboxcfg.Repair{Attempts: ptr(1), BudgetShare: 0.3},
		Resources:    sandboxcfg.Resources{CPU: 2000, MemoryMB: 4096},
		Network:      sandboxcfg.Network{Allow: []string{"proxy.golang.org"}},
	}
	for _, tc := range []struct {
		name  string
		repo  string // "" is no file at all
		flags sandboxcfg.Flags
		want  sandboxcfg.Config // before defaults
	}{
		{
			name: "no repository file: server defaults",
			want: server,
		},
		{
			name: "repository file over server defaults",
			repo: "model: openai/gpt-5\nenv:\n  B: repo\n  C: repo\nvalidate:\n  test: make test\n" +
				"plan:\n  required: false\nrepair:\n  min_budget_usd: 2\nresources:\n  memory_mb: 8192\nnetwork:\n  allow: [registry.npmjs.org]\n",
			want: sandboxcfg.Config{
				Model:        "openai/gpt-5",
				MaxBudgetUSD: 4,
				Env:          map[string]string{"A": "server", "B": "repo", "C": "repo"},
				// Lists are replaced, not appended: the repo says what runs.
				Validate:  sandboxcfg.Checks{{Name: "test", Command: "make test"}},
				Plan:      sandboxcfg.Plan{Required: ptr(false)},
				Repair:    sandboxcfg.Repair{Attempts: ptr(1), BudgetShare: 0.3, MinBudgetUSD: 2},
				Resources: sandboxcfg.Resources{CPU: 2000, MemoryMB: 8192},
				Network:   sandboxcfg.Network{Allow: []string{"registry.npmjs.org"}},
			},
		},
		{
			name:  "flags over the repository file",
			repo:  "model: openai/gpt-5\nmax_budget_usd: 6\ntimeout_minutes: 30\nharness: opencode\n",
			flags: sandboxcfg.Flags{BudgetUSD: 2.5, TimeoutMinutes: 10, Model: "anthropic/claude-opus-4-1", Harness: "claude-code"},
			want: sandboxcfg.Config{
				Model:          "anthropic/claude-opus-4-1",
				Harness:        "claude-code",
				MaxBudgetUSD:   2.5,
				TimeoutMinutes: 10,
				Env:            server.Env,
				Validate:       server.Validate,
				Plan:           server.Plan,
				Repair:         server.Repair,
				Resources:      server.Resources,
				Network:        server.Network,
			},
		},
		{
			name: "every scalar and section of the repository file",
			repo: "name: shop\nmode: coding\nbranch: develop\nharness: command\ncommand: ./agent.sh\ninactivity_timeout: 30\n" +
				"services:\n  db:\n    image: postgres:16\n    ports: [5432]\nsupabase: true\nlifecycle:\n  setup: npm ci\n" +
				"dev:\n  command: npm run dev\n  port: 3000\npr:\n  draft: true\nmcp:\n  docs:\n    url: http://docs\nskills: [a.md]\n",
			want: sandboxcfg.Config{
				Name: "shop", Mode: "coding", Branch: "develop", Harness: "command", Command: "./agent.sh",
				Model: server.Model, MaxBudgetUSD: 4, InactivitySeconds: 30,
				Services:  map[string]sandboxcfg.Service{"db": {Image: "postgres:16", Ports: []int{5432}}},
				Supabase:  true,
				Env:       server.Env,
				Lifecycle: sandboxcfg.Lifecycle{Setup: []string{"npm ci"}},
				Validate:  server.Validate,
				Dev:       sandboxcfg.Dev{Command: "npm run dev", Port: 3000},
				PR:        sandboxcfg.PR{Draft: true},
				MCP:       map[string]sandboxcfg.MCPServer{"docs": {URL: "http://docs"}},
				Skills:    []string{"a.md"},
				Plan:      server.Plan, Repair: server.Repair, Resources: server.Resources, Network: server.Network,
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var repo *sandboxcfg.Config
			if tc.repo != "" {
				repo = mustParse(t, tc.repo)
			}
			got, err := sandboxcfg.Resolve(server, repo, "acme/shop/.sandbox.yml", tc.flags, sandboxcfg.Limits{})
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if want := withDefaults(tc.want); !reflect.DeepEqual(got, want) {
				t.Errorf("Resolve:\n got %#v\nwant %#v", got, want)
			}
		})
	}
}

func TestResolveAppliesDefaults(t *testing.T) {
	t.Parallel()
	got, err := sandboxcfg.Resolve(sandboxcfg.Config{}, mustParse(t, "validate:\n  lint: make lint\n"), ".sandbox.yml", sandboxcfg.Flags{}, sandboxcfg.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Mode != "coding" || got.Harness != "opencode" || got.MaxBudgetUSD != 5 || got.TimeoutMinutes != 60 ||
		got.InactivitySeconds != 180 || got.Validate[0].TimeoutSeconds != 600 {
		t.Errorf("defaults not applied: %+v", got)
	}
	if !got.Plan.Required || got.Repair.Attempts != 2 || got.RepairBudget(got.MaxBudgetUSD) != 1 {
		t.Errorf("plan %+v, repair %+v (budget %v), want required, 2 attempts, $1", got.Plan, got.Repair, got.RepairBudget(got.MaxBudgetUSD))
	}
}

func TestResolveLimits(t *testing.T) {
	t.Parallel()
	no := false
	for _, tc := range []struct {
		name   string
		server sandboxcfg.Config
		repo   string
		flags  sandboxcfg.Flags
		limits sandboxcfg.Limits
		want   []string // every line of the error; nil means it resolves
	}{
		{
			name:   "budget at the ceiling",
			repo:   "max_budget_usd: 8\n",
			limits: sandboxcfg.Limits{MaxBudgetUSD: 8},
		},
		{
			name:   "budget over the ceiling",
			repo:   "max_budget_usd: 10\n",
			limits: sandboxcfg.Limits{MaxBudgetUSD: 8},
			want:   []string{"acme/shop/.sandbox.yml: max_budget_usd: $10.00 is over the server ceiling of $8.00"},
		},
		{
			name:   "flag budget over the ceiling",
			flags:  sandboxcfg.Flags{BudgetUSD: 9},
			limits: sandboxcfg.Limits{MaxBudgetUSD: 8},
			want:   []string{"acme/shop/.sandbox.yml: max_budget_usd: $9.00 is over the server ceiling of $8.00"},
		},
		{
			name:   "default budget over a low ceiling",
			limits: sandboxcfg.Limits{MaxBudgetUSD: 2},
			want:   []string{"acme/shop/.sandbox.yml: max_budget_usd: $5.00 is over the server ceiling of $2.00"},
		},
		{
			name:   "timeout over the ceiling",
			repo:   "timeout_minutes: 240\n",
			limits: sandboxcfg.Limits{MaxTimeoutMinutes: 120},
			want:   []string{"acme/shop/.sandbox.yml: timeout_minutes: 240 is over the server ceiling of 120"},
		},
		{
			name:   "flag timeout over the ceiling",
			flags:  sandboxcfg.Flags{TimeoutMinutes: 121},
			limits: sandboxcfg.Limits{MaxTimeoutMinutes: 120},
			want:   []string{"acme/shop/.sandbox.yml: timeout_minutes: 121 is over the server ceiling of 120"},
		},
		{
			name:   "allowed images by glob",
			repo:   "services:\n  db:\n    image: postgres:16\n  api:\n    image: ghcr.io/acme/api:1\n  cache:\n    image: redis\n",
			limits: sandboxcfg.Limits{AllowedImages: []string{"postgres:*", "ghcr.io/acme/*", "redis"}},
		},
		{
			name: "images outside the allowed globs",
			repo: "services:\n  db:\n    image: mysql:8\n  api:\n    image: ghcr.io/acme/team/api:1\n  ok:\n    image: postgres:16\n",
			// "*" stops at "/": an org's images do not admit a sub-path.
			limits: sandboxcfg.Limits{AllowedImages: []string{"postgres:*", "ghcr.io/acme/*"}},
			want: []string{
				`acme/shop/.sandbox.yml: services.api.image: "ghcr.io/acme/team/api:1" is not allowed on this server (allowed: postgres:*, ghcr.io/acme/*)`,
				`acme/shop/.sandbox.yml: services.db.image: "mysql:8" is not allowed on this server (allowed: postgres:*, ghcr.io/acme/*)`,
			},
		},
		{
			name:   "server default service image is checked too",
			server: sandboxcfg.Config{Services: map[string]sandboxcfg.Service{"db": {Image: "mysql:8"}}},
			limits: sandboxcfg.Limits{AllowedImages: []string{"postgres:*"}},
			want:   []string{`acme/shop/.sandbox.yml: services.db.image: "mysql:8" is not allowed on this server (allowed: postgres:*)`},
		},
		{
			name:   "harness not allowed",
			repo:   "harness: claude-code\n",
			limits: sandboxcfg.Limits{AllowedHarnesses: []string{"opencode"}},
			want:   []string{`acme/shop/.sandbox.yml: harness: "claude-code" is not allowed on this server (allowed: opencode)`},
		},
		{
			name:   "flag harness not allowed",
			flags:  sandboxcfg.Flags{Harness: "command"},
			limits: sandboxcfg.Limits{AllowedHarnesses: []string{"opencode", "claude-code"}},
			want: []string{
				"command: is required when harness is command",
				`acme/shop/.sandbox.yml: harness: "command" is not allowed on this server (allowed: opencode, claude-code)`,
			},
		},
		{
			name:   "default harness must be allowed",
			limits: sandboxcfg.Limits{AllowedHarnesses: []string{"claude-code"}},
			want:   []string{`acme/shop/.sandbox.yml: harness: "opencode" is not allowed on this server (allowed: claude-code)`},
		},
		{
			name:   "unknown harness from a flag",
			flags:  sandboxcfg.Flags{Harness: "codex"},
			limits: sandboxcfg.Limits{},
			want:   []string{`harness: must be one of opencode, claude-code, command, got "codex"`},
		},
		{
			name:   "allowed models by glob",
			repo:   "model: anthropic/claude-sonnet-4-5\n",
			limits: sandboxcfg.Limits{AllowedModels: []string{"anthropic/*", "openai/gpt-5"}},
		},
		{
			name:   "model not allowed",
			flags:  sandboxcfg.Flags{Model: "openai/gpt-4o"},
			limits: sandboxcfg.Limits{AllowedModels: []string{"anthropic/*", "openai/gpt-5"}},
			want:   []string{`acme/shop/.sandbox.yml: model: "openai/gpt-4o" is not allowed on this server (allowed: anthropic/*, openai/gpt-5)`},
		},
		{
			name:   "no model set leaves the choice to the harness",
			limits: sandboxcfg.Limits{AllowedModels: []string{"anthropic/*"}},
		},
		{
			name:   "allowed overrides",
			repo:   "env:\n  A: b\nvalidate:\n  lint: make lint\n",
			limits: sandboxcfg.Limits{AllowedOverrides: []string{"env", "validate"}},
		},
		{
			name:   "overrides outside the allowed list are errors",
			repo:   "model: x/y\nenv:\n  A: b\nresources:\n  cpu: 1\ndev:\n  routes: [/]\n",
			limits: sandboxcfg.Limits{AllowedOverrides: []string{"env", "validate"}},
			want: []string{
				"acme/shop/.sandbox.yml: model: the server does not let repositories set this (allowed: env, validate)",
				"acme/shop/.sandbox.yml: dev: the server does not let repositories set this (allowed: env, validate)",
				"acme/shop/.sandbox.yml: resources: the server does not let repositories set this (allowed: env, validate)",
			},
		},
		{
			name:   "flags are not repository overrides",
			flags:  sandboxcfg.Flags{BudgetUSD: 1, Model: "x/y"},
			limits: sandboxcfg.Limits{AllowedOverrides: []string{"env"}},
		},
		{
			name:   "cpu and memory ceilings",
			repo:   "resources:\n  cpu: 9000\n  memory_mb: 70000\n",
			limits: sandboxcfg.Limits{MaxCPU: 8000, MaxMemoryMB: 65536},
			want: []string{
				"acme/shop/.sandbox.yml: resources.cpu: 9000 is over the server ceiling of 8000",
				"acme/shop/.sandbox.yml: resources.memory_mb: 70000 is over the server ceiling of 65536",
			},
		},
		{
			name:   "cpu and memory at the ceilings",
			repo:   "resources:\n  cpu: 8000\n  memory_mb: 65536\n",
			limits: sandboxcfg.Limits{MaxCPU: 8000, MaxMemoryMB: 65536},
		},
		{
			name:   "supabase refused",
			repo:   "supabase: true\n",
			limits: sandboxcfg.Limits{AllowSupabase: &no},
			want:   []string{"acme/shop/.sandbox.yml: supabase: the Supabase stack is not allowed on this server"},
		},
		{
			name:   "supabase allowed when the server says nothing",
			repo:   "supabase: true\n",
			limits: sandboxcfg.Limits{},
		},
		{
			name:   "supabase off with the refusal in place",
			limits: sandboxcfg.Limits{AllowSupabase: &no},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var repo *sandboxcfg.Config
			if tc.repo != "" {
				repo = mustParse(t, tc.repo)
			}
			got, err := sandboxcfg.Resolve(tc.server, repo, "acme/shop/.sandbox.yml", tc.flags, tc.limits)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Resolve: %v", err)
				}
				if got.Harness == "" {
					t.Fatal("Resolve returned no config and no error")
				}
				return
			}
			if got.Harness != "" {
				t.Errorf("Resolve returned a config along with errors")
			}
			var errs sandboxcfg.Errors
			if !errors.As(err, &errs) {
				t.Fatalf("error is %T, want sandboxcfg.Errors: %v", err, err)
			}
			if lines := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(lines, tc.want) {
				t.Errorf("Resolve errors:\n got:\n  %s\nwant:\n  %s", strings.Join(lines, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}

// The server's defaults are one value shared by every webhook worker; a
// Resolve for one repository must not leak into the next.
func TestResolveLeavesServerDefaultsAlone(t *testing.T) {
	t.Parallel()
	server := sandboxcfg.Config{
		Env:      map[string]string{"A": "1"},
		Services: map[string]sandboxcfg.Service{"db": {Image: "postgres:16", Ports: []int{5432}}},
		MCP:      map[string]sandboxcfg.MCPServer{"docs": {URL: "http://docs"}},
		Validate: sandboxcfg.Checks{{Name: "lint", Command: "make lint"}},
	}
	snapshot := func() sandboxcfg.Config {
		return sandboxcfg.Config{
			Env:      map[string]string{"A": "1"},
			Services: map[string]sandboxcfg.Service{"db": {Image: "postgres:16", Ports: []int{5432}}},
			MCP:      map[string]sandboxcfg.MCPServer{"docs": {URL: "http://docs"}},
			Validate: sandboxcfg.Checks{{Name: "lint", Command: "make lint"}},
		}
	}
	a := mustParse(t, "env:\n  SECRET_OF_A: x\nservices:\n  cache:\n    image: redis\nmcp:\n  a-only:\n    url: http://a\n")
	if _, err := sandboxcfg.Resolve(server, a, "a/.sandbox.yml", sandboxcfg.Flags{}, sandboxcfg.Limits{}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(server, snapshot()) {
		t.Fatalf("Resolve changed the server defaults:\n got %#v\nwant %#v", server, snapshot())
	}
	b, err := sandboxcfg.Resolve(server, nil, "b/.sandbox.yml", sandboxcfg.Flags{}, sandboxcfg.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if _, leaked := b.MCP["a-only"]; leaked {
		t.Error("repository a's MCP server leaked into repository b")
	}
	if _, leaked := b.Env["SECRET_OF_A"]; leaked {
		t.Error("repository a's env leaked into repository b")
	}
	if _, leaked := b.Services["cache"]; leaked {
		t.Error("repository a's service leaked into repository b")
	}

	// Concurrent resolves (run with -race to see the data race this guards).
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := sandboxcfg.Resolve(server, a, "a/.sandbox.yml", sandboxcfg.Flags{}, sandboxcfg.Limits{}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if !reflect.DeepEqual(server, snapshot()) {
		t.Fatalf("concurrent Resolve changed the server defaults: %#v", server)
	}
}

// resolve is the one place that fills in defaults.
func TestResolveFillsDefaults(t *testing.T) {
	t.Parallel()
	base := sandboxcfg.Resolved{Mode: "coding", Harness: "opencode", MaxBudgetUSD: 5, TimeoutMinutes: 60, InactivitySeconds: 180,
		Plan: sandboxcfg.ResolvedPlan{Required: true}, Repair: sandboxcfg.ResolvedRepair{Attempts: 2, BudgetShare: 0.2, MinBudgetUSD: 1},
		Cache: sandboxcfg.ResolvedCache{Enabled: true}, Review: sandboxcfg.ResolvedReview{BudgetShare: 0.1},
		CI: sandboxcfg.ResolvedCI{FixAttempts: 2}, Reports: sandboxcfg.ResolvedReports{Outsiders: "quoted"}}
	with := func(change func(*sandboxcfg.Resolved)) sandboxcfg.Resolved {
		r := base
		change(&r)
		return r
	}
	for _, tc := range []struct {
		name string
		in   sandboxcfg.Config
		want sandboxcfg.Resolved
	}{
		{name: "empty config", want: base},
		{
			name: "set values are kept",
			in: sandboxcfg.Config{Mode: "task", Harness: "claude-code", MaxBudgetUSD: 0.5, TimeoutMinutes: 5, InactivitySeconds: 30,
				Plan: sandboxcfg.Plan{Required: ptr(false)}, Repair: sandboxcfg.Repair{Attempts: ptr(0), BudgetShare: 0.5, MinBudgetUSD: 2}},
			want: sandboxcfg.Resolved{Mode: "task", Harness: "claude-code", MaxBudgetUSD: 0.5, TimeoutMinutes: 5, InactivitySeconds: 30,
				Repair: sandboxcfg.ResolvedRepair{BudgetShare: 0.5, MinBudgetUSD: 2}, Cache: sandboxcfg.ResolvedCache{Enabled: true},
				Review: sandboxcfg.ResolvedReview{BudgetShare: 0.1}, CI: sandboxcfg.ResolvedCI{FixAttempts: 2}, Reports: sandboxcfg.ResolvedReports{Outsiders: "quoted"}},
		},
		{
			name: "check timeouts",
			in:   sandboxcfg.Config{Validate: sandboxcfg.Checks{{Name: "a", Command: "x"}, {Name: "b", Command: "y", TimeoutSeconds: 30}}},
			want: with(func(r *sandboxcfg.Resolved) {
				r.Validate = sandboxcfg.Checks{{Name: "a", Command: "x", TimeoutSeconds: 600}, {Name: "b", Command: "y", TimeoutSeconds: 30}}
			}),
		},
		{
			name: "service health checks",
			in: sandboxcfg.Config{Services: map[string]sandboxcfg.Service{
				"tcp-default": {Image: "pg", Ports: []int{5432, 5433}},
				"http":        {Image: "api", Ports: []int{80}, Healthcheck: &sandboxcfg.Healthcheck{HTTP: "/health"}},
				"slow":        {Image: "es", Healthcheck: &sandboxcfg.Healthcheck{TCP: 9200, TimeoutSeconds: 300}},
				"no-ports":    {Image: "worker"},
			}},
			want: with(func(r *sandboxcfg.Resolved) {
				r.Services = map[string]sandboxcfg.ResolvedService{
					"tcp-default": {Image: "pg", Ports: []int{5432, 5433}, Healthcheck: sandboxcfg.Healthcheck{TCP: 5432, TimeoutSeconds: 60}},
					"http":        {Image: "api", Ports: []int{80}, Healthcheck: sandboxcfg.Healthcheck{HTTP: "/health", TimeoutSeconds: 60}},
					"slow":        {Image: "es", Healthcheck: sandboxcfg.Healthcheck{TCP: 9200, TimeoutSeconds: 300}},
					"no-ports":    {Image: "worker", Healthcheck: sandboxcfg.Healthcheck{TimeoutSeconds: 60}},
				}
			}),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := sandboxcfg.MustResolve(tc.in)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("resolved:\n got %#v\nwant %#v", got, tc.want)
			}
			if err := got.Check(); err != nil {
				t.Errorf("a resolved config fails its check: %v", err)
			}
		})
	}
}

func TestResolveDoesNotWriteThroughSharedHealthchecks(t *testing.T) {
	t.Parallel()
	hc := &sandboxcfg.Healthcheck{HTTP: "/health"}
	sandboxcfg.MustResolve(sandboxcfg.Config{Services: map[string]sandboxcfg.Service{"api": {Image: "api", Ports: []int{80}, Healthcheck: hc}}})
	if hc.TimeoutSeconds != 0 {
		t.Errorf("resolving wrote into a Healthcheck it does not own (timeout %d)", hc.TimeoutSeconds)
	}
}

// A check arriving over the wire with something unset is refused: the
// sandbox applies no default of its own.
func TestCheckRefusesAnUnresolvedConfig(t *testing.T) {
	t.Parallel()
	r := sandboxcfg.MustResolve(sandboxcfg.Config{Validate: sandboxcfg.Checks{{Name: "test", Command: "go test"}}})
	r.TimeoutMinutes, r.Validate[0].TimeoutSeconds = 0, 0
	err := r.Check()
	if err == nil || !strings.Contains(err.Error(), "timeout_minutes") || !strings.Contains(err.Error(), "validate.test.timeout_seconds") {
		t.Errorf("Check = %v", err)
	}
}

func TestRepairBudget(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		budget float64
		repair sandboxcfg.Repair
		want   float64
	}{
		{"20% of the default budget is exactly the floor", 5, sandboxcfg.Repair{}, 1},
		{"20% of a larger budget", 10, sandboxcfg.Repair{}, 2},
		{"20% of a large budget", 100, sandboxcfg.Repair{}, 20},
		{"small budget gets the $1 floor", 2, sandboxcfg.Repair{}, 1},
		{"no budget gets the $1 floor", 0, sandboxcfg.Repair{}, 1},
		{"just over the floor", 5.5, sandboxcfg.Repair{}, 1.1},
		{"custom share", 10, sandboxcfg.Repair{BudgetShare: 0.5}, 5},
		{"custom floor", 10, sandboxcfg.Repair{MinBudgetUSD: 3}, 3},
		{"custom floor under the share", 50, sandboxcfg.Repair{MinBudgetUSD: 3}, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := sandboxcfg.MustResolve(sandboxcfg.Config{Repair: tc.repair})
			if got := r.RepairBudget(tc.budget); !nearly(got, tc.want) {
				t.Errorf("RepairBudget($%g) with %+v = %v, want %v", tc.budget, tc.repair, got, tc.want)
			}
		})
	}
}

func nearly(a, b float64) bool {
	d := a - b
	return d < 1e-9 && d > -1e-9
}

func TestVerifyNamesFieldsWithoutPositions(t *testing.T) {
	t.Parallel()
	c := sandboxcfg.Config{Harness: "nope", Dev: sandboxcfg.Dev{Port: 3000}}
	err := c.Verify()
	want := "harness: must be one of opencode, claude-code, command, got \"nope\"\ndev.command: is required when dev.port is set"
	if err == nil || err.Error() != want {
		t.Errorf("Verify() = %v, want:\n%s", err, want)
	}
	if err := (&sandboxcfg.Config{}).Verify(); err != nil {
		t.Errorf("Verify() of an empty config = %v", err)
	}
}

// The organisation's file sits beneath the repository's: the repository
// wins key by key, what it leaves alone comes from the org, and Origins
// names the layer each key came from.
func TestResolveLayersOrgBeneathRepo(t *testing.T) {
	t.Parallel()
	server := sandboxcfg.Config{Model: "server/model", MaxBudgetUSD: 4}
	org := mustParse(t, "model: org/model\nvalidate:\n  lint: make lint\nenv:\n  A: org\n  B: org\nresources:\n  cpu: 2000\n")
	repo := mustParse(t, "env:\n  B: repo\nresources:\n  memory_mb: 2048\n")
	got, origins, err := sandboxcfg.ResolveLayers(server, []sandboxcfg.Layer{
		{Name: "acme/.github:.sandbox.yml", Config: org},
		{Name: "acme/app:.sandbox.yml", Config: repo},
	}, sandboxcfg.Flags{BudgetUSD: 2}, sandboxcfg.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Model != "org/model" || got.MaxBudgetUSD != 2 || len(got.Validate) != 1 || got.Validate[0].Command != "make lint" {
		t.Errorf("resolved %+v: want the org's model and check, the flag's budget", got)
	}
	if got.Env["A"] != "org" || got.Env["B"] != "repo" || got.Resources.CPU != 2000 || got.Resources.MemoryMB != 2048 {
		t.Errorf("env %v resources %+v: want the repo over the org key by key", got.Env, got.Resources)
	}
	want := sandboxcfg.Origins{
		"model":          "acme/.github:.sandbox.yml",
		"validate":       "acme/.github:.sandbox.yml",
		"env":            "acme/app:.sandbox.yml",
		"resources":      "acme/app:.sandbox.yml",
		"max_budget_usd": sandboxcfg.OriginFlags,
	}
	if !reflect.DeepEqual(origins, want) {
		t.Errorf("origins %v, want %v", origins, want)
	}

	// With no repository file the org's still applies, beneath nothing.
	got, origins, err = sandboxcfg.ResolveLayers(server, []sandboxcfg.Layer{{Name: "org", Config: org}, {Name: "repo"}}, sandboxcfg.Flags{}, sandboxcfg.Limits{})
	if err != nil || got.Model != "org/model" || got.MaxBudgetUSD != 4 || origins["max_budget_usd"] != sandboxcfg.OriginServer {
		t.Errorf("org alone: %+v %v %v", got, origins, err)
	}
}

// The org's file is bound by the server exactly as a repository's is, and
// a value over a ceiling is reported against the file that set it.
func TestResolveLayersLimitsNameTheFile(t *testing.T) {
	t.Parallel()
	org := mustParse(t, "max_budget_usd: 50\nmodel: org/model\n")
	repo := mustParse(t, "model: repo/model\n")
	_, _, err := sandboxcfg.ResolveLayers(sandboxcfg.Config{}, []sandboxcfg.Layer{{Name: "acme/.github:.sandbox.yml", Config: org}, {Name: "acme/app:.sandbox.yml", Config: repo}},
		sandboxcfg.Flags{}, sandboxcfg.Limits{MaxBudgetUSD: 10, AllowedOverrides: []string{"model", "max_budget_usd"}})
	if err == nil || !strings.Contains(err.Error(), "acme/.github:.sandbox.yml: max_budget_usd: $50.00 is over the server ceiling of $10.00") {
		t.Errorf("org budget over the ceiling: %v", err)
	}
	_, _, err = sandboxcfg.ResolveLayers(sandboxcfg.Config{}, []sandboxcfg.Layer{{Name: "acme/.github:.sandbox.yml", Config: mustParse(t, "validate:\n  x: true\n")}, {Name: "acme/app:.sandbox.yml", Config: repo}},
		sandboxcfg.Flags{}, sandboxcfg.Limits{AllowedOverrides: []string{"model"}})
	if err == nil || !strings.Contains(err.Error(), "acme/.github:.sandbox.yml: validate: the server does not let repositories set this") {
		t.Errorf("org key outside allowed_overrides: %v", err)
	}
}
