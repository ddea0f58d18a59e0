package nomad

import (
	"context"
	"fmt"
	"strings"
)

// ListLocks implements dispatch.LockLister. Long keys are stored under a hash
// (LockPath), so the prefix is matched against each Variable's "key" item,
// not its path; there are few locks (one per active issue or batch).
func (b *lockVars) ListLocks(ctx context.Context, prefix string) (map[string]string, error) {
	metas, _, err := b.c.Variables().PrefixList(LockPrefix, b.stateQ(ctx))
	if err != nil {
		return nil, fmt.Errorf("list locks (variables under %s): %w", LockPrefix, err)
	}
	prefix = strings.ToLower(prefix)
	out := map[string]string{}
	for _, m := range metas {
		v, _, err := b.c.Variables().Peek(m.Path, b.stateQ(ctx))
		if err != nil {
			return nil, fmt.Errorf("read lock variable %s: %w", m.Path, err)
		}
		if v == nil {
			continue // released since the listing
		}
		key := strings.ToLower(v.Items["key"])
		if strings.HasPrefix(key, prefix) && v.Items["holder"] != "" {
			out[key] = v.Items["holder"]
		}
	}
	return out, nil
}
