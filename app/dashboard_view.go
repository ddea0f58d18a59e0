package app

import (
	"fmt"
	"html/template"
	"io"
	"net/url"
	"strconv"
	"time"

	"github.com/sandbox-bot/sandbox-bot/app/receipts"
)

// Chart geometry, in SVG user units; the browser scales the viewBox.
const (
	chartW, chartH = 600.0, 160.0
	chartPad       = 4.0
)

// chart is a bar chart drawn by the server as inline SVG: no script, no
// library, nothing fetched.
type chart struct {
	ID, Title   string
	W, H        float64
	Bars        []bar
	Max         string
	First, Last string
}

type bar struct {
	X, Y, W, H float64
	Title      string
}

func barChart(id, title string, labels []string, values []float64, format func(float64) string) chart {
	c := chart{ID: id, Title: title, W: chartW, H: chartH}
	peak := 0.0
	for _, v := range values {
		peak = max(peak, v)
	}
	c.Max = format(peak)
	if len(values) == 0 {
		return c
	}
	slot := chartW / float64(len(values))
	for i, v := range values {
		h := 0.0
		if peak > 0 {
			h = (chartH - 2*chartPad) * v / peak
		}
		c.Bars = append(c.Bars, bar{X: float64(i)*slot + slot*0.1, Y: chartH - chartPad - h, W: slot * 0.8, H: h, Title: labels[i] + ": " + format(v)})
	}
	c.First, c.Last = labels[0], labels[len(labels)-1]
	return c
}

func seriesCharts(st receipts.Stats) []chart {
	labels := make([]string, len(st.Series))
	cost := make([]float64, len(st.Series))
	dur := make([]float64, len(st.Series))
	for i, b := range st.Series {
		labels[i] = b.Start.Format(time.DateOnly)
		cost[i], dur[i] = b.CostUSD, b.AvgDurationSeconds
	}
	per := "day"
	if st.BucketDays > 1 {
		per = strconv.Itoa(st.BucketDays) + " days"
	}
	return []chart{
		barChart("cost-chart", "Cost per "+per, labels, cost, func(v float64) string { return fmt.Sprintf("$%.2f", v) }),
		barChart("duration-chart", "Average duration per "+per, labels, dur, formatSeconds),
	}
}

func successChart(groups []receipts.Group) chart {
	labels := make([]string, len(groups))
	rates := make([]float64, len(groups))
	for i, g := range groups {
		labels[i], rates[i] = g.Repo+" "+g.Mode, g.SuccessRate()*100
	}
	c := barChart("success-chart", "Success rate by repository and mode", labels, rates, func(v float64) string { return fmt.Sprintf("%.0f%%", v) })
	c.Max = "100%"
	// Rates are drawn against 100%, not against the best group.
	for i := range c.Bars {
		c.Bars[i].H = (chartH - 2*chartPad) * rates[i] / 100
		c.Bars[i].Y = chartH - chartPad - c.Bars[i].H
	}
	return c
}

func formatSeconds(v float64) string {
	return (time.Duration(v * float64(time.Second))).Round(time.Second).String()
}

// pageURL is the dashboard URL of page n with the same filters.
func pageURL(q query, n int) string {
	v := url.Values{}
	for k, s := range map[string]string{"repo": q.Repo, "mode": q.Mode, "status": q.Status, "from": q.From, "to": q.To, "task": q.Task} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if n > 1 {
		v.Set("page", strconv.Itoa(n))
	}
	if len(v) == 0 {
		return "/dashboard"
	}
	return "/dashboard?" + v.Encode()
}

