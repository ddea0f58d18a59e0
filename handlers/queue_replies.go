package handlers

import "github.com/sandbox-bot/sandbox-bot/dispatch"

// QueuedData is github/queued: the run waits for a slot under the
// server's caps.
type QueuedData struct {
	TaskID string
	Mode   dispatch.Mode
	// Place is the run's place among the waiting runs: 1 starts next.
	Place int
	// Ahead is how many wait before it (Place-1).
	Ahead int
	// Caps describe the caps that are set ("2 in all", "1 per repository").
	Caps   []string
	Marker string
}

// QueueAbortedData is github/queue_aborted: /abort removed a waiting run
// from the queue.
type QueueAbortedData struct {
	TaskID string
	By     string
	Marker string
}
