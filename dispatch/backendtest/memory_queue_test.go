package backendtest_test

import (
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/backendtest"
)

func TestQueueContract(t *testing.T) {
	t.Parallel()
	backendtest.RunQueue(t, func(t *testing.T) (dispatch.Queue, dispatch.Queue) {
		b := backendtest.NewMemory()
		return b, b
	})
}
