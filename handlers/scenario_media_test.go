package handlers_test

import (
	"bytes"
	"context"
	"image/png"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/runner"
	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// The real runner captures the dev server's routes and pushes a media
// commit, then a commit that removes the media, to the fake GitHub's git
// with the run's token; the PR body the bot opens shows the images from
// the media commit: every link resolves there to a PNG of the page, and
// the branch tip holds no media.
func TestPRBodyShowsMediaFromTheMediaCommit(t *testing.T) {
	t.Parallel()
	testenv.Chromium(t)
	testenv.Binary(t, "ffmpeg", "apt-get install ffmpeg")
	mcp := runtest.BrowserMCP(t)
	h := newHarness(t, map[string]string{".sandbox.yml": "plan:\n  required: false\n", "README.md": "# hello\n"}, nil)
	h.stop()
	// The bot links media under GITHUB_WEB_URL, known once the fake runs.
	h.start(map[string]string{"GITHUB_WEB_URL": h.gh.WebURL()})
	n := h.gh.AddIssue(testRepo, writer, "Add a home page", "A green page.")
	h.label(n, writer, "d-media")
	spec := h.waitSubmitted(1)[0]

	// What the sandbox does, with the work order the bot sent: the
	// agent (a command) writes the page, the runner screenshots it.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	port := runtest.FreePort(t)
	o := spec.Order
	o.Config.Harness, o.Config.Command = "command", `cat >/dev/null
echo '{"type":"step_start"}'
echo '<html><body style="margin:0;background:#228b22"><h1>hello</h1></body></html>' > index.html
echo '{"type":"tool_use","tool":"browser_take_snapshot","input":{}}'
echo 'not a video' > "$SANDBOX_RECORDINGS_DIR/broken.webm"
echo '{"type":"step_finish","tokens":{"input":100,"output":10},"cost_usd":0.01}'
echo "Added the page."`
	o.Config.Dev = sandboxcfg.Dev{Command: `HANDLERS_TEST_SERVE=1 exec "$DEV_SERVER"`, Port: port, Routes: []string{"/"}}
	o.OutputDir = filepath.Join(t.TempDir(), "out")
	o.TokenFile = filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(o.TokenFile, []byte(spec.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	home, work := t.TempDir(), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res := runner.Run(ctx, o, runner.Options{
		Environ: append(runtest.HermeticEnv(home), "DEV_SERVER="+self, runner.EnvBrowserMCPBin+"="+mcp), WorkDir: filepath.Join(work, "w"), StateDir: filepath.Join(work, "s"),
	})
	if res.Status != dispatch.StatusCompleted || res.MediaCommit == "" {
		t.Fatalf("runner: %s, media commit %q, error %+v", res.Status, res.MediaCommit, res.Error)
	}
	h.backend.Finish(o.TaskID, res)

	h.gh.WaitFor(30*time.Second, "the PR", func() bool { return len(h.gh.PullRequests(testRepo)) == 1 })
	body := h.gh.PullRequests(testRepo)[0].Body
	links := regexp.MustCompile(`!\[[^\]]*\]\(([^)]+)\)`).FindAllStringSubmatch(body, -1)
	if len(links) != 3 { // desktop, mobile, the recording
		t.Fatalf("want 3 images in the PR body, got %d:\n%s", len(links), body)
	}
	for _, m := range links {
		url := m[1]
		if !strings.HasPrefix(url, h.gh.WebURL()+"/"+testRepo+"/raw/"+res.MediaCommit+"/") {
			t.Fatalf("image %s does not point at the media commit %s", url, res.MediaCommit)
		}
		img := fetch(t, url)
		if strings.HasSuffix(url, ".png") {
			m, err := png.Decode(bytes.NewReader(img))
			if err != nil {
				t.Fatalf("%s is not a PNG: %v", url, err)
			}
			if r, g, b, _ := m.At(m.Bounds().Dx()/2, m.Bounds().Dy()-5).RGBA(); r>>8 != 0x22 || g>>8 != 0x8b || b>>8 != 0x22 {
				t.Fatalf("%s does not show the green page (bottom centre is %02x%02x%02x)", url, r>>8, g>>8, b>>8)
			}
		} else if !bytes.HasPrefix(img, []byte("RIFF")) {
			t.Fatalf("%s is not a WebP", url)
		}
	}
	// The receipt shows the agent's browser use and what media was left out.
	if !strings.Contains(body, "| Steps | 1 (1 browser tool call) |") || !strings.Contains(body, "Media left out: recording broken.webm: ffmpeg could not convert it") {
		t.Fatalf("the PR body lacks the browser calls or the media note:\n%s", body)
	}
	// The tip is clean: the same paths are gone at the branch.
	tip := strings.Replace(links[0][1], "/raw/"+res.MediaCommit+"/", "/raw/"+o.TargetBranch+"/", 1)
	if code := get(t, tip).StatusCode; code != http.StatusNotFound {
		t.Fatalf("the branch tip still serves %s (%d)", tip, code)
	}
}

func get(t *testing.T, url string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A signed-in reviewer's view of a private repository.
	req.Header.Set("Authorization", "token reviewer-session")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func fetch(t *testing.T, url string) []byte {
	t.Helper()
	resp := get(t, url)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return b
}
