package sandboxcfg_test

import (
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

// A layer lowers the budgets beneath it and never raises them: the
// organisation's file cannot lift the server's, nor the repository's the
// organisation's.
func TestBudgetsAreOnlyLowered(t *testing.T) {
	t.Parallel()
	server := sandboxcfg.Config{Budgets: sandboxcfg.Budgets{InstallationMonthlyUSD: 500}}
	org := &sandboxcfg.Config{Budgets: sandboxcfg.Budgets{InstallationMonthlyUSD: 900, RepoMonthlyUSD: 100}}
	repo := &sandboxcfg.Config{Budgets: sandboxcfg.Budgets{InstallationMonthlyUSD: 300, RepoMonthlyUSD: 200}}
	r, origins, err := sandboxcfg.ResolveLayers(server, []sandboxcfg.Layer{{Name: "org", Config: org}, {Name: "repo", Config: repo}}, sandboxcfg.Flags{}, sandboxcfg.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := sandboxcfg.Budgets{InstallationMonthlyUSD: 300, RepoMonthlyUSD: 100}
	if r.Budgets != want {
		t.Errorf("budgets = %+v, want %+v (each layer only lowers)", r.Budgets, want)
	}
	if origins["budgets"] != "repo" {
		t.Errorf("origin of budgets = %q, want repo", origins["budgets"])
	}
}

func TestBudgetsNegativeIsRefused(t *testing.T) {
	t.Parallel()
	_, err := sandboxcfg.Parse(".sandbox.yml", []byte("budgets:\n  repo_monthly_usd: -3\n"))
	if err == nil {
		t.Fatal("a negative budget was taken")
	}
	if got := err.Error(); !strings.Contains(got, "budgets.repo_monthly_usd") {
		t.Errorf("error %q does not name budgets.repo_monthly_usd", got)
	}
}

func TestLowest(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ a, b, want float64 }{{0, 0, 0}, {0, 5, 5}, {5, 0, 5}, {3, 5, 3}, {5, 3, 3}} {
		if got := sandboxcfg.Lowest(c.a, c.b); got != c.want {
			t.Errorf("Lowest(%g, %g) = %g, want %g", c.a, c.b, got, c.want)
		}
	}
}
