package app

import (
	_ "embed"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"
)

//go:embed live.js
var liveScript []byte

// serveLiveScript serves the live page's script, a static file: the page
// itself holds no inline script, and its policy allows this one only.
func serveLiveScript(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(liveScript)
}

var livePage = template.Must(template.New("live").Funcs(template.FuncMap{
	"usd":  func(f float64) string { return fmt.Sprintf("$%.2f", f) },
	"secs": formatSeconds,
	"when": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>{{with .Title}}{{.}} · {{end}}{{.Run.Meta.TaskID}} · sandbox-bot</title><link rel="stylesheet" href="/dashboard/style.css">
<script src="/runs/live.js" defer></script></head>
<body data-task="{{.Run.Meta.TaskID}}" data-live="{{.Run.Live}}">
<header><h1><a href="/dashboard">sandbox-bot</a> · run <code id="task">{{.Run.Meta.TaskID}}</code></h1>{{if .Viewer}}<span id="viewer">{{.Viewer}}</span>{{end}}</header>
<p class="run-head"><span id="repo">{{.Run.Meta.Repo}}#{{.Run.Meta.Number}}</span>{{with .Title}} · <span id="title">{{.}}</span>{{end}} · mode <b id="mode">{{.Run.Meta.Mode}}</b> · <span id="state">{{if .Run.Live}}running{{else}}ended{{end}}</span>{{if not .Run.Started.IsZero}} · started {{when .Run.Started}}{{end}}</p>
<section class="figures live-figures">
<div><b id="stage">–</b> stage</div><div><b id="steps">0</b> steps</div><div><b id="tool-calls">0</b> tool calls</div>
<div><b id="tokens">0</b> tokens</div><div><b id="cost">$0.00</b> so far</div>
</section>
<p id="preview-link" class="preview" hidden><a href="/runs/{{.Run.Meta.TaskID}}/preview/" target="_blank" rel="noopener">Open the running app</a> (the sandbox's dev server, while the run lives)</p>
<section id="screencast-box" hidden><h2>The agent's browser <small>(read-only)</small></h2><img id="screencast" alt="the agent's browser"></section>
<section id="receipt"{{if not .Receipt}} hidden{{end}}><h2>Receipt</h2>{{with .Receipt}}
<table class="receipt"><tr><th>Status</th><td id="r-status">{{.Status}}</td></tr><tr><th>Duration</th><td>{{secs .DurationSeconds}}</td></tr>
<tr><th>Cost</th><td id="r-cost">{{usd .CostUSD}}</td></tr><tr><th>Tokens</th><td>{{.InputTokens}} in / {{.OutputTokens}} out</td></tr><tr><th>Steps</th><td>{{.Steps}}</td></tr>
{{with .Branch}}<tr><th>Branch</th><td><code>{{.}}</code></td></tr>{{end}}{{with .Error}}<tr><th>Error</th><td class="error">{{.}}</td></tr>{{end}}
{{range .Checks}}<tr><th>check <code>{{.Name}}</code></th><td>{{if .Passed}}passed{{else}}failed{{end}}, {{.Attempts}} attempt(s)</td></tr>{{end}}
</table>{{with .Note}}<p>{{.}}</p>{{end}}{{end}}</section>
<h2>What happened</h2>
<ol id="log" class="live-log"></ol>
{{with .NoLines}}<p id="no-lines" class="muted">{{.}}</p>{{end}}
<p id="status-line" class="muted">{{if .Run.Live}}Connecting…{{else}}Loading the run's lines…{{end}}</p>
</body></html>`))

// page renders the run's page; the script fills it from the stream.
func (lp *livePages) page(w http.ResponseWriter, r *http.Request, v viewer) {
	run, ok := lp.findOr404(w, r, v, true)
	if !ok {
		return
	}
	data := map[string]any{"Run": run, "Viewer": v.Login, "Title": lp.clean(run.Title())}
	if run.Receipt != nil && !run.Live() {
		data["Receipt"] = lp.receipt(r.Context(), run.Meta.TaskID, 0)
	}
	if run.State == "" && run.Head == nil {
		data["NoLines"] = lp.noTranscript()
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "private, no-store")
	w.Header().Set("X-Frame-Options", "DENY")
	// Its own script and stylesheet, its own stream, frames of the
	// agent's browser as data: images; nothing else, from nowhere else.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
	if err := livePage.Execute(w, data); err != nil {
		lp.log.Warn().Err(err).Msg("live page: render")
	}
}

// noTranscript says why an ended run's page has no lines.
func (lp *livePages) noTranscript() string {
	if lp.retention == 0 {
		return "This bot keeps no transcripts (SANDBOX_TRANSCRIPT_RETENTION=off): the run's lines went with its sandbox."
	}
	return fmt.Sprintf("The run's lines are no longer kept: transcripts are kept for %s.", formatRetention(lp.retention))
}

// formatRetention writes a retention as days when it is whole days.
func formatRetention(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	}
	return d.String()
}

// liveURL is the page of a run under the public address.
func liveURL(public, taskID string) string {
	return strings.TrimSuffix(public, "/") + "/runs/" + taskID
}
