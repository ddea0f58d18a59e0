package sandboxcfg_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

func ptr[T any](v T) *T { return &v }

// fullConfig is testdata/full.sandbox.yml, field by field.
func fullConfig() *sandboxcfg.Config {
	return &sandboxcfg.Config{
		Name:              "shop",
		Mode:              "coding",
		Branch:            "develop",
		Harness:           "opencode",
		Model:             "anthropic/claude-sonnet-4-5",
		Command:           "./agent.sh",
		MaxBudgetUSD:      7.5,
		TimeoutMinutes:    45,
		InactivitySeconds: 240, Attempts: 2,
		Services: map[string]sandboxcfg.Service{
			"db": {
				Image:   "postgres:16",
				Command: []string{"postgres", "-c", "fsync=off"},
				Env:     map[string]string{"POSTGRES_PASSWORD": "postgres", "POSTGRES_PORT": "5432"},
				Ports:   []int{5432},
				Healthcheck: &sandboxcfg.Healthcheck{
					Command:        []string{"pg_isready", "-U", "postgres"},
					TimeoutSeconds: 90,
				},
			},
			"cache": {Image: "redis:7", Ports: []int{6379, 16379}, Healthcheck: &sandboxcfg.Healthcheck{TCP: 16379}},
			"api": {
				Image:       "ghcr.io/acme/api:1.2",
				Ports:       []int{8080},
				Healthcheck: &sandboxcfg.Healthcheck{HTTP: "8080:/health"},
			},
		},
		Supabase: true,
		Env: map[string]string{
			"DATABASE_URL": "postgres://postgres:postgres@{db}/shop",
			"REDIS_URL":    "redis://{cache}",
			"SUPABASE_URL": "http://{supabase_kong}",
			"API_TOKEN":    "${API_TOKEN}",
			"DEBUG":        "true",
		},
		Lifecycle: sandboxcfg.Lifecycle{Setup: []string{"npm ci", "npm run db:migrate"}},
		Cache:     sandboxcfg.Cache{Enabled: ptr(true), Paths: []string{"node_modules", "packages/web/node_modules"}, KeyFiles: []string{".nvmrc"}},
		Validate: sandboxcfg.Checks{
			{Name: "lint", Command: "npm run lint"},
			{Name: "typecheck", Command: "npx tsc --noEmit"},
			{Name: "test", Command: "npm test -- --runInBand", TimeoutSeconds: 900},
		},
		Dev: sandboxcfg.Dev{Command: "npm run dev", Port: 3000, Routes: []string{"/", "/settings"}, PreviewSecrets: []string{"STRIPE_TEST_KEY"}},
		PR:  sandboxcfg.PR{Labels: []string{"agent", "needs-review"}, Draft: true, Reviewers: []string{"alice", "acme/frontend"}},
		MCP: map[string]sandboxcfg.MCPServer{
			"files": {
				Command: []string{"npx", "-y", "@modelcontextprotocol/server-filesystem", "/work"},
				Env:     map[string]string{"LOG_LEVEL": "debug"},
			},
			"docs": {URL: "https://mcp.example.com/sse"},
		},
		Skills:    []string{"docs/skills/testing.md"},
		Plan:      sandboxcfg.Plan{Required: ptr(false), Strict: ptr(true)},
		Repair:    sandboxcfg.Repair{Attempts: ptr(3), BudgetShare: 0.25, MinBudgetUSD: 2},
		Review:    sandboxcfg.Review{Enabled: ptr(true), Model: "anthropic/claude-haiku-4-5", BudgetShare: 0.15, Auto: ptr(true)},
		Secrets:   sandboxcfg.Secrets{Allow: []sandboxcfg.SecretAllow{{Path: "testdata/fixtures/**", Rule: "aws-access-token"}}},
		Network:   sandboxcfg.Network{Allow: []string{"registry.npmjs.org", "*.github.com"}},
		Resources: sandboxcfg.Resources{CPU: 4000, MemoryMB: 8192},
		CI:        sandboxcfg.CI{Fix: ptr(true), FixAttempts: 3},
		Reports:   sandboxcfg.Reports{Outsiders: "strict"},
		Budgets:   sandboxcfg.Budgets{InstallationMonthlyUSD: 400, RepoMonthlyUSD: 50},
		Routines: sandboxcfg.Routines{
			{Name: "weekly-deps", Schedule: "0 6 * * 1", Timezone: "Europe/Berlin", Task: "Update the dependencies that have new minor versions and make the tests pass.", Mode: "issue", Repositories: []string{"web"}},
			{Name: "red-main", On: "main_ci_failed", Task: "The default branch's checks fail; find why and fix it."},
		},
	}
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseFullFile(t *testing.T) {
	t.Parallel()
	got, err := sandboxcfg.Parse(".sandbox.yml", readTestdata(t, "full.sandbox.yml"))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if want := fullConfig(); !reflect.DeepEqual(got, want) {
		t.Errorf("Parse(full.sandbox.yml):\n got %#v\nwant %#v", got, want)
	}
	if r := sandboxcfg.MustResolve(*got); r.Plan.Required || r.Repair.Attempts != 3 {
		t.Errorf("plan.required: false and repair.attempts: 3 resolve to %+v and %+v", r.Plan, r.Repair)
	}
}

// TestParseEveryFieldIsCovered keeps fullConfig honest: a field added to the
// model without a line in full.sandbox.yml fails here.
func TestParseEveryFieldIsCovered(t *testing.T) {
	t.Parallel()
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		switch v.Kind() {
		case reflect.Pointer:
			// Set at all is what counts: plan.required: false is zero.
			if v.IsNil() {
				t.Errorf("%s is not set by full.sandbox.yml", path)
			}
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				f := v.Type().Field(i)
				name := strings.Split(f.Tag.Get("yaml"), ",")[0]
				if name == "-" {
					continue
				}
				walk(v.Field(i), path+"."+name)
			}
		case reflect.Map:
			if v.Len() == 0 {
				t.Errorf("%s is not set by full.sandbox.yml", path)
			}
			// Struct values must be covered by at least one entry.
			if v.Type().Elem().Kind() == reflect.Struct {
				covered := map[string]bool{}
				iter := v.MapRange()
				for iter.Next() {
					e := iter.Value()
					for i := 0; i < e.NumField(); i++ {
						if !e.Field(i).IsZero() {
							covered[e.Type().Field(i).Name] = true
						}
					}
				}
				for i := 0; i < v.Type().Elem().NumField(); i++ {
					if f := v.Type().Elem().Field(i); !covered[f.Name] {
						t.Errorf("%s.*.%s is set by no entry of full.sandbox.yml", path, f.Name)
					}
				}
			}
		default:
			if v.IsZero() {
				t.Errorf("%s is not set by full.sandbox.yml", path)
			}
		}
	}
	c, err := sandboxcfg.Parse(".sandbox.yml", readTestdata(t, "full.sandbox.yml"))
	if err != nil {
		t.Fatal(err)
	}
	walk(reflect.ValueOf(*c), "")
}

