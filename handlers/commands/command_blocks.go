package commands

import "strings"

// commandable marks the lines of a comment on which a command may start:
// those a reader sees as ordinary text. Everything the Markdown renderer
// shows as code, hides, quotes or folds away is not a command, so nobody
// approves anything by quoting, folding or pasting someone else's "/approve":
//
//   - fenced code (``` or ~~~, closed only by a fence of the same character
//     at least as long) and indented code (4 spaces or a tab);
//   - HTML comments, on every line they touch, to the end of the comment
//     (or of the comment body when unclosed);
//   - block quotes, with their lazy continuation lines (a line right after
//     a quoted one renders inside the quote until a blank line);
//   - <details> blocks, nested ones included.
func Commandable(lines []string) []bool {
	ok := make([]bool, len(lines))
	var (
		fenceChar  byte
		fenceLen   int
		inComment  bool
		inQuote    bool
		detailsLvl int
	)
	for i, raw := range lines {
		line := strings.TrimRight(raw, " \t")
		if fenceLen > 0 {
			if closesFence(line, fenceChar, fenceLen) {
				fenceLen = 0
			}
			continue
		}
		if inComment {
			if _, after, closed := strings.Cut(line, "-->"); closed {
				inComment = opensComment(after)
			}
			continue
		}
		if strings.Contains(line, "<!--") {
			inComment = opensComment(line)
			continue
		}
		lower := strings.ToLower(line)
		if opens, closes := strings.Count(lower, "<details"), strings.Count(lower, "</details>"); opens > 0 || closes > 0 {
			detailsLvl = max(detailsLvl+opens-closes, 0)
			continue
		}
		if detailsLvl > 0 {
			continue
		}
		if strings.TrimSpace(line) == "" {
			inQuote = false
			continue
		}
		if indentedCode(raw) {
			continue
		}
		trimmed := strings.TrimLeft(line, " ")
		if c, n := fenceOpen(trimmed); n > 0 {
			fenceChar, fenceLen = c, n
			continue
		}
		if strings.HasPrefix(trimmed, ">") {
			inQuote = true
			continue
		}
		if inQuote {
			continue // lazy continuation of the quoted paragraph
		}
		ok[i] = true
	}
	return ok
}

// opensComment reports whether s leaves an HTML comment open at its end.
func opensComment(s string) bool {
	for {
		_, after, found := strings.Cut(s, "<!--")
		if !found {
			return false
		}
		_, rest, closed := strings.Cut(after, "-->")
		if !closed {
			return true
		}
		s = rest
	}
}

// indentedCode: four spaces or a tab before any text make a code line.
func indentedCode(raw string) bool {
	spaces := 0
	for _, r := range raw {
		switch r {
		case ' ':
			spaces++
			if spaces >= 4 {
				return true
			}
		case '\t':
			return true
		default:
			return false
		}
	}
	return false
}

// fenceOpen returns the fence character and length a line opens with.
func fenceOpen(trimmed string) (byte, int) {
	if len(trimmed) < 3 || (trimmed[0] != '`' && trimmed[0] != '~') {
		return 0, 0
	}
	c := trimmed[0]
	n := 0
	for n < len(trimmed) && trimmed[n] == c {
		n++
	}
	// A backtick fence's info string may not hold a backtick.
	if n < 3 || (c == '`' && strings.Contains(trimmed[n:], "`")) {
		return 0, 0
	}
	return c, n
}

// closesFence: the same character, at least as many, nothing after.
func closesFence(line string, c byte, n int) bool {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 {
		return false
	}
	k := 0
	for k < len(t) && t[k] == c {
		k++
	}
	return k >= n && strings.TrimSpace(t[k:]) == ""
}
