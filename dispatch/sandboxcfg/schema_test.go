package sandboxcfg_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"

	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

var update = flag.Bool("update", false, "rewrite sandbox.schema.json from the model")

const schemaFile = "sandbox.schema.json"

func TestSchemaUpToDate(t *testing.T) {
	t.Parallel()
	want, err := sandboxcfg.MarshalSchema()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(schemaFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatalf("%v (run: go generate ./dispatch/sandboxcfg)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("dispatch/sandboxcfg/%s is out of date with the Config model: run `go generate ./dispatch/sandboxcfg` (or go test ./dispatch/sandboxcfg -run TestSchemaUpToDate -update) and commit it", schemaFile)
	}
}

// compileSchema loads the committed schema into a real draft 2020-12
// validator; compiling also checks it against the draft's meta-schema.
func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatalf("%s is not JSON: %v", schemaFile, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(schemaFile, doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(schemaFile)
	if err != nil {
		t.Fatalf("compiling %s: %v", schemaFile, err)
	}
	return sch
}

// yamlInstance turns YAML into the JSON value an editor's YAML language
// server validates.
func yamlInstance(t *testing.T, src string) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal([]byte(src), &v); err != nil {
		t.Fatalf("test YAML does not parse: %v", err)
	}
	if v == nil {
		v = map[string]any{}
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("test YAML has no JSON form: %v", err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

func TestSchemaAcceptsValidFiles(t *testing.T) {
	t.Parallel()
	sch := compileSchema(t)
	for _, tc := range []struct{ name, yaml string }{
		{"full example", string(readTestdata(t, "full.sandbox.yml"))},
		{"empty", ""},
		{"shorthands", "lifecycle:\n  setup: npm ci\nskills: AGENTS.md\nservices:\n  r:\n    image: redis\n    command: redis-server\nvalidate:\n  lint: make lint\n"},
		{"checks in both forms", "validate:\n  lint: make lint\n  test:\n    command: make test\n    timeout_seconds: 60\n"},
		{"env scalars", "env:\n  PORT: 3000\n  DEBUG: true\n  NAME: x\n"},
		{"task mode", "mode: task\nharness: command\ncommand: ./run.sh\n"},
		{"repair bounds", "repair:\n  attempts: 0\n  budget_share: 1\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Both must agree: what the bot accepts, an editor accepts.
			if _, err := sandboxcfg.Parse(".sandbox.yml", []byte(tc.yaml)); err != nil {
				t.Fatalf("Parse rejects the example: %v", err)
			}
			if err := sch.Validate(yamlInstance(t, tc.yaml)); err != nil {
				t.Errorf("schema rejects a file Parse accepts:\n%s\n%v", tc.yaml, err)
			}
		})
	}
}

func TestSchemaRejectsInvalidFiles(t *testing.T) {
	t.Parallel()
	sch := compileSchema(t)
	for _, tc := range []struct {
		name, yaml string
		where      string // JSON pointer the validator must blame
	}{
		{"unknown top-level key", "modle: x\n", ""},
		{"unknown service key", "services:\n  db:\n    image: pg\n    imagee: pg\n", "/services/db"},
		{"unknown check key", "validate:\n  test:\n    command: t\n    timeout: 5\n", "/validate/test"},
		{"unknown healthcheck key", "services:\n  db:\n    image: pg\n    healthcheck:\n      tpc: 1\n", "/services/db/healthcheck"},
		{"string for a number", "max_budget_usd: five\n", "/max_budget_usd"},
		{"fraction for a whole number", "timeout_minutes: 1.5\n", "/timeout_minutes"},
		{"string for a boolean", "supabase: \"yes\"\n", "/supabase"},
		{"list for a mapping", "services: []\n", "/services"},
		{"list for a check", "validate:\n  lint: [make, lint]\n", "/validate/lint"},
		{"mapping for a list", "skills: {a: b}\n", "/skills"},
		{"list in a string list", "lifecycle:\n  setup: [[a]]\n", "/lifecycle/setup/0"},
		{"enum", "harness: opencod\n", "/harness"},
		{"maximum", "repair:\n  attempts: 9\n", "/repair/attempts"},
		{"minimum", "max_budget_usd: -1\n", "/max_budget_usd"},
		{"missing required image", "services:\n  db:\n    ports: [1]\n", "/services/db"},
		{"check without command", "validate:\n  lint:\n    timeout_seconds: 5\n", "/validate/lint"},
		{"plan required as a string", "plan:\n  required: \"no\"\n", "/plan/required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := sandboxcfg.Parse(".sandbox.yml", []byte(tc.yaml)); err == nil {
				t.Errorf("Parse accepts what the schema must reject:\n%s", tc.yaml)
			}
			err := sch.Validate(yamlInstance(t, tc.yaml))
			var verr *jsonschema.ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("schema accepts:\n%s\n(err %v)", tc.yaml, err)
			}
			if !blames(verr, tc.where) {
				t.Errorf("schema rejects for the wrong place, want %q:\n%v", tc.where, verr)
			}
		})
	}
}

// blames reports whether some leaf of the validation error points at where.
func blames(e *jsonschema.ValidationError, where string) bool {
	if len(e.Causes) == 0 {
		return "/"+strings.Join(e.InstanceLocation, "/") == where || (where == "" && len(e.InstanceLocation) == 0)
	}
	for _, c := range e.Causes {
		if blames(c, where) {
			return true
		}
	}
	return false
}

