package memory_test

import (
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch/backendtest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/memory"
)

func TestLocksListsByPrefix(t *testing.T) {
	t.Parallel()
	backendtest.LockLister(t, memory.New())
}
