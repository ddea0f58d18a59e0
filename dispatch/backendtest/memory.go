package backendtest

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/budget"
)

type memoryRun struct {
	spec     dispatch.RunSpec
	status   dispatch.RunStatus
	result   *dispatch.Result
	raw      []byte // a result.json as bytes (FinishRaw), decoded on Result
	progress []dispatch.Progress
}

// Memory is a dispatch.Backend that keeps runs in memory: no sandbox
// starts. The bot's tests stand it behind the Backend interface to see
// exactly what would have been started, and to end runs with a chosen
// result.json; it passes the conformance suite like the real backends
// (memory_test.go). The zero value is not usable; call NewMemory.
//
// It is an adapter and nothing more: each interface it offers is served by
// a part named for what it does, the parts on runs pointing to the same
// runs, built in NewMemory.
type Memory struct {
	// *memRuns is embedded here too, so that Name resolves here first
	// rather than through several parts at once.
	*memRuns
	*memSandboxes // dispatch.Backend's runs and CurrentToken; CancelEndsRun
	*memScript    // Emit, Finish, FinishRaw: the test plays the sandboxes (RunScript)
	*memRecord    // Specs, Spec, Tokens, Cancels, WaitSubmitted, IDs (RunRecord)
	*memLocks     // Lock, Unlock, Holder, ListLocks; LockHolder (RunRecord)
	*memSessions  // KeepSession, KeptSession; LeaveSession (RunScript)
	// MemoryQueue is the run queue, kept like everything else here in
	// memory.
	MemoryQueue
	// MemoryBook is the budget book (budget.Book), in memory too.
	budget.MemoryBook
	// MemoryRoutineBooks are the routines' claims.
	MemoryRoutineBooks
}

// RunScript is how a test plays the sandboxes behind Memory, which has
// none: a run prints a progress line, ends with a receipt (or without one,
// or with raw bytes), leaves a session archive. Only Memory's users need
// it, so it is declared here rather than in dispatch.
type RunScript interface {
	Emit(taskID string, p dispatch.Progress)
	Finish(taskID string, result *dispatch.Result)
	FinishRaw(taskID string, raw []byte)
	LeaveSession(taskID string, archive []byte)
}

// RunRecord is what a test reads back of what the bot asked of Memory: the
// runs it submitted, the tokens it delivered, the cancels, the locks held.
type RunRecord interface {
	Specs() []dispatch.RunSpec
	Spec(taskID string) (dispatch.RunSpec, bool)
	WaitSubmitted(ctx context.Context, n int) ([]dispatch.RunSpec, error)
	IDs() []string
	Tokens(taskID string) []string
	Cancels(taskID string) int
	LockHolder(key string) string
}

// Every interface Memory offers, asserted so that a part added with a
// method of the same name as another's (which would hide both) fails to
// build rather than drop a capability the bot looks for at run time.
var (
	_ dispatch.Backend       = (*Memory)(nil)
	_ dispatch.TokenReader   = (*Memory)(nil)
	_ dispatch.LockLister    = (*Memory)(nil)
	_ dispatch.SessionKeeper = (*Memory)(nil)
	_ budget.Book            = (*Memory)(nil)
	_ RunScript              = (*Memory)(nil)
	_ RunRecord              = (*Memory)(nil)
)

// New returns an empty backend.
func NewMemory() *Memory {
	runs := &memRuns{runs: map[string]*memoryRun{}, cancels: map[string]int{}, tokens: map[string][]string{}, changed: make(chan struct{})}
	return &Memory{
		memRuns:      runs,
		memSandboxes: &memSandboxes{memRuns: runs, CancelEndsRun: true},
		memScript:    &memScript{runs},
		memRecord:    &memRecord{runs},
		memLocks:     &memLocks{locks: map[string]string{}},
		memSessions:  &memSessions{},
	}
}

// memRuns are the runs the parts on runs read and change, under one
// mutex.
type memRuns struct {
	mu    sync.Mutex
	runs  map[string]*memoryRun
	order []string
	// history keeps every spec ever submitted, cleaned up or not.
	history []dispatch.RunSpec
	// cancels and tokens outlive Cleanup, for assertions.
	cancels map[string]int
	tokens  map[string][]string
	// changed is closed and replaced on every state change, so waiters
	// wake without polling.
	changed chan struct{}
}

func (b *memRuns) notify() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// Name implements dispatch.Backend.
func (b *memRuns) Name() string { return "memory" }

