package main

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/cookiejar"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/app/receipts"
	"github.com/sandbox-bot/sandbox-bot/runner/modeltest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// labelOn delivers issue n's agent label to one replica.
func (l *loop) labelOn(b *botProcess, n int) {
	iss := l.gh.Issue(e2eRepo, n)
	l.deliverTo(b, "issues", fmt.Sprintf("label-%d-%d", n, time.Now().UnixNano()), l.gh.Payload("issues.labeled", e2eRepo, e2eWriter, func(m map[string]any) {
		m["label"] = map[string]any{"name": "agent"}
		m["issue"] = map[string]any{"number": n, "title": iss.Title, "body": iss.Body, "user": map[string]any{"login": iss.User}}
	}))
}

// TestE2EBudgetAcrossReplicas: two replicas share PostgreSQL and a $4
// monthly budget with a $2 floor; each run's budget is $2 (the loop's
// .sandbox.yml). Five labels delivered at once, spread over both replicas:
// two plan runs start in real sandboxes, with OpenCode on the priced
// scripted model, and three issues are refused with the figures and
// agent:over-budget. Once the plans are posted, their real costs settle
// and leave room: a sixth label starts a run. The replica that started it
// is killed mid-run; a replica started after reads its result and settles
// it, once. The usage page of that replica then shows the three runs'
// spend equal to their receipts' sum to the cent, and its CSV to the
// micro-dollar.
func TestE2EBudgetAcrossReplicas(t *testing.T) {
	gate, release := liveGate(t)
	gate6, release6 := liveGate(t)
	dbURL := testenv.Postgres(t)
	plan := "1. Change the greeting. 2. Nothing else."
	l := startLoop(t, loopOptions{script: []modeltest.Turn{
		{Text: plan, Usage: usage(900, 60), Gate: gate},
		{Text: plan, Usage: usage(900, 60), Gate: gate},
		{Text: plan, Usage: usage(900, 60), Gate: gate6},
	}, signIn: true, env: []string{"SANDBOX_DATABASE_URL=" + dbURL, "SANDBOX_BUDGET_INSTALLATION_MONTHLY_USD=4", "SANDBOX_BUDGET_FLOOR_USD=2"}})
	second := l.startReplica()
	var issues []int
	for i := range 6 {
		issues = append(issues, l.gh.AddIssue(e2eRepo, e2eWriter, fmt.Sprintf("Budget task %d", i+1), "Change the greeting."))
	}
	var wg sync.WaitGroup
	for i, n := range issues[:5] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := l.bot
			if i%2 == 1 {
				b = second
			}
			l.labelOn(b, n)
		}()
	}
	wg.Wait()
	acked, refused := []int{}, []int{}
	for _, n := range issues[:5] {
		var body string
		l.gh.WaitFor(3*time.Minute, fmt.Sprintf("the answer on #%d", n), func() bool {
			for _, c := range l.gh.Issue(e2eRepo, n).Comments {
				if strings.Contains(c.Body, `"kind":"ack"`) || strings.Contains(c.Body, `"kind":"over-budget"`) {
					body = c.Body
					return true
				}
			}
			return false
		})
		if strings.Contains(body, `"kind":"over-budget"`) {
			refused = append(refused, n)
			for _, want := range []string{"monthly budget is $4.00", "$4.00 is reserved", "leaves $0.00", "floor of $2.00", "resets on"} {
				if !strings.Contains(body, want) {
					t.Errorf("#%d's refusal does not say %q:\n%s", n, want, body)
				}
			}
		} else {
			acked = append(acked, n)
		}
	}
	if len(acked) != 2 || len(refused) != 3 {
		t.Fatalf("runs started on %v and refused on %v; want two started, three refused", acked, refused)
	}
	release()
	for _, n := range acked {
		l.waitComment(n, "## 📋 Plan", 5*time.Minute)
	}
	l.labelOn(second, issues[5])
	l.waitComment(issues[5], `"kind":"ack"`, 3*time.Minute)
	l.command(issues[5], "/status")
	status := l.waitComment(issues[5], "This month", 2*time.Minute)
	if !strings.Contains(status, "the installation's budget of $4.00") || !strings.Contains(status, "$2.00 reserved by runs in flight") {
		t.Errorf("/status after the sixth run started does not show the month:\n%s", status)
	}
	// The two plans settled to what OpenCode reported on the priced model
	// (not to their $2 budgets, nor to nothing), and spend and the sixth
	// run's reservation stay within the $4.
	m := regexp.MustCompile(`budget of \$4\.00: \$([0-9.]+) spent`).FindStringSubmatch(status)
	if m == nil {
		t.Fatalf("/status names no spend:\n%s", status)
	}
	spent, _ := strconv.ParseFloat(m[1], 64)
	if spent <= 0 || spent >= 1 || spent+2 > 4 {
		t.Errorf("$%s spent by two priced plan runs, want their real cost: above $0, far below their $2 budgets", m[1])
	}

	// The replica following the sixth run dies; the run ends meanwhile; a
	// new replica settles it from its result.
	if err := second.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-second.done
	release6()
	third := l.startReplica()
	l.waitComment(issues[5], "## 📋 Plan", 5*time.Minute)
	l.commandOn(third, issues[5], "/status")
	l.gh.WaitFor(2*time.Minute, "/status with the sixth run settled", func() bool {
		n := 0
		for _, c := range l.gh.Issue(e2eRepo, issues[5]).Comments {
			if strings.Contains(c.Body, "This month") {
				if n++; n == 2 {
					status = c.Body
					return true
				}
			}
		}
		return false
	})
	// Settled (nothing reserved any more) to its real cost, not to its $2
	// budget: the costs here are fractions of a cent, so the spend shows
	// as before, to the cent (the ledger's contract proves a second settle
	// changes nothing).
	m3 := regexp.MustCompile(`budget of \$4\.00: \$([0-9.]+) spent`).FindStringSubmatch(status)
	if m3 == nil || !strings.Contains(status, "$0.00 reserved by runs in flight") {
		t.Fatalf("/status after the restart does not show the sixth run settled:\n%s", status)
	}
	if after, _ := strconv.ParseFloat(m3[1], 64); after < spent || after > spent+0.02 {
		t.Errorf("after the restart $%s spent, want the sixth run's real cost on top of $%.2f", m3[1], spent)
	}
	l.usageMatchesReceipts(third, dbURL, 3)
}