var dashboardPage = template.Must(template.New("dashboard").Funcs(template.FuncMap{
	"pct":     func(f float64) string { return fmt.Sprintf("%.0f%%", f*100) },
	"usd":     func(f float64) string { return fmt.Sprintf("$%.2f", f) },
	"secs":    formatSeconds,
	"when":    func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04") },
	"pageURL": pageURL,
	"add":     func(a, b int) int { return a + b },
	"modes":   func() []string { return []string{"plan", "execute", "revise", "rebase", "continue", "task"} },
	"statuses": func() []string {
		return []string{"completed", "failed", "interrupted", "timeout", "budget_exceeded", "hung", "aborted"}
	},
}).Parse(`{{define "head"}}<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>sandbox-bot dashboard</title><link rel="stylesheet" href="/dashboard/style.css"></head>
<body><header><h1>sandbox-bot</h1><nav><a href="/dashboard/usage">usage</a></nav>{{if .D.Viewer}}<form method="post" action="/dashboard/logout"><span id="viewer">{{.D.Viewer}}</span> <button>Sign out</button></form>{{end}}</header>
{{$q := .D.Query}}
<form class="filters" method="get" action="/dashboard">
<label>Repository <select name="repo"><option value="">all</option>{{range .D.Repos}}<option{{if eq . $q.Repo}} selected{{end}}>{{.}}</option>{{end}}</select></label>
<label>Mode <select name="mode"><option value="">all</option>{{range modes}}<option{{if eq . $q.Mode}} selected{{end}}>{{.}}</option>{{end}}</select></label>
<label>Status <select name="status"><option value="">all</option>{{range statuses}}<option{{if eq . $q.Status}} selected{{end}}>{{.}}</option>{{end}}</select></label>
<label>From <input type="date" name="from" value="{{$q.From}}"></label>
<label>To <input type="date" name="to" value="{{$q.To}}"></label>
<button>Show</button> <a href="/dashboard">reset</a></form>
{{end}}{{define "body"}}{{$q := .D.Query}}{{with .D.Stats}}
<section class="figures">
<div><b id="total-runs">{{.Runs}}</b> runs</div>
<div><b id="success-rate">{{pct .SuccessRate}}</b> succeeded</div>
<div><b id="total-cost">{{usd .CostUSD}}</b> spent</div>
</section>
{{end}}
<section class="charts">{{range .Charts}}
<figure><figcaption>{{.Title}} <small>(peak {{.Max}})</small></figcaption>
<svg class="chart" id="{{.ID}}" viewBox="0 0 {{.W}} {{.H}}" preserveAspectRatio="none" role="img" aria-label="{{.Title}}">
<line class="axis" x1="0" y1="{{.H}}" x2="{{.W}}" y2="{{.H}}"></line>
{{range .Bars}}<rect class="bar" x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="{{.H}}"><title>{{.Title}}</title></rect>{{end}}
</svg>{{if .First}}<div class="range"><span>{{.First}}</span><span>{{.Last}}</span></div>{{end}}</figure>
{{end}}</section>
<section class="tables">
<div class="wide"><h2>Success by repository and mode</h2>
<table id="groups"><tr><th>Repository</th><th>Mode</th><th class="num">Runs</th><th class="num">Succeeded</th><th class="num">Cost</th><th class="num">Avg duration</th></tr>
{{range .D.Stats.Groups}}<tr><td class="repo">{{.Repo}}</td><td>{{.Mode}}</td><td class="num">{{.Runs}}</td><td class="num">{{pct .SuccessRate}}</td><td class="num">{{usd .CostUSD}}</td><td class="num">{{secs .AvgDurationSeconds}}</td></tr>
{{else}}<tr><td colspan="6">No runs.</td></tr>{{end}}</table></div>
<div><h2>Commonest failures</h2>
<table id="failures"><tr><th>Status</th><th>Runs</th></tr>
{{range .D.Stats.Failures}}<tr><td>{{.Status}}</td><td>{{.Runs}}</td></tr>{{else}}<tr><td colspan="2">No failures.</td></tr>{{end}}</table></div>
<div><h2>Most expensive runs</h2>
<table id="expensive"><tr><th>Run</th><th>Repository</th><th>Mode</th><th>Cost</th></tr>
{{range .D.Stats.Expensive}}<tr><td><a href="{{.URL}}">{{.TaskID}}</a></td><td>{{.Repo}}#{{.Number}}</td><td>{{.Mode}}</td><td>{{usd .CostUSD}}</td></tr>{{else}}<tr><td colspan="4">No runs.</td></tr>{{end}}</table></div>
</section>
<h2>Routines</h2>
<table id="routines"><tr><th>Repository</th><th>Routine</th><th>When</th><th>Next tick</th><th>Last run</th><th>Result</th></tr>
{{range .D.Routines}}<tr class="routine"><td class="repo">{{.Repo}}</td><td>{{.Name}}</td><td>{{if .Schedule}}<code>{{.Schedule}}</code> {{or .Timezone "UTC"}}{{else}}on {{.On}}{{end}}</td><td>{{if .Next.IsZero}}–{{else}}{{when .Next}}{{end}}</td><td>{{if .LastAt.IsZero}}–{{else}}{{when .LastAt}}{{end}}</td><td>{{or .Result "–"}}</td></tr>
{{else}}<tr><td colspan="6">No routines.</td></tr>{{end}}</table>
<h2>Runs <small>{{.D.Runs.Total}} in all{{if .D.Runs.Runs}}, {{add .D.Runs.Offset 1}}–{{add .D.Runs.Offset (len .D.Runs.Runs)}} shown{{end}}</small></h2>
<table id="runs"><tr><th>Ended</th><th>Run</th><th>Repository</th><th>Mode</th><th>Status</th><th>Cost</th><th>Duration</th><th>Steps</th><th>Tokens in/out</th></tr>
{{range .D.Runs.Runs}}<tr id="{{.TaskID}}" class="run {{.Status}}{{if eq .TaskID $q.Task}} selected{{end}}"><td>{{when .EndedAt}}</td><td><a href="/runs/{{.TaskID}}">{{.TaskID}}</a>{{with .Title}} <span class="title">{{.}}</span>{{end}}</td><td><a href="{{.URL}}">{{.Repo}}#{{.Number}}</a></td><td>{{.Mode}}</td><td>{{.Status}}{{if .Error}} <small>{{.Error}}</small>{{end}}</td><td>{{if .CostUnknown}}unknown{{else}}{{usd .CostUSD}}{{end}}</td><td>{{secs .DurationSeconds}}</td><td>{{.Steps}}</td><td>{{.InputTokens}} / {{.OutputTokens}}</td></tr>
{{else}}<tr><td colspan="9">{{if $q.Task}}No receipt for {{$q.Task}} yet: the run has not ended, or it is not in a repository you can read.{{else}}No runs match.{{end}}</td></tr>{{end}}</table>
<nav class="pages">{{if .Prev}}<a rel="prev" href="{{pageURL $q .Prev}}">← newer</a>{{end}} page {{$q.Page}} of {{.Pages}} {{if .Next}}<a rel="next" href="{{pageURL $q .Next}}">older →</a>{{end}}</nav>
</body></html>{{end}}`))

// renderHead writes the top of the page, which needs only the filter's
// choices, so the browser has it (and fetches the stylesheet) while the
// figures are computed.
func renderHead(w io.Writer, d data) error {
	return dashboardPage.ExecuteTemplate(w, "head", map[string]any{"D": d})
}

// renderBody writes the figures, charts and runs.
func renderBody(w io.Writer, d data) error {
	pages := max(1, (d.Runs.Total+PageSize-1)/PageSize)
	prev, next := 0, 0
	if d.Query.Page > 1 {
		prev = d.Query.Page - 1
	}
	if d.Query.Page < pages {
		next = d.Query.Page + 1
	}
	return dashboardPage.ExecuteTemplate(w, "body", map[string]any{
		"D": d, "Charts": append(seriesCharts(d.Stats), successChart(d.Stats.Groups)), "Pages": pages, "Prev": prev, "Next": next,
	})
}