// finish ends a run with result (nil: the run ended without a receipt, as
// a killed sandbox does).
func (b *memRuns) finish(taskID string, result *dispatch.Result) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.runs[taskID]
	if !ok || r.status.State.Ended() {
		return
	}
	if result != nil {
		cp := *result
		cp.SchemaVersion = dispatch.ResultVersion
		if cp.TaskID == "" {
			cp.TaskID = taskID
		}
		r.result = &cp
	}
	r.status.State = dispatch.StateComplete
	if result == nil {
		r.status.State = dispatch.StateLost
	}
	r.status.EndedAt = time.Now()
	b.notify()
}

// memSandboxes are the runs as dispatch.Backend offers them: submitted,
// watched, cancelled, given a new token, cleaned up.
type memSandboxes struct {
	*memRuns
	// CancelEndsRun makes Cancel finish the run as interrupted, the way a
	// runner that pushes and writes its receipt on SIGTERM would.
	CancelEndsRun bool
}

// Submit implements dispatch.Backend.
func (b *memSandboxes) Submit(_ context.Context, spec dispatch.RunSpec) (bool, error) {
	// Like the real backends, it decides where the sandbox finds its token
	// and leaves its receipt.
	if spec.Order.OutputDir == "" {
		spec.Order.OutputDir = dispatch.OutputDir
	}
	if spec.Order.TokenFile == "" {
		spec.Order.TokenFile = dispatch.TokenPath
	}
	if err := spec.Order.Validate(); err != nil {
		return false, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	id := spec.Order.TaskID
	if _, ok := b.runs[id]; ok {
		return false, nil
	}
	b.runs[id] = &memoryRun{
		spec:   spec,
		status: dispatch.RunStatus{Meta: spec.Meta, State: dispatch.StateRunning, StartedAt: time.Now()},
	}
	b.tokens[id] = []string{spec.Token}
	b.order = append(b.order, id)
	b.history = append(b.history, spec)
	b.notify()
	return true, nil
}

// Status implements dispatch.Backend.
func (b *memSandboxes) Status(_ context.Context, taskID string) (dispatch.RunStatus, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.runs[taskID]
	if !ok {
		return dispatch.RunStatus{}, dispatch.ErrNotFound
	}
	return r.status, nil
}

// List implements dispatch.Backend.
func (b *memSandboxes) List(_ context.Context) ([]dispatch.RunStatus, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]dispatch.RunStatus, 0, len(b.order))
	for _, id := range b.order {
		if r, ok := b.runs[id]; ok {
			out = append(out, r.status)
		}
	}
	return out, nil
}

// Wait implements dispatch.Backend.
func (b *memSandboxes) Wait(ctx context.Context, taskID string, progress func(dispatch.Progress)) (dispatch.RunStatus, error) {
	sent := 0
	for {
		b.mu.Lock()
		r, ok := b.runs[taskID]
		if !ok {
			b.mu.Unlock()
			return dispatch.RunStatus{}, dispatch.ErrNotFound
		}
		// Progress and status are read under one lock, so every line
		// emitted before Finish is delivered before Wait returns.
		pending := append([]dispatch.Progress(nil), r.progress[sent:]...)
		sent = len(r.progress)
		st, ch := r.status, b.changed
		b.mu.Unlock()
		for _, p := range pending {
			if progress != nil {
				progress(p)
			}
		}
		if st.State.Ended() {
			return st, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return st, ctx.Err()
		}
	}
}

// Result implements dispatch.Backend.
func (b *memSandboxes) Result(_ context.Context, taskID string) (*dispatch.Result, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.runs[taskID]
	if !ok {
		return nil, fmt.Errorf("memory backend: %s: %w", taskID, dispatch.ErrNotFound)
	}
	if !r.status.State.Ended() {
		return nil, fmt.Errorf("memory backend: %s is %s: %w", taskID, r.status.State, dispatch.ErrRunning)
	}
	if r.raw != nil {
		return dispatch.ParseResult(r.raw)
	}
	if r.result == nil {
		return nil, fmt.Errorf("memory backend: %s: %w", taskID, dispatch.ErrNoResult)
	}
	cp := *r.result
	return &cp, nil
}

// Cancel implements dispatch.Backend.
func (b *memSandboxes) Cancel(_ context.Context, taskID string) error {
	b.mu.Lock()
	r, ok := b.runs[taskID]
	if !ok {
		b.mu.Unlock()
		return dispatch.ErrNotFound
	}
	b.cancels[taskID]++
	b.notify()
	end := b.CancelEndsRun && !r.status.State.Ended()
	b.mu.Unlock()
	if end {
		b.finish(taskID, &dispatch.Result{TaskID: taskID, Mode: r.spec.Order.Mode, Status: dispatch.StatusInterrupted,
			Branch: r.spec.Order.TargetBranch, Error: &dispatch.RunError{Message: "cancelled"}})
	}
	return nil
}

