package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/sandbox-bot/sandbox-bot/app/receipts"
	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// liveEvent is one progress line as the page gets it.
type liveEvent struct {
	Seq       int                   `json:"seq"`
	Time      int64                 `json:"t"`              // when the runner wrote it, unix ms
	Wrote     int64                 `json:"tu"`             // the same, unix µs (latency measurements)
	Read      int64                 `json:"read,omitempty"` // when this replica read it, unix µs (live lines only)
	Stage     string                `json:"stage"`
	Message   string                `json:"message,omitempty"`
	Kind      dispatch.ProgressKind `json:"kind,omitempty"`
	Tool      string                `json:"tool,omitempty"`
	Detail    string                `json:"detail,omitempty"`
	Step      int                   `json:"step,omitempty"`
	ToolCalls int                   `json:"tool_calls,omitempty"`
	Tokens    int64                 `json:"tokens,omitempty"`
	CostUSD   float64               `json:"cost_usd,omitempty"`
	Status    dispatch.Status       `json:"status,omitempty"`
}

// receiptView is the receipt as the page shows it: figures, checks, and
// what went wrong, cleaned like everything else.
type receiptView struct {
	Status          string      `json:"status"`
	DurationSeconds float64     `json:"duration_seconds"`
	CostUSD         float64     `json:"cost_usd"`
	InputTokens     int64       `json:"input_tokens"`
	OutputTokens    int64       `json:"output_tokens"`
	Steps           int         `json:"steps"`
	Branch          string      `json:"branch,omitempty"`
	Error           string      `json:"error,omitempty"`
	Checks          []checkView `json:"checks,omitempty"`
	Note            string      `json:"note,omitempty"`
}

type checkView struct {
	Name     string `json:"name"`
	Passed   bool   `json:"passed"`
	Attempts int    `json:"attempts"`
}

// event is a line as the page shows it and the store keeps it: cleaned.
func (lp *livePages) event(l liveLine) liveEvent {
	p := l.Payload
	e := liveEvent{Seq: l.Seq, Time: p.Time.UnixMilli(), Wrote: p.Time.UnixMicro(), Stage: lp.clean(p.Stage),
		Message: lp.clean(p.Message), Kind: p.Kind, Tool: lp.clean(p.Tool), Detail: lp.clean(p.Detail),
		Step: p.Step, ToolCalls: p.ToolCalls, Tokens: p.Tokens, CostUSD: p.CostUSD, Status: p.Status}
	if !l.Read.IsZero() {
		e.Read = l.Read.UnixMicro()
	}
	return e
}

func (lp *livePages) fromStore(r *receipts.Run) *receiptView {
	return &receiptView{Status: r.Status, DurationSeconds: r.DurationSeconds, CostUSD: r.CostUSD, InputTokens: r.InputTokens,
		OutputTokens: r.OutputTokens, Steps: r.Steps, Branch: r.Branch, Error: lp.clean(r.Error)}
}

func (lp *livePages) fromResult(res *dispatch.Result) *receiptView {
	v := &receiptView{Status: string(res.Status), DurationSeconds: res.DurationSeconds, CostUSD: res.TokenUsage.TotalCostUSD,
		InputTokens: res.TokenUsage.Input, OutputTokens: res.TokenUsage.Output, Steps: res.TokenUsage.Steps, Branch: lp.clean(res.Branch)}
	if res.Error != nil {
		v.Error = lp.clean(clipText(res.Error.Message, 2000))
	}
	for _, c := range res.Validation {
		v.Checks = append(v.Checks, checkView{Name: lp.clean(c.Name), Passed: c.Passed, Attempts: c.Attempts})
	}
	return v
}

