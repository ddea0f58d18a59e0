package filelock_test

import (
	"testing"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch/backendtest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/filelock"
)

func TestLocksListsByPrefix(t *testing.T) {
	t.Parallel()
	backendtest.LockLister(t, filelock.New(t.TempDir(), zerolog.Nop()))
}
