package app

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch/budget"
)

// BudgetsConfig are the monthly budgets as written (`budgets:` in the
// file, SANDBOX_BUDGET_* in the environment); load resolves them into the
// handlers' budget.Policy. An organisation's or a repository's
// .sandbox.yml can lower them (budgets: in sandboxcfg), never raise them.
type BudgetsConfig struct {
	// InstallationMonthlyUSD bounds what the runs of one installation
	// (organisation or account) spend in a month; 0 is no budget
	// (SANDBOX_BUDGET_INSTALLATION_MONTHLY_USD).
	InstallationMonthlyUSD float64 `yaml:"installation_monthly_usd"`
	// RepoMonthlyUSD bounds what one repository's runs spend in a month
	// (SANDBOX_BUDGET_REPO_MONTHLY_USD).
	RepoMonthlyUSD float64 `yaml:"repo_monthly_usd"`
	// FloorUSD is the least budget a run is given: a run whose own budget
	// does not fit runs with what is left when that is at least this, and
	// is refused otherwise (SANDBOX_BUDGET_FLOOR_USD, default $1).
	FloorUSD float64 `yaml:"floor_usd"`
	// MonthTimezone is where months begin, an IANA name (UTC unless set;
	// SANDBOX_BUDGET_MONTH_TIMEZONE).
	MonthTimezone string `yaml:"month_timezone"`

	policy budget.Policy
}

// DefaultBudgetFloorUSD is the floor when none is set.
const DefaultBudgetFloorUSD = 1.0

// load applies the environment over the file, fills the defaults and
// validates; errors name the setting.
func (b *BudgetsConfig) load(getenv Getenv) error {
	for _, f := range []struct {
		key, name string
		dst       *float64
	}{
		{"SANDBOX_BUDGET_INSTALLATION_MONTHLY_USD", "budgets.installation_monthly_usd", &b.InstallationMonthlyUSD},
		{"SANDBOX_BUDGET_REPO_MONTHLY_USD", "budgets.repo_monthly_usd", &b.RepoMonthlyUSD},
		{"SANDBOX_BUDGET_FLOOR_USD", "budgets.floor_usd", &b.FloorUSD},
	} {
		if v, ok := getenv(f.key); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return fmt.Errorf("%s: %q is not an amount in dollars such as 500", f.key, v)
			}
			*f.dst = n
		}
		if *f.dst < 0 {
			return fmt.Errorf("%s (%s): must not be negative, got %g", f.name, f.key, *f.dst)
		}
	}
	if v, ok := getenv("SANDBOX_BUDGET_MONTH_TIMEZONE"); ok {
		b.MonthTimezone = v
	}
	loc := time.UTC
	if tz := strings.TrimSpace(b.MonthTimezone); tz != "" {
		l, err := time.LoadLocation(tz)
		if err != nil {
			return fmt.Errorf("budgets.month_timezone (SANDBOX_BUDGET_MONTH_TIMEZONE): %q is not a time zone such as Europe/Berlin", b.MonthTimezone)
		}
		loc = l
	}
	if b.FloorUSD == 0 {
		b.FloorUSD = DefaultBudgetFloorUSD
	}
	b.policy = budget.Policy{InstallationUSD: b.InstallationMonthlyUSD, RepoUSD: b.RepoMonthlyUSD, FloorUSD: b.FloorUSD, Location: loc}
	return b.check()
}

// check refuses budgets that could admit nothing: a floor above a budget.
func (b *BudgetsConfig) check() error {
	for _, v := range []struct {
		name   string
		budget float64
	}{{"budgets.installation_monthly_usd", b.InstallationMonthlyUSD}, {"budgets.repo_monthly_usd", b.RepoMonthlyUSD}} {
		if v.budget > 0 && b.FloorUSD > v.budget {
			return fmt.Errorf("budgets.floor_usd (SANDBOX_BUDGET_FLOOR_USD): $%.2f is above %s of $%.2f, so no run could ever start", b.FloorUSD, v.name, v.budget)
		}
	}
	return nil
}

// Policy is what load resolved.
func (b *BudgetsConfig) Policy() budget.Policy { return b.policy }
