package app

import (
	"context"
	"encoding/csv"
	"fmt"
	"html/template"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/app/receipts"
	"github.com/sandbox-bot/sandbox-bot/dispatch/budget"
)

// The usage page (/dashboard/usage): where the money went, a month at a
// time, in the repositories the reader may see. Spend per day of the
// month and per month of the year ending with it, by repository, by the
// person who asked, by model and by kind of run, with tokens; the
// budgets and what is left beside it; the same figures as CSV
// (/dashboard/usage.csv, or ?format=csv). Days and months are the
// budgets' (their time zone), so the page's month is the one the budgets
// count. Runs of unknown cost are counted apart, never as $0.

// usageBudgets is what the page shows the budgets from: the server's
// policy, and the ledger of reservations (nil: budgets are off).
type usageBudgets struct {
	policy budget.Policy
	ledger budget.Ledger
	now    func() time.Time
}

// usageQuery is one usage request.
type usageQuery struct {
	// Month is YYYY-MM in the budgets' time zone; Repo narrows to one
	// repository.
	Month, Repo string
	start       time.Time
	filter      receipts.Filter
}

// Sum is a set of runs' figures: a usage row's, its keys unused.
type Sum struct{ receipts.UsageRow }

// group is the figures of one name (a repository, a person, a model, a
// kind of run, a day, a month).
type group struct {
	Name string
	Sum
}

// usageData is everything the page shows.
type usageData struct {
	Viewer  string
	Query   usageQuery
	Repos   []string
	Zone    string
	Total   Sum
	Days    []group
	Months  []group
	By      []breakdown
	Budgets []budgetRow
	// Rows are the month's receipts added up by day, repository,
	// installation, requester, model and kind: the CSV's lines.
	Rows []receipts.UsageRow
}

// breakdown is one table of the page: the month by one key.
type breakdown struct {
	ID, Title, Key string
	Groups         []group
}

func (u usageBudgets) loc() *time.Location {
	if u.policy.Location == nil {
		return time.UTC
	}
	return u.policy.Location
}

// parseUsage reads the month (this month when none) and repository.
func (u usageBudgets) parseUsage(r *http.Request, v viewer) (usageQuery, error) {
	q := usageQuery{Month: r.URL.Query().Get("month"), Repo: r.URL.Query().Get("repo")}
	now := u.now().In(u.loc())
	q.start = time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, u.loc())
	if q.Month != "" {
		t, err := time.ParseInLocation("2006-01", q.Month, u.loc())
		if err != nil {
			return q, fmt.Errorf("month: %q is not a month (YYYY-MM)", q.Month)
		}
		q.start = t
	}
	q.Month = q.start.Format("2006-01")
	q.filter = receipts.Filter{RepoIDs: v.RepoIDs, Repo: q.Repo}
	return q, nil
}

// bounds are the starts of the month's days and of the year's months
// (each list ends with the start of the period after).
func (q usageQuery) bounds() (days, months []time.Time) {
	for t := q.start; !t.After(q.start.AddDate(0, 1, 0)); t = t.AddDate(0, 0, 1) {
		days = append(days, t)
	}
	for i := -11; i <= 1; i++ {
		months = append(months, q.start.AddDate(0, i, 0))
	}
	return days, months
}

// loadUsage reads the month's and the year's figures.
func (d *dashboard) loadUsage(ctx context.Context, q usageQuery, out *usageData) error {
	days, months := q.bounds()
	rows, err := d.store.Usage(ctx, q.filter, days, true)
	if err != nil {
		return err
	}
	year, err := d.store.Usage(ctx, q.filter, months, false)
	if err != nil {
		return err
	}
	out.Rows = rows
	out.Days = make([]group, len(days)-1)
	for i := range out.Days {
		out.Days[i].Name = days[i].Format(time.DateOnly)
	}
	out.Months = make([]group, len(months)-1)
	for i := range out.Months {
		out.Months[i].Name = months[i].Format("2006-01")
	}
	for _, r := range year {
		out.Months[r.Bucket].Add(r)
	}
	by := map[string]map[string]*Sum{}
	keys := []struct{ id, title, key string }{
		{"by-repo", "By repository", "Repository"}, {"by-requester", "By the person who asked", "Person"},
		{"by-model", "By model", "Model"}, {"by-kind", "By kind of run", "Kind"},
	}
	for _, r := range rows {
		out.Total.Add(r)
		out.Days[r.Bucket].Add(r)
		for _, k := range keys {
			name := usageKey(r, k.key)
			if by[k.key] == nil {
				by[k.key] = map[string]*Sum{}
			}
			if by[k.key][name] == nil {
				by[k.key][name] = &Sum{}
			}
			by[k.key][name].Add(r)
		}
	}
	for _, k := range keys {
		out.By = append(out.By, breakdown{ID: k.id, Title: k.title, Key: k.key, Groups: sortedGroups(by[k.key])})
	}
	return nil
}