// RefreshToken implements dispatch.Backend.
func (b *memSandboxes) RefreshToken(_ context.Context, taskID, token string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.runs[taskID]
	if !ok {
		return fmt.Errorf("memory backend: refresh token of %s: %w", taskID, dispatch.ErrNotFound)
	}
	if r.status.State.Ended() {
		return fmt.Errorf("memory backend: refresh token of %s: the run has ended (%s)", taskID, r.status.State)
	}
	b.tokens[taskID] = append(b.tokens[taskID], token)
	return nil
}

// Cleanup implements dispatch.Backend.
func (b *memSandboxes) Cleanup(_ context.Context, taskID string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.runs, taskID)
	for i, id := range b.order {
		if id == taskID {
			b.order = append(b.order[:i], b.order[i+1:]...)
			break
		}
	}
	b.notify()
	return nil
}

// CurrentToken implements dispatch.TokenReader: the last token delivered.
func (b *memSandboxes) CurrentToken(_ context.Context, taskID string) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.runs[taskID]; !ok {
		return "", dispatch.ErrNotFound
	}
	toks := b.tokens[taskID]
	if len(toks) == 0 {
		return "", nil
	}
	return toks[len(toks)-1], nil
}

// memScript is the test's hand on the runs (RunScript): what their
// sandboxes would print and how they end.
type memScript struct {
	*memRuns
}

// Emit adds a progress line to a running run.
func (b *memScript) Emit(taskID string, p dispatch.Progress) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r, ok := b.runs[taskID]; ok {
		p.Event, p.TaskID = "progress", taskID
		r.progress = append(r.progress, p)
		b.notify()
	}
}

// Finish ends a run with result (nil: the run ended without a receipt, as
// a killed sandbox does).
func (b *memScript) Finish(taskID string, result *dispatch.Result) { b.finish(taskID, result) }

// memRecord reads back what the bot asked of the runs (RunRecord).
type memRecord struct {
	*memRuns
}

// Specs returns every run ever submitted, in order, cleaned up or not.
func (b *memRecord) Specs() []dispatch.RunSpec {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]dispatch.RunSpec(nil), b.history...)
}

// Spec returns one run's spec.
func (b *memRecord) Spec(taskID string) (dispatch.RunSpec, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.runs[taskID]
	if !ok {
		return dispatch.RunSpec{}, false
	}
	return r.spec, true
}

// Tokens returns the tokens delivered to a run, first the initial one.
func (b *memRecord) Tokens(taskID string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.tokens[taskID]...)
}

// Cancels counts Cancel calls for a run.
func (b *memRecord) Cancels(taskID string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cancels[taskID]
}

// WaitSubmitted blocks until n runs were submitted in total, or ctx ends.
func (b *memRecord) WaitSubmitted(ctx context.Context, n int) ([]dispatch.RunSpec, error) {
	for {
		b.mu.Lock()
		count, ch := len(b.history), b.changed
		b.mu.Unlock()
		if count >= n {
			return b.Specs(), nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return b.Specs(), ctx.Err()
		}
	}
}

// IDs returns the task ids known, sorted.
func (b *memRecord) IDs() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	ids := append([]string(nil), b.order...)
	sort.Strings(ids)
	return ids
}

// memLocks are the per-issue locks (dispatch.Locker, dispatch.LockLister,
// memory_locklist.go), under a mutex of their own: no run shares their
// state.
type memLocks struct {
	mu    sync.Mutex
	locks map[string]string
}

// Lock implements dispatch.Backend. Keys are lower-cased, as GitHub names
// are case-insensitive (the real backends do the same).
func (b *memLocks) Lock(_ context.Context, key, holder string) (string, error) {
	key = strings.ToLower(key)
	b.mu.Lock()
	defer b.mu.Unlock()
	if cur, ok := b.locks[key]; ok && cur != holder {
		return cur, fmt.Errorf("lock %s is held by %s: %w", key, cur, dispatch.ErrLocked)
	}
	b.locks[key] = holder
	return holder, nil
}

// Unlock implements dispatch.Backend.
func (b *memLocks) Unlock(_ context.Context, key, holder string) error {
	key = strings.ToLower(key)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.locks[key] == holder {
		delete(b.locks, key)
	}
	return nil
}

// Holder implements dispatch.Backend.
func (b *memLocks) Holder(_ context.Context, key string) (string, error) {
	return b.LockHolder(key), nil
}

// LockHolder returns who holds key, or "".
func (b *memLocks) LockHolder(key string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.locks[strings.ToLower(key)]
}
