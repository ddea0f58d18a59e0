package templates

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"text/template"
)

// CheckOverrides checks every operator override that has samples (Check),
// so an override naming a field its data lack, or calling a function
// wrongly, stops the bot at start with the file, the line and the problem,
// instead of failing a reply on an issue later. samples maps a template
// name ("github/ack") to data of the type it is rendered with. Overrides
// without samples (the prompts, rendered by the runner inside the sandbox)
// were only parsed by Load.
func (s *Set) CheckOverrides(samples map[string][]any) error {
	var errs []error
	for _, name := range s.Overrides() {
		if err := s.Check(name, samples[name]); err != nil {
			errs = append(errs, fmt.Errorf("template override %s: %w", s.overrides[name], err))
		}
	}
	return errors.Join(errs...)
}

// Check follows every field the named template refers to through the
// type of its samples, in every branch, and then renders it with each
// sample. The error says the line, the column and the problem.
func (s *Set) Check(name string, samples []any) error {
	t, ok := s.byName[name]
	if !ok {
		return fmt.Errorf("no template %q", name)
	}
	if len(samples) == 0 {
		return nil
	}
	if errs := checkFields(t, reflect.TypeOf(samples[0])); len(errs) > 0 {
		return fmt.Errorf("%s (its data are %T)", strings.Join(errs, "; "), samples[0])
	}
	for _, data := range samples {
		if _, err := s.Render(name, data); err != nil {
			return fmt.Errorf("%s (its data are %T)", describe(err), data)
		}
	}
	return nil
}

// Overrides lists the templates the operator overrode, by name.
func (s *Set) Overrides() []string { return slices.Sorted(maps.Keys(s.overrides)) }

// textTemplateError matches text/template's parse and execution errors:
// `template: github/ack:3:14: executing "github/ack" at <.Usr>: can't
// evaluate field Usr in type handlers.AckData` or `template: github/ack:3:
// unclosed action`.
var textTemplateError = regexp.MustCompile(`^template: [^:]*:(\d+)(?::(\d+))?: (?:executing "[^"]*" at <([^>]*)>: )?(.*)$`)

// describe rewrites a text/template error as "line 3, column 14, at
// {{.Usr}}: can't evaluate field Usr in type handlers.AckData": the
// template's internal name is left out, since the caller names the file.
func describe(err error) string {
	msg := err.Error()
	var ee template.ExecError
	if errors.As(err, &ee) {
		msg = ee.Err.Error()
	} else if _, after, ok := strings.Cut(msg, ": template: "); ok {
		msg = "template: " + after // Render's "render <name>: " prefix
	}
	m := textTemplateError.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	out := "line " + m[1]
	if m[2] != "" {
		out += ", column " + m[2]
	}
	if m[3] != "" {
		out += ", at {{" + m[3] + "}}"
	}
	return out + ": " + m[4]
}
