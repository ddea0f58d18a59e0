package app

import (
	"encoding/csv"
	"io"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/app/receipts"
	"github.com/sandbox-bot/sandbox-bot/dispatch/budget"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// usageFixture is the dashboard fixture with budgets set (the memory
// backend keeps the book) and, besides its six receipts of early May
// 2026, receipts of many small costs across May: two of unknown cost.
func usageFixture(t *testing.T, dbURL string) *dashFixture {
	t.Helper()
	f := newDashFixtureOn(t, dbURL)
	f.env = map[string]string{"SANDBOX_BUDGET_INSTALLATION_MONTHLY_USD": "100", "SANDBOX_BUDGET_REPO_MONTHLY_USD": "40"}
	var more []receipts.Run
	for i := range 30 {
		repo := []string{"octo/alpha", "octo/beta", "other/gamma"}[i%3]
		r := receipts.Run{TaskID: "T-D" + strconv.Itoa(1000000+i), Repo: repo, RepoID: f.ids[repo], InstallationID: 1, Number: 20 + i, Mode: "execute",
			Status: "completed", Attempt: 1, CostUSD: 0.012345 * float64(i+1), InputTokens: int64(100 * i), OutputTokens: int64(i),
			EndedAt: time.Date(2026, 5, 1+i, 23, 59, 59, 0, time.UTC), Requester: []string{"alice", "carol"}[i%2], Model: "scripted/priced"}
		if repo == "other/gamma" {
			r.InstallationID = 2
		}
		if i == 3 || i == 5 {
			r.CostUSD, r.CostUnknown, r.Requester = 0, true, "dave"
		}
		more = append(more, r)
		f.seeded[repo] = append(f.seeded[repo], r)
	}
	s := f.store()
	defer s.Close()
	if err := s.PutMany(t.Context(), more); err != nil {
		t.Fatal(err)
	}
	f.start()
	return f
}

// mayMicros is what the seeded receipts of repos cost in May 2026, in
// micro-dollars, and how many are of unknown cost.
func (f *dashFixture) mayMicros(repos ...string) (int64, int) {
	var m int64
	n := 0
	for _, r := range f.runsOf(repos...) {
		if r.EndedAt.Month() != time.May {
			continue
		}
		if r.CostUnknown {
			n++
			continue
		}
		m += int64(math.Round(r.CostUSD * 1e6))
	}
	return m, n
}

func (f *dashFixture) get(c *http.Client, path string) (int, string) {
	f.t.Helper()
	resp, err := c.Get(f.http.URL + path)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// csvMicros adds up a usage CSV's cost column exactly, and its unknown
// runs; a line whose runs are all of unknown cost must have no cost.
func csvMicros(t *testing.T, body string) (int64, int, [][]string) {
	t.Helper()
	recs, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil || len(recs) == 0 || strings.Join(recs[0], ",") != "day,repository,installation,requester,model,kind,runs,cost_usd,unknown_cost_runs,input_tokens,output_tokens" {
		t.Fatalf("the CSV does not parse or has another header (%v):\n%s", err, body)
	}
	var m int64
	n := 0
	for _, r := range recs[1:] {
		runs, _ := strconv.Atoi(r[6])
		unknown, _ := strconv.Atoi(r[8])
		n += unknown
		if r[7] == "" {
			if unknown != runs {
				t.Errorf("CSV line %v has no cost but runs of known cost", r)
			}
			continue
		}
		whole, frac, _ := strings.Cut(r[7], ".")
		w, err1 := strconv.ParseInt(whole, 10, 64)
		fr, err2 := strconv.ParseInt(frac, 10, 64)
		if err1 != nil || err2 != nil || len(frac) != 6 {
			t.Fatalf("CSV cost %q is not dollars with six decimals", r[7])
		}
		m += w*1e6 + fr
	}
	return m, n, recs[1:]
}

func TestUsagePageShowsOnlyReadableRepositories(t *testing.T) {
	t.Parallel()
	readable(t, usageFixture(t, ""))
}

// The same with the receipts and the budget ledger in PostgreSQL (the
// replicas' shared store).
func TestUsagePageShowsOnlyReadableRepositoriesPostgres(t *testing.T) {
	t.Parallel()
	readable(t, usageFixture(t, testenv.Postgres(t)))
}

func readable(t *testing.T, f *dashFixture) {
	for _, c := range []struct {
		login string
		repos []string
	}{{"alice", []string{"octo/alpha", "other/gamma"}}, {"bob", []string{"octo/beta"}}, {"eve", nil}} {
		client := f.signedInClient(c.login)
		code, page := f.get(client, "/dashboard/usage?month=2026-05")
		micros, unknown := f.mayMicros(c.repos...)
		if code != http.StatusOK || !strings.Contains(page, `id="usage-total">`+centsUSD(micros)+`<`) || !strings.Contains(page, `id="usage-unknown">`+strconv.Itoa(unknown)+`<`) {
			t.Errorf("%s: %d; want the total %s and %d of unknown cost:\n%s", c.login, code, centsUSD(micros), unknown, page)
		}
		for _, other := range []string{"octo/alpha", "octo/beta", "other/gamma"} {
			if !strings.Contains(strings.Join(c.repos, " "), other) && strings.Contains(page, other) {
				t.Errorf("%s sees %s on the usage page, which they cannot read", c.login, other)
			}
		}
		code, body := f.get(client, "/dashboard/usage.csv?month=2026-05")
		got, gotUnknown, lines := csvMicros(t, body)
		if code != http.StatusOK || got != micros || gotUnknown != unknown {
			t.Errorf("%s's CSV: %d, %d micro-dollars and %d unknown; want %d and %d", c.login, code, got, gotUnknown, micros, unknown)
		}
		for _, l := range lines {
			if !strings.Contains(strings.Join(c.repos, " "), l[1]) {
				t.Errorf("%s's CSV has %v, of a repository they cannot read", c.login, l)
			}
		}
		// Asking for a repository one cannot read shows nothing of it.
		if c.login != "bob" {
			_, body := f.get(client, "/dashboard/usage?format=csv&month=2026-05&repo=octo%2Fbeta")
			if _, _, lines := csvMicros(t, body); len(lines) != 0 {
				t.Errorf("%s asking for octo/beta's usage gets %v", c.login, lines)
			}
		}
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, path := range []string{"/dashboard/usage", "/dashboard/usage.csv"} {
		if code, _ := f.get(noRedirect, path); code != http.StatusFound {
			t.Errorf("GET %s without a session: %d, want a redirect to sign-in", path, code)
		}
	}
}

// Unknown costs are never $0: a repository, a day, a model whose runs
// are all of unknown cost says "unknown"; one with some says how many
// beside the known spend.
func TestUsagePageShowsUnknownCosts(t *testing.T) {
	t.Parallel()
	f := usageFixture(t, "")
	_, page := f.get(f.signedInClient("alice"), "/dashboard/usage?month=2026-05")
	// T-D1000003 (alpha, 4 May, by carol) and T-D1000005 (gamma, 6 May,
	// by dave) named no cost.
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`<td class="repo">dave</td><td class="num">2</td><td class="num">unknown</td><td class="num">2</td>`),
		regexp.MustCompile(`<td class="repo">octo/alpha</td><td class="num">\d+</td><td class="num">\$[0-9.]+ (\+|&#43;) 1 unknown</td><td class="num">1</td>`),
		regexp.MustCompile(`<td>2026-05-06</td><td class="num">1</td><td class="num">unknown</td>`),
	} {
		if !want.MatchString(page) {
			t.Errorf("the page has no %s:\n%s", want, page)
		}
	}
	if strings.Contains(page, "<td>2026-05-06</td><td class=\"num\">1</td><td class=\"num\">$0.00</td>") {
		t.Error("a day of unknown cost shows $0.00")
	}
}

// The budgets beside the usage: the installation's, and a repository's
// as its last admission lowered it (here by .sandbox.yml to $10), with
// what the ledger counts against them.
func TestUsagePageShowsBudgets(t *testing.T) {
	t.Parallel()
	f := usageFixture(t, "")
	srv := f.srv.Load()
	ctx := t.Context()
	req := budget.Request{TaskID: "T-E0000001", InstallationID: 1, Repo: "octo/alpha", Month: "2026-05", AmountUSD: 3, InstallationUSD: 100, RepoUSD: 10, FloorUSD: 1}
	if _, err := srv.base.Budget.Reserve(ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := srv.base.Budget.Settle(ctx, req.TaskID, 2.5, true); err != nil {
		t.Fatal(err)
	}
	req.TaskID, req.AmountUSD = "T-E0000002", 4
	if _, err := srv.base.Budget.Reserve(ctx, req); err != nil {
		t.Fatal(err)
	}
	_, page := f.get(f.signedInClient("alice"), "/dashboard/usage?month=2026-05")
	for _, want := range []string{
		`<tr><td>installation</td><td class="repo">1</td><td class="num">$100.00</td><td class="num">$2.50</td><td class="num">$4.00</td><td class="num left">$93.50</td>`,
		`<tr><td>repository</td><td class="repo">octo/alpha <small>lowered by .sandbox.yml (server: $40.00)</small></td><td class="num">$10.00</td><td class="num">$2.50</td><td class="num">$4.00</td><td class="num left">$3.50</td>`,
		// gamma has had no admission: the server's budget.
		`<tr><td>repository</td><td class="repo">other/gamma</td><td class="num">$40.00</td>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the budgets have no %s:\n%s", want, page)
		}
	}
}