// receipt is the ended run's receipt: the backend's result.json while it
// holds it (read as the bot reads it: capped, strict), else the kept one.
// A receipt kept by another replica's store may take a moment to appear,
// so it waits a little for one.
func (lp *livePages) receipt(ctx context.Context, taskID string, wait time.Duration) *receiptView {
	deadline := time.Now().Add(wait)
	for {
		if res, err := lp.backend.Result(ctx, taskID); err == nil && res != nil {
			return lp.fromResult(res)
		}
		if page, err := lp.store.List(ctx, receipts.Filter{TaskID: taskID}, 0, 1); err == nil && len(page.Runs) > 0 {
			return lp.fromStore(&page.Runs[0])
		}
		if time.Now().After(deadline) {
			return &receiptView{Status: "ended", Note: "The run has ended; its receipt is on GitHub (the bot that followed it has not kept it here)."}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// sse writes Server-Sent Events and flushes each; the run's lines and the
// screencast's frames come from two goroutines.
type sse struct {
	mu *sync.Mutex
	w  http.ResponseWriter
	rc *http.ResponseController
}

func (s sse) send(event, id string, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	return s.sendRaw(event, id, b)
}

// sendRaw sends data that is JSON already (one line: JSON escapes
// newlines).
func (s sse) sendRaw(event, id string, b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id != "" {
		if _, err := fmt.Fprintf(s.w, "id: %s\n", id); err != nil {
			return err
		}
	}
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", event, b); err != nil {
		return err
	}
	return s.rc.Flush()
}

func (s sse) comment(text string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := fmt.Fprintf(s.w, ": %s\n\n", text); err != nil {
		return err
	}
	return s.rc.Flush()
}

// events streams the run: every progress line from the run's start (or
// after Last-Event-ID, when the browser reconnects), then the receipt.
func (lp *livePages) events(w http.ResponseWriter, r *http.Request, v viewer) {
	// For an ended run find reads the store too: its lines may be there.
	run, ok := lp.findOr404(w, r, v, false)
	if !ok {
		return
	}
	rc := http.NewResponseController(w)
	// The listener's write timeout is for ordinary requests; a stream
	// lives as long as the run.
	_ = rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "private, no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	out := sse{mu: &sync.Mutex{}, w: w, rc: rc}
	// A browser that loses the stream (a restarted bot) comes back in a
	// second, asking for what followed the last line it showed.
	if _, err := fmt.Fprint(w, "retry: 1000\n\n"); err != nil {
		return
	}
	last, _ := strconv.Atoi(r.Header.Get("Last-Event-ID"))
	if run.Live() {
		// The frames' goroutine writes to w too: it ends before this does.
		frames, stop := context.WithCancel(r.Context())
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); lp.screencast(frames, out, run.Meta.TaskID, v.Login) }()
		defer func() { stop(); wg.Wait() }()
	}
	from, seq, err := "nowhere", last, error(nil)
	switch {
	case run.fromStore():
		from = "store"
		seq, err = lp.streamStored(r.Context(), out, run.Meta.TaskID, last)
	case run.State != "":
		// The backend's log ends short when the sandbox goes while this
		// replica reads it: the run's follower (here or on another
		// replica) removes it once it has kept every line. The store has
		// what the log did not give, numbered the same.
		from = "backend"
		if seq, err = lp.stream(r.Context(), out, run.Meta.TaskID, last); err == nil {
			seq, err = lp.streamStored(r.Context(), out, run.Meta.TaskID, seq)
		}
	}
	if err != nil {
		return // the browser went
	}
	lp.log.Debug().Str("task_id", run.Meta.TaskID).Str("state", string(run.State)).Str("lines_from", from).
		Int("after", last).Int("through", seq).Msg("live page: the run's lines sent")
	if rv := lp.receipt(r.Context(), run.Meta.TaskID, 20*time.Second); rv != nil {
		_ = out.send("receipt", "", rv)
	}
	_ = out.send("end", "", map[string]string{"task_id": run.Meta.TaskID})
}

// stream sends the lines after seq until the run ends or the browser goes,
// and returns the number of the last line sent.
func (lp *livePages) stream(ctx context.Context, out sse, taskID string, seq int) (int, error) {
	feed, release := lp.feeds.watch(taskID)
	defer release()
	keepAlive := time.NewTicker(15 * time.Second)
	defer keepAlive.Stop()
	for {
		lines, ended, ferr, changed := feed.since(seq)
		for _, l := range lines {
			if err := out.send("progress", strconv.Itoa(l.Seq), lp.event(l)); err != nil {
				return seq, err
			}
			seq = l.Seq
		}
		if ended {
			if ferr != nil && !errors.Is(ferr, dispatch.ErrNotFound) {
				lp.log.Warn().Err(ferr).Str("task_id", taskID).Msg("live page: the run's log could not be followed to its end")
			}
			return seq, nil
		}
		select {
		case <-ctx.Done():
			return seq, ctx.Err()
		case <-changed:
		case <-keepAlive.C:
			if err := out.comment("keep-alive"); err != nil {
				return seq, err
			}
		}
	}
}

// storedPage is how many stored lines one read returns.
const storedPage = 500

// streamStored sends the kept lines after seq: the same lines, numbered the
// same way, as the backend's log held while the run lived, so a browser
// that reconnects across the switch gets nothing twice and loses nothing.
// It returns the number of the last line sent.
func (lp *livePages) streamStored(ctx context.Context, out sse, taskID string, seq int) (int, error) {
	for {
		lines, err := lp.store.Lines(ctx, taskID, seq, storedPage)
		if err != nil {
			lp.log.Warn().Err(err).Str("task_id", taskID).Msg("live page: read the run's kept lines")
			return seq, nil
		}
		for _, l := range lines {
			if err := out.sendRaw("progress", strconv.Itoa(l.Seq), l.Data); err != nil {
				return seq, err
			}
			seq = l.Seq
		}
		if len(lines) < storedPage {
			return seq, nil
		}
	}
}

// clipText cuts s to n bytes on a character boundary.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
