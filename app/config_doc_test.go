package app

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/testkit/docsync"
)

var updateDocs = flag.Bool("update", false, "rewrite the generated sections of docs/configuration.md")

const configDocCommand = "go test ./app -run TestDocsConfigurationReference -update"

// docs/configuration.md's reference is generated from the code: every
// key of Config (its yaml name), the variable that sets it (found by
// setting each variable the package reads and seeing which field
// changes), its default (what LoadConfig fills in) and its doc comment.
func TestDocsConfigurationReference(t *testing.T) {
	docsync.Check(t, filepath.Join("..", "docs", "configuration.md"), configDocCommand, configReference(t), *updateDocs)
}

// configRow is one key of the configuration.
type configRow struct {
	key, env, def, doc string
}

func configReference(t *testing.T) string {
	t.Helper()
	base := map[string]string{"GITHUB_APP_INTEGRATION_ID": "1", "GITHUB_APP_WEBHOOK_SECRET": "s", "GITHUB_APP_PRIVATE_KEY": testKey}
	load := func(extra map[string]string) (map[string]string, error) {
		cfg, err := LoadConfig(func(k string) (string, bool) {
			if v, ok := extra[k]; ok {
				return v, true
			}
			v, ok := base[k]
			return v, ok
		})
		if err != nil {
			return nil, err
		}
		out := map[string]string{}
		flattenConfig(reflect.ValueOf(*cfg), "", out)
		return out, nil
	}
	defaults, err := load(nil)
	if err != nil {
		t.Fatal(err)
	}
	envOf := map[string][]string{}
	var unmapped []string
	for _, name := range envNames(t) {
		keys := keysSetBy(t, name, defaults, load)
		if len(keys) == 0 {
			unmapped = append(unmapped, name)
		}
		for _, k := range keys {
			envOf[k] = append(envOf[k], name)
		}
	}
	docs := fieldDocs(t)
	var rows []configRow
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range defaults {
			if !yield(k) {
				return
			}
		}
	}) {
		def := defaults[k]
		for _, e := range envOf[k] {
			if _, required := base[e]; required {
				def = "required"
			}
		}
		rows = append(rows, configRow{key: k, env: strings.Join(envOf[k], ", "), def: def, doc: docs[k]})
	}
	var b strings.Builder
	b.WriteString("| key (`SANDBOX_CONFIG` file) | variable | when unset | meaning |\n| --- | --- | --- | --- |\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", r.key, code(r.env), code(r.def), cell(r.doc))
	}
	b.WriteString("\nVariables that set no key of the file: ")
	b.WriteString(code(strings.Join(unmapped, ", ")))
	b.WriteString(" (each is described under the table).\n\n" +
		"*When unset* is what LoadConfig leaves in the key: `–` is empty, and where the bot resolves a default of its own " +
		"from an empty key (images, artifacts, the setup cache, the CI log tail, the Nomad namespaces) the meaning or the notes below say it. " +
		"The `github.*` keys are go-githubapp's (`githubapp.Config`).\n")
	return b.String()
}

// code quotes a comma-separated list as code spans; "" is a dash.
func code(s string) string {
	if s == "" {
		return "–"
	}
	var out []string
	for _, p := range strings.Split(s, ", ") {
		out = append(out, "`"+strings.ReplaceAll(p, "|", "\\|")+"`")
	}
	return strings.Join(out, ", ")
}

func cell(s string) string { return strings.ReplaceAll(s, "|", "\\|") }

// flattenConfig writes each leaf of v under its yaml path.
func flattenConfig(v reflect.Value, prefix string, out map[string]string) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		fv := v.Field(i)
		if opts == "inline" || (name == "" && f.Anonymous) {
			flattenConfig(fv, prefix, out)
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		key := prefix + name
		// defaults is a whole .sandbox.yml (docs/sandbox-yml.md), one key here.
		if fv.Kind() == reflect.Struct && fv.Type() != reflect.TypeOf(time.Duration(0)) && name != "defaults" {
			flattenConfig(fv, key+".", out)
			continue
		}
		out[key] = leaf(fv)
	}
}

func leaf(v reflect.Value) string {
	switch {
	case v.IsZero():
		return ""
	case v.Type() == reflect.TypeOf(time.Duration(0)):
		return time.Duration(v.Int()).String()
	case v.Kind() == reflect.Struct:
		return "set"
	case v.Kind() == reflect.Slice:
		var parts []string
		for i := range v.Len() {
			parts = append(parts, fmt.Sprint(v.Index(i).Interface()))
		}
		return strings.Join(parts, ", ")
	}
	return fmt.Sprint(v.Interface())
}

