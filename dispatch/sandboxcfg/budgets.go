package sandboxcfg

// Budgets are monthly spending budgets a file may set: each layer (the
// server's defaults, the organisation's file, the repository's) can only
// lower what is beneath it, never raise it, so a repository cannot spend
// past what its organisation or the operator allow. Zero is "not set".
type Budgets struct {
	InstallationMonthlyUSD float64 `yaml:"installation_monthly_usd,omitempty" json:"installation_monthly_usd,omitempty" desc:"Lowers the monthly budget of the whole installation (organisation or account) for runs of this repository, in US dollars; it never raises the server's." min:"0"`
	RepoMonthlyUSD         float64 `yaml:"repo_monthly_usd,omitempty" json:"repo_monthly_usd,omitempty" desc:"Lowers this repository's monthly budget, in US dollars; it never raises the server's or the organisation's." min:"0"`
}

func (b Budgets) set() bool { return b.InstallationMonthlyUSD != 0 || b.RepoMonthlyUSD != 0 }

// lower takes the lower of each budget that over sets.
func (b *Budgets) lower(over Budgets) {
	b.InstallationMonthlyUSD = Lowest(b.InstallationMonthlyUSD, over.InstallationMonthlyUSD)
	b.RepoMonthlyUSD = Lowest(b.RepoMonthlyUSD, over.RepoMonthlyUSD)
}

func (b Budgets) validate(bad report) {
	if b.InstallationMonthlyUSD < 0 {
		bad("budgets.installation_monthly_usd", "must not be negative, got %g", b.InstallationMonthlyUSD)
	}
	if b.RepoMonthlyUSD < 0 {
		bad("budgets.repo_monthly_usd", "must not be negative, got %g", b.RepoMonthlyUSD)
	}
}

// Lowest is the lower of two budgets where 0 means "not set".
func Lowest(a, b float64) float64 {
	switch {
	case a <= 0:
		return max(b, 0)
	case b <= 0:
		return a
	}
	return min(a, b)
}
