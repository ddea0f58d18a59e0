package nomad

import (
	"context"
	"strings"
)

// RoutinesPrefix is where each repository's routine book lives, one
// Variable per repository written with check-and-set like the queue: of
// two replicas claiming one tick, Nomad takes one write. The bot's ACL
// policy needs variables read and write on it.
const RoutinesPrefix = "sandbox-bot/routines/"

// bookVars are the routine books (dispatch.RoutineBooks) and the budget
// book (budget.Book, budget.go), documents in Variables like the queue.
type bookVars struct {
	*varDocs
}

// RoutinesPath is repo's Variable: the lock's encoding (LockPath) under
// RoutinesPrefix.
func RoutinesPath(repo string) string {
	return RoutinesPrefix + strings.TrimPrefix(LockPath(repo), LockPrefix)
}

// UpdateRoutineBook implements dispatch.RoutineBooks.
func (b *bookVars) UpdateRoutineBook(ctx context.Context, repo string, change func([]byte) ([]byte, error)) error {
	return b.updateVar(ctx, "routine book of "+repo, RoutinesPath(repo), "book", change)
}

// ReadRoutineBook implements dispatch.RoutineBooks.
func (b *bookVars) ReadRoutineBook(ctx context.Context, repo string) ([]byte, error) {
	data, _, err := b.readVar(ctx, "routine book of "+repo, RoutinesPath(repo), "book")
	return data, err
}
