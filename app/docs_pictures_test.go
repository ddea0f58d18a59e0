package app

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers"
	"github.com/sandbox-bot/sandbox-bot/templates"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

var pictures = flag.Bool("pictures", false, "write the README's pictures to docs/")

// TestDocsPictures takes the README's three pictures in Chromium: a plan
// comment and a PR receipt, each the real template rendered with its
// sample (handlers.ReplySamples) and turned into HTML by cmark-gfm as
// GitHub renders Markdown, and a run's live page served by the bot with
// a run that has written lines. Each is checked for what a reader must
// see in it; with -pictures they are written to docs/.
func TestDocsPictures(t *testing.T) {
	testenv.Long(t, "Chromium renders three pages")
	cmark := testenv.Binary(t, "cmark-gfm", "apt-get install cmark-gfm")
	out := t.TempDir()
	if *pictures {
		out = filepath.Join("..", "docs")
	}
	tpl := templates.MustLoadEmbedded()
	samples := handlers.ReplySamples()
	pages := map[string]string{}
	for _, c := range []struct{ file, tmpl, who string }{
		{"plan-comment.png", "github/plan_comment", "sandbox-bot commented on issue #7"},
		{"pr-receipt.png", "github/pr_body", "sandbox-bot opened pull request #8"},
	} {
		md, err := tpl.Render(c.tmpl, samples[c.tmpl][0])
		if err != nil {
			t.Fatalf("render %s: %v", c.tmpl, err)
		}
		cmd := exec.Command(cmark, "--unsafe", "-e", "table", "-e", "strikethrough", "-e", "autolink", "-e", "tasklist")
		cmd.Stdin = strings.NewReader(md)
		body, err := cmd.Output()
		if err != nil {
			t.Fatalf("cmark-gfm on %s: %v", c.tmpl, err)
		}
		pages["/"+strings.TrimSuffix(c.file, ".png")] = fmt.Sprintf(commentPage, html.EscapeString(c.who), body)
	}
	var media []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/media/") {
			w.Header().Set("Content-Type", "image/png")
			w.Write(media)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, pages[r.URL.Path])
	}))
	t.Cleanup(srv.Close)
	// The receipt's screenshot stands for the one the runner takes of the
	// dev server: a login page, rendered here; GitHub serves the media
	// commit's files, which the picture cannot reach, so the receipt's
	// links point to this server.
	pages["/login"] = loginPage
	for k, v := range pages {
		pages[k] = strings.ReplaceAll(v, `src="https://github.com/octo-org/hello/raw/0123abc/.sandbox-bot/media/login.png"`, `src="/media/login.png"`)
	}
	ctx := browser(t)
	media = shootPage(t, ctx, srv.URL+"/login", "form", filepath.Join(t.TempDir(), "login.png"), 640).png

	plan := shootPage(t, ctx, srv.URL+"/plan-comment", ".box", filepath.Join(out, "plan-comment.png"), 1000).text
	for _, want := range []string{"/approve", "/revise"} {
		if !strings.Contains(plan, want) {
			t.Errorf("the plan comment does not show %s:\n%s", want, plan)
		}
	}
	receipt := shootPage(t, ctx, srv.URL+"/pr-receipt", ".box", filepath.Join(out, "pr-receipt.png"), 1000).text
	for _, want := range []string{"T-0123456789abcdef", "$"} {
		if !strings.Contains(receipt, want) {
			t.Errorf("the receipt does not show %s:\n%s", want, receipt)
		}
	}

	f, _, task := startPreview(t)
	mem := f.backend.(previewBackend)
	at := time.Now().Truncate(time.Second)
	for i, p := range []dispatch.Progress{
		{Stage: "clone", Message: "cloned octo/alpha at main"},
		{Stage: "setup", Message: "npm ci (restored from the setup cache)"},
		{Stage: "agent", Message: "agent started: opencode, anthropic/claude-sonnet-4-5"},
		{Stage: "agent", Message: "tool read", Tool: "read", Kind: dispatch.KindTool, Detail: `{"filePath":"src/client.ts"}`, ToolCalls: 1, Step: 1, Tokens: 4200, CostUSD: 0.02},
		{Stage: "agent", Message: "tool grep", Tool: "grep", Kind: dispatch.KindTool, Detail: `{"pattern":"fetch(","path":"src"}`, ToolCalls: 2, Step: 2, Tokens: 6100, CostUSD: 0.03},
		{Stage: "agent", Message: "text", Kind: dispatch.KindText, Detail: "The client fetches on every call; a cache keyed by URL with a TTL fits here.", Step: 3, Tokens: 7300, CostUSD: 0.04},
		{Stage: "agent", Message: "tool bash", Tool: "bash", Kind: dispatch.KindTool, Detail: `{"command":"npm test -- client"}`, ToolCalls: 3, Step: 4, Tokens: 9800, CostUSD: 0.05},
	} {
		p.Time = at.Add(time.Duration(i*9) * time.Second)
		mem.Emit(task, p)
	}
	f.gh.SignInAs("alice")
	live := shootPage(t, ctx, f.http.URL+"/runs/"+task, "#log", filepath.Join(out, "live-run.png"), 1000).text
	if !strings.Contains(live, "npm test -- client") || !strings.Contains(live, task) {
		t.Errorf("the live page does not show the run's last tool call and its task id:\n%s", live)
	}
}