type validCase struct {
	name string
	yaml string
	want *sandboxcfg.Config
}

// validParseCases are files Parse accepts; they also seed FuzzParse.
func validParseCases() []validCase {
	return []validCase{
		{name: "empty file", yaml: "", want: &sandboxcfg.Config{}},
		{name: "only comments", yaml: "# nothing configured yet\n\n", want: &sandboxcfg.Config{}},
		{name: "empty document", yaml: "---\n", want: &sandboxcfg.Config{}},
		{name: "explicit null document", yaml: "~\n", want: &sandboxcfg.Config{}},
		{name: "one document with a start marker", yaml: "---\nname: a\n", want: &sandboxcfg.Config{Name: "a"}},
		{
			name: "explicit nulls leave defaults",
			yaml: "name: ~\nplan:\n  required: null\nservices:\nvalidate:\n",
			want: &sandboxcfg.Config{},
		},
		{
			name: "string shorthand for lists",
			yaml: "lifecycle:\n  setup: npm ci\nskills: AGENTS.md\nnetwork:\n  allow: example.com\n" +
				"services:\n  cache:\n    image: redis:7\n    command: redis-server --save ''\n    healthcheck:\n      command: redis-cli ping\n" +
				"dev:\n  command: npm run dev\n  port: 3000\n  routes: /\npr:\n  labels: agent\n  reviewers: alice\n" +
				"mcp:\n  fs:\n    command: mcp-fs\n",
			want: &sandboxcfg.Config{
				Lifecycle: sandboxcfg.Lifecycle{Setup: []string{"npm ci"}},
				Skills:    []string{"AGENTS.md"},
				Network:   sandboxcfg.Network{Allow: []string{"example.com"}},
				Services: map[string]sandboxcfg.Service{"cache": {
					Image:       "redis:7",
					Command:     []string{"redis-server --save ''"},
					Healthcheck: &sandboxcfg.Healthcheck{Command: []string{"redis-cli ping"}},
				}},
				Dev: sandboxcfg.Dev{Command: "npm run dev", Port: 3000, Routes: []string{"/"}},
				PR:  sandboxcfg.PR{Labels: []string{"agent"}, Reviewers: []string{"alice"}},
				MCP: map[string]sandboxcfg.MCPServer{"fs": {Command: []string{"mcp-fs"}}},
			},
		},
		{
			name: "validate keeps file order and both forms",
			yaml: "validate:\n  zz-slow: make e2e\n  aa-lint:\n    command: make lint\n  mm: make test\n",
			want: &sandboxcfg.Config{Validate: sandboxcfg.Checks{
				{Name: "zz-slow", Command: "make e2e"},
				{Name: "aa-lint", Command: "make lint"},
				{Name: "mm", Command: "make test"},
			}},
		},
		{
			name: "scalars as strings in env and names",
			yaml: "name: 2024\nenv:\n  PORT: 3000\n  DEBUG: true\n  RATIO: 0.5\n",
			want: &sandboxcfg.Config{Name: "2024", Env: map[string]string{"PORT": "3000", "DEBUG": "true", "RATIO": "0.5"}},
		},
		{
			name: "whole number for a dollar amount",
			yaml: "max_budget_usd: 3\nrepair:\n  min_budget_usd: 0\n  attempts: 0\n",
			want: &sandboxcfg.Config{MaxBudgetUSD: 3, Repair: sandboxcfg.Repair{Attempts: ptr(0)}},
		},
		{
			name: "plan required true",
			yaml: "plan: {required: true}\n",
			want: &sandboxcfg.Config{Plan: sandboxcfg.Plan{Required: ptr(true)}},
		},
		{
			name: "task mode",
			yaml: "mode: task\nharness: command\ncommand: ./report.sh\n",
			want: &sandboxcfg.Config{Mode: "task", Harness: "command", Command: "./report.sh"},
		},
		{
			name: "anchors and aliases",
			yaml: "services:\n  db: &pg\n    image: postgres:16\n    ports: [5432]\n  replica: *pg\n" +
				"env:\n  A: &v shared\n  B: *v\n" +
				"validate:\n  lint: &lint npm run lint\n  lint-again: *lint\n" +
				"pr:\n  labels: &labels [agent, bot]\n  reviewers: *labels\n",
			want: &sandboxcfg.Config{
				Services: map[string]sandboxcfg.Service{
					"db":      {Image: "postgres:16", Ports: []int{5432}},
					"replica": {Image: "postgres:16", Ports: []int{5432}},
				},
				Env: map[string]string{"A": "shared", "B": "shared"},
				Validate: sandboxcfg.Checks{
					{Name: "lint", Command: "npm run lint"},
					{Name: "lint-again", Command: "npm run lint"},
				},
				PR: sandboxcfg.PR{Labels: []string{"agent", "bot"}, Reviewers: []string{"agent", "bot"}},
			},
		},
		{
			name: "merge keys, own keys win",
			yaml: "services:\n  db: &pg\n    image: postgres:16\n    env: &pgenv\n      POSTGRES_PASSWORD: pw\n      POSTGRES_DB: app\n" +
				"  test-db:\n    <<: *pg\n    env:\n      <<: *pgenv\n      POSTGRES_DB: test\n    ports: [5433]\n",
			want: &sandboxcfg.Config{Services: map[string]sandboxcfg.Service{
				"db":      {Image: "postgres:16", Env: map[string]string{"POSTGRES_PASSWORD": "pw", "POSTGRES_DB": "app"}},
				"test-db": {Image: "postgres:16", Env: map[string]string{"POSTGRES_PASSWORD": "pw", "POSTGRES_DB": "test"}, Ports: []int{5433}},
			}},
		},
		{
			name: "merge keys in validate keep order",
			yaml: "validate:\n  <<: &base\n    lint: make lint\n    test: make test\n  e2e: make e2e\n",
			want: &sandboxcfg.Config{Validate: sandboxcfg.Checks{
				{Name: "lint", Command: "make lint"},
				{Name: "test", Command: "make test"},
				{Name: "e2e", Command: "make e2e"},
			}},
		},
		{
			name: "merge of several sources",
			yaml: "services:\n  a: &a {image: a:1, ports: [1]}\n  b: &b {image: b:1, command: run-b}\n  c:\n    <<: [*a, *b]\n",
			want: &sandboxcfg.Config{Services: map[string]sandboxcfg.Service{
				"a": {Image: "a:1", Ports: []int{1}},
				"b": {Image: "b:1", Command: []string{"run-b"}},
				"c": {Image: "a:1", Ports: []int{1}, Command: []string{"run-b"}},
			}},
		},
		{
			name: "CRLF line endings",
			yaml: "name: shop\r\nvalidate:\r\n  lint: make lint\r\n",
			want: &sandboxcfg.Config{Name: "shop", Validate: sandboxcfg.Checks{{Name: "lint", Command: "make lint"}}},
		},
		{
			name: "placeholders of supabase and services",
			yaml: "supabase: true\nservices:\n  redis_1:\n    image: redis\nenv:\n  R: redis://{redis_1}\n  S: \"{supabase_kong}\"\n  T: \"${TOKEN}\"\n",
			want: &sandboxcfg.Config{
				Supabase: true,
				Services: map[string]sandboxcfg.Service{"redis_1": {Image: "redis"}},
				Env:      map[string]string{"R": "redis://{redis_1}", "S": "{supabase_kong}", "T": "${TOKEN}"},
			},
		},
	}
}

