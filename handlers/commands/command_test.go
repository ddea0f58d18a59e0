package commands_test

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/handlers/commands"
	"github.com/sandbox-bot/sandbox-bot/handlers/lifecycle"
)

type commandCase struct {
	name string
	body string
	want *commands.Command
}

// validCommands are comments that hold a command, or none; they also seed
// FuzzParseCommand.
func validCommands() []commandCase {
	return []commandCase{
		// Every command.
		{"approve", "/approve", &commands.Command{Name: "approve"}},
		{"revise", "/revise use the existing date helper", &commands.Command{Name: "revise", Text: "use the existing date helper"}},
		{"abort", "/abort", &commands.Command{Name: "abort"}},
		{"retry", "/retry", &commands.Command{Name: "retry"}},
		{"continue", "/continue", &commands.Command{Name: "continue"}},
		{"rebase", "/rebase", &commands.Command{Name: "rebase"}},
		{"plan", "/plan", &commands.Command{Name: "plan"}},

		// Flags, with a space and with =.
		{"budget with space", "/approve --budget 3", &commands.Command{Name: "approve", Flags: sandboxcfg.Flags{BudgetUSD: 3}}},
		{"budget with =", "/approve --budget=3", &commands.Command{Name: "approve", Flags: sandboxcfg.Flags{BudgetUSD: 3}}},
		{"budget in dollars", "/approve --budget $2.50", &commands.Command{Name: "approve", Flags: sandboxcfg.Flags{BudgetUSD: 2.5}}},
		{"timeout with space", "/approve --timeout 30", &commands.Command{Name: "approve", Flags: sandboxcfg.Flags{TimeoutMinutes: 30}}},
		{"timeout in minutes with =", "/retry --timeout=45m", &commands.Command{Name: "retry", Flags: sandboxcfg.Flags{TimeoutMinutes: 45}}},
		{"model", "/approve --model anthropic/claude-opus-4-1", &commands.Command{Name: "approve", Flags: sandboxcfg.Flags{Model: "anthropic/claude-opus-4-1"}}},
		{"harness with =", "/plan --harness=claude-code", &commands.Command{Name: "plan", Flags: sandboxcfg.Flags{Harness: "claude-code"}}},
		{
			"every approve flag, mixed forms", "/approve --budget=2 --timeout 20 --model x/y --harness=opencode",
			&commands.Command{Name: "approve", Flags: sandboxcfg.Flags{BudgetUSD: 2, TimeoutMinutes: 20, Model: "x/y", Harness: "opencode"}},
		},
		{"extra spaces", "/approve   --budget   3  ", &commands.Command{Name: "approve", Flags: sandboxcfg.Flags{BudgetUSD: 3}}},
		{"continue flags", "/continue --budget 1 --timeout 15", &commands.Command{Name: "continue", Flags: sandboxcfg.Flags{BudgetUSD: 1, TimeoutMinutes: 15}}},

		// Text after the command and on following lines.
		{"revise with flags and text", "/revise --budget 2 make the button blue", &commands.Command{Name: "revise", Flags: sandboxcfg.Flags{BudgetUSD: 2}, Text: "make the button blue"}},
		{"revise text on the next lines", "/revise\nUse the date helper.\n\nAnd keep the API.", &commands.Command{Name: "revise", Text: "Use the date helper.\n\nAnd keep the API."}},
		{"revise text on both", "/revise first\nsecond", &commands.Command{Name: "revise", Text: "first\nsecond"}},
		{"text after approve", "/approve\nthanks, looks right", &commands.Command{Name: "approve", Text: "thanks, looks right"}},
		{"flags stop at the text", "/revise --model x/y keep --budget as words", &commands.Command{Name: "revise", Flags: sandboxcfg.Flags{Model: "x/y"}, Text: "keep --budget as words"}},
		{"the first command counts", "/approve\n/abort", &commands.Command{Name: "approve", Text: "/abort"}},

		// Where a command may stand.
		{"after prose", "Looks good to me.\n\n/approve --budget 3", &commands.Command{Name: "approve", Flags: sandboxcfg.Flags{BudgetUSD: 3}}},
		{"indented", "   /approve", &commands.Command{Name: "approve"}},
		{"upper case", "/APPROVE", &commands.Command{Name: "approve"}},
		{"mixed case", "/Revise Please rename it", &commands.Command{Name: "revise", Text: "Please rename it"}},
		{"CRLF", "/revise fix the test\r\nand the lint\r\n", &commands.Command{Name: "revise", Text: "fix the test\nand the lint"}},
		{"CRLF before the command", "LGTM\r\n/approve --budget=4\r\n", &commands.Command{Name: "approve", Flags: sandboxcfg.Flags{BudgetUSD: 4}}},
		{"after a closed backtick fence", "```\n/abort\n```\n/approve", &commands.Command{Name: "approve"}},
		{"after a closed tilde fence", "~~~sh\n/abort\n~~~\n/rebase", &commands.Command{Name: "rebase"}},
		// A blank line ends a quote; without one the next line renders
		// inside it (see "lazy quote continuation" below).
		{"after a quote", "> /abort\n\n/approve", &commands.Command{Name: "approve"}},
		{"after a closed HTML comment", "<!-- /abort -->\n/approve", &commands.Command{Name: "approve"}},
		{"after a details block", "<details>\n/abort\n</details>\n/approve", &commands.Command{Name: "approve"}},
		{"three leading spaces", "   /approve", &commands.Command{Name: "approve"}},
		{"after a longer fence closed", "````\n```\n/abort\n````\n/approve", &commands.Command{Name: "approve"}},
		{"revise text keeps its code", "/revise use this:\n```go\nx := 1\n```", &commands.Command{Name: "revise", Text: "use this:\n```go\nx := 1\n```"}},

		// No command at all.
		{"empty", "", nil},
		{"prose", "Thanks, I will look at it tomorrow.", nil},
		{"path at the start of a line", "/etc/hosts is wrong on the runner", nil},
		{"path in prose", "see /usr/local/bin/tool for details", nil},
		{"command in the middle of a line", "please /approve this", nil},
		{"in a backtick fence", "```\n/approve\n```", nil},
		{"in a tilde fence", "~~~\n/approve --budget 3\n~~~", nil},
		{"in a fence with a language", "```yaml\n/abort\n```", nil},
		{"in an unclosed fence", "```\n/approve", nil},
		{"tilde fence not closed by backticks", "~~~\n```\n/approve\n~~~", nil},
		{"in a quote", "> /approve", nil},
		{"in an indented quote", "  > /revise do it", nil},
		{"in a nested quote", ">> /abort", nil},
		{"lazy quote continuation", "> /abort\n/approve", nil},
		{"indented code block", "Run this:\n\n    /approve", nil},
		{"indented by a tab", "\t/approve", nil},
		{"in an HTML comment", "<!-- /approve -->", nil},
		{"in a multi-line HTML comment", "<!--\n/approve\n-->", nil},
		{"in an unclosed HTML comment", "LGTM <!--\n/approve", nil},
		{"on a line with a comment", "<!-- hidden --> /approve", nil},
		{"in a details block", "<details><summary>log</summary>\n\n/approve\n\n</details>", nil},
		{"in nested details", "<DETAILS>\n<details>\n</details>\n/approve\n</details>", nil},
		{"fence closed only by a longer one", "````\n```\n/approve", nil},
		{"tilde fence not closed by a shorter one", "~~~~\n~~~\n/approve\n", nil},
		{"quoted fence", "> ```\n> /approve\n> ```", nil},
		{"slash alone", "/", nil},
		{"far from every command", "/kubernetes", nil},
		{"digits", "/123", nil},
	}
}

