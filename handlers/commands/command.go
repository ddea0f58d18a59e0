// Package commands parses the command a comment gives the bot, against
// the commands the lifecycle table declares (lifecycle.Commands), and
// says which lines of a rendered comment may hold one (Commandable).
package commands

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
)

// Command grammar, one per comment:
//
//	comment  = { line } ; the first command line counts, later ones are text
//	command  = "/" name { " " flag } [ " " text ] { newline text-line }
//	flag     = "--" key ( "=" value | " " value )
//	name     = one of lifecycle.Commands (approve, revise, abort, ...)
//
// A command must start a line (up to three leading spaces). Lines the
// rendered comment shows as code, hides, quotes or folds away are never
// commands (see commandable), so quoting someone's "/approve" does not
// approve anything. Flags come right after the name; the rest of the line
// and every following line is the command's text (the feedback of
// /revise).

// Command is a parsed comment command.
type Command struct {
	Name  string
	Flags sandboxcfg.Flags
	// Text is what follows the flags: feedback for /revise.
	Text string
}

// Event is the command's row in the lifecycle tables. ParseCommand makes
// commands of lifecycle.Commands only, and each of those is a row of both
// tables (TestEveryCellIsDecided).
func (c *Command) Event() lifecycle.Event { return lifecycle.Event("/" + c.Name) }

// CommandError is a comment that looks like a command but is not a valid
// one. Its message is written for the person who typed it.
type CommandError struct{ Msg string }

func (e *CommandError) Error() string { return e.Msg }

// grammar is the vocabulary of the parser and the help reply: the
// declared commands (lifecycle.Commands), or a test's.
type Grammar []lifecycle.CommandSpec

// CommandNames lists the commands, sorted, for help texts.
func CommandNames() []string { return Grammar(lifecycle.Commands).names() }

func (g Grammar) names() []string {
	names := make([]string, 0, len(g))
	for _, c := range g {
		names = append(names, c.Name())
	}
	sort.Strings(names)
	return names
}

func (g Grammar) named(name string) (lifecycle.CommandSpec, bool) {
	for _, c := range g {
		if c.Name() == name {
			return c, true
		}
	}
	return lifecycle.CommandSpec{}, false
}

// help is the help reply's list of the commands allowed on an issue, or
// on the App's pull requests.
func (g Grammar) Help(onPR bool) []string {
	var out []string
	for _, n := range g.names() {
		c, _ := g.named(n)
		if c.Allowed(lifecycle.OnIssue, false) && !onPR || c.Allowed(lifecycle.OnPR, true) && onPR {
			out = append(out, "`/"+n+"` — "+c.Help)
		}
	}
	return out
}

// ParseCommand finds the command in a comment body. It returns nil, nil when
// the comment holds no command (most comments), and a *CommandError when a
// line is almost a command (a typo, a bad flag) so the bot can help.
func ParseCommand(body string) (*Command, error) { return Grammar(lifecycle.Commands).parse(body) }

func (g Grammar) parse(body string) (*Command, error) {
	lines := strings.Split(strings.ReplaceAll(body, "\r\n", "\n"), "\n")
	ok := Commandable(lines)
	for i, raw := range lines {
		line := strings.TrimSpace(raw)
		if !ok[i] || !strings.HasPrefix(line, "/") {
			continue
		}
		name, rest, _ := strings.Cut(line[1:], " ")
		name = strings.ToLower(name)
		spec, ok := g.named(name)
		if !ok {
			if isWord(name) {
				if s := closest(name, g.names()); s != "" {
					return nil, &CommandError{Msg: fmt.Sprintf("`/%s` is not a command. Did you mean `/%s`?", name, s)}
				}
			}
			continue // "/etc/hosts is wrong" is prose, not a command
		}
		cmd := &Command{Name: name}
		text, err := parseFlags(cmd, spec, strings.TrimSpace(rest))
		if err != nil {
			return nil, err
		}
		if tail := strings.TrimSpace(strings.Join(lines[i+1:], "\n")); tail != "" {
			if text != "" {
				text += "\n"
			}
			text += tail
		}
		cmd.Text = strings.TrimSpace(text)
		if spec.NeedsText && cmd.Text == "" {
			return nil, &CommandError{Msg: fmt.Sprintf("`/%s` needs your feedback after it, e.g. `/%s use the existing date helper`.", name, name)}
		}
		return cmd, nil
	}
	return nil, nil
}