func TestSchemaShape(t *testing.T) {
	t.Parallel()
	s, err := sandboxcfg.JSONSchema()
	if err != nil {
		t.Fatal(err)
	}
	if s.Schema != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("$schema = %q", s.Schema)
	}
	wantTop := []string{"name", "mode", "branch", "harness", "model", "command", "max_budget_usd", "timeout_minutes",
		"inactivity_timeout", "attempts", "services", "supabase", "env", "lifecycle", "cache", "validate", "dev", "pr", "mcp", "skills",
		"plan", "repair", "network", "review", "secrets", "resources", "ci", "reports", "budgets", "routines"}
	if got := s.Properties.Names(); !reflect.DeepEqual(got, wantTop) {
		t.Errorf("top-level properties (in model order):\n got %v\nwant %v", got, wantTop)
	}
	prop := func(path ...string) *sandboxcfg.Schema {
		t.Helper()
		cur := s
		for _, p := range path {
			switch {
			case p == "*":
				next, ok := cur.AdditionalProperties.(*sandboxcfg.Schema)
				if !ok {
					t.Fatalf("%v: no schema for map values", path)
				}
				cur = next
			case cur.Properties == nil || cur.Properties.Get(p) == nil:
				t.Fatalf("%v: no property %q", path, p)
			default:
				cur = cur.Properties.Get(p)
			}
		}
		return cur
	}
	for _, tc := range []struct {
		path []string
		typ  any
	}{
		{[]string{"plan", "required"}, "boolean"},         // *bool is a plain boolean
		{[]string{"repair", "attempts"}, "integer"},       // *int is a plain integer
		{[]string{"max_budget_usd"}, "number"},            // float64
		{[]string{"services", "*", "ports"}, "array"},     // []int has no string shorthand
		{[]string{"skills"}, []string{"array", "string"}}, // []string does
		{[]string{"services", "*", "healthcheck"}, "object"},
		{[]string{"env"}, "object"},
	} {
		if got := prop(tc.path...).Type; !reflect.DeepEqual(got, tc.typ) {
			t.Errorf("%v: type %v, want %v", tc.path, got, tc.typ)
		}
	}
	if a := prop("repair", "attempts"); a.Minimum == nil || *a.Minimum != 0 || a.Maximum == nil || *a.Maximum != 5 {
		t.Errorf("repair.attempts bounds: %+v", a)
	}
	if got := prop("harness").Enum; !reflect.DeepEqual(got, []string{"opencode", "claude-code", "command"}) {
		t.Errorf("harness enum = %v", got)
	}
	if got := prop("services", "*").Required; !reflect.DeepEqual(got, []string{"image"}) {
		t.Errorf("services.*.required = %v, want [image]", got)
	}
	if d := prop("services").Description; !strings.Contains(d, "placeholders") {
		t.Errorf("services description not taken from the desc tag: %q", d)
	}
	checks, ok := prop("validate").AdditionalProperties.(*sandboxcfg.Schema)
	if !ok || len(checks.OneOf) != 2 || checks.OneOf[0].Type != "string" || checks.OneOf[1].Type != "object" {
		t.Fatalf("validate values must be oneOf string | object, got %+v", prop("validate"))
	}
	if names := checks.OneOf[1].Properties.Names(); !reflect.DeepEqual(names, []string{"command", "timeout_seconds"}) {
		t.Errorf("check object properties = %v (the name is the key, not a property)", names)
	}

	// Every object with properties is closed, so a typo is flagged.
	var walk func(s *sandboxcfg.Schema, path string)
	walk = func(s *sandboxcfg.Schema, path string) {
		if s.Properties != nil {
			if s.AdditionalProperties != false {
				t.Errorf("%s: additionalProperties is %v, want false", path, s.AdditionalProperties)
			}
			for _, n := range s.Properties.Names() {
				if s.Properties.Get(n).Description == "" {
					t.Errorf("%s.%s has no description", path, n)
				}
				walk(s.Properties.Get(n), path+"."+n)
			}
		}
		if sub, ok := s.AdditionalProperties.(*sandboxcfg.Schema); ok {
			walk(sub, path+".*")
		}
		if s.Items != nil {
			walk(s.Items, path+"[]")
		}
		for i, o := range s.OneOf {
			walk(o, path+"|"+string(rune('0'+i)))
		}
	}
	walk(s, "")
}

func TestSchemaGeneratorWritesTheCommittedFile(t *testing.T) {
	t.Parallel()
	testenv.Long(t, "builds the generator")
	out := filepath.Join(t.TempDir(), "schema.json")
	cmd := goRun(t, "./gen", "-o", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run ./gen: %v\n%s", err, b)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("go run ./gen writes a schema that differs from the committed sandbox.schema.json")
	}
}

func goRun(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go tool on PATH: %v", err)
	}
	return exec.Command(gobin, append([]string{"run"}, args...)...)
}

// Every file of the Parse table that Parse accepts, the schema accepts too,
// but for the listed, deliberate differences.
func TestSchemaAgreesWithParseTable(t *testing.T) {
	t.Parallel()
	sch := compileSchema(t)
	stricter := map[string]string{
		"explicit nulls leave defaults":       "the schema has no null: an editor flags an empty key",
		"scalars as strings in env and names": "the schema wants a string for name (env values may be any scalar)",
	}
	for _, tc := range validParseCases() {
		if why, ok := stricter[tc.name]; ok {
			if err := sch.Validate(yamlInstance(t, tc.yaml)); err == nil {
				t.Errorf("%s: listed as stricter (%s) but the schema accepts it; drop it from the list", tc.name, why)
			}
			continue
		}
		if err := sch.Validate(yamlInstance(t, tc.yaml)); err != nil {
			t.Errorf("%s: Parse accepts, the schema rejects:\n%s\n%v", tc.name, tc.yaml, err)
		}
	}
}