func TestParseCommand(t *testing.T) {
	t.Parallel()
	for _, tc := range validCommands() {
		t.Run(tc.name, func(t *testing.T) {
			got, err := commands.ParseCommand(tc.body)
			if err != nil {
				t.Fatalf("ParseCommand(%q): %v", tc.body, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseCommand(%q)\n got %#v\nwant %#v", tc.body, got, tc.want)
			}
		})
	}
}

type commandErrorCase struct {
	name string
	body string
	want string // the reply the person gets
}

func commandErrors() []commandErrorCase {
	return []commandErrorCase{
		{"typo of approve", "/aprove", "`/aprove` is not a command. Did you mean `/approve`?"},
		{"typo of revise", "/revsie the button", "`/revsie` is not a command. Did you mean `/revise`?"},
		{"typo in upper case", "/ABORTT", "`/abortt` is not a command. Did you mean `/abort`?"},
		{"typo after prose", "ok\n/rebse", "`/rebse` is not a command. Did you mean `/rebase`?"},
		{"revise without text", "/revise", "`/revise` needs your feedback after it, e.g. `/revise use the existing date helper`."},
		{"revise with flags only", "/revise --budget 3", "`/revise` needs your feedback after it, e.g. `/revise use the existing date helper`."},
		{"revise with blank lines only", "/revise\n\n  \n", "`/revise` needs your feedback after it, e.g. `/revise use the existing date helper`."},
		{"unknown flag, did you mean", "/approve --budjet 3", "`/approve` has no flag `--budjet`. Did you mean `--budget`? Its flags: `--budget`, `--model`, `--timeout`, `--harness`, `--attempts`."},
		{"unknown flag with =", "/approve --modle=x/y", "`/approve` has no flag `--modle`. Did you mean `--model`? Its flags: `--budget`, `--model`, `--timeout`, `--harness`, `--attempts`."},
		{"unknown flag, nothing close", "/approve --force", "`/approve` has no flag `--force`. Its flags: `--budget`, `--model`, `--timeout`, `--harness`, `--attempts`."},
		{"flag of another command", "/revise --harness claude-code do it", "`/revise` has no flag `--harness`. Its flags: `--budget`, `--model`, `--timeout`."},
		{"flag on a command without flags", "/abort --force", "`/abort` has no flag `--force`. It takes no flags."},
		{"flag on rebase", "/rebase --budget 1", "`/rebase` has no flag `--budget`. It takes no flags."},
		{"empty flag name", "/approve -- 3", "`/approve` has no flag `--`. Its flags: `--budget`, `--model`, `--timeout`, `--harness`, `--attempts`."},
		{"budget not a number", "/approve --budget abc", "`--budget` takes a positive number of dollars, got `abc`."},
		{"budget negative", "/approve --budget -1", "`--budget` takes a positive number of dollars, got `-1`."},
		{"budget zero", "/approve --budget=0", "`--budget` takes a positive number of dollars, got `0`."},
		{"budget NaN", "/approve --budget NaN", "`--budget` takes a positive number of dollars, got `NaN`."},
		{"budget infinite", "/approve --budget=+Inf", "`--budget` takes a positive number of dollars, got `+Inf`."},
		{"timeout fraction", "/approve --timeout 1.5", "`--timeout` takes a whole number of minutes, got `1.5`."},
		{"timeout zero", "/retry --timeout=0", "`--timeout` takes a whole number of minutes, got `0`."},
		{"timeout in seconds", "/approve --timeout 30s", "`--timeout` takes a whole number of minutes, got `30s`."},
		{"budget without value", "/approve --budget", "`--budget` needs a value, e.g. `--budget 3`."},
		{"budget with empty =", "/approve --budget=", "`--budget` needs a value, e.g. `--budget 3`."},
		{"model without value", "/approve --model", "`--model` needs a value, e.g. `--model provider/model`."},
		{"harness without value", "/plan --harness", "`--harness` needs a value, e.g. `--harness opencode`."},
		{"timeout without value", "/approve --timeout", "`--timeout` needs a value, e.g. `--timeout 30`."},
		{"a flag as the value of another", "/approve --model --budget 3", "`--model` needs a value, e.g. `--model provider/model`."},
		{"CRLF error", "/aprove\r\n", "`/aprove` is not a command. Did you mean `/approve`?"},
	}
}

func TestParseCommandErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range commandErrors() {
		t.Run(tc.name, func(t *testing.T) {
			cmd, err := commands.ParseCommand(tc.body)
			if cmd != nil {
				t.Errorf("ParseCommand(%q) returned %#v along with an error", tc.body, cmd)
			}
			var ce *commands.CommandError
			if !errors.As(err, &ce) {
				t.Fatalf("ParseCommand(%q) error = %T %v, want *CommandError", tc.body, err, err)
			}
			if ce.Msg != tc.want || err.Error() != tc.want {
				t.Errorf("ParseCommand(%q)\n got %q\nwant %q", tc.body, err.Error(), tc.want)
			}
		})
	}
}

