package backendtest_test

import (
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/backendtest"
)

func TestRoutineBooksContract(t *testing.T) {
	t.Parallel()
	backendtest.RunRoutineBooks(t, func(t *testing.T) (dispatch.RoutineBooks, dispatch.RoutineBooks) {
		m := &backendtest.MemoryRoutineBooks{}
		return m, m
	})
}
