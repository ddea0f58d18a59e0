package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

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
// it, once.
func TestE2EBudgetAcrossReplicas(t *testing.T) {
	gate, release := liveGate(t)
	gate6, release6 := liveGate(t)
	plan := "1. Change the greeting. 2. Nothing else."
	l := startLoop(t, loopOptions{script: []modeltest.Turn{
		{Text: plan, Usage: usage(900, 60), Gate: gate},
		{Text: plan, Usage: usage(900, 60), Gate: gate},
		{Text: plan, Usage: usage(900, 60), Gate: gate6},
	}, env: []string{"SANDBOX_DATABASE_URL=" + testenv.Postgres(t), "SANDBOX_BUDGET_INSTALLATION_MONTHLY_USD=4", "SANDBOX_BUDGET_FLOOR_USD=2"}})
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
}

// commandOn comments body on #n and delivers it to one replica.
func (l *loop) commandOn(b *botProcess, n int, body string) {
	id := l.gh.AddComment(e2eRepo, n, e2eWriter, body)
	l.deliverTo(b, "issue_comment", fmt.Sprintf("comment-%d", id), l.gh.Payload("issue_comment.created", e2eRepo, e2eWriter, func(m map[string]any) {
		m["issue"] = map[string]any{"number": n, "title": l.gh.Issue(e2eRepo, n).Title}
		m["comment"] = map[string]any{"id": id, "body": body, "user": map[string]any{"login": e2eWriter, "type": "User"}}
	}))
}
