// Package sanitize makes text clean before it reaches GitHub, and
// Secrets redacts what must never be posted.
//
// Text from the sandbox (plan, PR summary, error messages) is the
// agent's: it can carry anything a hostile prompt put there. Before it is posted it
// is made to show exactly what it says, so what a writer approves is what
// the execute run gets (the plan is read back from the comment):
//
//   - raw HTML outside code is escaped (`<details>` shows as text; an HTML
//     comment, invisible on GitHub, becomes visible), and link reference
//     definitions (`[x]: …`, another invisible line) are escaped;
//   - @mentions outside code get a zero-width space after the @, so the
//     agent cannot ping people or teams;
//   - fenced code blocks keep their content (GitHub shows it verbatim),
//     except that `<!--` gets a zero-width space, so nothing in it can
//     pass for one of the bot's hidden markers; fence lines are moved to
//     column 0 and an unclosed fence is closed, so GitHub sees the same
//     code regions this parser does and a fence cannot swallow the rest
//     of the comment;
//   - inline code spans are kept verbatim when their backticks pair up
//     within the line the way CommonMark pairs them;
//   - indented code blocks are not told apart from indented text and are
//     sanitized like text (safe, at worst `&lt;` shows in such a block);
//   - the text is cut at a cap, with a note saying so.
package sanitize

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

const (
	Zwsp = "\u200b"
	// Caps on what the bot posts from a result, in bytes after sanitizing.
	// GitHub takes 65,536 characters per comment or PR body; the rest of
	// the template needs room too.
	MaxPlanBytes    = 30000
	MaxSummaryBytes = 20000
	MaxErrorBytes   = 4000
)

// sanitizeMarkdown returns s made safe to post (see above), at most max
// bytes plus a truncation note.
func Markdown(s string, max int) string {
	s = strings.ToValidUTF8(strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\x00", ""), "\uFFFD")
	lines := strings.Split(s, "\n")
	var out strings.Builder
	var fence fenceState
	// carried is set once a backtick run in the current paragraph found
	// no partner on its line: CommonMark may pair it with one on a later
	// line, so from there to the paragraph's end nothing counts as code.
	carried := false
	total := len(s)
	for i, line := range lines {
		var next string
		switch {
		case fence.open:
			if fence.closes(line) {
				next = strings.Repeat(string(fence.char), fence.n)
				fence.open = false
			} else {
				next = strings.ReplaceAll(line, "<!--", "<!"+Zwsp+"--")
			}
			carried = false
		case fence.opens(line):
			next = strings.Repeat(string(fence.char), fence.n) + fence.info
			carried = false
		case strings.TrimSpace(line) == "":
			next = line
			carried = false
		default:
			next, carried = sanitizeLine(line, carried)
		}
		if max > 0 && out.Len()+len(next)+1 > max {
			// Cut at a line boundary (or inside an overlong line at a
			// rune boundary), then close a fence left open.
			if out.Len() == 0 {
				next = TruncateUTF8(next, max)
				out.WriteString(next)
			}
			if fence.open {
				out.WriteString("\n" + strings.Repeat(string(fence.char), fence.n))
			}
			fmt.Fprintf(&out, "\n\n*(Cut by sandbox-bot: the agent wrote %d bytes; the first part is shown.)*", total)
			return out.String()
		}
		if i > 0 {
			out.WriteByte('\n')
		}
		out.WriteString(next)
	}
	if fence.open {
		out.WriteString("\n" + strings.Repeat(string(fence.char), fence.n))
	}
	return out.String()
}

// fenceState tracks a top-level fenced code block (CommonMark rules: up to
// three spaces of indentation, three or more backticks or tildes, a
// backtick fence's info string has no backtick; it closes with at least as
// many of the same character and nothing but spaces after).
type fenceState struct {
	open bool
	char byte
	n    int
	info string
}

func (f *fenceState) opens(line string) bool {
	rest, ok := trimIndent(line)
	if !ok || len(rest) < 3 || (rest[0] != '`' && rest[0] != '~') {
		return false
	}
	c := rest[0]
	n := 0
	for n < len(rest) && rest[n] == c {
		n++
	}
	if n < 3 {
		return false
	}
	info := rest[n:]
	if c == '`' && strings.Contains(info, "`") {
		return false
	}
	*f = fenceState{open: true, char: c, n: n, info: safeInfo(info)}
	return true
}

func (f *fenceState) closes(line string) bool {
	rest, ok := trimIndent(line)
	if !ok {
		return false
	}
	n := 0
	for n < len(rest) && rest[n] == f.char {
		n++
	}
	return n >= f.n && strings.TrimRight(rest[n:], " \t") == ""
}

// trimIndent removes up to three leading spaces; four or a tab make an
// indented line, which is never a fence.
func trimIndent(line string) (string, bool) {
	i := 0
	for i < len(line) && i < 4 && line[i] == ' ' {
		i++
	}
	if i == 4 || (i < len(line) && line[i] == '\t') {
		return "", false
	}
	return line[i:], true
}

// safeInfo keeps a fence's language word and drops the rest of the info
// string, which GitHub does not show.
func safeInfo(info string) string {
	word, _, _ := strings.Cut(strings.TrimSpace(info), " ")
	for _, r := range word {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("+-_.#", r)) {
			return ""
		}
	}
	return word
}

