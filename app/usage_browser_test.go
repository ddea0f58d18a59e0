package app

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// usageFigures is what the test reads off the rendered usage page.
type usageFigures struct {
	Path      string    `json:"path"`
	Total     string    `json:"total"`
	Unknown   string    `json:"unknown"`
	DayBars   int       `json:"dayBars"`
	MonthBars int       `json:"monthBars"`
	DayLabels []string  `json:"dayLabels"`
	Title     string    `json:"title"`
	Desc      string    `json:"desc"`
	Labelled  string    `json:"labelled"`
	YLabels   []string  `json:"yLabels"`
	DayRows   []string  `json:"dayRows"`
	Heights   []float64 `json:"heights"`
	Width     float64   `json:"width"`
	CSV       string    `json:"csv"`
	Body      string    `json:"body"`
}

const readUsage = `(() => {
  const q = s => document.querySelector(s), qa = s => Array.from(document.querySelectorAll(s));
  return {
    path: location.pathname, total: q('#usage-total').textContent, unknown: q('#usage-unknown').textContent,
    dayBars: qa('svg#days-chart rect.bar').length, monthBars: qa('svg#months-chart rect.bar').length,
    dayLabels: qa('svg#days-chart text.x-label').map(e => e.textContent),
    title: q('svg#days-chart title').textContent, desc: q('svg#days-chart desc').textContent,
    labelled: q('svg#days-chart').getAttribute('aria-labelledby'),
    yLabels: qa('svg#days-chart text.y-label').map(e => e.textContent),
    dayRows: qa('#days-chart-figures tr').slice(1).map(r => Array.from(r.cells).map(c => c.textContent).join('|')),
    heights: qa('svg#days-chart rect.bar').map(r => r.getBoundingClientRect().height),
    width: q('svg#days-chart').getBoundingClientRect().width,
    csv: q('#csv').href, body: document.body.innerText,
  };
})()`

// The usage page in Chromium: May 2026's 31 days as bars with their day
// numbers, titled and described, its figures equal to the receipts' sum
// to the cent, each day's figure as text, the bars drawn to scale; the
// CSV the page links to, fetched with the browser's session, adds up to
// the same.
func TestUsagePageInChromium(t *testing.T) {
	t.Parallel()
	f := usageFixture(t, "")
	ctx := browser(t)
	f.gh.SignInAs("alice")
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900), chromedp.Navigate(f.http.URL+"/dashboard/usage?month=2026-05"),
		chromedp.WaitVisible("#usage-total")); err != nil {
		t.Fatal(err)
	}
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](readUsage))
	if err != nil {
		t.Fatal(err)
	}
	var p usageFigures
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	micros, unknown := f.mayMicros("octo/alpha", "other/gamma")
	if p.Path != "/dashboard/usage" || p.Total != centsUSD(micros) || p.Unknown != "2" || unknown != 2 {
		t.Errorf("at %s: total %s, %s of unknown cost; want %s and 2", p.Path, p.Total, p.Unknown, centsUSD(micros))
	}
	if p.DayBars != 31 || len(p.DayLabels) != 31 || p.DayLabels[0] != "1" || p.DayLabels[30] != "31" || p.MonthBars != 12 {
		t.Errorf("charts: %d day bars labelled %v, %d month bars; want May's 31 days 1 to 31, and 12 months", p.DayBars, p.DayLabels, p.MonthBars)
	}
	if p.Title != "Spend per day, May 2026" || !strings.Contains(p.Desc, "31 bars") || !strings.Contains(p.Desc, centsUSD(micros)+" spent") ||
		p.Labelled != "days-chart-title days-chart-desc" || len(p.YLabels) != 3 || p.YLabels[0] != "$0.00" {
		t.Errorf("the chart's title %q, description %q (labelled by %q), y axis %v", p.Title, p.Desc, p.Labelled, p.YLabels)
	}
	// Each day's figure as text, and the days add up to the total.
	var sum int64
	perDay := map[string]int64{}
	for _, r := range f.runsOf("octo/alpha", "other/gamma") {
		if !r.CostUnknown && r.EndedAt.Month() == 5 {
			perDay[r.EndedAt.Format("2006-01-02")] += int64(r.CostUSD*1e6 + 0.5)
		}
	}
	if len(p.DayRows) != 31 {
		t.Fatalf("the figures' table has %d days, want 31: %v", len(p.DayRows), p.DayRows)
	}
	peak := 0.0
	for i, row := range p.DayRows {
		cells := strings.Split(row, "|")
		day := cells[0]
		want := centsUSD(perDay[day])
		if cells[1] == "0" {
			want = "$0.00"
		}
		if cells[2] != want && !strings.HasPrefix(cells[2], want+" + ") && cells[2] != "unknown" {
			t.Errorf("%s: %s in the table, want %s", day, cells[2], want)
		}
		sum += perDay[day]
		peak = max(peak, p.Heights[i])
	}
	if sum != micros {
		t.Errorf("the days add up to %d micro-dollars, the month to %d", sum, micros)
	}
	// Bars to scale: the costliest day's bar the tallest, an empty day flat.
	if peak <= 0 || p.Width < 600 {
		t.Errorf("bars %v in a chart %v px wide: want drawn, in a chart of the page's width", p.Heights, p.Width)
	}
	if strings.Contains(p.Body, "octo/beta") {
		t.Errorf("alice sees octo/beta:\n%s", p.Body)
	}
	// The CSV the page links to, with the browser's session.
	cookies, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{f.http.URL}})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, p.CSV, nil)
	for _, c := range cookies.Cookies {
		req.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	got, gotUnknown, _ := csvMicros(t, string(body))
	if resp.StatusCode != http.StatusOK || got != micros || gotUnknown != 2 || !strings.Contains(p.CSV, "/dashboard/usage.csv?month=2026-05") {
		t.Errorf("the CSV at %s: %d, %d micro-dollars, %d unknown; want %d and 2", p.CSV, resp.StatusCode, got, gotUnknown, micros)
	}
}
