package sandboxcfg

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// FileName is where the bot and the CLI look for the configuration.
const FileName = ".sandbox.yml"

// Pos is a place in a YAML file.
type Pos struct{ Line, Column int }

// FieldError names what is wrong and where: the file, the line and column,
// and the dotted field path, so a person can fix it without guessing.
type FieldError struct {
	File  string
	Pos   Pos
	Field string
	Msg   string
}

func (e *FieldError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
	}
	if e.Pos.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Pos.Line, e.Pos.Column)
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in one file, in file order.
type Errors []*FieldError

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// maxErrors bounds the report: past this a person fixes and re-runs anyway.
const maxErrors = 20

// Parse decodes and validates a .sandbox.yml. Unknown keys, wrong types and
// invalid values are all reported with file, line and column. An empty file
// is a valid, empty configuration.
func Parse(file string, data []byte) (*Config, error) {
	c, pos, err := decode(file, data)
	if err != nil {
		return nil, err
	}
	if errs := c.validate(file, pos); len(errs) > 0 {
		return nil, errs
	}
	return c, nil
}

// positions maps a dotted field path to where it stands in the file.
type positions map[string]Pos

func decode(file string, data []byte) (*Config, positions, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, nil, syntaxError(file, err)
	}
	c := &Config{}
	d := &decoder{file: file, pos: positions{}}
	if len(doc.Content) > 0 {
		root := doc.Content[0]
		if len(doc.Content) > 1 {
			d.fail(doc.Content[1], "", "only one YAML document is allowed")
		}
		d.decode(root, reflect.ValueOf(c).Elem(), "")
	}
	if len(d.errs) > 0 {
		return nil, nil, d.errs
	}
	return c, d.pos, nil
}

// syntaxError turns yaml.v3's "yaml: line N: msg" into a FieldError.
func syntaxError(file string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	e := &FieldError{File: file, Msg: "invalid YAML: " + msg}
	if strings.HasPrefix(msg, "line ") {
		rest := msg[len("line "):]
		if i := strings.IndexByte(rest, ':'); i > 0 {
			if n, convErr := strconv.Atoi(rest[:i]); convErr == nil {
				e.Pos = Pos{Line: n, Column: 1}
				e.Msg = "invalid YAML: " + strings.TrimSpace(rest[i+1:])
			}
		}
	}
	return Errors{e}
}

type decoder struct {
	file string
	pos  positions
	errs Errors
}

func (d *decoder) fail(n *yaml.Node, path, format string, args ...any) {
	if len(d.errs) >= maxErrors {
		return
	}
	d.errs = append(d.errs, &FieldError{File: d.file, Pos: Pos{n.Line, n.Column}, Field: path, Msg: fmt.Sprintf(format, args...)})
}

var checksType = reflect.TypeOf(Checks{})

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// decode fills v from n, recording positions and reporting every mismatch
// rather than stopping at the first, so one round trip fixes the file.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if path != "" {
		d.pos[path] = Pos{n.Line, n.Column}
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // an explicit null leaves the zero value
	}
	if v.Type() == checksType {
		d.decodeChecks(n, v, path)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		ptr := reflect.New(v.Type().Elem())
		d.decode(n, ptr.Elem(), path)
		v.Set(ptr)
	case reflect.Struct:
		d.decodeStruct(n, v, path)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.fail(n, path, "expected a mapping (key: value), got %s", describe(n))
			return
		}
		m := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				d.fail(k, path, "keys must be plain strings")
				continue
			}
			if seen[k.Value] {
				d.fail(k, join(path, k.Value), "defined twice")
				continue
			}
			seen[k.Value] = true
			elem := reflect.New(v.Type().Elem()).Elem()
			d.decode(val, elem, join(path, k.Value))
			m.SetMapIndex(reflect.ValueOf(k.Value), elem)
		}
		v.Set(m)
	case reflect.Slice:
		items := n.Content
		if n.Kind == yaml.ScalarNode && v.Type().Elem().Kind() == reflect.String {
			// "setup: npm ci" is what people write for a single command.
			items = []*yaml.Node{n}
		} else if n.Kind != yaml.SequenceNode {
			d.fail(n, path, "expected a list, got %s", describe(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(items), len(items))
		for i, item := range items {
			d.decode(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	default:
		d.decodeScalar(n, v, path)
	}
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "expected a mapping (key: value), got %s", describe(n))
		return
	}
	fields := yamlFields(v.Type())
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		key := k.Value
		p := join(path, key)
		idx, ok := fields[key]
		if !ok {
			d.fail(k, p, "unknown field%s (valid fields: %s)", suggest(key, fieldNames(fields)), strings.Join(fieldNames(fields), ", "))
			continue
		}
		if seen[key] {
			d.fail(k, p, "defined twice")
			continue
		}
		seen[key] = true
		d.decode(val, v.Field(idx), p)
	}
	for name, idx := range fields {
		if v.Type().Field(idx).Tag.Get("required") == "true" && !seen[name] {
			d.fail(n, join(path, name), "is required")
		}
	}
}

func (d *decoder) decodeChecks(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "expected a mapping of check name to command, got %s", describe(n))
		return
	}
	var checks Checks
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		p := join(path, k.Value)
		if seen[k.Value] {
			d.fail(k, p, "defined twice")
			continue
		}
		seen[k.Value] = true
		c := Check{Name: k.Value}
		if val.Kind == yaml.ScalarNode {
			d.pos[p] = Pos{val.Line, val.Column}
			c.Command = val.Value
		} else {
			d.decode(val, reflect.ValueOf(&c).Elem(), p)
		}
		checks = append(checks, c)
	}
	v.Set(reflect.ValueOf(checks))
}

func (d *decoder) decodeScalar(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.ScalarNode {
		d.fail(n, path, "expected %s, got %s", kindName(v.Kind()), describe(n))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(n.Value)
	case reflect.Bool:
		var b bool
		if n.Tag != "!!bool" || n.Decode(&b) != nil {
			d.fail(n, path, "expected true or false, got %q", n.Value)
			return
		}
		v.SetBool(b)
	case reflect.Int:
		var i int
		if n.Tag != "!!int" || n.Decode(&i) != nil {
			d.fail(n, path, "expected a whole number, got %q", n.Value)
			return
		}
		v.SetInt(int64(i))
	case reflect.Float64:
		var f float64
		if (n.Tag != "!!int" && n.Tag != "!!float") || n.Decode(&f) != nil {
			d.fail(n, path, "expected a number, got %q", n.Value)
			return
		}
		v.SetFloat(f)
	default:
		d.fail(n, path, "unsupported field type %s", v.Type())
	}
}

func yamlFields(t reflect.Type) map[string]int {
	m := map[string]int{}
	for i := 0; i < t.NumField(); i++ {
		name := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]
		if name == "" || name == "-" {
			continue
		}
		m[name] = i
	}
	return m
}

func fieldNames(m map[string]int) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	default:
		return fmt.Sprintf("%q", n.Value)
	}
}

func kindName(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int:
		return "a whole number"
	case reflect.Float64:
		return "a number"
	}
	return k.String()
}

// suggest returns ` (did you mean "x"?)` for the closest valid name, or "".
func suggest(word string, valid []string) string {
	best, bestDist := "", 3
	for _, v := range valid {
		if d := Levenshtein(word, v); d < bestDist {
			best, bestDist = v, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// Levenshtein is the edit distance between a and b; shared with the comment
// parser's "did you mean".
func Levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// ErrNotFound is returned by loaders when no configuration exists anywhere.
var ErrNotFound = errors.New("no " + FileName + " found")
