package backendtest_test

import (
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch/backendtest"
)

func TestLocksListsByPrefix(t *testing.T) {
	t.Parallel()
	backendtest.LockLister(t, backendtest.NewMemory())
}