// Every declared command parses by its name, and CommandNames lists each
// once, sorted: a command added to the declaration needs nothing here.
func TestEveryDeclaredCommandParses(t *testing.T) {
	t.Parallel()
	var want []string
	for _, c := range lifecycle.Commands {
		want = append(want, c.Name())
		body := "/" + c.Name()
		if c.NeedsText {
			body += " feedback"
		}
		cmd, err := commands.ParseCommand(body)
		if err != nil || cmd == nil || cmd.Name != c.Name() {
			t.Errorf("ParseCommand(%q) = %+v, %v", body, cmd, err)
		}
	}
	slices.Sort(want)
	if got := commands.CommandNames(); !slices.Equal(got, want) || len(want) < 9 {
		t.Errorf("CommandNames() = %v, want the declared %v", got, want)
	}
}

// FuzzParseCommand: comment bodies are written by anyone on GitHub; the
// parser must never panic, and what it returns must be usable as is.
func FuzzParseCommand(f *testing.F) {
	for _, tc := range validCommands() {
		f.Add(tc.body)
	}
	for _, tc := range commandErrors() {
		f.Add(tc.body)
	}
	names := commands.CommandNames()
	f.Fuzz(func(t *testing.T, body string) {
		cmd, err := commands.ParseCommand(body)
		if err != nil {
			if cmd != nil {
				t.Fatalf("ParseCommand(%q) returned a command and an error", body)
			}
			var ce *commands.CommandError
			if !errors.As(err, &ce) {
				t.Fatalf("ParseCommand(%q) error is %T, want *CommandError", body, err)
			}
			if strings.TrimSpace(ce.Msg) == "" {
				t.Fatalf("ParseCommand(%q) returned an empty error message", body)
			}
			return
		}
		if cmd == nil {
			return
		}
		if !slices.Contains(names, cmd.Name) {
			t.Fatalf("ParseCommand(%q) returned unknown command %q", body, cmd.Name)
		}
		if cmd.Name == "revise" && cmd.Text == "" {
			t.Fatalf("ParseCommand(%q) returned /revise without feedback", body)
		}
		if cmd.Text != strings.TrimSpace(cmd.Text) || strings.Contains(cmd.Text, "\r\n") {
			t.Fatalf("ParseCommand(%q) text %q is not trimmed and normalised", body, cmd.Text)
		}
		f := cmd.Flags
		if f.BudgetUSD < 0 || math.IsNaN(f.BudgetUSD) || math.IsInf(f.BudgetUSD, 0) {
			t.Fatalf("ParseCommand(%q) budget %v", body, f.BudgetUSD)
		}
		if f.TimeoutMinutes < 0 {
			t.Fatalf("ParseCommand(%q) timeout %d", body, f.TimeoutMinutes)
		}
		// A value may start with "--" only when given explicitly with "=".
		if (strings.HasPrefix(f.Model, "--") && !strings.Contains(body, "="+f.Model)) ||
			(strings.HasPrefix(f.Harness, "--") && !strings.Contains(body, "="+f.Harness)) {
			t.Fatalf("ParseCommand(%q) took a flag as a value: %+v", body, f)
		}
		again, errAgain := commands.ParseCommand(body)
		if errAgain != nil || !reflect.DeepEqual(cmd, again) {
			t.Fatalf("ParseCommand(%q) is not deterministic", body)
		}
	})
}
