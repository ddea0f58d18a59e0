package sandboxcfg

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

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
		if e.File == "" {
			b.WriteString("line ") // inside another file (the server config)
		} else {
			b.WriteByte(':')
		}
		fmt.Fprintf(&b, "%d", e.Pos.Line)
		// yaml.v3 gives no column for some syntax errors; ":0" would
		// send an editor to the wrong place.
		if e.Pos.Column > 0 {
			fmt.Fprintf(&b, ":%d", e.Pos.Column)
		}
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

// UnmarshalYAML decodes a Config held in another YAML file (the server
// config's defaults) by the same rules as Parse: strict keys, the name:
// command form of validate, string shorthands, validation. Lines are those
// of the enclosing file.
func (c *Config) UnmarshalYAML(n *yaml.Node) error {
	var out Config
	d := &decoder{pos: positions{}}
	d.decode(n, reflect.ValueOf(&out).Elem(), "")
	if len(d.errs) > 0 {
		return d.errs
	}
	if errs := out.validate("", d.pos); len(errs) > 0 {
		return errs
	}
	*c = out
	return nil
}

// positions maps a dotted field path to where it stands in the file.
type positions map[string]Pos

func decode(file string, data []byte) (*Config, positions, error) {
	// A Decoder, not yaml.Unmarshal: Unmarshal reads the first document
	// and silently drops the rest, so "---" halfway through a file would
	// hide everything after it.
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return &Config{}, positions{}, nil // empty file
		}
		return nil, nil, syntaxError(file, data, err)
	}
	c := &Config{}
	d := &decoder{file: file, pos: positions{}}
	if len(doc.Content) > 0 {
		d.decode(doc.Content[0], reflect.ValueOf(c).Elem(), "")
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, nil, syntaxError(file, data, err)
	default:
		d.fail(&next, "", "only one YAML document is allowed; remove the second \"---\"")
	}
	if len(d.errs) > 0 {
		return nil, nil, d.errs
	}
	return c, d.pos, nil
}

// parserProblems are the messages of yaml.v3's parser (as opposed to its
// scanner). yaml.v3 reports their line zero-based, one above the problem.
var parserProblems = []string{
	"did not find expected <stream-start>",
	"did not find expected <document start>",
	"did not find expected node content",
	"did not find expected key",
	"did not find expected '-' indicator",
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"found duplicate %YAML directive",
	"found duplicate %TAG directive",
	"found incompatible YAML document",
	"found undefined tag handle",
}

// syntaxError turns yaml.v3's "yaml: line N: msg" into a FieldError with
// the line a person should look at. yaml.v3 leaves the line out for
// problems on the first line, for bad bytes and for unknown anchors; those
// are located here.
func syntaxError(file string, data []byte, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if i := strings.IndexByte(rest, ':'); i > 0 {
			if n, convErr := strconv.Atoi(rest[:i]); convErr == nil {
				line, msg = n, strings.TrimSpace(rest[i+1:])
			}
		}
	}
	e := &FieldError{File: file, Msg: "invalid YAML: " + msg}
	switch {
	case slices.Contains(parserProblems, msg):
		e.Pos = Pos{Line: line + 1}
	case line > 0:
		e.Pos = Pos{Line: line}
	case strings.HasPrefix(msg, "unknown anchor '"):
		name := strings.TrimSuffix(strings.TrimPrefix(msg, "unknown anchor '"), "' referenced")
		e.Pos = locate(data, bytes.Index(data, []byte("*"+name)))
	case strings.Contains(msg, "UTF-8") || strings.Contains(msg, "control characters") || strings.Contains(msg, "Unicode"):
		e.Pos = locate(data, badByte(data))
	default:
		e.Pos = Pos{Line: 1} // yaml.v3 omits "line 1"
	}
	// A problem found at the end of input ("[" never closed) is reported
	// on the line after the last one; the last line is where to look.
	if last := lineCount(data); e.Pos.Line > last {
		e.Pos = Pos{Line: last}
	}
	return Errors{e}
}

// badByte is the offset of the first byte yaml.v3's reader refuses: invalid
// UTF-8 or a character outside YAML's printable set; -1 when there is none.
func badByte(data []byte) int {
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			return i
		case r == 0x09 || r == 0x0A || r == 0x0D || r == 0x85:
		case r >= 0x20 && r <= 0x7E, r >= 0xA0 && r <= 0xD7FF, r >= 0xE000 && r <= 0xFFFD, r >= 0x10000:
		default:
			return i
		}
		i += size
	}
	return -1
}

