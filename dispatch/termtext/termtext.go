// Package termtext makes text that a command-line program printed fit to
// show as text: in a GitHub comment, a PR body, a receipt or the dashboard.
// The agent CLIs colour their errors (OpenCode prints "\x1b[91mError"), a
// hostile agent can print any escape it likes, and neither belongs in text
// a person reads outside a terminal.
package termtext

import (
	"strings"

	"github.com/charmbracelet/x/ansi"
)

// Clean returns s without terminal escape sequences (CSI, OSC, DCS and the
// rest, parsed by charmbracelet/x/ansi) and without the control characters
// left after them, but newlines and tabs. A carriage return, which a
// terminal uses to overwrite a line, ends the line instead.
func Clean(s string) string {
	if !needsCleaning(s) {
		return s
	}
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = ansi.Strip(s)
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\t':
			return r
		case r == '\r':
			return '\n'
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			return -1
		}
		return r
	}, s)
}

// needsCleaning reports whether s holds a control character at all, so
// that clean text (nearly all of it) is returned as it is.
func needsCleaning(s string) bool {
	for _, r := range s {
		if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return true
		}
	}
	return false
}
