package dispatch

import "context"

// LockLister is what a Locker may also do: list the locks it holds under a
// key prefix. The bot keeps state that must outlive it and be shared by
// replicas (a pending review batch, handlers/batch.go) as locks under
// their own prefix, and finds it again after a restart through this.
// memory, filelock (docker, process) and nomad implement it.
type LockLister interface {
	// ListLocks returns key -> holder for every lock whose key starts with
	// prefix. Keys come back lower-cased, as the lockers store them.
	ListLocks(ctx context.Context, prefix string) (map[string]string, error)
}