// lineCount is the number of lines a person sees in data (at least 1).
func lineCount(data []byte) int {
	n := bytes.Count(data, []byte("\n"))
	if len(data) > 0 && data[len(data)-1] != '\n' {
		n++
	}
	return max(n, 1)
}

// locate turns a byte offset into a 1-based line and column (in
// characters); a negative offset is "somewhere in the file": line 1.
func locate(data []byte, offset int) Pos {
	if offset < 0 || offset > len(data) {
		return Pos{Line: 1}
	}
	before := data[:offset]
	line := bytes.Count(before, []byte("\n")) + 1
	lineStart := bytes.LastIndexByte(before, '\n') + 1
	return Pos{Line: line, Column: utf8.RuneCount(before[lineStart:]) + 1}
}

type decoder struct {
	file string
	pos  positions
	errs Errors
	// work counts values and mapping entries visited, aliases and merges
	// included each time they are used.
	work int
}

// maxWork bounds what one file may expand to. An alias or merge key reuses
// a subtree each time it is named, so a file of a few hundred bytes can
// stand for billions of values; the bot reads files from every repository
// it is installed on and must not stall on one of them.
const maxWork = 100_000

// spend charges n units of work and reports whether the budget still holds;
// the first overdraft is reported where it happened.
func (d *decoder) spend(n *yaml.Node, path string, units int) bool {
	before := d.work
	d.work += units
	if d.work > maxWork && before <= maxWork {
		d.fail(n, path, "the file expands to too many values (aliases and merge keys count each time they are used); limit %d", maxWork)
	}
	return d.work <= maxWork
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
	if !d.spend(n, path, 1) {
		return
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
		for _, e := range d.entries(n, path) {
			k, val := e.key, e.value
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

type entry struct{ key, value *yaml.Node }

// entries lists a mapping's key/value pairs with YAML merge keys
// (<<: *base, or <<: [*a, *b]) expanded in place, the way docker-compose
// files share service settings. A key written in the mapping wins over a
// merged one, and an earlier merge source wins over a later one.
func (d *decoder) entries(n *yaml.Node, path string) []entry {
	return d.mergeEntries(n, path, map[*yaml.Node]bool{})
}

func (d *decoder) mergeEntries(n *yaml.Node, path string, active map[*yaml.Node]bool) []entry {
	// An anchor may merge itself (&a {<<: *a}); yaml.v3 builds that cycle
	// into the node graph, so it has to be cut here.
	if active[n] {
		d.fail(n, path, "merge key refers to the mapping that contains it")
		return nil
	}
	if !d.spend(n, path, 1+len(n.Content)/2) {
		return nil
	}
	active[n] = true
	defer delete(active, n)

	own := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; !isMergeKey(k) {
			own[k.Value] = true
		}
	}
	var out []entry
	merged := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if !isMergeKey(k) {
			out = append(out, entry{k, val})
			continue
		}
		for _, src := range mergeSources(val) {
			if src.Kind != yaml.MappingNode {
				d.fail(val, join(path, "<<"), "a merge key takes an alias of a mapping or a list of them, got %s", describe(src))
				continue
			}
			for _, e := range d.mergeEntries(src, path, active) {
				if !own[e.key.Value] && !merged[e.key.Value] {
					merged[e.key.Value] = true
					out = append(out, e)
				}
			}
		}
	}
	return out
}

func isMergeKey(k *yaml.Node) bool { return k.Kind == yaml.ScalarNode && k.Tag == "!!merge" }

// mergeSources resolves the value of a merge key to the mappings it names.
func mergeSources(val *yaml.Node) []*yaml.Node {
	if val.Kind == yaml.AliasNode {
		val = val.Alias
	}
	if val.Kind != yaml.SequenceNode {
		return []*yaml.Node{val}
	}
	out := make([]*yaml.Node, len(val.Content))
	for i, item := range val.Content {
		if item.Kind == yaml.AliasNode {
			item = item.Alias
		}
		out[i] = item
	}
	return out
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "expected a mapping (key: value), got %s", describe(n))
		return
	}
	fields := yamlFields(v.Type())
	seen := map[string]bool{}
	for _, e := range d.entries(n, path) {
		k, val := e.key, e.value
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
	for _, e := range d.entries(n, path) {
		k, val := e.key, e.value
		if val.Kind == yaml.AliasNode {
			val = val.Alias // lint2: *lint names the same command
		}
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
		if math.IsNaN(f) || math.IsInf(f, 0) {
			// .nan passes every "< 0" and "> max" check downstream.
			d.fail(n, path, "expected a finite number, got %q", n.Value)
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
