package process

import "github.com/sandbox-bot/sandbox-bot/dispatch"

// The lock files list themselves (filelock), so review batches pending
// on this backend are found again after a restart.
var _ dispatch.LockLister = (*Backend)(nil)