// parseFlags consumes leading --flags and returns the remaining text.
func parseFlags(cmd *Command, spec lifecycle.CommandSpec, rest string) (string, error) {
	for strings.HasPrefix(rest, "--") {
		tok, after, _ := strings.Cut(rest, " ")
		key, val, hasEq := strings.Cut(strings.TrimPrefix(tok, "--"), "=")
		rest = strings.TrimSpace(after)
		if !hasEq && !strings.HasPrefix(rest, "--") {
			// "--model --budget 3" is a forgotten value, not a model
			// named "--budget".
			val, after, _ = strings.Cut(rest, " ")
			rest = strings.TrimSpace(after)
		}
		if !slices.Contains(spec.Flags, key) {
			msg := fmt.Sprintf("`/%s` has no flag `--%s`.", cmd.Name, key)
			if s := closest(key, spec.Flags); s != "" {
				msg += fmt.Sprintf(" Did you mean `--%s`?", s)
			}
			if len(spec.Flags) > 0 {
				msg += " Its flags: " + flagList(spec.Flags) + "."
			} else {
				msg += " It takes no flags."
			}
			return "", &CommandError{Msg: msg}
		}
		if val == "" {
			return "", &CommandError{Msg: fmt.Sprintf("`--%s` needs a value, e.g. `--%s %s`.", key, key, flagExample(key))}
		}
		if err := setFlag(&cmd.Flags, key, val); err != nil {
			return "", err
		}
	}
	return rest, nil
}

func setFlag(f *sandboxcfg.Flags, key, val string) error {
	switch key {
	case "budget":
		v, err := strconv.ParseFloat(strings.TrimPrefix(val, "$"), 64)
		// ParseFloat takes "NaN" and "Inf"; neither is a budget.
		if err != nil || v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return &CommandError{Msg: fmt.Sprintf("`--budget` takes a positive number of dollars, got `%s`.", val)}
		}
		f.BudgetUSD = v
	case "timeout":
		v, err := strconv.Atoi(strings.TrimSuffix(val, "m"))
		if err != nil || v <= 0 {
			return &CommandError{Msg: fmt.Sprintf("`--timeout` takes a whole number of minutes, got `%s`.", val)}
		}
		f.TimeoutMinutes = v
	case "attempts":
		v, err := strconv.Atoi(val)
		if err != nil || v <= 0 {
			return &CommandError{Msg: fmt.Sprintf("`--attempts` takes a whole number of runs from 1 up, got `%s`.", val)}
		}
		f.Attempts = v
	case "model":
		f.Model = val
	case "harness":
		f.Harness = val
	}
	return nil
}

func flagExample(key string) string {
	switch key {
	case "budget":
		return "3"
	case "timeout":
		return "30"
	case "harness":
		return "opencode"
	case "attempts":
		return "3"
	}
	return "provider/model"
}

func flagList(flags []string) string {
	parts := make([]string, len(flags))
	for i, f := range flags {
		parts[i] = "`--" + f + "`"
	}
	return strings.Join(parts, ", ")
}

func isWord(s string) bool {
	if s == "" || len(s) > 20 {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && r != '-' {
			return false
		}
	}
	return true
}

// closest returns the valid name within edit distance 2 of s, or "". Of
// two as near, the one with s's letters wins: two letters swapped
// ("/revsie") is nearer /revise than /review.
func closest(s string, valid []string) string {
	best, bestDist := "", 3
	for _, v := range valid {
		d := sandboxcfg.Levenshtein(s, v)
		if d < bestDist || d == bestDist && best != "" && sameLetters(s, v) && !sameLetters(s, best) {
			best, bestDist = v, d
		}
	}
	return best
}

// sameLetters reports whether a and b are made of the same letters.
func sameLetters(a, b string) bool {
	x, y := []byte(a), []byte(b)
	slices.Sort(x)
	slices.Sort(y)
	return string(x) == string(y)
}
