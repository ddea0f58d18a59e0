package app

import (
	"fmt"
	"html/template"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The usage page's charts: bars drawn by the server as SVG, with a title
// and a description for screen readers, both axes labelled, and every bar's
// figure as text in a table beside it (and in its tooltip), so the page
// reads the same without a script, without the picture, and aloud.

// Usage chart geometry, in SVG user units.
const (
	usageW, usageH     = 720.0, 220.0
	usageLeft, usageBt = 64.0, 28.0
	usageTop           = 12.0
)

type usageChart struct {
	ID, Title, Desc string
	W, H            float64
	// X0 and Y0 are the plot's left edge and its baseline.
	X0, Y0, Right float64
	Bars          []usageBar
	YTicks        []tick
	XLabels       []tick
	Groups        []group
	// Unit names a bar's period in the figures' table (Day, Month).
	Unit string
}

type usageBar struct {
	X, Y, W, H float64
	Tip        string
	// Unknown marks a bar with runs of unknown cost (drawn as "?" above
	// it: the bar is the known spend only).
	Unknown bool
	MarkX   float64
	MarkY   float64
}

type tick struct {
	X, Y  float64
	Label string
}

// spendChart draws the spend of each group, labelling the x axis with
// label(i) every step groups.
func spendChart(id, title, unit string, groups []group, label func(i int) string, step int) usageChart {
	c := usageChart{ID: id, Title: title, W: usageW, H: usageH, X0: usageLeft, Y0: usageH - usageBt, Right: usageW - 4, Groups: groups, Unit: unit}
	var peak, total int64
	unknown := 0
	for _, g := range groups {
		peak = max(peak, g.CostMicros)
		total += g.CostMicros
		unknown += g.Unknown
	}
	top := niceTop(peak)
	for _, f := range []int64{0, 2, 4} {
		v := top * f / 4
		c.YTicks = append(c.YTicks, tick{X: c.X0 - 6, Y: c.Y0 - (c.Y0-usageTop)*float64(v)/float64(top), Label: centsUSD(v)})
	}
	slot := (c.Right - c.X0) / float64(max(len(groups), 1))
	for i, g := range groups {
		h := (c.Y0 - usageTop) * float64(g.CostMicros) / float64(top)
		b := usageBar{X: c.X0 + float64(i)*slot + slot*0.15, W: slot * 0.7, H: h, Y: c.Y0 - h, Tip: g.Name + ": " + spend(g.Sum), Unknown: g.Unknown > 0}
		b.MarkX, b.MarkY = b.X+b.W/2, b.Y-3
		c.Bars = append(c.Bars, b)
		if i%step == 0 || i == len(groups)-1 {
			c.XLabels = append(c.XLabels, tick{X: b.X + b.W/2, Y: c.Y0 + 16, Label: label(i)})
		}
	}
	c.Desc = fmt.Sprintf("%d bars, one per %s, from %s to %s; %s spent in all, the highest %s%s.", len(groups), strings.ToLower(unit),
		first(groups), last(groups), centsUSD(total), centsUSD(peak), unknownNote(unknown))
	return c
}

// niceTop is the y axis's top: the least of 1, 2 or 5 times a power of
// ten dollars (ten cents at least) that holds peak micro-dollars, so the
// axis's middle tick is a round figure in whole cents too.
func niceTop(peak int64) int64 {
	for unit := int64(100000); ; unit *= 10 {
		for _, m := range []int64{1, 2, 5} {
			if unit*m >= peak {
				return unit * m
			}
		}
	}
}

func first(g []group) string {
	if len(g) == 0 {
		return ""
	}
	return g[0].Name
}

func last(g []group) string {
	if len(g) == 0 {
		return ""
	}
	return g[len(g)-1].Name
}

func unknownNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("; %d runs of unknown cost are not in the bars", n)
}

// Spend is the figure as the page shows it (spend).
func (s Sum) Spend() string { return spend(s) }

// spend is a figure as the page shows it: known spend, and the runs of
// unknown cost beside it; never $0 for runs nobody priced.
func spend(s Sum) string {
	switch {
	case s.Runs == 0:
		return "$0.00"
	case s.Unknown == s.Runs:
		return "unknown"
	case s.Unknown > 0:
		return fmt.Sprintf("%s + %d unknown", centsUSD(s.CostMicros), s.Unknown)
	}
	return centsUSD(s.CostMicros)
}

// usageCharts are the month's days and the year's months.
func usageCharts(d usageData) []usageChart {
	start := d.Query.start
	days := spendChart("days-chart", "Spend per day, "+start.Format("January 2006"), "Day", d.Days,
		func(i int) string { return strconv.Itoa(i + 1) }, 1)
	months := spendChart("months-chart", "Spend per month, the twelve months to "+start.Format("January 2006"), "Month", d.Months,
		func(i int) string { return start.AddDate(0, i-11, 0).Format("Jan 06") }, 1)
	return []usageChart{days, months}
}

// usageURL is the page with the same repository, another month.
func usageURL(q usageQuery, month time.Time, csv bool) string {
	v := url.Values{}
	if q.Repo != "" {
		v.Set("repo", q.Repo)
	}
	v.Set("month", month.Format("2006-01"))
	path := "/dashboard/usage"
	if csv {
		path += ".csv"
	}
	return path + "?" + v.Encode()
}

