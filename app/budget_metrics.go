package app

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/app/receipts"
	"github.com/sandbox-bot/sandbox-bot/dispatch/budget"
)

// seenLedger is the ledger, remembering the installations whose runs
// reserved through this replica (the budget gauges report those) and, in
// the receipts store, the budgets each admission applied to its
// repository (the usage page shows a repository's budget as its
// configuration lowered it; only an admission reads that configuration).
type seenLedger struct {
	budget.Ledger
	limits receipts.Usage
	now    func() time.Time
	log    zerolog.Logger
	mu     sync.Mutex
	seen   map[int64]bool
}

func (l *seenLedger) Reserve(ctx context.Context, r budget.Request) (budget.Grant, error) {
	l.mu.Lock()
	l.seen[r.InstallationID] = true
	l.mu.Unlock()
	if l.limits != nil {
		if err := l.limits.KeepLimits(ctx, receipts.Limits{InstallationID: r.InstallationID, Repo: r.Repo,
			InstallationUSD: r.InstallationUSD, RepoUSD: r.RepoUSD, UpdatedAt: l.now()}); err != nil {
			l.log.Warn().Err(err).Str("task_id", r.TaskID).Str("repo", r.Repo).Msg("keep the run's budgets for the usage page")
		}
	}
	return l.Ledger.Reserve(ctx, r)
}

func (l *seenLedger) installations() []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]int64, 0, len(l.seen))
	for id := range l.seen {
		out = append(out, id)
	}
	return out
}

// budgetCollector reports, at each scrape, the month's spend, what is
// reserved and the budget of every installation seen, read from the
// shared ledger (so every replica reports the same figures).
type budgetCollector struct {
	ledger *seenLedger
	policy budget.Policy
	now    func() time.Time
	log    zerolog.Logger

	spent, reserved, limit *prometheus.Desc
}

func newBudgetCollector(l *seenLedger, p budget.Policy, now func() time.Time, log zerolog.Logger) *budgetCollector {
	labels := []string{"installation"}
	return &budgetCollector{ledger: l, policy: p, now: now, log: log,
		spent:    prometheus.NewDesc("sandbox_bot_budget_spent_usd", "What settled runs cost this month, by installation (a run of unknown cost counts by its budget).", labels, nil),
		reserved: prometheus.NewDesc("sandbox_bot_budget_reserved_usd", "What the runs in flight reserved of this month's budget, by installation.", labels, nil),
		limit:    prometheus.NewDesc("sandbox_bot_budget_usd", "The installation's monthly budget set in the server configuration.", labels, nil),
	}
}

func (c *budgetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.spent
	ch <- c.reserved
	ch <- c.limit
}

func (c *budgetCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	month := c.policy.Month(c.now())
	for _, id := range c.ledger.installations() {
		t, _, err := c.ledger.Totals(ctx, id, "", month)
		if err != nil {
			c.log.Warn().Err(err).Int64("installation", id).Msg("budget metrics: read the month's figures")
			continue
		}
		inst := strconv.FormatInt(id, 10)
		ch <- prometheus.MustNewConstMetric(c.spent, prometheus.GaugeValue, t.SpentUSD, inst)
		ch <- prometheus.MustNewConstMetric(c.reserved, prometheus.GaugeValue, t.ReservedUSD, inst)
		if c.policy.InstallationUSD > 0 {
			ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, c.policy.InstallationUSD, inst)
		}
	}
}
