package sandboxcfg

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// The decoder walks the YAML node tree into a Config by its yaml tags,
// strictly: every unknown key, wrong type and bad value is an error with
// its line and column, and no file may expand past a budget of work.

type decoder struct {
	file string
	pos  positions
	errs Errors
	// work counts values and mapping entries visited, aliases and merges
	// included each time they are used.
	work int
	// routineErrs are the problems of routines entries (routines.go),
	// kept apart: a bad routine never fails the rest of the file.
	routineErrs Errors
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
	if v.Type() == routinesType {
		d.decodeRoutines(n, v, path)
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
