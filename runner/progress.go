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
	// details counts lines with a Detail: past maxDetails the agent's
	// steps are reported without it, so an agent that talks without end
	// cannot fill the log the bot and the live page read.
	details int
}

// maxDetails bounds the detailed lines of one run.
const maxDetails = 5000

func (p *reporter) emit(pr dispatch.Progress) {
	pr.Event = "progress"
	pr.TaskID = p.taskID
	if pr.Time.IsZero() {
		pr.Time = time.Now().UTC()
	}
	// Redacted before it is cut, so a cut cannot leave half a secret.
	pr.Message, pr.Detail = p.red.String(pr.Message), shortDetail(pr.Kind, p.red.String(pr.Detail))
	p.mu.Lock()
	defer p.mu.Unlock()
	if pr.Detail != "" {
		if p.details++; p.details > maxDetails {
			if pr.Kind == dispatch.KindText {
				return
			}
			pr.Detail = ""
		}
	}
	b, err := json.Marshal(pr)
	if err != nil {
		return
	}
	p.w.Write(append(b, '\n')) //nolint:errcheck // progress is best effort; the receipt is what counts
}

// shortDetail bounds a detail: a tool call's arguments and the agent's
// text by their start, a check's output by its end, where it says what
// failed.
func shortDetail(kind dispatch.ProgressKind, s string) string {
	switch kind {
	case dispatch.KindTool:
		return clipRunes(s, dispatch.MaxToolDetail)
	case dispatch.KindCheck:
		return lastRunes(s, dispatch.MaxTextDetail)
	}
	return clipRunes(s, dispatch.MaxTextDetail)
}
