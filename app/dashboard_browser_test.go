package app

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// browser is headless Debian Chromium driven over CDP.
func browser(t *testing.T) context.Context {
	t.Helper()
	bin := testenv.Chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-dev-shm-usage", true))
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	t.Cleanup(cancel)
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(cancelBrowser)
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start Chromium %s: %v", bin, err)
	}
	return bctx
}

// pageFigures is what the test reads off the rendered dashboard.
type pageFigures struct {
	Path       string   `json:"path"`
	Viewer     string   `json:"viewer"`
	Total      string   `json:"total"`
	Rate       string   `json:"rate"`
	Cost       string   `json:"cost"`
	CostBars   int      `json:"costBars"`
	DurBars    int      `json:"durBars"`
	RateBars   int      `json:"rateBars"`
	RunRows    int      `json:"runRows"`
	RunIDs     []string `json:"runIDs"`
	RunLinks   []string `json:"runLinks"`
	IssueLinks []string `json:"issueLinks"`
	Titles     []string `json:"titles"`
	Injected   int      `json:"injected"`
	Failures   []string `json:"failures"`
	Expensive  string   `json:"expensive"`
	BodyText   string   `json:"bodyText"`
	BarHeights []string `json:"barHeights"`
}

const readFigures = `(() => {
  const q = s => document.querySelector(s), qa = s => Array.from(document.querySelectorAll(s));
  return {
    path: location.pathname, viewer: (q('#viewer') || {}).textContent || '',
    total: q('#total-runs').textContent, rate: q('#success-rate').textContent, cost: q('#total-cost').textContent,
    costBars: qa('svg#cost-chart rect.bar').length, durBars: qa('svg#duration-chart rect.bar').length,
    rateBars: qa('svg#success-chart rect.bar').length, runRows: qa('#runs tr.run').length,
    runIDs: qa('#runs tr.run').map(r => r.id), runLinks: qa('#runs tr.run td:nth-child(2) a').map(a => a.href),
    issueLinks: qa('#runs tr.run td:nth-child(3) a').map(a => a.href),
    titles: qa('#runs tr.run td:nth-child(2) .title').map(e => e.textContent),
    injected: qa('#runs img, #runs script, #runs b').length,
    failures: qa('#failures tr td:first-child').map(td => td.textContent),
    expensive: (q('#expensive tr:nth-child(2) td a') || {}).textContent || '',
    bodyText: document.body.innerText,
    barHeights: qa('svg#cost-chart rect.bar').map(r => r.getAttribute('height')),
  };
})()`