// usageKey is a row's name by key, as the page and the CSV show it.
func usageKey(r receipts.UsageRow, key string) string {
	switch key {
	case "Repository":
		return r.Repo
	case "Person":
		return nonEmpty(r.Requester, "(the bot)")
	case "Model":
		return nonEmpty(r.Model, "(harness default)")
	}
	return r.Mode
}

func nonEmpty(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}

// sortedGroups puts the biggest spender first, then the most runs.
func sortedGroups(m map[string]*Sum) []group {
	out := make([]group, 0, len(m))
	for name, s := range m {
		out = append(out, group{Name: name, Sum: *s})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.CostMicros != b.CostMicros {
			return a.CostMicros > b.CostMicros
		}
		if a.Runs != b.Runs {
			return a.Runs > b.Runs
		}
		return a.Name < b.Name
	})
	return out
}

// usage serves the page, or its CSV with ?format=csv.
func (d *dashboard) usage(w http.ResponseWriter, r *http.Request, v viewer) {
	if r.URL.Query().Get("format") == "csv" {
		d.usageCSV(w, r, v)
		return
	}
	q, err := d.budgets.parseUsage(r, v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	out := usageData{Viewer: v.Login, Query: q, Zone: d.budgets.loc().String()}
	if out.Repos, err = d.store.Repos(r.Context(), q.filter); err != nil {
		d.log.Error().Err(err).Msg("usage: read receipts")
		http.Error(w, "read receipts: "+err.Error(), http.StatusInternalServerError)
		return
	}
	pageHeaders(w)
	if err := usagePage.ExecuteTemplate(w, "head", out); err != nil {
		d.log.Warn().Err(err).Msg("usage: render")
		return
	}
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	if err := d.loadUsage(r.Context(), q, &out); err != nil {
		d.log.Error().Err(err).Msg("usage: read receipts")
		fmt.Fprintf(w, "<p class=\"error\">Could not read the receipts: %s</p></body></html>", template.HTMLEscapeString(err.Error()))
		return
	}
	out.Budgets = d.budgetRows(r.Context(), q, out)
	if err := renderUsage(w, out); err != nil {
		d.log.Warn().Err(err).Msg("usage: render")
	}
}

// usageCSV is the month's figures, one line per day, repository,
// installation, requester, model and kind: the page's tables are sums of
// its lines. Costs are exact (micro-dollars); a line whose runs' costs
// are all unknown has no cost, not 0.
func (d *dashboard) usageCSV(w http.ResponseWriter, r *http.Request, v viewer) {
	q, err := d.budgets.parseUsage(r, v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var out usageData
	if err := d.loadUsage(r.Context(), q, &out); err != nil {
		d.log.Error().Err(err).Msg("usage: read receipts")
		http.Error(w, "read receipts: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Cache-Control", "private, no-store")
	w.Header().Set("Content-Disposition", `attachment; filename="sandbox-bot-usage-`+q.Month+`.csv"`)
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"day", "repository", "installation", "requester", "model", "kind", "runs", "cost_usd", "unknown_cost_runs", "input_tokens", "output_tokens"})
	for _, row := range out.Rows {
		cost := ""
		if row.Runs > row.Unknown {
			cost = microsUSD(row.CostMicros)
		}
		_ = cw.Write([]string{out.Days[row.Bucket].Name, csvCell(row.Repo), strconv.FormatInt(row.InstallationID, 10), csvCell(row.Requester), csvCell(row.Model), csvCell(row.Mode),
			strconv.Itoa(row.Runs), cost, strconv.Itoa(row.Unknown), strconv.FormatInt(row.InputTokens, 10), strconv.FormatInt(row.OutputTokens, 10)})
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		zerolog.Ctx(r.Context()).Warn().Err(err).Msg("usage: write the CSV")
	}
}

// csvCell keeps a spreadsheet from reading text (a model's name is a
// repository writer's) as a formula.
func csvCell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// microsUSD is micro-dollars as dollars, exactly ("12.345678").
func microsUSD(m int64) string {
	sign := ""
	if m < 0 {
		sign, m = "-", -m
	}
	return fmt.Sprintf("%s%d.%06d", sign, m/1e6, m%1e6)
}

// centsUSD is micro-dollars rounded to the cent ("$12.35").
func centsUSD(m int64) string {
	sign := ""
	if m < 0 {
		sign, m = "-", -m
	}
	c := (m + 5000) / 10000
	return fmt.Sprintf("%s$%d.%02d", sign, c/100, c%100)
}
