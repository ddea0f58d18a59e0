package runner_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
)

// The real OpenCode calls the browser's tools (OpenCode names an MCP tool
// <server>_<tool>): the snapshot's result holds the page's text, the
// screenshot comes back to the model as a PNG whose pixels are the page.
func TestBrowserToolsOpenCode(t *testing.T) {
	t.Parallel()
	e, srv := openCodeRunEnv(t, nil)
	files, dev := browserProject(t, e)
	url := "http://127.0.0.1:" + strconv.Itoa(dev.Port) + "/"
	srv.Append(
		modeltest.Turn{ToolCalls: []modeltest.ToolCall{{Name: "browser_navigate_page", Args: map[string]any{"type": "url", "url": url}}}, Usage: usage(1000, 20)},
		modeltest.Turn{ToolCalls: []modeltest.ToolCall{{Name: "browser_take_snapshot", Args: map[string]any{}}}, Usage: usage(1200, 20)},
		modeltest.Turn{ToolCalls: []modeltest.ToolCall{{Name: "browser_take_screenshot", Args: map[string]any{}}}, Usage: usage(1400, 20)},
		modeltest.Turn{ToolCalls: []modeltest.ToolCall{write("NOTES.md", "# Notes\n\nThe page shows the canary.\n")}, Usage: usage(1600, 40)},
		modeltest.Turn{Text: "Checked the page in the browser and wrote NOTES.md.", Usage: usage(1800, 20)},
	)
	remote := runtest.NewRemote(t, files)
	cfg := sandboxcfg.Config{}
	cfg.Dev = dev
	res := run(t, e, order(t, remote.URL, dispatch.ModeExecute, cfg))
	wantStatus(t, res, dispatch.StatusCompleted)

	reqs := srv.ScriptedRequests()
	if len(reqs) < 5 {
		t.Fatalf("the model served %d scripted turns, want 5", len(reqs))
	}
	if !strings.Contains(reqs[0].LastUser(), url[:len(url)-1]) {
		t.Errorf("the prompt does not give the dev URL %s:\n%s", url, reqs[0].LastUser())
	}
	var tools []string
	for _, n := range reqs[0].Tools {
		if strings.HasPrefix(n, "browser_") {
			tools = append(tools, n)
		}
	}
	t.Logf("browser tools offered: %v", tools)
	snapshot := strings.Join(reqs[2].ToolResults(), "\n")
	if !strings.Contains(snapshot, browserText) {
		t.Fatalf("the snapshot's result lacks the page text %q:\n%s", browserText, snapshot)
	}
	imgs := reqs[3].Images()
	for i, m := range reqs[3].Messages {
		t.Logf("msg %d %s images=%d %q", i, m.Role, len(m.Images), m.Content[:min(len(m.Content), 300)])
	}
	if len(imgs) == 0 {
		t.Fatalf("the screenshot did not come back to the model as an image")
	}
	if g := greenShare(t, imgs[len(imgs)-1]); g < 0.5 {
		t.Fatalf("only %.0f%% of the screenshot is the page's green", g*100)
	}
	wantBrowserUsed(t, res, "browser_take_snapshot", "browser_take_screenshot")
}
