package main

import (
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch/docker/dockertest"
	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// TestE2EPreviewOnAPullRequest: /preview on the agent's pull request
// starts a preview sandbox (the real image) whose dev server a signed-in
// person opens through the bot, at a host of its own under the preview
// domain; it holds the one slot the caps allow, so a plan asked for
// meanwhile waits, ends by itself when its time is up, says so on the PR,
// and frees the slot for that plan. The PR head's dev server is hostile
// (the agent wrote it): it gets nothing its own run would not have (no
// provider key, no pass-through secret but the one the base branch names
// for previews, no way to the metadata address, the bot's listener or a
// network the operator denied), and its headers and 103 never reach the
// browser. Its Vite-style page loads its assets by absolute path.
func TestE2EPreviewOnAPullRequest(t *testing.T) {
	yml, files := uiRepo()
	yml = strings.Replace(yml, "  routes: [/]\n", "  routes: [/]\n  preview_secrets: [E2E_PREVIEW_OK]\n", 1)
	gw := dockertest.Gateway(t)
	denyAddr, denyHits := dockertest.ConnCounter(t) // a stand-in for a network the operator denies
	_, denyPortText, _ := net.SplitHostPort(denyAddr)
	denyPort, _ := strconv.Atoi(denyPortText)
	// The machine the sandbox runs on: a service on every address of the
	// host, and one the operator lets sandboxes reach.
	wall, hostHits, allowHits := hostWallServers(t)
	const passSecret, providerKey = "pass-secret-canary-5150", "provider-key-canary-6160"
	l := startLoop(t, loopOptions{signIn: true, onBridge: true, sandboxYML: yml, files: files, hostAllow: []string{wall.allowAddr},
		env: []string{"SANDBOX_PREVIEW_DURATION=40s", "SANDBOX_MAX_RUNS=1", "SANDBOX_PREVIEW_DOMAIN=" + previewDomain,
			"SANDBOX_PASS_ENV=E2E_PASS_SECRET,E2E_PREVIEW_OK", "E2E_PASS_SECRET=" + passSecret, "E2E_PREVIEW_OK=visible-to-previews",
			"SANDBOX_PROVIDERS=canary=http://" + gw + ":9,E2E_PROVIDER_KEY", "E2E_PROVIDER_KEY=" + providerKey,
			"SANDBOX_DENY_NETWORKS=" + gw + ":" + strconv.Itoa(denyPort)},
		script: []modeltest.Turn{{Text: uiPlanText, Usage: usage(900, 60)}}})
	_, botPort, _ := net.SplitHostPort(l.addr)
	bp, _ := strconv.Atoi(botPort)
	branch := "agent/t-0000abcd-heading"
	l.gh.CreateBranch(e2eRepo, branch, "main")
	// The PR's head differs from main: the preview serves the head, and
	// its server.js is the agent's.
	head := uiCanary + " (the PR's head)"
	l.gh.CommitFile(e2eRepo, branch, "page.html", vitePage(head), "Change the heading")
	l.gh.CommitFile(e2eRepo, branch, "server.js", hostileServerJS(gw, bp, denyPort, wall), "Serve it my way")
	pr := l.gh.AddPullRequest(e2eRepo, "sandbox-bot[bot]", "Change the heading", branch, "main")
	l.gh.SetBody(e2eRepo, pr, `<!-- sandbox-bot:{"kind":"pr","task":"T-0000ABCD","mode":"execute","issue":1,"branch":"`+branch+`"} -->`+"\nThe heading.")
	l.command(pr, "/preview")
	c := l.waitComment(pr, "Open the preview", time.Minute)
	link := regexp.MustCompile(`\((http://[^)]+/preview/)\)`).FindStringSubmatch(c)
	if link == nil {
		t.Fatalf("no preview link in:\n%s", c)
	}
	// A browser-like client first: the sandbox unpacks the code and
	// starts the dev server, the bot answers 502 until it is up.
	cl := previewOriginClient(l.addr)
	var handOff string
	cl.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
		if strings.Contains(req.URL.Path, "hand-off") {
			handOff = req.URL.String()
		}
		return nil
	}
	l.gh.SignInAs("alice")
	l.gh.WaitFor(2*time.Minute, "the preview serving the PR head's page", func() bool {
		r, err := cl.Get(link[1])
		if err != nil {
			return false
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return r.StatusCode == http.StatusOK && strings.Contains(string(b), head)
	})
	// The hostile dev server gets nothing its own run would not have.
	resp := checkNothingActsBeyond(t, cl, link[1])
	probe := l.previewGet(t, cl, resp.Request.URL.String()+"probe")
	bad := false
	for _, canary := range []string{passSecret, providerKey} {
		if strings.Contains(probe, canary) {
			bad = true
			t.Errorf("the preview's dev server got a secret its run must not hold: %s", canary)
		}
	}
	for _, want := range []string{`"uid":1000`, `"gateway":"ENOENT"`, `"metadata":"ECONNREFUSED"`, `"bot":"ECONNREFUSED"`,
		`"botByName":"ECONNREFUSED"`, `"denied":"ECONNREFUSED"`, `visible-to-previews`} {
		if !strings.Contains(probe, want) {
			bad = true
			t.Errorf("the hostile dev server's probe lacks %s", want)
		}
	}
	checkHostWall(t, probe, wall, hostHits, allowHits)
	if bad {
		t.Logf("the probe:\n%s", probe)
	}
	// Its own origin, handed over once.
	origin := resp.Request.URL.Scheme + "://" + resp.Request.URL.Host
	if !strings.HasSuffix(resp.Request.URL.Hostname(), "."+previewDomain) {
		t.Fatalf("the preview is at %s, want a host of its own under %s", resp.Request.URL, previewDomain)
	}
	if handOff == "" {
		t.Fatal("no hand-off on the way to the preview")
	}
	if r, err := previewOriginClient(l.addr).Get(handOff); err != nil || r.StatusCode != http.StatusForbidden {
		t.Errorf("a hand-off code used a second time: %v %v; want 403", r, err)
	}
	// In Chromium, the page's module script by absolute path loads.
	alice := previewOriginBrowser(t, l.addr)()
	l.signedIn(alice, "alice", link[1])
	waitJS(t, alice, "the page's module script from /assets/", `document.getElementById('assets').textContent === 'assets loaded'`, 30*time.Second)
	shot(t, alice, "pr-preview.png")
	if n := denyHits.Load(); n != 0 {
		t.Errorf("the operator's denied network got %d connections from the preview", n)
	}

	// The preview holds the only slot: a plan asked for now waits.
	n := l.gh.AddIssue(e2eRepo, e2eWriter, "Another", "Plan something.")
	l.label(n)
	l.waitComment(n, "in line", time.Minute)
	// Its time up, the preview ends by itself and says so; the slot goes
	// to the plan.
	l.gh.WaitFor(2*time.Minute, "the preview's comment edited at its end", func() bool {
		for _, m := range l.gh.Issue(e2eRepo, pr).Comments {
			if strings.Contains(m.Body, "has ended") {
				return true
			}
		}
		return false
	})
	l.waitComment(n, "Planning this issue", time.Minute)
	l.gh.WaitFor(time.Minute, "the ended preview refused", func() bool {
		r, err := cl.Get(origin + "/")
		if err == nil {
			r.Body.Close()
		}
		return err == nil && r.StatusCode == http.StatusNotFound
	})
}

// previewGet fetches url with c and returns its body.
func (l *loop) previewGet(t *testing.T, c *http.Client, url string) string {
	t.Helper()
	r, body, _ := testenv.Get(t, c, url)
	if r.StatusCode != http.StatusOK {
		t.Fatalf("%s answers %d: %s", url, r.StatusCode, body)
	}
	return body
}
