package nomad

import (
	"context"
	"fmt"
)

// CurrentToken implements dispatch.TokenReader from the run's Variable.
func (b *jobs) CurrentToken(ctx context.Context, taskID string) (string, error) {
	id, err := b.findJob(ctx, taskID)
	if err != nil {
		return "", err
	}
	v, _, err := b.c.Variables().Read(TokenVarPath(id), b.qopts(ctx))
	if isNotFound(err) {
		return "", nil // a task-mode run, or one cleaned up already
	}
	if err != nil {
		return "", fmt.Errorf("read token of %s: variable %s: %w", taskID, TokenVarPath(id), err)
	}
	return v.Items[TokenItem], nil
}
