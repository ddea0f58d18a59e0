package visible

import (
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/app/githubtest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// Each construct rendered by cmark-gfm as GitHub renders it: the quote
// holds the words a reader sees and none of the hidden ones, and the
// removal is counted (never "no hidden content").
func TestVisibleTextIsWhatGitHubShows(t *testing.T) {
	t.Parallel()
	if _, err := githubtest.CmarkGFM(); err != nil {
		testenv.Missing(t, "cmark-gfm", err.Error())
	}
	var all []string
	for _, tc := range githubtest.HiddenConstructs {
		all = append(all, tc.Markdown)
		t.Run(tc.Name, func(t *testing.T) {
			text, h := renderVisible(t, tc.Markdown)
			if strings.Contains(text, tc.Hidden) || strings.Contains(text, strings.TrimSuffix(tc.Hidden, "hide")+"more") {
				t.Errorf("the quote holds the hidden %q:\n%s", tc.Hidden, text)
			}
			if !strings.Contains(text, tc.Shown) {
				t.Errorf("the quote lacks the shown %q:\n%s", tc.Shown, text)
			}
			if len(h.Describe()) == 0 {
				t.Errorf("nothing counted as removed from %q (quote %q)", tc.Markdown, text)
			}
		})
	}
	text, _ := renderVisible(t, strings.Join(all, "\n\n"))
	for _, tc := range githubtest.HiddenConstructs {
		if strings.Contains(text, tc.Hidden) || !strings.Contains(text, tc.Shown) {
			t.Errorf("all constructs in one body: %q hidden / %q shown:\n%s", tc.Hidden, tc.Shown, text)
		}
	}
}

func renderVisible(t *testing.T, md string) (string, HiddenCounts) {
	t.Helper()
	rendered, err := githubtest.RenderGFM(md)
	if err != nil {
		t.Fatal(err)
	}
	text, h, err := Text(rendered, md)
	if err != nil {
		t.Fatal(err)
	}
	return text, h
}

// The text a reader sees keeps its shape: paragraphs, code, details as
// text, images as [image N], links as their words; plain text loses
// nothing and is said to hold nothing hidden.
func TestVisibleTextKeepsWhatAReaderSees(t *testing.T) {
	t.Parallel()
	if _, err := githubtest.CmarkGFM(); err != nil {
		testenv.Missing(t, "cmark-gfm", err.Error())
	}
	for _, tc := range []struct {
		name, in, want string
		removed        []string
	}{
		{"plain", "The button is blue.\n\nIt should be red.", "The button is blue.\n\nIt should be red.", nil},
		{"code", "Run:\n\n```sh\nmake  test\n```", "Run:\n\n```\nmake  test\n```", []string{"1 word of the Markdown source that GitHub's rendering does not show"}},
		{"details", "<details><summary>Logs</summary>\n\nstack trace\n</details>", "<details><summary>Logs</summary>\n\nstack trace\n\n</details>", nil},
		{"images", "See ![shot](https://example.com/a.png) and ![](https://example.com/b.png)", "See [image 1] and [image 2]",
			[]string{"1 word of the Markdown source that GitHub's rendering does not show"}},
		{"link", "See [the docs](https://example.com/docs) and https://example.com/x", "See the docs and https://example.com/x",
			[]string{"1 link address (GitHub shows the link's words)"}},
		{"zero width", "Fix\u200b the\u200d bu\ufefftton\u2060", "Fix the button", []string{"4 zero-width or invisible characters"}},
		{"tasks", "- [x] done\n- [ ] todo", "- [x] done\n\n- [ ] todo", nil},
		{"emoji", "👍🏽 works", "👍🏽 works", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, h := renderVisible(t, tc.in)
			if got != tc.want {
				t.Errorf("visible text of %q = %q, want %q", tc.in, got, tc.want)
			}
			if d := h.Describe(); strings.Join(d, "; ") != strings.Join(tc.removed, "; ") {
				t.Errorf("removed %q, want %q", d, tc.removed)
			}
		})
	}
}
