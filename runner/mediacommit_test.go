package runner_test

import (
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/runner"
	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// dev.routes are screenshotted with Chromium at a desktop and a mobile
// width and recorded, the agent's own recording (a WebM in
// $SANDBOX_RECORDINGS_DIR) becomes an animated WebP, and all of it is
// committed in a media commit that the receipt names and that the next
// commit removes, so the branch tip stays clean.
func TestMediaCommit(t *testing.T) {
	t.Parallel()
	testenv.Chromium(t)
	testenv.Binary(t, "ffmpeg", "apt-get install ffmpeg")
	mcp := runtest.BrowserMCP(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	remote := runtest.NewRemote(t, projectFiles())
	port := runtest.FreePort(t)
	cfg := commandCfg(`mkdir -p about
echo '<html><body style="background:#228b22"><h1>calc</h1></body></html>' > index.html
echo '<html><body style="background:#8b008b"><h1>About</h1></body></html>' > about/index.html
ffmpeg -loglevel error -f lavfi -i color=c=blue:s=320x240:d=1 -c:v libvpx-vp9 "$SANDBOX_RECORDINGS_DIR/add flow.webm"
echo 'not a video' > "$SANDBOX_RECORDINGS_DIR/broken.mp4"
echo "Added pages."`)
	cfg.Dev = sandboxcfg.Dev{Command: `RUNNER_TEST_SERVE=1 exec "$DEV_SERVER"`, Port: port, Routes: []string{"/", "/about/"}}
	e := newRunEnv(t, nil)
	e.opts.Environ = append(e.opts.Environ, "DEV_SERVER="+self, runner.EnvBrowserMCPBin+"="+mcp)
	o := order(t, remote.URL, dispatch.ModeExecute, cfg)
	res := run(t, e, o)
	wantStatus(t, res, dispatch.StatusCompleted)
	dir := ".sandbox/media/" + taskID
	want := []string{dir + "/index.png", dir + "/about.png", dir + "/index-mobile.png", dir + "/about-mobile.png"}
	if strings.Join(res.ScreenshotPaths, ",") != strings.Join(want, ",") {
		t.Fatalf("screenshot_paths = %v, want %v", res.ScreenshotPaths, want)
	}
	if strings.Join(res.RecordingPaths, ",") != dir+"/recording.webp,"+dir+"/add-flow.webp" {
		t.Fatalf("recording_paths = %v", res.RecordingPaths)
	}
	if len(res.MediaOmitted) != 1 || !strings.Contains(res.MediaOmitted[0], "broken.mp4") {
		t.Fatalf("media_omitted = %q, want the broken recording named", res.MediaOmitted)
	}
	// The media commit is the tip's parent: the tip removes the media.
	if res.MediaCommit == "" || strings.TrimSpace(runtest.Git(t, remote.Dir, "rev-parse", o.TargetBranch+"^")) != res.MediaCommit {
		t.Fatalf("media_commit %q is not the parent of the tip %s", res.MediaCommit, res.HeadSHA)
	}
	if tree := runtest.Git(t, remote.Dir, "ls-tree", "-r", "--name-only", o.TargetBranch); strings.Contains(tree, ".sandbox/") {
		t.Fatalf("the branch tip still holds media:\n%s", tree)
	}
	for _, p := range append(res.ScreenshotPaths, res.RecordingPaths...) {
		if _, ok := remote.File(t, res.MediaCommit, p); !ok {
			t.Fatalf("%s is not in the media commit on the remote", p)
		}
	}
	mobile, _ := remote.File(t, res.MediaCommit, dir+"/index-mobile.png")
	if m, err := png.Decode(strings.NewReader(mobile)); err != nil || m.Bounds().Dx() != 390 {
		t.Fatalf("the mobile screenshot is not 390 px wide: %v", err)
	} else if g := share(m, func(r, g, b uint32) bool { return near8(r, 0x22) && near8(g, 0x8b) && near8(b, 0x22) }); g < 0.5 {
		t.Fatalf("only %.0f%% of the mobile screenshot is the page's green", g*100)
	}
	if webp, _ := remote.File(t, res.MediaCommit, dir+"/add-flow.webp"); !strings.HasPrefix(webp, "RIFF") || !strings.Contains(webp[:64], "WEBP") {
		t.Fatalf("the agent's recording is not a WebP in the media commit")
	}
	// The media commit holds the media and nothing else.
	files := runtest.Git(t, remote.Dir, "show", "--name-only", "--format=", res.MediaCommit)
	if len(strings.Fields(files)) != 6 || strings.Contains(files, "index.html") {
		t.Fatalf("media commit files:\n%s", files)
	}
	if _, err := os.Stat(filepath.Join(o.OutputDir, "media", "recording.webm")); err != nil {
		t.Fatalf("the WebM is not in the output dir: %v", err)
	}
}
