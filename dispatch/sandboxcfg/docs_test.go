package sandboxcfg_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/testkit/docsync"
)

const referenceCommand = "go test ./dispatch/sandboxcfg -run TestDocsSandboxYMLReference -update"

// docs/sandbox-yml.md's reference is generated from the JSON Schema (which
// TestSchemaUpToDate keeps equal to the model): every key, its type and
// its description, with an example taken from testdata/full.sandbox.yml,
// which sets every key and parses (TestParseFullConfig). A key the
// example file lacks fails the test.
func TestDocsSandboxYMLReference(t *testing.T) {
	raw, err := sandboxcfg.MarshalSchema()
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	var example yaml.Node
	if err := yaml.Unmarshal(readTestdata(t, "full.sandbox.yml"), &example); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("| key | type | meaning | example |\n| --- | --- | --- | --- |\n")
	var missing []string
	walkSchema(schema, nil, func(path []string, s map[string]any) {
		ex := exampleAt(example.Content[0], path)
		if ex == "" {
			missing = append(missing, strings.Join(path, "."))
		}
		desc, _ := s["description"].(string)
		if enum, ok := s["enum"].([]any); ok {
			desc += fmt.Sprintf(" One of: %v.", strings.Trim(fmt.Sprint(enum), "[]"))
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | `%s` |\n", strings.Join(path, "."), typeOf(s), cellText(desc), cellText(ex))
	})
	if len(missing) > 0 {
		t.Errorf("testdata/full.sandbox.yml gives no example of %s: set every key there", strings.Join(missing, ", "))
	}
	docsync.Check(t, filepath.Join("..", "..", "docs", "sandbox-yml.md"), referenceCommand, b.String(), *update)
}

// walkSchema visits every property, in alphabetical order (a reader
// looks a key up); a map's entries are <name>, a list's items [].
func walkSchema(s map[string]any, path []string, visit func([]string, map[string]any)) {
	if props, ok := s["properties"].(map[string]any); ok {
		for _, name := range slices.Sorted(maps.Keys(props)) {
			p := append(append([]string(nil), path...), name)
			child, _ := props[name].(map[string]any)
			visit(p, child)
			walkSchema(child, p, visit)
		}
	}
	if ap, ok := s["additionalProperties"].(map[string]any); ok {
		walkSchema(ap, append(append([]string(nil), path...), "<name>"), visit)
	}
	if it, ok := s["items"].(map[string]any); ok {
		walkSchema(it, append(append([]string(nil), path...), "[]"), visit)
	}
	for _, o := range asList(s["oneOf"]) {
		if m, ok := o.(map[string]any); ok {
			walkSchema(m, path, visit)
		}
	}
}

func asList(v any) []any { l, _ := v.([]any); return l }

func typeOf(s map[string]any) string {
	switch t := s["type"].(type) {
	case string:
		return t
	case []any:
		return strings.Trim(strings.ReplaceAll(fmt.Sprint(t), " ", " or "), "[]")
	}
	var kinds []string
	for _, o := range asList(s["oneOf"]) {
		if m, ok := o.(map[string]any); ok {
			kinds = append(kinds, typeOf(m))
		}
	}
	return strings.Join(kinds, " or ")
}

// exampleAt is the example file's value at path, as one line of YAML: of
// a map's entries (<name>) and a list's items ([]) the first that has the
// rest of the path.
func exampleAt(n *yaml.Node, path []string) string {
	if len(path) == 0 {
		flow(n)
		out, err := yaml.Marshal(n)
		if err != nil {
			return ""
		}
		line := strings.Join(strings.Fields(string(out)), " ")
		if len(line) > 90 {
			line = line[:87] + "…"
		}
		return line
	}
	key, rest := path[0], path[1:]
	var candidates []*yaml.Node
	switch {
	case n.Kind == yaml.MappingNode && key == "<name>":
		for i := 1; i < len(n.Content); i += 2 {
			candidates = append(candidates, n.Content[i])
		}
	case n.Kind == yaml.SequenceNode && key == "[]":
		candidates = n.Content
	case n.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				candidates = append(candidates, n.Content[i+1])
			}
		}
	}
	for _, c := range candidates {
		if ex := exampleAt(c, rest); ex != "" {
			return ex
		}
	}
	return ""
}

func flow(n *yaml.Node) {
	n.HeadComment, n.LineComment, n.FootComment = "", "", ""
	if n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode {
		n.Style = yaml.FlowStyle
	}
	for _, c := range n.Content {
		flow(c)
	}
}

func cellText(s string) string { return strings.ReplaceAll(s, "|", "\\|") }

// The example at the top of docs/sandbox-yml.md is a .sandbox.yml the
// parser takes as it is.
func TestDocsExampleParses(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "sandbox-yml.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(raw), "## An example\n")
	_, rest, ok2 := strings.Cut(rest, "```yaml\n")
	example, _, ok3 := strings.Cut(rest, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/sandbox-yml.md has no yaml block under \"## An example\"")
	}
	if _, err := sandboxcfg.Parse("docs/sandbox-yml.md", []byte(example)); err != nil {
		t.Errorf("the example in docs/sandbox-yml.md does not parse: %v", err)
	}
}
