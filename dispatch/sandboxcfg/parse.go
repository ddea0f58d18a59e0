package sandboxcfg

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
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