var usagePage = template.Must(template.New("usage").Funcs(template.FuncMap{
	"spend": spend, "usd": centsUSD,
	"prev":  func(q usageQuery) string { return usageURL(q, q.start.AddDate(0, -1, 0), false) },
	"next":  func(q usageQuery) string { return usageURL(q, q.start.AddDate(0, 1, 0), false) },
	"csv":   func(q usageQuery) string { return usageURL(q, q.start, true) },
	"title": func(q usageQuery) string { return q.start.Format("January 2006") },
}).Parse(`{{define "head"}}<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>sandbox-bot usage, {{title .Query}}</title><link rel="stylesheet" href="/dashboard/style.css"></head>
<body><header><h1>sandbox-bot usage</h1><nav><a href="/dashboard">runs</a></nav>{{if .Viewer}}<form method="post" action="/dashboard/logout"><span id="viewer">{{.Viewer}}</span> <button>Sign out</button></form>{{end}}</header>
{{$q := .Query}}
<form class="filters" method="get" action="/dashboard/usage">
<label>Repository <select name="repo"><option value="">all you can read</option>{{range .Repos}}<option{{if eq . $q.Repo}} selected{{end}}>{{.}}</option>{{end}}</select></label>
<label>Month <input type="month" name="month" value="{{$q.Month}}"></label>
<button>Show</button> <a href="{{prev $q}}" rel="prev">← earlier month</a> <a href="{{next $q}}" rel="next">later month →</a> <a id="csv" href="{{csv $q}}">CSV</a></form>
<p class="muted">Days and months in {{.Zone}}, as the budgets count them.</p>
{{end}}{{define "body"}}<section class="figures">
<div><b id="usage-total">{{usd .Total.CostMicros}}</b> spent in {{title .Query}}</div>
<div><b id="usage-runs">{{.Total.Runs}}</b> runs</div>
<div><b id="usage-unknown">{{.Total.Unknown}}</b> of unknown cost</div>
<div><b id="usage-tokens">{{.Total.InputTokens}} / {{.Total.OutputTokens}}</b> tokens in / out</div>
</section>
{{if .Budgets}}<h2>Budgets, {{title .Query}}</h2>
<table id="budgets"><tr><th>Budget of</th><th></th><th class="num">Budget</th><th class="num">Spent</th><th class="num">Reserved</th><th class="num">Left</th><th class="num">Runs of unknown cost</th></tr>
{{range .Budgets}}<tr><td>{{.Scope}}</td><td class="repo">{{.Name}}{{with .Note}} <small>{{.}}</small>{{end}}</td><td class="num">{{.Budget}}</td><td class="num">{{.Spent}}</td><td class="num">{{.Reserved}}</td><td class="num left">{{.Left}}</td><td class="num">{{.Unknown}}</td></tr>
{{end}}</table><p class="muted">A budget counts a run of unknown cost by its own budget, and a run in flight by what it reserved.</p>{{end}}
{{range .Charts}}<figure class="usage">
<svg class="usage-chart" id="{{.ID}}" viewBox="0 0 {{.W}} {{.H}}" role="img" aria-labelledby="{{.ID}}-title {{.ID}}-desc">
<title id="{{.ID}}-title">{{.Title}}</title><desc id="{{.ID}}-desc">{{.Desc}}</desc>
{{$c := .}}{{range .YTicks}}<line class="grid" x1="{{$c.X0}}" y1="{{.Y}}" x2="{{$c.Right}}" y2="{{.Y}}"></line><text class="y-label" x="{{.X}}" y="{{.Y}}" text-anchor="end" dominant-baseline="middle">{{.Label}}</text>{{end}}
<line class="axis" x1="{{.X0}}" y1="{{.Y0}}" x2="{{.Right}}" y2="{{.Y0}}"></line>
{{range .Bars}}<rect class="bar" x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="{{.H}}"><title>{{.Tip}}</title></rect>{{if .Unknown}}<text class="unknown" x="{{.MarkX}}" y="{{.MarkY}}" text-anchor="middle">?</text>{{end}}{{end}}
{{range .XLabels}}<text class="x-label" x="{{.X}}" y="{{.Y}}" text-anchor="middle">{{.Label}}</text>{{end}}
</svg>
<figcaption>{{.Title}} <small>(bars: known spend; ? marks runs of unknown cost)</small></figcaption>
<details><summary>The figures</summary><table class="chart-figures" id="{{.ID}}-figures"><tr><th>{{.Unit}}</th><th class="num">Runs</th><th class="num">Spend</th><th class="num">Tokens in / out</th></tr>
{{range .Groups}}<tr><td>{{.Name}}</td><td class="num">{{.Runs}}</td><td class="num">{{.Spend}}</td><td class="num">{{.InputTokens}} / {{.OutputTokens}}</td></tr>
{{end}}</table></details></figure>
{{end}}
<section class="usage-tables">{{range .By}}<div><h2>{{.Title}}</h2>
<table id="{{.ID}}"><tr><th>{{.Key}}</th><th class="num">Runs</th><th class="num">Spend</th><th class="num">Unknown cost</th><th class="num">Tokens in / out</th></tr>
{{range .Groups}}<tr><td class="repo">{{.Name}}</td><td class="num">{{.Runs}}</td><td class="num">{{.Spend}}</td><td class="num">{{.Unknown}}</td><td class="num">{{.InputTokens}} / {{.OutputTokens}}</td></tr>
{{else}}<tr><td colspan="5">No runs this month.</td></tr>{{end}}</table></div>
{{end}}</section>
</body></html>{{end}}`))

// renderUsage writes the figures, the charts and the tables.
func renderUsage(w io.Writer, d usageData) error {
	return usagePage.ExecuteTemplate(w, "body", struct {
		usageData
		Charts []usageChart
	}{d, usageCharts(d)})
}