func TestParseValid(t *testing.T) {
	t.Parallel()
	for _, tc := range validParseCases() {
		t.Run(tc.name, func(t *testing.T) {
			got, err := sandboxcfg.Parse(".sandbox.yml", []byte(tc.yaml))
			if err != nil {
				t.Fatalf("Parse:\n%s\nerror: %v", tc.yaml, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Parse:\n%s\n got %#v\nwant %#v", tc.yaml, got, tc.want)
			}
		})
	}
}

// topFields is the valid-field list every unknown top-level key reports.
const topFields = "(valid fields: attempts, branch, budgets, cache, ci, command, dev, env, harness, inactivity_timeout, lifecycle, max_budget_usd, mcp, mode, model, name, network, plan, pr, repair, reports, resources, review, routines, secrets, services, skills, supabase, timeout_minutes, validate)"

type errorCase struct {
	name string
	yaml string
	want []string // every line of the error, in order
}

// errorParseCases are files Parse rejects, with the exact report; they also
// seed FuzzParse.
func errorParseCases() []errorCase {
	return []errorCase{
		// Unknown keys.
		{
			name: "unknown key with did-you-mean",
			yaml: "name: shop\nmodle: x\n",
			want: []string{`ci/.sandbox.yml:2:1: modle: unknown field (did you mean "mode"?) ` + topFields},
		},
		{
			name: "unknown key far from any field",
			yaml: "frobnicate: 1\n",
			want: []string{`ci/.sandbox.yml:1:1: frobnicate: unknown field ` + topFields},
		},
		{
			name: "unknown nested key",
			yaml: "services:\n  db:\n    imagee: postgres\n",
			want: []string{
				`ci/.sandbox.yml:3:5: services.db.imagee: unknown field (did you mean "image"?) (valid fields: command, env, healthcheck, image, ports)`,
				`ci/.sandbox.yml:3:5: services.db.image: is required`,
			},
		},
		{
			name: "unknown key in a check",
			yaml: "validate:\n  test:\n    command: go test\n    timeout_second: 5\n",
			want: []string{`ci/.sandbox.yml:4:5: validate.test.timeout_second: unknown field (did you mean "timeout_seconds"?) (valid fields: command, timeout_seconds)`},
		},
		{
			name: "unknown key in healthcheck",
			yaml: "services:\n  db:\n    image: pg\n    healthcheck:\n      tpc: 5432\n",
			want: []string{`ci/.sandbox.yml:5:7: services.db.healthcheck.tpc: unknown field (did you mean "tcp"?) (valid fields: command, http, tcp, timeout_seconds)`},
		},
		// Wrong types.
		{
			name: "wrong scalar types",
			yaml: "max_budget_usd: five\ntimeout_minutes: 1.5\ninactivity_timeout: \"10\"\nsupabase: yes\n",
			want: []string{
				`ci/.sandbox.yml:1:17: max_budget_usd: expected a number, got "five"`,
				`ci/.sandbox.yml:2:18: timeout_minutes: expected a whole number, got "1.5"`,
				`ci/.sandbox.yml:3:21: inactivity_timeout: expected a whole number, got "10"`,
				`ci/.sandbox.yml:4:11: supabase: expected true or false, got "yes"`,
			},
		},
		{
			name: "wrong collection types",
			yaml: "services: []\nenv: [a]\nvalidate: [lint]\nskills: {a: b}\nplan: true\nname: [a]\n",
			want: []string{
				`ci/.sandbox.yml:1:11: services: expected a mapping (key: value), got a list`,
				`ci/.sandbox.yml:2:6: env: expected a mapping (key: value), got a list`,
				`ci/.sandbox.yml:3:11: validate: expected a mapping of check name to command, got a list`,
				`ci/.sandbox.yml:4:9: skills: expected a list, got a mapping`,
				`ci/.sandbox.yml:5:7: plan: expected a mapping (key: value), got "true"`,
				`ci/.sandbox.yml:6:7: name: expected a string, got a list`,
			},
		},
		{
			name: "scalar where a list of numbers is due",
			yaml: "services:\n  db:\n    image: x\n    ports: 5432\n",
			want: []string{`ci/.sandbox.yml:4:12: services.db.ports: expected a list, got "5432"`},
		},
		{
			name: "list item of the wrong type",
			yaml: "services:\n  db:\n    image: x\n    ports: [5432, http]\nlifecycle:\n  setup:\n    - [nested]\n",
			want: []string{
				`ci/.sandbox.yml:4:19: services.db.ports[1]: expected a whole number, got "http"`,
				`ci/.sandbox.yml:7:7: lifecycle.setup[0]: expected a string, got a list`,
			},
		},
		{
			name: "check as a list",
			yaml: "validate:\n  lint: [make, lint]\n",
			want: []string{`ci/.sandbox.yml:2:9: validate.lint: expected a mapping (key: value), got a list`},
		},
		{
			name: "check mapping without command",
			yaml: "validate:\n  lint:\n    timeout_seconds: 5\n",
			want: []string{`ci/.sandbox.yml:3:5: validate.lint.command: is required`},
		},
		{
			name: "number too large",
			yaml: "timeout_minutes: 99999999999999999999\n",
			want: []string{`ci/.sandbox.yml:1:18: timeout_minutes: expected a whole number, got "99999999999999999999"`},
		},
		{
			name: "not a finite number",
			yaml: "max_budget_usd: .nan\nrepair:\n  budget_share: .inf\n  min_budget_usd: -.inf\n",
			want: []string{
				`ci/.sandbox.yml:1:17: max_budget_usd: expected a finite number, got ".nan"`,
				`ci/.sandbox.yml:3:17: repair.budget_share: expected a finite number, got ".inf"`,
				`ci/.sandbox.yml:4:19: repair.min_budget_usd: expected a finite number, got "-.inf"`,
			},
		},
		{
			name: "top level is not a mapping",
			yaml: "- name: shop\n",
			want: []string{`ci/.sandbox.yml:1:1: expected a mapping (key: value), got a list`},
		},
		{
			name: "non-string map key",
			yaml: "env:\n  [a, b]: c\n",
			want: []string{`ci/.sandbox.yml:2:3: env: keys must be plain strings`},
		},
		// Duplicates.
		{
			name: "duplicate top-level key",
			yaml: "name: a\nmodel: m\nname: b\n",
			want: []string{`ci/.sandbox.yml:3:1: name: defined twice`},
		},
		{
			name: "duplicate service",
			yaml: "services:\n  db: {image: a}\n  db: {image: b}\n",
			want: []string{`ci/.sandbox.yml:3:3: services.db: defined twice`},
		},
		{
			name: "duplicate env var and check",
			yaml: "env:\n  A: 1\n  A: 2\nvalidate:\n  lint: a\n  lint: b\n",
			want: []string{
				`ci/.sandbox.yml:3:3: env.A: defined twice`,
				`ci/.sandbox.yml:6:3: validate.lint: defined twice`,
			},
		},
		// Documents and syntax.
		{
			name: "two documents",
			yaml: "name: a\n---\nname: b\n",
			want: []string{`ci/.sandbox.yml:2:1: only one YAML document is allowed; remove the second "---"`},
		},
		{
			name: "syntax error on the first line",
			yaml: "name: a: b\n",
			want: []string{`ci/.sandbox.yml:1: invalid YAML: mapping values are not allowed in this context`},
		},
		{
			name: "syntax error in a later line (scanner)",
			yaml: "name: a\nmodel: m\nenv:\n  A: 1\n   B: 2\n",
			want: []string{`ci/.sandbox.yml:5: invalid YAML: mapping values are not allowed in this context`},
		},
		{
			name: "unclosed flow list (parser)",
			yaml: "name: a\nskills: [a, b\nmodel: m\n",
			want: []string{`ci/.sandbox.yml:2: invalid YAML: did not find expected ',' or ']'`},
		},
		{
			name: "list item inside a mapping (parser)",
			yaml: "name: a\nmodel: m\n- item\n",
			want: []string{`ci/.sandbox.yml:3: invalid YAML: did not find expected key`},
		},
		{
			name: "tab indentation",
			yaml: "services:\n\tdb: {}\n",
			want: []string{`ci/.sandbox.yml:2: invalid YAML: found character that cannot start any token`},
		},
		{
			name: "unterminated quote, reported at the end of input",
			yaml: "name: \"shop\nmodel: m\n",
			want: []string{`ci/.sandbox.yml:2: invalid YAML: found unexpected end of stream`},
		},
		{
			name: "syntax error in the second document",
			yaml: "name: a\n---\nname: [\n",
			want: []string{`ci/.sandbox.yml:3: invalid YAML: did not find expected node content`},
		},
		{
			name: "control character",
			yaml: "name: a\nmodel: m\x01\n",
			want: []string{`ci/.sandbox.yml:2:9: invalid YAML: control characters are not allowed`},
		},
		{
			name: "invalid UTF-8",
			yaml: "name: é\nmodel: \xff\n",
			want: []string{`ci/.sandbox.yml:2:8: invalid YAML: invalid leading UTF-8 octet`},
		},
		{
			name: "unknown anchor",
			yaml: "name: a\nmodel: *nope\n",
			want: []string{`ci/.sandbox.yml:2:8: invalid YAML: unknown anchor 'nope' referenced`},
		},
		{
			name: "merge of a scalar",
			yaml: "services:\n  db:\n    <<: not-a-mapping\n    image: x\n",
			want: []string{`ci/.sandbox.yml:3:9: services.db.<<: a merge key takes an alias of a mapping or a list of them, got "not-a-mapping"`},
		},
		{
			name: "merge of itself",
			yaml: "services:\n  db: &self\n    image: x\n    <<: *self\n",
			want: []string{`ci/.sandbox.yml:2:7: services.db: merge key refers to the mapping that contains it`},
		},
		// Semantic validation.
		{
			name: "mode and harness",
			yaml: "mode: bogus\nharness: opencod\n",
			want: []string{
				`ci/.sandbox.yml:1:7: mode: must be coding or task, got "bogus"`,
				`ci/.sandbox.yml:2:10: harness: must be one of opencode, claude-code, command, got "opencod" (did you mean "opencode"?)`,
			},
		},
		{
			name: "command harness without command",
			yaml: "harness: command\n",
			want: []string{`ci/.sandbox.yml: command: is required when harness is command`},
		},
		{
			name: "negative limits",
			yaml: "max_budget_usd: -1\ntimeout_minutes: -5\ninactivity_timeout: -1\n",
			want: []string{
				`ci/.sandbox.yml:1:17: max_budget_usd: must not be negative, got -1`,
				`ci/.sandbox.yml:2:18: timeout_minutes: must be at least 1, got -5`,
				`ci/.sandbox.yml:3:21: inactivity_timeout: must be at least 1, got -1`,
			},
		},
		{
			name: "bad service",
			yaml: "services:\n  DB:\n    image: \"\"\n    ports: [70000]\n    healthcheck:\n      tcp: 1\n      http: health\n",
			want: []string{
				`ci/.sandbox.yml:3:5: services.DB: service names are lower-case letters, digits, - and _ (they become host names)`,
				`ci/.sandbox.yml:3:12: services.DB.image: is required`,
				`ci/.sandbox.yml:4:13: services.DB.ports[0]: must be a port between 1 and 65535, got 70000`,
				`ci/.sandbox.yml:6:7: services.DB.healthcheck: set exactly one of tcp, http, command`,
				`ci/.sandbox.yml:7:13: services.DB.healthcheck.http: must be a path such as /health or port:/path, got "health"`,
			},
		},
		{
			name: "healthcheck with nothing to probe and a bad port",
			yaml: "services:\n  db:\n    image: pg\n    healthcheck:\n      tcp: -1\n",
			want: []string{
				`ci/.sandbox.yml:5:12: services.db.healthcheck.tcp: must be a port between 1 and 65535, got -1`,
			},
		},
		{
			name: "placeholder naming no service",
			yaml: "env:\n  A: \"{redis}\"\n",
			want: []string{`ci/.sandbox.yml:2:6: env.A: placeholder {redis} names no service (no services are defined)`},
		},
		{
			name: "placeholder naming a missing service",
			yaml: "services:\n  db: {image: pg}\nenv:\n  A: redis://{redis}\n  B: \"{supabase_kong}\"\n",
			want: []string{
				`ci/.sandbox.yml:4:6: env.A: placeholder {redis} names no service (services: db)`,
				`ci/.sandbox.yml:5:6: env.B: placeholder {supabase_kong} names no service (services: db)`,
			},
		},
		{
			name: "empty check and negative check timeout",
			yaml: "validate:\n  lint:\n  test:\n    command: go test\n    timeout_seconds: -1\n",
			want: []string{
				`ci/.sandbox.yml:2:8: validate.lint: command is empty`,
				`ci/.sandbox.yml:5:22: validate.test.timeout_seconds: must be positive`,
			},
		},
		{
			name: "dev server",
			yaml: "dev:\n  port: 70000\n  routes: [/, settings]\n",
			want: []string{
				`ci/.sandbox.yml:2:9: dev.port: must be a port between 1 and 65535, got 70000`,
				`ci/.sandbox.yml: dev.command: is required when dev.port is set`,
				`ci/.sandbox.yml:3:15: dev.routes[1]: must start with /, got "settings"`,
			},
		},
		{
			name: "mcp with both or neither",
			yaml: "mcp:\n  both:\n    command: [x]\n    url: http://x\n  neither:\n    env: {A: b}\n",
			want: []string{
				`ci/.sandbox.yml:3:5: mcp.both: set exactly one of command, url`,
				`ci/.sandbox.yml:6:5: mcp.neither: set exactly one of command, url`,
			},
		},
		{
			name: "repair out of range",
			yaml: "repair:\n  attempts: 9\n  budget_share: 1.5\n  min_budget_usd: -1\n",
			want: []string{
				`ci/.sandbox.yml:2:13: repair.attempts: must be between 0 and 5, got 9`,
				`ci/.sandbox.yml:3:17: repair.budget_share: must be between 0 and 1, got 1.5`,
				`ci/.sandbox.yml:4:19: repair.min_budget_usd: must not be negative`,
			},
		},
		{
			name: "network allow and resources",
			yaml: "network:\n  allow: [\"https://x.com/\", \"\"]\nresources:\n  cpu: -1\n  memory_mb: -2\n",
			want: []string{
				`ci/.sandbox.yml:2:11: network.allow[0]: must be a host, not a URL (write example.com, or example.com:8443 for a port other than 443), got "https://x.com/"`,
				`ci/.sandbox.yml:2:29: network.allow[1]: must be a host name, *.domain, an IP address or a CIDR network, optionally with :port, got ""`,
				`ci/.sandbox.yml:4:8: resources.cpu: must not be negative`,
				`ci/.sandbox.yml:5:14: resources.memory_mb: must not be negative`,
			},
		},
		{
			name: "network allow ports",
			yaml: "network:\n  allow:\n    - registry.npmjs.org:443\n    - git.corp:0\n    - \"[fd00::1]:70000\"\n    - a*b.example.com\n",
			want: []string{
				`ci/.sandbox.yml:4:7: network.allow[1]: port "0" is not a number between 1 and 65535, got "git.corp:0"`,
				`ci/.sandbox.yml:5:7: network.allow[2]: port "70000" is not a number between 1 and 65535, got "[fd00::1]:70000"`,
				`ci/.sandbox.yml:6:7: network.allow[3]: must be a host name, *.domain, an IP address or a CIDR network, optionally with :port, got "a*b.example.com"`,
			},
		},
		{
			name: "cache paths outside the repository",
			yaml: "cache:\n  paths: [/usr/lib, ../up, node_modules/, .git/hooks, \".\"]\n  key_files: [\"~/.npmrc\"]\n",
			want: []string{
				`ci/.sandbox.yml:2:11: cache.paths[0]: "/usr/lib" must be relative to the repository`,
				`ci/.sandbox.yml:2:21: cache.paths[1]: "../up" is not inside the repository`,
				`ci/.sandbox.yml:2:28: cache.paths[2]: "node_modules/" is not clean; write "node_modules"`,
				`ci/.sandbox.yml:2:43: cache.paths[3]: ".git/hooks" is inside .git`,
				`ci/.sandbox.yml:2:55: cache.paths[4]: "." is not inside the repository`,
				`ci/.sandbox.yml:3:15: cache.key_files[0]: "~/.npmrc" must be relative to the repository`,
			},
		},
		{
			name: "task mode with supabase",
			yaml: "mode: task\nsupabase: true\n",
			want: []string{`ci/.sandbox.yml:2:11: supabase: task mode has no inner Docker daemon, so it cannot start the Supabase stack`},
		},
		{
			name: "task mode with services",
			yaml: "mode: task\nservices:\n  db: {image: pg}\n",
			want: []string{`ci/.sandbox.yml:3:3: services: task mode has no inner Docker daemon, so it cannot run services`},
		},
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range errorParseCases() {
		t.Run(tc.name, func(t *testing.T) {
			c, err := sandboxcfg.Parse("ci/.sandbox.yml", []byte(tc.yaml))
			if err == nil {
				t.Fatalf("Parse:\n%s\nreturned %#v, want an error", tc.yaml, c)
			}
			var errs sandboxcfg.Errors
			if !errors.As(err, &errs) {
				t.Fatalf("error is %T, want sandboxcfg.Errors: %v", err, err)
			}
			if got := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Parse:\n%s\n got:\n  %s\nwant:\n  %s", tc.yaml, strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
			for _, e := range errs {
				if e.File != "ci/.sandbox.yml" {
					t.Errorf("error %q names file %q", e, e.File)
				}
			}
		})
	}
}

func TestParseErrorsAreBounded(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := 0; i < 50; i++ {
		b.WriteString("unknown_" + strings.Repeat("x", i+1) + ": 1\n")
	}
	_, err := sandboxcfg.Parse(".sandbox.yml", []byte(b.String()))
	var errs sandboxcfg.Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error is %T: %v", err, err)
	}
	if len(errs) != 20 {
		t.Errorf("got %d errors for 50 unknown keys, want the report cut at 20", len(errs))
	}
	if errs[0].Pos.Line != 1 || errs[19].Pos.Line != 20 {
		t.Errorf("errors are not the first 20 in file order: first at line %d, last at %d", errs[0].Pos.Line, errs[19].Pos.Line)
	}
}

func TestParseSemanticErrorsAreBounded(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("env:\n")
	for i := 0; i < 30; i++ {
		b.WriteString("  V" + strings.Repeat("x", i+1) + ": \"{nope}\"\n")
	}
	_, err := sandboxcfg.Parse(".sandbox.yml", []byte(b.String()))
	var errs sandboxcfg.Errors
	if !errors.As(err, &errs) || len(errs) != 20 {
		t.Fatalf("got %d errors (%v), want 20", len(errs), err)
	}
}

func TestFieldErrorFormat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		e    sandboxcfg.FieldError
		want string
	}{
		{sandboxcfg.FieldError{File: "a.yml", Pos: sandboxcfg.Pos{Line: 3, Column: 7}, Field: "mode", Msg: "bad"}, "a.yml:3:7: mode: bad"},
		{sandboxcfg.FieldError{File: "a.yml", Pos: sandboxcfg.Pos{Line: 3}, Msg: "invalid YAML: x"}, "a.yml:3: invalid YAML: x"},
		{sandboxcfg.FieldError{File: "a.yml", Field: "harness", Msg: "bad"}, "a.yml: harness: bad"},
		{sandboxcfg.FieldError{Field: "harness", Msg: "bad"}, "harness: bad"},
		{sandboxcfg.FieldError{Pos: sandboxcfg.Pos{Line: 3, Column: 7}, Field: "mode", Msg: "bad"}, "line 3:7: mode: bad"},
		{sandboxcfg.FieldError{Msg: "bad"}, "bad"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}

func TestLevenshtein(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"", "abc", 3}, {"abc", "", 3}, {"approve", "aprove", 1},
		{"kitten", "sitting", 3}, {"mode", "model", 1}, {"abort", "abort", 0},
	} {
		if got := sandboxcfg.Levenshtein(tc.a, tc.b); got != tc.want {
			t.Errorf("Levenshtein(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := sandboxcfg.Levenshtein(tc.b, tc.a); got != tc.want {
			t.Errorf("Levenshtein(%q, %q) = %d, want %d (not symmetric)", tc.b, tc.a, got, tc.want)
		}
	}
}

