package nomad

import "context"

// BudgetPath is the Variable holding the budget book when the replicas
// share no database (budget.BookLedger): written with check-and-set like
// the queue, so two replicas reserving at once cannot both take the last
// dollars. The bot's ACL policy needs variables read and write on it. It
// keeps two months of settled runs; an installation running thousands of
// runs a month is better served by SANDBOX_DATABASE_URL.
const BudgetPath = "sandbox-bot/budget"

// UpdateBudget implements budget.Book.
func (b *bookVars) UpdateBudget(ctx context.Context, change func([]byte) ([]byte, error)) error {
	return b.updateVar(ctx, "budget book", BudgetPath, "book", change)
}

// ReadBudget implements budget.Book.
func (b *bookVars) ReadBudget(ctx context.Context) ([]byte, error) {
	data, _, err := b.readVar(ctx, "budget book", BudgetPath, "book")
	return data, err
}
