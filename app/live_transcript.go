package app

import (
	"errors"
	"net/http"
	"time"

	"github.com/sandbox-bot/sandbox-bot/app/receipts"
)

// transcript serves GET /runs/<task-id>/transcript: the run's whole
// transcript as kept in the store, one JSON line per progress line
// (NDJSON, as the page's stream carries them), under the page's access
// rules. X-Transcript says whether it is whole (the run's log was read to
// its end) or partial (the run goes on, or its follower stopped early).
func (lp *livePages) transcript(w http.ResponseWriter, r *http.Request, v viewer) {
	run, ok := lp.findOr404(w, r, v, true)
	if !ok {
		return
	}
	if run.Head == nil {
		http.Error(w, lp.noTranscript(), http.StatusNotFound)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/x-ndjson; charset=utf-8")
	h.Set("Content-Disposition", `attachment; filename="`+run.Meta.TaskID+`.ndjson"`)
	h.Set("Cache-Control", "private, no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	state := "partial"
	if run.Head.Whole {
		state = "whole"
	}
	h.Set("X-Transcript", state)
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // a long transcript takes its time
	for seq := 0; ; {
		lines, err := lp.store.Lines(r.Context(), run.Meta.TaskID, seq, storedPage)
		if err != nil {
			// The store's own words (a driver's error names hosts, users
			// and tables) go to the log, not to the viewer.
			if seq == 0 && !errors.Is(err, receipts.ErrNoTranscript) {
				http.Error(w, "the run's transcript could not be read from the bot's store; try again, or ask the operator (the bot's log says why)", http.StatusInternalServerError)
			}
			lp.log.Warn().Err(err).Str("task_id", run.Meta.TaskID).Msg("transcript: read the kept lines")
			return
		}
		for _, l := range lines {
			if _, err := w.Write(append(l.Data, '\n')); err != nil {
				return
			}
			seq = l.Seq
		}
		if len(lines) < storedPage {
			return
		}
	}
}
