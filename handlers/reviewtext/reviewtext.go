// Package reviewtext reads and writes a review's text: the lines a pull
// request's diff holds (inline comments must fall in them), the agent's
// review split into inline comments and a summary, a failing check's lines,
// and a suggest run's patch as GitHub suggested changes.
package reviewtext

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/google/go-github/v62/github"

	"github.com/sandbox-bot/sandbox-bot/handlers/sanitize"
)

// A review run's text, the pure parts: which lines of a pull request's
// diff take an inline comment, which lines of the agent's review are
// inline comments, and the review GitHub is sent, within its limits.

const (
	// maxReviewDiff bounds the diff a review run's agent is given; it
	// reads the rest from the checkout.
	MaxReviewDiff = 60 << 10
	// maxReviewText bounds the agent's review as the bot reads it.
	MaxReviewText = 40000
	// maxInlineComments is how many inline comments one review carries;
	// the rest go to the summary.
	MaxInlineComments = 30
	// maxInlineBytes bounds one inline comment.
	MaxInlineBytes = 4000
	// maxReviewBody is the review's body: GitHub takes 65,536 characters.
	MaxReviewBody = 60000
)

// diffLines are, per file, the lines of the new side a review comment may
// be on: the added and context lines of the patch's hunks (GitHub's RIGHT
// side). A comment anywhere else is refused by GitHub (422).
type DiffLines map[string]map[int]bool

// hunkHeader is "@@ -a,b +c,d @@ …"; c is the first new line.
var hunkHeader = regexp.MustCompile(`^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@`)