// A Config inside another YAML file (the server config's defaults) follows
// Parse's rules, with the enclosing file's lines.
func TestConfigInsideAnotherYAMLFile(t *testing.T) {
	t.Parallel()
	var server struct {
		Listen   string            `yaml:"listen"`
		Defaults sandboxcfg.Config `yaml:"defaults"`
	}
	src := "listen: :8080\ndefaults:\n  lifecycle:\n    setup: make deps\n  validate:\n    lint: make lint\n    test:\n      command: make test\n      timeout_seconds: 30\n"
	if err := yaml.Unmarshal([]byte(src), &server); err != nil {
		t.Fatalf("yaml.Unmarshal: %v", err)
	}
	want := sandboxcfg.Config{
		Lifecycle: sandboxcfg.Lifecycle{Setup: []string{"make deps"}},
		Validate:  sandboxcfg.Checks{{Name: "lint", Command: "make lint"}, {Name: "test", Command: "make test", TimeoutSeconds: 30}},
	}
	if !reflect.DeepEqual(server.Defaults, want) {
		t.Errorf("defaults:\n got %#v\nwant %#v", server.Defaults, want)
	}

	for _, tc := range []struct{ src, want string }{
		{"listen: x\ndefaults:\n  modle: m\n", `line 3:3: modle: unknown field (did you mean "mode"?) ` + topFields},
		{"defaults:\n  harness: codex\n", `line 2:12: harness: must be one of opencode, claude-code, command, got "codex"`},
		{"defaults:\n  max_budget_usd: .nan\n", `line 2:19: max_budget_usd: expected a finite number, got ".nan"`},
	} {
		err := yaml.Unmarshal([]byte(tc.src), &server)
		var errs sandboxcfg.Errors
		if !errors.As(err, &errs) || err.Error() != tc.want {
			t.Errorf("yaml.Unmarshal(%q) = %v (%T), want %q", tc.src, err, err, tc.want)
		}
	}
}

