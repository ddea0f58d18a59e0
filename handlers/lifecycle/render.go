package lifecycle

import (
	"fmt"
	"strings"
)

// Markdown renders the three tables for docs/lifecycle.md, where a test keeps
// them equal to the code (TestDocsShowTheTable).
func Markdown() string {
	var b strings.Builder
	writeCommands(&b, Commands)
	b.WriteString("\n**On an issue** (row: what happened; column: the issue's state):\n\n")
	writeTable(&b, IssueEvents, IssueStates, issueTable)
	b.WriteString("\n**On a pull request** (the App's, unless the column says otherwise):\n\n")
	writeTable(&b, PREvents, PRStates, prTable)
	b.WriteString("\n**When a run ends** (row: the run's mode; column: how it ended):\n\n")
	b.WriteString("| run |")
	for _, e := range Ends {
		fmt.Fprintf(&b, " %s |", e)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(Ends)) + "\n")
	for _, m := range runModes() {
		fmt.Fprintf(&b, "| %s |", m)
		for _, e := range Ends {
			fmt.Fprintf(&b, " %s |", runTable[m][e])
		}
		b.WriteString("\n")
	}
	return b.String()
}

// writeCommands lists the comment commands as declared (Commands).
func writeCommands(b *strings.Builder, cmds []CommandSpec) {
	b.WriteString("**The commands** (a comment line that starts with one; anywhere else it gets the `wrong_place` reply):\n\n")
	b.WriteString("| command | where | flags | what it does |\n|---|---|---|---|\n")
	for _, c := range cmds {
		var where []string
		for _, w := range []struct {
			bit  Where
			text string
		}{{InIssues, "issue"}, {InPRs, "the App's PR"}, {InOthersPRs, "any PR"}} {
			if c.Where&w.bit != 0 {
				where = append(where, w.text)
			}
		}
		flags := make([]string, len(c.Flags))
		for i, f := range c.Flags {
			flags[i] = "`--" + f + "`"
		}
		help := c.Help
		if c.NeedsText {
			help += " (text after it required)"
		}
		fmt.Fprintf(b, "| `%s` | %s | %s | %s |\n", c.Event, strings.Join(where, ", "), strings.Join(flags, " "), help)
	}
}

func writeTable(b *strings.Builder, events []Event, states []State, t map[Event]map[State]Rule) {
	b.WriteString("| |")
	for _, s := range states {
		fmt.Fprintf(b, " **%s** |", s)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(states)) + "\n")
	for _, e := range events {
		fmt.Fprintf(b, "| %s |", eventText(e))
		for _, s := range states {
			fmt.Fprintf(b, " %s |", t[e][s])
		}
		b.WriteString("\n")
	}
}

func eventText(e Event) string {
	if strings.HasPrefix(string(e), "/") {
		return "`" + string(e) + "`"
	}
	return string(e)
}

// String is the rule as a table cell: its cases in order, the last one
// "else" when guards come before it.
func (r Rule) String() string {
	var parts []string
	for i, c := range r {
		text := c.actionText()
		switch {
		case c.If != Always:
			text = string(c.If) + ": " + text
		case i > 0:
			text = "else " + text
		}
		parts = append(parts, text)
	}
	return strings.Join(parts, "; ")
}

func (c Case) actionText() string {
	if c.Do == Nothing {
		return "—"
	}
	text := string(c.Do)
	if name, ok := c.Do.ReplyName(); ok {
		text = "`" + name + "`"
	}
	if c.Next != "" {
		text += " → " + string(c.Next)
	}
	return text
}