// linesOfPatch reads the commentable new-side lines of one file's patch.
func LinesOfPatch(patch string) map[int]bool {
	lines := map[int]bool{}
	next := 0
	for _, l := range strings.Split(patch, "\n") {
		if m := hunkHeader.FindStringSubmatch(l); m != nil {
			next, _ = strconv.Atoi(m[1])
			continue
		}
		if next == 0 {
			continue
		}
		switch {
		case strings.HasPrefix(l, "+"), strings.HasPrefix(l, " "):
			lines[next] = true
			next++
		case strings.HasPrefix(l, "-"), strings.HasPrefix(l, `\`):
			// the old side's line, or "\ No newline at end of file"
		}
	}
	return lines
}

// diffOf reads the commentable lines of a pull request's files.
func DiffOf(files []*github.CommitFile) DiffLines {
	d := DiffLines{}
	for _, f := range files {
		if f.GetPatch() != "" {
			d[f.GetFilename()] = LinesOfPatch(f.GetPatch())
		}
	}
	return d
}

// has reports whether line of path is in the diff.
func (d DiffLines) has(path string, line int) bool { return d[path][line] }

// unifiedDiff is the pull request's diff as text for the agent, clipped
// to limit bytes with a note.
func UnifiedDiff(files []*github.CommitFile, limit int) string {
	var b strings.Builder
	for _, f := range files {
		name := f.GetFilename()
		fmt.Fprintf(&b, "diff --git a/%s b/%s\n", name, name)
		switch f.GetStatus() {
		case "added":
			fmt.Fprintf(&b, "--- /dev/null\n+++ b/%s\n", name)
		case "removed":
			fmt.Fprintf(&b, "--- a/%s\n+++ /dev/null\n", name)
		default:
			fmt.Fprintf(&b, "--- a/%s\n+++ b/%s\n", name, name)
		}
		if f.GetPatch() == "" {
			b.WriteString("(no patch: a binary file, or too large for GitHub to show)\n")
		} else {
			b.WriteString(strings.TrimRight(f.GetPatch(), "\n") + "\n")
		}
		if b.Len() > limit {
			return sanitize.TruncateUTF8(b.String(), limit) + "\n[… the diff goes on: read the files in the checkout]\n"
		}
	}
	return b.String()
}

// inlineComment is one line of the agent's review that names a line of
// the diff.
type InlineComment struct {
	Path string
	Line int
	Body string
}

// reviewLine is "path:line: text", compiler style (as `sandbox-agent
// validate` prints); a list marker or backticks around the place are
// taken too.
var reviewLine = regexp.MustCompile("^\\s*(?:[-*]\\s+)?`?([^\\s:`][^:`]*):(\\d+)`?:\\s*(.+)$")

// Split parses the agent's review: each line "path:line: text" on a
// line inside the diff becomes an inline comment there (at most limit); any
// other such line stays in the summary, which is the rest of the text.
func Split(text string, d DiffLines, limit int) (inline []InlineComment, summary string) {
	var rest []string
	for _, l := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n") {
		m := reviewLine.FindStringSubmatch(l)
		if m == nil {
			rest = append(rest, l)
			continue
		}
		path := strings.TrimPrefix(strings.TrimPrefix(m[1], "./"), "b/")
		line, err := strconv.Atoi(m[2])
		if err != nil || !d.has(path, line) || len(inline) >= limit {
			rest = append(rest, fmt.Sprintf("- `%s:%s`: %s", sanitize.Inline(path, 200), m[2], m[3]))
			continue
		}
		inline = append(inline, InlineComment{Path: path, Line: line, Body: strings.TrimSpace(m[3])})
	}
	return inline, strings.TrimSpace(strings.Join(rest, "\n"))
}

// failingLines are the lines of a failed check's output that name a place
// ("path:line: …") or say what failed, at most limit of them: what the
// review's table shows of a failure.
func FailingLines(tail string, limit int) []string {
	var out []string
	lines := strings.Split(strings.TrimSpace(tail), "\n")
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if reviewLine.MatchString(t) || strings.Contains(t, "FAIL") || strings.Contains(strings.ToLower(t), "error") {
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		// Nothing names a place: the last lines say most.
		for i := max(0, len(lines)-3); i < len(lines); i++ {
			if t := strings.TrimSpace(lines[i]); t != "" {
				out = append(out, t)
			}
		}
	}
	if len(out) > limit {
		out = out[len(out)-limit:]
	}
	for i := range out {
		out[i] = sanitize.TruncateUTF8(out[i], 300)
	}
	return out
}

// Suggestion is a suggested change: lines Start..End of Path's new
// version (the pull request's head) replaced by Lines.
type Suggestion struct {
	Path       string
	Start, End int
	Lines      []string
}

// SuggestionsOf reads a suggest run's patch (from the pull request's
// head, one line of context): each hunk that replaces lines of the head
// is a suggestion of its new-side lines for its old-side lines. A hunk
// that only adds to an empty file has no line to suggest on and is left
// out (rest counts those).
func SuggestionsOf(patch string) (out []Suggestion, rest int) {
	var path string
	var cur *Suggestion
	flush := func() {
		if cur != nil {
			out = append(out, *cur)
			cur = nil
		}
	}
	for _, l := range strings.Split(patch, "\n") {
		switch {
		case strings.HasPrefix(l, "diff --git "):
			flush()
			path = ""
		case strings.HasPrefix(l, "+++ "):
			path = strings.TrimPrefix(strings.TrimPrefix(l, "+++ "), "b/")
		case strings.HasPrefix(l, "--- "):
		case strings.HasPrefix(l, "@@"):
			flush()
			m := oldRange.FindStringSubmatch(l)
			start, _ := strconv.Atoi(m[1])
			n := 1
			if m[2] != "" {
				n, _ = strconv.Atoi(m[2])
			}
			if path == "" || path == "/dev/null" || n == 0 || start == 0 {
				rest++
				continue
			}
			cur = &Suggestion{Path: path, Start: start, End: start + n - 1, Lines: []string{}}
		case cur != nil && (strings.HasPrefix(l, "+") || strings.HasPrefix(l, " ")):
			cur.Lines = append(cur.Lines, l[1:])
		}
	}
	flush()
	return out, rest
}

// oldRange is a hunk header's old side: "-start,count".
var oldRange = regexp.MustCompile(`^@@ -(\d+)(?:,(\d+))? \+`)

// within reports whether every line of s is in the diff: where GitHub
// takes a comment spanning them.
func (s Suggestion) Within(d DiffLines) bool {
	for l := s.Start; l <= s.End; l++ {
		if !d.has(s.Path, l) {
			return false
		}
	}
	return true
}

// Body is the suggestion as GitHub's suggested-change block, whose fence
// is longer than any backtick run in the lines.
func (s Suggestion) Body() string {
	fence := "```"
	for strings.Contains(strings.Join(s.Lines, "\n"), fence) {
		fence += "`"
	}
	// Nothing in it passes for one of the bot's markers.
	text := strings.ReplaceAll(strings.Join(s.Lines, "\n"), "<!-- sandbox-bot:", "<!"+sanitize.Zwsp+"-- sandbox-bot:")
	return fence + "suggestion\n" + text + "\n" + fence
}
