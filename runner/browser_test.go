package runner_test

import (
	"bytes"
	"image"
	"image/png"
	"os"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/runner"
	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// browserPage is the test project's page: a text to find in the snapshot
// and a colour to find in the screenshot's pixels.
const (
	browserText = "Browser canary 4242"
	browserPage = `<!doctype html><html><head><title>Calc</title></head><body style="margin:0;background:#228b22"><h1 style="color:#fff">` + browserText + `</h1><button>Add</button></body></html>`
)

// browserProject is the project with a page its dev server serves: the
// test binary itself (TestMain, RUNNER_TEST_SERVE) on a free port.
func browserProject(t *testing.T, e *runEnv) (map[string]string, sandboxcfg.Dev) {
	t.Helper()
	testenv.Chromium(t)
	mcp := runtest.BrowserMCP(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	port := runtest.FreePort(t)
	e.opts.Environ = append(e.opts.Environ, "DEV_SERVER="+self, runner.EnvBrowserMCPBin+"="+mcp)
	files := projectFiles()
	files["index.html"] = browserPage
	return files, sandboxcfg.Dev{Command: `RUNNER_TEST_SERVE=1 exec "$DEV_SERVER"`, Port: port}
}

// greenShare is the share of an image's pixels that are the page's
// background, #228b22, within a small tolerance for scaling.
func greenShare(t *testing.T, img []byte) float64 {
	t.Helper()
	m, err := png.Decode(bytes.NewReader(img))
	if err != nil {
		t.Fatalf("the screenshot is not a PNG: %v", err)
	}
	return share(m, func(r, g, b uint32) bool {
		return near8(r, 0x22) && near8(g, 0x8b) && near8(b, 0x22)
	})
}

func share(m image.Image, match func(r, g, b uint32) bool) float64 {
	bounds := m.Bounds()
	hit, all := 0, 0
	for y := bounds.Min.Y; y < bounds.Max.Y; y += 4 {
		for x := bounds.Min.X; x < bounds.Max.X; x += 4 {
			r, g, b, _ := m.At(x, y).RGBA()
			all++
			if match(r>>8, g>>8, b>>8) {
				hit++
			}
		}
	}
	return float64(hit) / float64(max(all, 1))
}

func near8(v, want uint32) bool { return v+8 >= want && v <= want+8 }

// wantBrowserUsed checks the receipt counts the browser calls.
func wantBrowserUsed(t *testing.T, res *dispatch.Result, names ...string) {
	t.Helper()
	for _, n := range names {
		if res.Tools[n] < 1 {
			t.Errorf("the receipt's tools %v lack %s", res.Tools, n)
		}
	}
	if res.BrowserCalls() < len(names) {
		t.Errorf("receipt browser calls = %d, want >= %d (tools %v)", res.BrowserCalls(), len(names), res.Tools)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
