package githubtest

import (
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// The rendering keeps what GitHub's sanitizer keeps: comments, processing
// instructions, declarations and CDATA are gone, a script or a style is
// shown as text (cmark-gfm's tagfilter, as on GitHub), an
// unknown tag leaves its text, an event handler or a javascript: link
// leaves nothing, a table and a task list stay.
func TestRenderGFMSanitizesAsGitHub(t *testing.T) {
	t.Parallel()
	if _, err := CmarkGFM(); err != nil {
		testenv.Missing(t, "cmark-gfm", err.Error())
	}
	out, err := RenderGFM("<!-- c1 -->\n\n<? pi ?>\n\n<!X decl>\n\n<![CDATA[ cd ]]>\n\n<script>alert(1)</script>\n\n" +
		"<style>p{}</style>\n\n<foo onclick=\"x()\">kept</foo> <a href=\"javascript:alert(1)\" onmouseover=\"y()\">link</a>\n\n" +
		"| a | b |\n|---|---|\n| 1 | 2 |\n\n- [x] done\n")
	if err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"<!--", "c1", "<?", "pi ?", "decl", "CDATA", " cd ", "<script", "<style", "onclick", "javascript", "onmouseover", "<foo"} {
		if strings.Contains(out, gone) {
			t.Errorf("the rendering holds %q:\n%s", gone, out)
		}
	}
	for _, kept := range []string{"kept", ">link</a>", "<table>", "<td>1</td>", `type="checkbox"`} {
		if !strings.Contains(out, kept) {
			t.Errorf("the rendering lacks %q:\n%s", kept, out)
		}
	}
}
