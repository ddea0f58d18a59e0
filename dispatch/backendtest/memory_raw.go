package backendtest

import (
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// FinishRaw ends a run with result.json given as bytes, the way a sandbox
// writes it: Result decodes them as the real backends do (cap, strict
// schema), so handler tests can hand the bot a hostile receipt.
func (b *memScript) FinishRaw(taskID string, raw []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.runs[taskID]
	if !ok || r.status.State.Ended() {
		return
	}
	r.raw = append([]byte{}, raw...)
	r.status.State = dispatch.StateComplete
	r.status.EndedAt = time.Now()
	b.notify()
}