var envNameRE = regexp.MustCompile(`"((?:SANDBOX|GITHUB|NOMAD|OPENCODE)_[A-Z0-9_]+)"`)

// envNames are the variables the package's code names.
func envNames(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range envNameRE.FindAllStringSubmatch(string(b), -1) {
			seen[m[1]] = true
		}
	}
	return slices.Sorted(func(yield func(string) bool) {
		for k := range seen {
			if !yield(k) {
				return
			}
		}
	})
}

// keysSetBy sets the variable to values of each kind a setting takes
// until one loads and changes keys: those keys are the ones it sets.
func keysSetBy(t *testing.T, name string, defaults map[string]string, load func(map[string]string) (map[string]string, error)) []string {
	dir := t.TempDir()
	// A required variable is given its value changed.
	required := ""
	if v, ok := map[string]string{"GITHUB_APP_INTEGRATION_ID": "2", "GITHUB_APP_WEBHOOK_SECRET": "t", "GITHUB_APP_PRIVATE_KEY": testKey + "\n"}[name]; ok {
		required = v
	}
	for _, v := range []string{required, "7", "7m", "7KiB", "true", "x/y", "x", "10.9.0.0/16", "http://127.0.0.1:7", dir, "off",
		"process", "caps", "installation", "postgres://u@127.0.0.1:7/db", "10.9.0.1:7"} {
		if v == "" {
			continue
		}
		got, err := load(map[string]string{name: v})
		if err != nil {
			continue
		}
		var keys []string
		for k, d := range defaults {
			if got[k] != d {
				keys = append(keys, k)
			}
		}
		// NOMAD_ADDR also chooses the backend's default; it sets nomad.addr.
		if len(keys) > 0 {
			slices.Sort(keys)
			if len(keys) > 1 {
				keys = slices.DeleteFunc(keys, func(k string) bool { return k == "backend" && name != "SANDBOX_BACKEND" })
			}
			return keys
		}
	}
	return nil
}

// fieldDocs are the doc comments of Config's fields, by yaml path, read
// from the packages that declare its types.
func fieldDocs(t *testing.T) map[string]string {
	t.Helper()
	byType := map[string]map[string]string{} // package path.type name -> field -> doc
	const module = "github.com/sandbox-bot/sandbox-bot/"
	for dir, pkg := range map[string]string{".": "app", "../handlers": "handlers", "../dispatch": "dispatch", "../dispatch/sandboxcfg": "dispatch/sandboxcfg"} {
		pkgs, err := parser.ParseDir(token.NewFileSet(), dir, func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pkgs {
			for _, f := range p.Files {
				ast.Inspect(f, func(n ast.Node) bool {
					ts, ok := n.(*ast.TypeSpec)
					if !ok {
						return true
					}
					st, ok := ts.Type.(*ast.StructType)
					if !ok {
						return true
					}
					fields := map[string]string{}
					var group string // the last comment, which may speak of the fields after it
					for _, fl := range st.Fields.List {
						doc := fl.Doc.Text() + fl.Comment.Text()
						for _, nm := range fl.Names {
							// The field's name starts its comment; the
							// reference names the key instead.
							d := strings.Join(strings.Fields(doc), " ")
							if rest, ok := strings.CutPrefix(d, nm.Name+" "); ok && rest != "" {
								d = strings.ToUpper(rest[:1]) + rest[1:]
							}
							// A comment above several fields names each
							// ("Workers handle ... QueueSize"): theirs too.
							if d == "" && regexp.MustCompile(`\b`+nm.Name+`\b`).MatchString(group) {
								d = group
							}
							if fl.Doc != nil {
								group = strings.Join(strings.Fields(fl.Doc.Text()), " ")
							}
							fields[nm.Name] = d
						}
					}
					byType[module+pkg+"."+ts.Name.Name] = fields
					return false
				})
			}
		}
	}
	out := map[string]string{}
	var walk func(rt reflect.Type, prefix string)
	walk = func(rt reflect.Type, prefix string) {
		for i := range rt.NumField() {
			f := rt.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if !f.IsExported() || name == "-" {
				continue
			}
			if opts == "inline" {
				walk(f.Type, prefix)
				continue
			}
			if name == "" {
				name = strings.ToLower(f.Name)
			}
			out[prefix+name] = byType[rt.PkgPath()+"."+rt.Name()][f.Name]
			if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeOf(time.Duration(0)) && name != "defaults" {
				walk(f.Type, prefix+name+".")
			}
		}
	}
	walk(reflect.TypeOf(Config{}), "")
	return out
}
