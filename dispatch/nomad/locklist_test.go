package nomad_test

import (
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch/backendtest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad/nomadtest"
)

func TestLocksListsByPrefix(t *testing.T) {
	t.Parallel()
	backendtest.LockLister(t, newEnv(t, nomadtest.Options{}).backend())
}
