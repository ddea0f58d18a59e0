package backendtest

import (
	"context"
	"strings"
)

// ListLocks implements dispatch.LockLister.
func (b *memLocks) ListLocks(_ context.Context, prefix string) (map[string]string, error) {
	prefix = strings.ToLower(prefix)
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]string{}
	for k, v := range b.locks {
		if strings.HasPrefix(k, prefix) {
			out[k] = v
		}
	}
	return out, nil
}