// Aliases and merge keys reuse a subtree each time they are named; a small
// file must not expand into millions of values and stall the bot. Without
// the bound the first file decodes 4 million env entries and the second
// 8^11 merged mappings.
func TestParseBoundsAliasExpansion(t *testing.T) {
	t.Parallel()
	var wide strings.Builder
	wide.WriteString("services:\n  s0: &s\n    image: a\n    env:\n")
	for i := 0; i < 2000; i++ {
		fmt.Fprintf(&wide, "      V%d: x\n", i)
	}
	for i := 1; i < 2000; i++ {
		fmt.Fprintf(&wide, "  s%d: *s\n", i)
	}

	var deep strings.Builder
	deep.WriteString("services:\n  s0:\n    image: a\n    env: &m0 {A: x, B: y}\n")
	for i := 1; i < 12; i++ {
		fmt.Fprintf(&deep, "  s%d:\n    image: a\n    env: &m%d\n      <<: [", i, i)
		for j := 0; j < 8; j++ {
			if j > 0 {
				deep.WriteString(", ")
			}
			fmt.Fprintf(&deep, "*m%d", i-1)
		}
		deep.WriteString("]\n")
	}

	for name, src := range map[string]string{"aliases": wide.String(), "merge keys": deep.String()} {
		t.Run(name, func(t *testing.T) {
			_, err := sandboxcfg.Parse(".sandbox.yml", []byte(src))
			var errs sandboxcfg.Errors
			if !errors.As(err, &errs) {
				t.Fatalf("Parse of a %d-byte file that expands without bound = %v, want sandboxcfg.Errors", len(src), err)
			}
			found := false
			for _, e := range errs {
				if strings.Contains(e.Msg, "expands to too many values") && e.Pos.Line > 0 {
					found = true
				}
			}
			if !found {
				t.Errorf("no error about the expansion, with a line, among:\n%v", err)
			}
		})
	}

	// A file well inside the bound still parses: 50 services sharing one
	// 100-variable environment.
	var ok strings.Builder
	ok.WriteString("services:\n  s0: &s\n    image: a\n    env:\n")
	for i := 0; i < 100; i++ {
		fmt.Fprintf(&ok, "      V%d: x\n", i)
	}
	for i := 1; i < 50; i++ {
		fmt.Fprintf(&ok, "  s%d: *s\n", i)
	}
	c, err := sandboxcfg.Parse(".sandbox.yml", []byte(ok.String()))
	if err != nil {
		t.Fatalf("Parse of 50 aliased services: %v", err)
	}
	if len(c.Services) != 50 || len(c.Services["s49"].Env) != 100 {
		t.Errorf("got %d services, s49 with %d env vars", len(c.Services), len(c.Services["s49"].Env))
	}
}