func TestDashboardInChromium(t *testing.T) {
	t.Parallel()
	f := newDashFixture(t)
	ctx := browser(t)

	read := func(who, url string) pageFigures {
		t.Helper()
		f.gh.SignInAs(who)
		if _, err := chromedp.Call(ctx, network.ClearBrowserCookies, cdp.Empty{}); err != nil {
			t.Fatal(err)
		}
		if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitVisible("#total-runs")); err != nil {
			t.Fatalf("%s loads %s: %v", who, url, err)
		}
		raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](readFigures))
		if err != nil {
			t.Fatalf("read the dashboard: %v", err)
		}
		var p pageFigures
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatal(err)
		}
		return p
	}

	// alice signs in through the OAuth flow and sees alpha and gamma.
	p := read("alice", f.http.URL+"/dashboard")
	want := f.runsOf("octo/alpha", "other/gamma")
	if p.Path != "/dashboard" || p.Viewer != "alice" {
		t.Fatalf("after sign-in: at %s as %q, want /dashboard as alice", p.Path, p.Viewer)
	}
	// 4 runs, 2 completed, $0.40+1.60+0.50+2.00.
	if p.Total != "4" || p.Rate != "50%" || p.Cost != "$4.50" {
		t.Errorf("figures: %s runs, %s succeeded, %s; want 4, 50%%, $4.50", p.Total, p.Rate, p.Cost)
	}
	// Her runs ended on days 0, 1, 3 and 4: five daily bars, the third
	// flat, the last (gamma's $2.00) the tallest; three repository-and-mode
	// groups: alpha plan, alpha execute, gamma task.
	if p.CostBars != 5 || p.DurBars != 5 || p.RateBars != 3 {
		t.Errorf("charts: %d cost bars, %d duration bars, %d success bars; want 5, 5, 3", p.CostBars, p.DurBars, p.RateBars)
	} else if p.BarHeights[2] != "0" || p.BarHeights[4] != "152" {
		t.Errorf("cost bar heights %v: want the third 0 (no runs) and the last 152 (the peak)", p.BarHeights)
	}
	if p.RunRows != len(want) {
		t.Errorf("runs table: %d rows %v, want %d", p.RunRows, p.RunIDs, len(want))
	}
	if p.Expensive != "T-C0000001" || strings.Join(p.Failures, ",") != "budget_exceeded,failed" {
		t.Errorf("most expensive %q, failures %v; want T-C0000001 and budget_exceeded, failed", p.Expensive, p.Failures)
	}
	// Each run links to its live page by its task id, with its issue's
	// title beside it (as text: a title is untrusted), and to its issue.
	for i, id := range p.RunIDs {
		if r := f.runOf(id); r == nil || p.RunLinks[i] != f.http.URL+"/runs/"+id || p.IssueLinks[i] != r.URL {
			t.Errorf("run %s links to %q and %q, want its live page and its issue", id, p.RunLinks[i], p.IssueLinks[i])
		}
	}
	if !slices.Contains(p.Titles, hostileTitle) || p.Injected != 0 {
		t.Errorf("titles %q with %d elements made of one: want %q shown as text", p.Titles, p.Injected, hostileTitle)
	}
	if strings.Contains(p.BodyText, "octo/beta") || strings.Contains(p.BodyText, "T-B0000001") {
		t.Errorf("alice sees octo/beta, which she cannot read:\n%s", p.BodyText)
	}

	// bob reads only beta.
	p = read("bob", f.http.URL+"/dashboard")
	if p.Viewer != "bob" || p.Total != "2" || p.RunRows != 2 || p.Expensive != "T-B0000001" || strings.Contains(p.BodyText, "octo/alpha") || strings.Contains(p.BodyText, "other/gamma") {
		t.Errorf("bob: %s runs, %d rows, most expensive %q; want beta's 2 runs only:\n%s", p.Total, p.RunRows, p.Expensive, p.BodyText)
	}

	// A filter narrows the page; a restart keeps every receipt.
	f.start()
	p = read("alice", f.http.URL+"/dashboard?repo=octo%2Falpha&status=completed")
	if p.Total != "2" || p.RunRows != 2 || p.Rate != "100%" {
		t.Errorf("alice, alpha completed, after a restart: %s runs, %d rows, %s; want 2, 2, 100%%", p.Total, p.RunRows, p.Rate)
	}
}

// runOf is a seeded receipt by task id.
func (f *dashFixture) runOf(id string) *struct{ URL string } {
	for _, runs := range f.seeded {
		for _, r := range runs {
			if r.TaskID == id {
				return &struct{ URL string }{r.URL}
			}
		}
	}
	return nil
}

// TestDashboardTablesDoNotOverlapAt1280: in a 1280-pixel-wide window no
// table of the three side by side reaches past its own box into the next
// (the "Avg duration" column of the first once did).
func TestDashboardTablesDoNotOverlapAt1280(t *testing.T) {
	t.Parallel()
	f := newDashFixture(t)
	ctx := browser(t)
	f.gh.SignInAs("alice")
	type box struct {
		ID                       string
		Left, Right, BoxRight    float64
		NextLeft, ScrollOverflow float64
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900), chromedp.Navigate(f.http.URL+"/dashboard"), chromedp.WaitVisible("#groups")); err != nil {
		t.Fatal(err)
	}
	boxes, err := chromedp.Run(ctx, chromedp.Evaluate[[]box](`Array.from(document.querySelectorAll('.tables > div')).map((d, i, all) => {
  const t = d.querySelector('table').getBoundingClientRect(), b = d.getBoundingClientRect();
  const next = all[i+1] && Math.abs(all[i+1].getBoundingClientRect().top - b.top) < 2 ? all[i+1].getBoundingClientRect().left : 1e9;
  return {ID: d.querySelector('table').id, Left: t.left, Right: t.right, BoxRight: b.right, NextLeft: next, ScrollOverflow: d.scrollWidth - d.clientWidth};
})`))
	if err != nil {
		t.Fatal(err)
	}
	if len(boxes) != 3 {
		t.Fatalf("want 3 tables side by side, got %+v", boxes)
	}
	for _, b := range boxes {
		if b.Right > b.BoxRight+0.5 || b.Right > b.NextLeft || b.ScrollOverflow > 0 {
			t.Errorf("table #%s ends at %.0f px: its box ends at %.0f, the next box starts at %.0f, %.0f px hidden", b.ID, b.Right, b.BoxRight, b.NextLeft, b.ScrollOverflow)
		}
	}
}
