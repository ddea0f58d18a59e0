package memory_test

import (
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/backendtest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/memory"
)

func TestQueueContract(t *testing.T) {
	t.Parallel()
	backendtest.RunQueue(t, func(t *testing.T) (dispatch.Queue, dispatch.Queue) {
		b := memory.New()
		return b, b
	})
}
