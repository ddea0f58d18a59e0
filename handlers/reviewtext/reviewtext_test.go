package reviewtext

import (
	"strings"
	"testing"

	"github.com/google/go-github/v62/github"
)

const samplePatch = "@@ -1,4 +1,5 @@\n package calc\n \n-func Sum(a, b int) int { return a + b }\n+// Sum adds.\n+func Sum(a, b int) int { return a + b + 1 }\n \n@@ -20,3 +21,3 @@ func Max(a, b int) int {\n \tif a > b {\n-\t\treturn b\n+\t\treturn a\n \t}\n\\ No newline at end of file"

// The lines of a patch a review comment may be on: the new side's added
// and context lines of each hunk, none of the removed ones.
func TestLinesOfPatch(t *testing.T) {
	got := LinesOfPatch(samplePatch)
	for _, l := range []int{1, 2, 3, 4, 5, 21, 22, 23} {
		if !got[l] {
			t.Errorf("line %d is in the diff; got %v", l, got)
		}
	}
	for _, l := range []int{0, 6, 7, 20, 24, 100} {
		if got[l] {
			t.Errorf("line %d is not in the diff; got %v", l, got)
		}
	}
}

// The agent's "path:line:" lines inside the diff are inline comments; one
// outside it, or past the cap, stays in the summary with the place named.
func TestSplitReview(t *testing.T) {
	d := DiffOf([]*github.CommitFile{{Filename: github.String("calc/sum.go"), Patch: github.String(samplePatch)}})
	text := "calc/sum.go:4: off by one.\n- `calc/sum.go:22`: returns the wrong one.\ncalc/sum.go:40: far from the change.\nREADME.md:1: not changed.\n\nOverall fine.\nSee https://x.example:443/a for more."
	inline, summary := Split(text, d, 30)
	if len(inline) != 2 || inline[0] != (InlineComment{Path: "calc/sum.go", Line: 4, Body: "off by one."}) || inline[1].Line != 22 {
		t.Fatalf("inline: %+v", inline)
	}
	for _, want := range []string{"`calc/sum.go:40`: far from the change.", "`README.md:1`: not changed.", "Overall fine.", "https://x.example:443/a"} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary lacks %q:\n%s", want, summary)
		}
	}
	inline, summary = Split(text, d, 1)
	if len(inline) != 1 || !strings.Contains(summary, "`calc/sum.go:22`") {
		t.Errorf("past the cap a comment goes to the summary: %+v\n%s", inline, summary)
	}
}

// What a failed check's table row shows: the lines that name a place or
// a failure, else the last ones.
func TestFailingLines(t *testing.T) {
	got := FailingLines("ok  a\n--- FAIL: TestSum\n    sum_test.go:6: got 5, want 4\nFAIL\nexit status 1", 8)
	if len(got) != 3 || got[1] != "sum_test.go:6: got 5, want 4" {
		t.Errorf("got %q", got)
	}
	if got := FailingLines("one\ntwo\nthree\nfour", 8); strings.Join(got, ",") != "two,three,four" {
		t.Errorf("got %q", got)
	}
}

// A suggest run's patch as suggestions: each hunk's old lines replaced by
// its new ones; an addition to an empty file has no line and is left out;
// a fence in the code gets a longer fence.
func TestSuggestionsOf(t *testing.T) {
	patch := "diff --git a/a.go b/a.go\n--- a/a.go\n+++ b/a.go\n@@ -3,3 +3,4 @@ x\n ctx\n-old\n+new\n+more\n ctx2\n\\ No newline at end of file\n" +
		"diff --git a/b.md b/b.md\n--- a/b.md\n+++ b/b.md\n@@ -1 +1 @@\n-x\n+```go\n" +
		"diff --git a/c.txt b/c.txt\n--- /dev/null\n+++ b/c.txt\n@@ -0,0 +1 @@\n+new file\n"
	got, rest := SuggestionsOf(patch)
	if rest != 1 || len(got) != 2 {
		t.Fatalf("got %+v, %d left out", got, rest)
	}
	if s := got[0]; s.Path != "a.go" || s.Start != 3 || s.End != 5 || strings.Join(s.Lines, "|") != "ctx|new|more|ctx2" {
		t.Errorf("first: %+v", s)
	}
	if s := got[1]; s.Path != "b.md" || s.Start != 1 || s.End != 1 || s.Body() != "````suggestion\n```go\n````" {
		t.Errorf("second: %+v %q", s, s.Body())
	}
	d := DiffLines{"a.go": {3: true, 4: true, 5: true}}
	if !got[0].Within(d) || got[1].Within(d) {
		t.Errorf("within: the first is in the diff, the second is not")
	}
}
