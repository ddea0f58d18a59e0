package handlers

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// An issue by someone without write access reaches the agent, once a
// writer vouched for it, as the words a person reading it on GitHub sees:
// what GitHub does not show is where an instruction meant for the agent
// alone would hide. stripHidden removes it before the text is quoted:
//
//   - HTML comments outside fenced code (GitHub shows code as written); an
//     unclosed one hides everything after it on GitHub, and goes too;
//   - link reference definitions (`[//]: # (text)`), which GitHub renders
//     as nothing;
//   - invisible characters anywhere: format characters (zero-width space,
//     joiners, word joiner, byte order mark, soft hyphen, Unicode tags),
//     bidirectional controls, the variation selectors past U+FE0F,
//     invisible fillers and control characters other than tab and newline.
//
// Collapsed <details> stay: their text is a click away for the person
// reading, so it is no hidden channel, and the quote keeps the tags as text.

// hiddenCounts is what stripHidden removed.
type hiddenCounts struct {
	comments, refDefs, zeroWidth, bidi, tags, controls int
	// unclosed: a comment that never closes took the rest of the text.
	unclosed bool
}

// describe names what was removed, for the acknowledgement and the work
// order ("2 HTML comments").
func (h hiddenCounts) describe() []string {
	var out []string
	add := func(n int, one, many string) {
		switch {
		case n == 1:
			out = append(out, "1 "+one)
		case n > 1:
			out = append(out, fmt.Sprintf("%d %s", n, many))
		}
	}
	add(h.comments, "HTML comment", "HTML comments")
	if h.unclosed {
		out = append(out, "the text after an unclosed HTML comment")
	}
	add(h.refDefs, "link reference definition", "link reference definitions")
	add(h.zeroWidth, "zero-width or invisible character", "zero-width or invisible characters")
	add(h.bidi, "bidirectional control character", "bidirectional control characters")
	add(h.tags, "Unicode tag character", "Unicode tag characters")
	add(h.controls, "control character", "control characters")
	return out
}

func (h *hiddenCounts) add(o hiddenCounts) {
	h.comments += o.comments
	h.refDefs += o.refDefs
	h.zeroWidth += o.zeroWidth
	h.bidi += o.bidi
	h.tags += o.tags
	h.controls += o.controls
	h.unclosed = h.unclosed || o.unclosed
}

// refDefRE is a CommonMark link reference definition on one line:
// [label]: destination "optional title".
var refDefRE = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*\S.*$`)

// stripHidden returns s as GitHub shows it to a reader, and what it took
// out.
func stripHidden(s string) (string, hiddenCounts) {
	var h hiddenCounts
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.Map(func(r rune) rune {
		switch k := invisible(r); k {
		case "":
			return r
		case "bidi":
			h.bidi++
		case "tag":
			h.tags++
		case "control":
			h.controls++
		default:
			h.zeroWidth++
		}
		return -1
	}, s)
	var out []string
	var fence fenceState
	inComment := false
	for _, line := range strings.Split(s, "\n") {
		switch {
		case inComment:
			end := strings.Index(line, "-->")
			if end < 0 {
				continue
			}
			inComment = false
			line = line[end+3:]
			if strings.TrimSpace(line) == "" {
				continue
			}
		case fence.open:
			if fence.closes(line) {
				fence.open = false
			}
			out = append(out, line)
			continue
		case fence.opens(line):
			out = append(out, line)
			continue
		}
		if refDefRE.MatchString(line) {
			h.refDefs++
			continue
		}
		kept, open, n := cutComments(line)
		h.comments += n
		inComment = open
		if n > 0 && strings.TrimSpace(kept) == "" {
			continue // a line that was only a comment leaves no blank line
		}
		out = append(out, kept)
	}
	if inComment {
		h.unclosed = true
	}
	return strings.TrimSpace(strings.Join(out, "\n")), h
}

// cutComments removes the HTML comments of one line outside code spans;
// open reports a comment that goes on past the line.
func cutComments(line string) (kept string, open bool, n int) {
	var b strings.Builder
	for i := 0; i < len(line); {
		switch {
		case line[i] == '`':
			run := runLen(line, i, '`')
			if end := closingRun(line, i+run, run); end >= 0 {
				b.WriteString(line[i : end+run])
				i = end + run
				continue
			}
			b.WriteString(line[i : i+run])
			i += run
		case strings.HasPrefix(line[i:], "<!--"):
			n++
			end := strings.Index(line[i+4:], "-->")
			if end < 0 {
				return b.String(), true, n
			}
			i += 4 + end + 3
		default:
			b.WriteByte(line[i])
			i++
		}
	}
	return b.String(), false, n
}

// invisible says which kind of invisible character r is, "" for one a
// reader sees (or a tab or newline).
func invisible(r rune) string {
	switch {
	case r == '\t' || r == '\n':
		return ""
	case r == 0x200E || r == 0x200F || r == 0x061C || r >= 0x202A && r <= 0x202E || r >= 0x2066 && r <= 0x2069:
		return "bidi"
	case r >= 0xE0000 && r <= 0xE007F:
		return "tag"
	case unicode.IsControl(r):
		return "control"
	case unicode.In(r, unicode.Cf),
		r >= 0xE0100 && r <= 0xE01EF, // variation selectors 17-256: data riding on a visible character
		r == 0x034F, r == 0x115F, r == 0x1160, r == 0x3164, r == 0xFFA0:
		return "zero-width"
	}
	return ""
}
