package app_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/app"
	"github.com/sandbox-bot/sandbox-bot/dispatch/budget"
)

// The budgets: none by default, the file, the environment over the file,
// and one line naming the setting for a bad value.
func TestBudgetSettings(t *testing.T) {
	t.Parallel()
	c, err := app.LoadConfig(lookup(appEnv(nil)))
	if err != nil {
		t.Fatal(err)
	}
	if c.Settings.Budgets.Any() || c.Settings.Budgets.FloorUSD != app.DefaultBudgetFloorUSD {
		t.Errorf("defaults %+v; want no budget and the $1 floor", c.Settings.Budgets)
	}

	file := writeServerConfig(t, "budgets:\n  installation_monthly_usd: 500\n  repo_monthly_usd: 80\n  floor_usd: 2\n  month_timezone: Europe/Berlin\n")
	c, err = app.LoadConfig(lookup(appEnv(map[string]string{"SANDBOX_CONFIG": file, "SANDBOX_BUDGET_REPO_MONTHLY_USD": "60"})))
	if err != nil {
		t.Fatal(err)
	}
	berlin, _ := time.LoadLocation("Europe/Berlin")
	want := budget.Policy{InstallationUSD: 500, RepoUSD: 60, FloorUSD: 2, Location: berlin}
	if got := c.Settings.Budgets; got.InstallationUSD != want.InstallationUSD || got.RepoUSD != want.RepoUSD || got.FloorUSD != want.FloorUSD || got.Location.String() != "Europe/Berlin" {
		t.Errorf("budgets %+v; want %+v", got, want)
	}
	// 23:30 UTC on 31 October is November in Berlin.
	if m := c.Settings.Budgets.Month(time.Date(2026, 10, 31, 23, 30, 0, 0, time.UTC)); m != "2026-11" {
		t.Errorf("month in Berlin = %s; want 2026-11", m)
	}

	for env, bad := range map[string]string{
		"SANDBOX_BUDGET_INSTALLATION_MONTHLY_USD": "lots",
		"SANDBOX_BUDGET_REPO_MONTHLY_USD":         "-3",
		"SANDBOX_BUDGET_FLOOR_USD":                "x",
		"SANDBOX_BUDGET_MONTH_TIMEZONE":           "Mars/Olympus",
	} {
		_, err := app.LoadConfig(lookup(appEnv(map[string]string{env: bad})))
		if err == nil || !strings.Contains(err.Error(), env) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s=%s: %v; want one line naming %s", env, bad, err, env)
		}
	}
	_, err = app.LoadConfig(lookup(appEnv(map[string]string{"SANDBOX_BUDGET_REPO_MONTHLY_USD": "5", "SANDBOX_BUDGET_FLOOR_USD": "10"})))
	if err == nil || !strings.Contains(err.Error(), "budgets.floor_usd") {
		t.Errorf("a floor above the budget: %v; want it refused naming budgets.floor_usd", err)
	}
}