// usageMatchesReceipts: this month's receipts in the shared database are
// the runs runs, each of known cost, asked for by the writer, on the
// repository's model; the usage page of the replica b, signed in as the
// writer, shows their spend equal to their sum to the cent, and its CSV
// to the micro-dollar.
func (l *loop) usageMatchesReceipts(b *botProcess, dbURL string, runs int) {
	t := l.t
	t.Helper()
	ctx := context.Background()
	store, err := receipts.OpenPostgres(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	now := time.Now().UTC()
	// A run's receipt is kept after its result is posted (the result goes
	// first), so the last run's may still be on its way.
	var kept receipts.Page
	l.gh.WaitFor(time.Minute, fmt.Sprintf("%d receipts this month", runs), func() bool {
		kept, err = store.List(ctx, receipts.Filter{From: time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)}, 0, receipts.MaxPageSize)
		if err != nil {
			t.Fatal(err)
		}
		return kept.Total >= runs
	})
	var micros int64
	for _, r := range kept.Runs {
		if r.CostUnknown || r.CostUSD <= 0 || r.Requester != e2eWriter || r.Model != l.model.OpenCodeModel() {
			t.Errorf("receipt %s: cost $%v (unknown %v), asked by %q on %q; want a known cost, %s, %s", r.TaskID, r.CostUSD, r.CostUnknown, r.Requester, r.Model, e2eWriter, l.model.OpenCodeModel())
		}
		micros += int64(math.Round(r.CostUSD * 1e6))
	}
	if kept.Total != runs {
		t.Errorf("%d receipts this month, want %d: %+v", kept.Total, runs, kept.Runs)
	}
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	l.gh.SignInAs(e2eWriter)
	get := func(path string) string {
		t.Helper()
		resp, err := client.Get("http://" + b.addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s on the replica: %d\n%s", path, resp.StatusCode, body)
		}
		return string(body)
	}
	// Signing in ends on the public address; the session cookie is the
	// host's, which every replica takes.
	get("/dashboard/usage")
	page := get("/dashboard/usage")
	c := (micros + 5000) / 10000
	for _, want := range []string{fmt.Sprintf(`id="usage-total">$%d.%02d<`, c/100, c%100), fmt.Sprintf(`id="usage-runs">%d<`, runs),
		`id="usage-unknown">0<`, `<td class="repo">` + e2eWriter + `</td><td class="num">` + strconv.Itoa(runs) + `</td>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the usage page does not show %s (the receipts: %d micro-dollars in %d runs):\n%s", want, micros, runs, page)
		}
	}
	lines, err := csv.NewReader(strings.NewReader(get("/dashboard/usage.csv"))).ReadAll()
	if err != nil || len(lines) < 2 {
		t.Fatalf("the usage CSV: %v %v", lines, err)
	}
	var got int64
	for _, line := range lines[1:] {
		whole, frac, _ := strings.Cut(line[7], ".")
		w, _ := strconv.ParseInt(whole, 10, 64)
		f, _ := strconv.ParseInt(frac, 10, 64)
		got += w*1e6 + f
	}
	if got != micros {
		t.Errorf("the usage CSV adds up to %d micro-dollars, the receipts to %d:\n%v", got, micros, lines)
	}
	t.Logf("usage page: %d runs, %d micro-dollars, as their receipts", runs, micros)
}

// commandOn comments body on #n and delivers it to one replica.
func (l *loop) commandOn(b *botProcess, n int, body string) {
	id := l.gh.AddComment(e2eRepo, n, e2eWriter, body)
	l.deliverTo(b, "issue_comment", fmt.Sprintf("comment-%d", id), l.gh.Payload("issue_comment.created", e2eRepo, e2eWriter, func(m map[string]any) {
		m["issue"] = map[string]any{"number": n, "title": l.gh.Issue(e2eRepo, n).Title}
		m["comment"] = map[string]any{"id": id, "body": body, "user": map[string]any{"login": e2eWriter, "type": "User"}}
	}))
}