// shot is a page's picture and its text.
type shot struct {
	png  []byte
	text string
}

// shootPage loads url at the width, waits for sel and for the page's text
// to settle, saves a screenshot of the whole page (as tall as its
// content) to file and returns it.
func shootPage(t *testing.T, ctx context.Context, url, sel, file string, width int64) shot {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, 100), chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(sel))); err != nil {
		t.Fatalf("load %s: %v", url, err)
	}
	var text string
	// The live page fills in from its event stream: wait until two reads
	// a moment apart agree.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		now, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
		if err != nil {
			t.Fatal(err)
		}
		if now == text && strings.TrimSpace(now) != "" || time.Now().After(deadline) {
			break
		}
		text = now
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("the screenshot of %s is not a PNG", url)
	}
	if err := os.WriteFile(file, png, 0o644); err != nil {
		t.Fatal(err)
	}
	return shot{png, text}
}

// commentPage frames rendered Markdown as GitHub shows a comment: a box
// with its header, GitHub's fonts, tables, code and details.
const commentPage = `<!doctype html><meta charset="utf-8"><style>
body { margin: 0; padding: 24px; background: #fff; color: #1f2328; width: 952px;
  font: 14px/1.5 -apple-system, "Segoe UI", "Noto Sans", Helvetica, Arial, sans-serif; }
.box { border: 1px solid #d1d9e0; border-radius: 6px; }
.head { background: #f6f8fa; border-bottom: 1px solid #d1d9e0; padding: 8px 16px; color: #59636e;
  border-radius: 6px 6px 0 0; } .head b { color: #1f2328; }
.md { padding: 16px; } .md > :first-child { margin-top: 0; } .md > :last-child { margin-bottom: 0; }
h1, h2, h3 { margin: 24px 0 16px; font-weight: 600; line-height: 1.25; }
h1, h2 { padding-bottom: .3em; border-bottom: 1px solid #d1d9e0; } h2 { font-size: 1.5em; } h3 { font-size: 1.25em; }
p, ul, ol, table, pre, details { margin: 0 0 16px; } a { color: #0969da; text-decoration: none; }
code { background: #eff1f3; border-radius: 6px; padding: .2em .4em; font: 85%% ui-monospace, SFMono-Regular, Menlo, monospace; }
pre { background: #f6f8fa; padding: 16px; border-radius: 6px; overflow: auto; } pre code { background: none; padding: 0; }
table { border-collapse: collapse; } th, td { border: 1px solid #d1d9e0; padding: 6px 13px; }
th { font-weight: 600; } tr:nth-child(2n) { background: #f6f8fa; }
blockquote { margin: 0 0 16px; padding: 0 1em; color: #59636e; border-left: .25em solid #d1d9e0; }
img { max-width: 100%%; } summary { cursor: pointer; }
</style><div class="box"><div class="head"><b>%s</b></div><div class="md">%s</div></div>`

// loginPage is the change the receipt's sample describes ("Adds a login
// page"), as its dev server would show it.
const loginPage = `<!doctype html><meta charset="utf-8"><style>
body { margin: 0; font: 15px system-ui, sans-serif; background: #eef2f7; height: 360px; display: grid; place-items: center; }
form { background: #fff; padding: 28px 32px; border-radius: 10px; box-shadow: 0 2px 12px #0002; width: 260px; }
h1 { font-size: 20px; margin: 0 0 16px; } label { display: block; margin: 10px 0 4px; color: #555; }
input { width: 100%; box-sizing: border-box; padding: 8px; border: 1px solid #ccd; border-radius: 6px; }
button { margin-top: 18px; width: 100%; padding: 9px; border: 0; border-radius: 6px; background: #2563eb; color: #fff; font-weight: 600; }
</style><form><h1>Sign in to Shop</h1><label>Email</label><input value="maya@example.com">
<label>Password</label><input type="password" value="secret"><button type="button">Sign in</button></form>`
