package filequeue_test

import (
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/backendtest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/filequeue"
)

// Two stores over one directory are two bot replicas on one machine (or a
// bot before and after a restart).
func TestQueueContract(t *testing.T) {
	t.Parallel()
	backendtest.RunQueue(t, func(t *testing.T) (dispatch.Queue, dispatch.Queue) {
		dir := t.TempDir()
		return filequeue.New(dir), filequeue.New(dir)
	})
}

func TestRequestOutsideTheDirectoryIsRefused(t *testing.T) {
	t.Parallel()
	s := filequeue.New(t.TempDir())
	for _, id := range []string{"../x", "", ".hidden", "a/b"} {
		if err := s.SaveQueued(t.Context(), id, []byte("{}")); err == nil {
			t.Errorf("SaveQueued(%q) succeeded", id)
		}
	}
}

// Two stores over one directory claim routine ticks as two replicas.
func TestRoutineBooksContract(t *testing.T) {
	t.Parallel()
	backendtest.RunRoutineBooks(t, func(t *testing.T) (dispatch.RoutineBooks, dispatch.RoutineBooks) {
		dir := t.TempDir()
		return filequeue.New(dir), filequeue.New(dir)
	})
}
