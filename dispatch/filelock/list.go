package filelock

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

var _ dispatch.LockLister = (*Locks)(nil)

// ListLocks implements dispatch.LockLister by reading the lock directory.
func (l *Locks) ListLocks(_ context.Context, prefix string) (map[string]string, error) {
	entries, err := os.ReadDir(l.dir)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list locks in %s: %w", l.dir, err)
	}
	prefix = strings.ToLower(prefix)
	out := map[string]string{}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".lock")
		if !ok || strings.HasPrefix(name, ".") {
			continue // temporary files of a Lock in progress
		}
		key, err := url.PathUnescape(name)
		if err != nil || !strings.HasPrefix(key, prefix) {
			continue
		}
		holder, err := l.read(key)
		if err != nil {
			return nil, err
		}
		if holder != "" {
			out[key] = holder
		}
	}
	return out, nil
}
