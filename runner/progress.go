package runner

import (
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// reporter prints progress lines: one JSON object per line on stdout, the
// contract the bot's log follower parses (dispatch.ParseProgress).
type reporter struct {
	mu     sync.Mutex
	w      io.Writer
	taskID string
	red    *Redactor
}

func (p *reporter) emit(pr dispatch.Progress) {
	pr.Event = "progress"
	pr.TaskID = p.taskID
	if pr.Time.IsZero() {
		pr.Time = time.Now().UTC()
	}
	pr.Message = p.red.String(pr.Message)
	b, err := json.Marshal(pr)
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.w.Write(append(b, '\n')) //nolint:errcheck // progress is best effort; the receipt is what counts
}