// sanitizeLine escapes HTML, link reference definitions and mentions in a
// line outside fenced code, keeping code spans that pair within the line.
// carried says a backtick run earlier in the paragraph is unpaired; the
// result says whether one is after this line.
func sanitizeLine(line string, carried bool) (string, bool) {
	var b strings.Builder
	if rest, ok := trimIndent(line); ok && strings.HasPrefix(rest, "[") && isLinkRefDef(rest) {
		b.WriteString(line[:len(line)-len(rest)] + `\`)
		line = rest
	}
	for i := 0; i < len(line); {
		c := line[i]
		switch {
		case c == '`':
			n := runLen(line, i, '`')
			if escapedAt(line, i) {
				b.WriteByte('`')
				i++
				continue
			}
			if !carried {
				if end := closingRun(line, i+n, n); end >= 0 {
					b.WriteString(strings.ReplaceAll(line[i:end+n], "<!--", "<!"+Zwsp+"--"))
					i = end + n
					continue
				}
				carried = true
			}
			b.WriteString(line[i : i+n])
			i += n
		case c == '<' && i+1 < len(line) && isTagStart(line[i+1]):
			b.WriteString("&lt;")
			i++
		case c == '@' && i+1 < len(line) && isAlnum(line[i+1]) && (i == 0 || !isWordByte(line[i-1]) && line[i-1] != '/'):
			b.WriteString("@" + Zwsp)
			i++
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String(), carried
}

// isLinkRefDef reports whether a line looks like `[label]: destination`,
// which GitHub does not render at all.
func isLinkRefDef(s string) bool {
	end := strings.Index(s, "]:")
	return end > 0 && !strings.Contains(s[1:end], "]")
}

func runLen(s string, i int, c byte) int {
	n := 0
	for i+n < len(s) && s[i+n] == c {
		n++
	}
	return n
}

// escapedAt reports whether s[i] follows an odd number of backslashes.
func escapedAt(s string, i int) bool {
	n := 0
	for j := i - 1; j >= 0 && s[j] == '\\'; j-- {
		n++
	}
	return n%2 == 1
}

// closingRun finds the next run of exactly n backticks from i, or -1.
func closingRun(s string, i, n int) int {
	for i < len(s) {
		if s[i] != '`' {
			i++
			continue
		}
		m := runLen(s, i, '`')
		if m == n {
			return i
		}
		i += m
	}
	return -1
}

func isTagStart(c byte) bool {
	return c == '/' || c == '!' || c == '?' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func isWordByte(c byte) bool { return isAlnum(c) || c == '_' || c == '`' || c >= utf8.RuneSelf }

// truncateUTF8 cuts s to at most n bytes without splitting a rune.
func TruncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// sanitizeInline makes a short text safe inside a table cell or inline
// code: one line, no backticks or pipes, capped.
func Inline(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	s = strings.NewReplacer("`", "'", "|", "/", "<", "&lt;").Replace(s)
	return TruncateUTF8(s, max)
}
