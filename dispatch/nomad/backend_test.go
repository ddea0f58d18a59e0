package nomad_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad/nomadtest"
)

// runner plays the sandbox on the fake client: it reads the work order and
// token the job's templates rendered, prints progress lines on stdout the
// way the runner does (split across writes, mixed with other output), and
// leaves result.json in /alloc/data. On SIGTERM (ctx cancelled) it writes
// an interrupted receipt unless noReceiptOnKill.
type runner struct {
	steps           int
	hold            chan struct{} // when set, the task runs until it is closed
	noReceiptOnKill bool
	exit            int

	mu     sync.Mutex
	orders []dispatch.WorkOrder
	tokens []string
	env    map[string]string
	// tokenSeen is sent each token file content the task reads while held.
	tokenSeen chan string
}

func (r *runner) Run(ctx context.Context, t *nomadtest.Task) (int, error) {
	order, err := renderedWorkOrder(t)
	if err != nil {
		return 1, err
	}
	token, _ := os.ReadFile(filepath.Join(t.TaskDir, "secrets", "token"))
	r.mu.Lock()
	r.orders = append(r.orders, order)
	r.tokens = append(r.tokens, string(token))
	r.env = t.Env
	r.mu.Unlock()

	fmt.Fprintln(t.Stdout, "Cloning into 'repo'...")
	for i := 1; i <= r.steps; i++ {
		line, _ := json.Marshal(dispatch.Progress{Event: "progress", TaskID: order.TaskID, Stage: "agent", Message: fmt.Sprintf("step %d", i), Step: i, CostUSD: 0.01 * float64(i)})
		// Half a line per write: the bot must reassemble lines across
		// log frames.
		half := len(line) / 2
		t.Stdout.Write(line[:half])
		time.Sleep(2 * time.Millisecond)
		t.Stdout.Write(append(line[half:], '\n'))
	}
	receipt := func(status dispatch.Status) error {
		return dispatch.WriteResult(filepath.Join(t.AllocDir, "data"), &dispatch.Result{
			TaskID: order.TaskID, Mode: order.Mode, Status: status, Branch: order.TargetBranch,
			TokenUsage: dispatch.TokenUsage{TotalCostUSD: 0.01 * float64(r.steps), Steps: r.steps},
		})
	}
	if r.hold != nil {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-r.hold:
			case <-ctx.Done():
				if r.noReceiptOnKill {
					return 137, nil
				}
				return 143, receipt(dispatch.StatusInterrupted)
			case <-tick.C:
				if r.tokenSeen != nil {
					b, _ := os.ReadFile(filepath.Join(t.TaskDir, "secrets", "token"))
					select {
					case r.tokenSeen <- string(b):
					default:
					}
				}
				continue
			}
			break
		}
	}
	final, _ := json.Marshal(dispatch.Progress{Event: "progress", TaskID: order.TaskID, Stage: "done", Message: "finished", Status: dispatch.StatusCompleted})
	fmt.Fprintf(t.Stdout, "%s\n", final)
	if r.exit != 0 {
		return r.exit, nil
	}
	return 0, receipt(dispatch.StatusCompleted)
}

func TestSubmitWaitResultWholeRun(t *testing.T) {
	t.Parallel()
	r := &runner{steps: 5}
	e := newEnv(t, nomadtest.Options{Driver: r})
	b := e.backend()
	ctx := ctxT(t)
	s := spec(dispatch.ModeExecute, "whole")

	created, err := b.Submit(ctx, s)
	if err != nil || !created {
		t.Fatalf("Submit = %v, %v", created, err)
	}
	var got []dispatch.Progress
	st, err := b.Wait(ctx, s.Order.TaskID, func(p dispatch.Progress) { got = append(got, p) })
	if err != nil {
		t.Fatal(err)
	}
	if st.State != dispatch.StateComplete || st.ExitCode != 0 || st.Meta.TaskID != s.Order.TaskID || st.Meta.Repo != "acme/web" || st.Meta.Number != 42 || st.Meta.InstallationID != 777 {
		t.Fatalf("status %+v", st)
	}
	if st.StartedAt.IsZero() || st.EndedAt.Before(st.StartedAt) {
		t.Errorf("times: started %v ended %v", st.StartedAt, st.EndedAt)
	}
	if len(got) != 6 || got[0].Message != "step 1" || got[4].Step != 5 || got[5].Stage != "done" {
		t.Fatalf("progress lines: %+v", got)
	}
	res, err := b.Result(ctx, s.Order.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != dispatch.StatusCompleted || res.TaskID != s.Order.TaskID || res.TokenUsage.Steps != 5 {
		t.Fatalf("result %+v", res)
	}
	// What the sandbox saw: the work order with the backend's paths, the
	// token through the template, no token in its environment.
	r.mu.Lock()
	order, token, env := r.orders[0], r.tokens[0], r.env
	r.mu.Unlock()
	if order.OutputDir != "/alloc/data" || order.TokenFile != "/secrets/token" || order.Task.Body != s.Order.Task.Body {
		t.Errorf("work order in the sandbox: %+v", order)
	}
	if token != testToken {
		t.Errorf("token file = %q", token)
	}
	for k, v := range env {
		if strings.Contains(v, testToken) {
			t.Errorf("token in the sandbox env %s", k)
		}
	}
	// The run ended: its token is gone from Nomad.
	if v := e.fake.Var(nomad.DefaultNamespace, nomad.TokenVarPath(jobIDOf(s))); v != nil {
		t.Errorf("token variable still there after the run: %v", v.Path)
	}
	if err := b.Cleanup(ctx, s.Order.TaskID); err != nil {
		t.Fatal(err)
	}
	if j := e.fake.Job(nomad.DefaultNamespace, jobIDOf(s)); j == nil || !*j.Stop {
		t.Errorf("cleanup without purge must stop the job and leave it to GC: %+v", j)
	}
}

func TestDuplicateSubmitRunsOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nomadtest.Options{})
	b := e.backend()
	ctx := ctxT(t)
	s := spec(dispatch.ModePlan, "dup")
	first, err := b.Submit(ctx, s)
	if err != nil || !first {
		t.Fatalf("first Submit = %v, %v", first, err)
	}
	// A redelivered webhook, and a bot restarted in between (no memory).
	second, err := b.Submit(ctx, s)
	if err != nil || second {
		t.Fatalf("second Submit = %v, %v; want false, nil", second, err)
	}
	third, err := e.backend().Submit(ctx, s)
	if err != nil || third {
		t.Fatalf("Submit from a fresh replica = %v, %v; want false, nil", third, err)
	}
	if n := e.fake.Jobs(); n != 1 {
		t.Fatalf("%d jobs, want 1", n)
	}
	if allocs := e.fake.Allocs(nomad.DefaultNamespace, jobIDOf(s)); len(allocs) != 1 {
		t.Fatalf("%d allocations, want 1", len(allocs))
	}
	registers := 0
	for _, c := range e.fake.Calls() {
		if c.Method == "PUT" && c.Path == "/v1/jobs" {
			registers++
		}
	}
	if registers != 1 {
		t.Errorf("%d registrations, want 1", registers)
	}
}

// TestConcurrentReplicasSubmitOnce races replicas past the existence check
// so that Nomad's EnforceIndex is what keeps the second sandbox out.
func TestConcurrentReplicasSubmitOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nomadtest.Options{})
	ctx := ctxT(t)
	s := spec(dispatch.ModeExecute, "race")
	const replicas = 8
	var created atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < replicas; i++ {
		b := e.backend()
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ok, err := b.Submit(ctx, s)
			if err != nil {
				t.Error(err)
			}
			if ok {
				created.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	if created.Load() != 1 || e.fake.Jobs() != 1 || len(e.fake.Allocs(nomad.DefaultNamespace, jobIDOf(s))) != 1 {
		t.Fatalf("created %d times, %d jobs, %d allocations; want 1 each", created.Load(), e.fake.Jobs(), len(e.fake.Allocs(nomad.DefaultNamespace, jobIDOf(s))))
	}
}

func TestLockContentionBetweenReplicas(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nomadtest.Options{})
	a, b := e.backend(), e.backend()
	ctx := ctxT(t)
	key := dispatch.LockKey("acme/My.Web", 42)

	// Both replicas race for the same issue: exactly one wins.
	type res struct {
		holder, cur string
		err         error
	}
	results := make(chan res, 2)
	for _, x := range []struct {
		be     *nomad.Backend
		holder string
	}{{a, "T-AAAAAAAA"}, {b, "T-BBBBBBBB"}} {
		go func() {
			cur, err := x.be.Lock(ctx, key, x.holder)
			results <- res{x.holder, cur, err}
		}()
	}
	r1, r2 := <-results, <-results
	winner, loser := r1, r2
	if r1.err != nil {
		winner, loser = r2, r1
	}
	if winner.err != nil || winner.cur != winner.holder {
		t.Fatalf("winner: %+v", winner)
	}
	if !errors.Is(loser.err, dispatch.ErrLocked) || loser.cur != winner.holder {
		t.Fatalf("loser: %+v; want ErrLocked naming %s", loser, winner.holder)
	}
	loserBackend := a
	if loser.holder == "T-BBBBBBBB" {
		loserBackend = b
	}
	// Re-taking one's own lock succeeds; releasing someone else's does not
	// release it.
	if cur, err := loserBackend.Lock(ctx, key, winner.holder); err != nil || cur != winner.holder {
		t.Fatalf("re-lock by holder = %q, %v", cur, err)
	}
	if err := loserBackend.Unlock(ctx, key, loser.holder); err != nil {
		t.Fatal(err)
	}
	if _, err := loserBackend.Lock(ctx, key, loser.holder); !errors.Is(err, dispatch.ErrLocked) {
		t.Fatalf("lock after a non-holder's unlock = %v, want ErrLocked", err)
	}
	if v := e.fake.Var("default", nomad.LockPath(key)); v == nil || v.Items["key"] != key {
		t.Fatalf("lock variable %+v", v)
	}
	// The holder releases it; the other takes it.
	if err := loserBackend.Unlock(ctx, key, winner.holder); err != nil {
		t.Fatal(err)
	}
	if cur, err := loserBackend.Lock(ctx, key, loser.holder); err != nil || cur != loser.holder {
		t.Fatalf("lock after release = %q, %v", cur, err)
	}
	// Unlocking a free lock is fine.
	if err := a.Unlock(ctx, "acme/web#9", "T-CCCCCCCC"); err != nil {
		t.Fatal(err)
	}
}

func TestEventStreamDropReconnectsFromLastIndex(t *testing.T) {
	t.Parallel()
	r := &runner{steps: 1, hold: make(chan struct{})}
	e := newEnv(t, nomadtest.Options{Driver: r})
	b := e.backend()
	ctx := ctxT(t)
	s := spec(dispatch.ModeRevise, "drop")
	if _, err := b.Submit(ctx, s); err != nil {
		t.Fatal(err)
	}
	done := make(chan dispatch.RunStatus, 1)
	go func() {
		st, err := b.Wait(ctx, s.Order.TaskID, nil)
		if err != nil {
			t.Error(err)
		}
		done <- st
	}()
	// Primed: the Wait has read the run once, so the end can only reach
	// it through the stream (or the re-read after a reconnect), not
	// through that first read.
	waitFor(t, "the run to be running and watched", func() bool {
		st, _ := b.Status(ctx, s.Order.TaskID)
		return st.State == dispatch.StateRunning && b.Connects() == 1 && b.Primed(jobIDOf(s))
	})
	// The agent loses its leader: the stream drops and cannot reopen while
	// the run ends.
	if n := e.fake.PauseEventStreams(); n != 1 {
		t.Fatalf("%d event streams open, want the one shared stream", n)
	}
	close(r.hold)
	allocID, _ := e.fake.WaitAlloc(ctx, nomad.DefaultNamespace, jobIDOf(s))
	waitFor(t, "the allocation to end", func() bool {
		a := e.fake.Alloc(allocID)
		return a.ClientStatus == api.AllocClientStatusComplete
	})
	endIndex := e.fake.Alloc(allocID).ModifyIndex
	e.fake.ResumeEventStreams()

	select {
	case st := <-done:
		if st.State != dispatch.StateComplete {
			t.Fatalf("after reconnecting the end was seen as %+v", st)
		}
	case <-ctx.Done():
		t.Fatal("the end of the run was missed after the stream dropped")
	}
	// What the dropped connection delivered is read from the agent's side
	// once it is over: batches already on the wire when the connection was
	// cut still reach the bot after PauseEventStreams returns, so the
	// backend's index at that moment is not yet the last one it applies.
	var queries []string
	for _, c := range e.fake.Calls() {
		if c.Path == "/v1/event/stream" {
			queries = append(queries, c.Query)
		}
	}
	batches := e.fake.StreamBatches()
	if len(queries) < 2 || len(batches) != 2 {
		t.Fatalf("stream requests %q delivering %v; want the dropped connection and one reconnect", queries, batches)
	}
	var last uint64
	if first := batches[0]; len(first) > 0 {
		last = first[len(first)-1]
	} else {
		// Nothing came on the first connection: it resumes where that one
		// started.
		q, err := url.ParseQuery(queries[0])
		if err != nil {
			t.Fatal(err)
		}
		from, _ := strconv.ParseUint(q.Get("index"), 10, 64)
		last = from - 1
	}
	// It reconnected asking for the batch after the last one it applied.
	want := fmt.Sprintf("index=%d", last+1)
	if !strings.Contains(queries[len(queries)-1], want) {
		t.Fatalf("stream requests %q (batches %v), want the last with %s", queries, batches, want)
	}
	// So the agent replays the end on the new connection: nothing that
	// happened while the stream was down is skipped. Whether the replay
	// is on record depends on a race the backend may win: the re-read
	// after every reconnect can end the Wait first, and the last Wait
	// closes the stream.
	if last+1 > endIndex {
		t.Errorf("reconnected from %d, past the end at %d", last+1, endIndex)
	}
	for _, idx := range e.fake.StreamBatches()[1] {
		if idx <= last {
			t.Errorf("batch %d delivered again after reconnecting from %d", idx, last+1)
		}
	}
}

func TestLostAllocationEndsLostWithoutResult(t *testing.T) {
	t.Parallel()
	r := &runner{steps: 2, hold: make(chan struct{}), noReceiptOnKill: true}
	e := newEnv(t, nomadtest.Options{Driver: r})
	b := e.backend()
	ctx := ctxT(t)
	s := spec(dispatch.ModeExecute, "lost")
	if _, err := b.Submit(ctx, s); err != nil {
		t.Fatal(err)
	}
	allocID, err := e.fake.WaitAlloc(ctx, nomad.DefaultNamespace, jobIDOf(s))
	if err != nil {
		t.Fatal(err)
	}
	var progress atomic.Int32
	done := make(chan dispatch.RunStatus, 1)
	go func() {
		st, err := b.Wait(ctx, s.Order.TaskID, func(dispatch.Progress) { progress.Add(1) })
		if err != nil {
			t.Error(err)
		}
		done <- st
	}()
	waitFor(t, "progress from the running sandbox", func() bool { return progress.Load() == 2 })
	if err := e.fake.LoseAlloc(allocID); err != nil {
		t.Fatal(err)
	}
	st := <-done
	if st.State != dispatch.StateLost {
		t.Fatalf("state %s, want lost (the bot resumes it in continue mode)", st.State)
	}
	if _, err := b.Result(ctx, s.Order.TaskID); !errors.Is(err, dispatch.ErrNoResult) {
		t.Fatalf("Result = %v, want ErrNoResult", err)
	}
	if st2, err := b.Status(ctx, s.Order.TaskID); err != nil || st2.State != dispatch.StateLost {
		t.Fatalf("Status = %+v, %v", st2, err)
	}
}

func TestCancelHonoursKillTimeoutAndKeepsReceipt(t *testing.T) {
	t.Parallel()
	r := &runner{steps: 1, hold: make(chan struct{})}
	e := newEnv(t, nomadtest.Options{Driver: r})
	b := e.backend()
	ctx := ctxT(t)
	s := spec(dispatch.ModeExecute, "cancel")
	if _, err := b.Submit(ctx, s); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "running", func() bool {
		st, _ := b.Status(ctx, s.Order.TaskID)
		return st.State == dispatch.StateRunning
	})
	if err := b.Cancel(ctx, s.Order.TaskID); err != nil {
		t.Fatal(err)
	}
	st, err := b.Wait(ctx, s.Order.TaskID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != dispatch.StateComplete {
		t.Fatalf("a cancelled run that wrote its receipt is complete, got %+v", st)
	}
	res, err := b.Result(ctx, s.Order.TaskID)
	if err != nil || res.Status != dispatch.StatusInterrupted {
		t.Fatalf("Result = %+v, %v; want interrupted", res, err)
	}
	var dereg []nomadtest.Call
	for _, c := range e.fake.Calls() {
		if c.Method == "DELETE" && strings.HasPrefix(c.Path, "/v1/job/") {
			dereg = append(dereg, c)
		}
	}
	if len(dereg) != 1 || !strings.Contains(dereg[0].Query, "purge=false") {
		t.Fatalf("deregistrations %+v, want one without purge", dereg)
	}
	// Nomad waits the task's kill_timeout between SIGTERM and SIGKILL.
	if j := e.fake.Job(nomad.DefaultNamespace, jobIDOf(s)); *j.TaskGroups[0].Tasks[0].KillTimeout != nomad.DefaultKillTimeout {
		t.Fatalf("kill_timeout %v", *j.TaskGroups[0].Tasks[0].KillTimeout)
	}
}

func TestKilledWithoutReceiptIsLost(t *testing.T) {
	t.Parallel()
	r := &runner{steps: 1, hold: make(chan struct{}), noReceiptOnKill: true}
	e := newEnv(t, nomadtest.Options{Driver: r})
	b := e.backend()
	ctx := ctxT(t)
	s := spec(dispatch.ModeExecute, "killed")
	if _, err := b.Submit(ctx, s); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "running", func() bool {
		st, _ := b.Status(ctx, s.Order.TaskID)
		return st.State == dispatch.StateRunning
	})
	// Stopped from outside (an operator's `nomad job stop`).
	if _, _, err := mustClient(t, e).Jobs().Deregister(jobIDOf(s), false, nil); err != nil {
		t.Fatal(err)
	}
	st, err := b.Wait(ctx, s.Order.TaskID, nil)
	if err != nil || st.State != dispatch.StateLost {
		t.Fatalf("Wait = %+v, %v; want lost", st, err)
	}
}

func TestFailedRunIsCompleteWithExitCode(t *testing.T) {
	t.Parallel()
	r := &runner{steps: 1, exit: 3}
	e := newEnv(t, nomadtest.Options{Driver: r})
	b := e.backend()
	ctx := ctxT(t)
	s := spec(dispatch.ModePlan, "fail")
	if _, err := b.Submit(ctx, s); err != nil {
		t.Fatal(err)
	}
	st, err := b.Wait(ctx, s.Order.TaskID, nil)
	if err != nil || st.State != dispatch.StateComplete || st.ExitCode != 3 {
		t.Fatalf("Wait = %+v, %v", st, err)
	}
	if _, err := b.Result(ctx, s.Order.TaskID); !errors.Is(err, dispatch.ErrNoResult) {
		t.Fatalf("Result = %v, want ErrNoResult", err)
	}
}

func TestRefreshTokenRewritesTheVariableAndFile(t *testing.T) {
	t.Parallel()
	r := &runner{steps: 1, hold: make(chan struct{}), tokenSeen: make(chan string, 1)}
	e := newEnv(t, nomadtest.Options{Driver: r})
	b := e.backend()
	ctx := ctxT(t)
	s := spec(dispatch.ModeExecute, "refresh")
	if _, err := b.Submit(ctx, s); err != nil {
		t.Fatal(err)
	}
	path := nomad.TokenVarPath(jobIDOf(s))
	before := e.fake.Var(nomad.DefaultNamespace, path)
	if before == nil || before.Items[nomad.TokenItem] != testToken {
		t.Fatalf("token variable %+v", before)
	}
	waitFor(t, "running", func() bool {
		st, _ := b.Status(ctx, s.Order.TaskID)
		return st.State == dispatch.StateRunning
	})
	const fresh = "ghs_FRESHTOKEN000000000000000000000002"
	if tok, err := b.CurrentToken(ctx, s.Order.TaskID); err != nil || tok != testToken {
		t.Fatalf("CurrentToken before the refresh: %q, %v", tok, err)
	}
	if err := b.RefreshToken(ctx, s.Order.TaskID, fresh); err != nil {
		t.Fatal(err)
	}
	// A restarted bot reads back what the sandbox holds, to revoke it.
	if tok, err := b.CurrentToken(ctx, s.Order.TaskID); err != nil || tok != fresh {
		t.Fatalf("CurrentToken after the refresh: %q, %v", tok, err)
	}
	after := e.fake.Var(nomad.DefaultNamespace, path)
	if after.Items[nomad.TokenItem] != fresh || after.ModifyIndex <= before.ModifyIndex {
		t.Fatalf("variable after refresh %+v", after)
	}
	// The template re-renders secrets/token; the runner picks it up on its
	// next git call without a restart.
	waitFor(t, "the sandbox to see the new token", func() bool {
		select {
		case tok := <-r.tokenSeen:
			return tok == fresh
		default:
			return false
		}
	})
	close(r.hold)
	if _, err := b.Wait(ctx, s.Order.TaskID, nil); err != nil {
		t.Fatal(err)
	}
	// After the end there is nothing to refresh, and nothing is written.
	if err := b.RefreshToken(ctx, s.Order.TaskID, "ghs_LATE"); err == nil {
		t.Fatal("a refresh after the end must say the run has ended")
	}
	if v := e.fake.Var(nomad.DefaultNamespace, path); v != nil {
		t.Fatalf("a refresh after the end wrote the token again: %+v", v.Items)
	}
}

func TestListAfterRestartAndPurge(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nomadtest.Options{})
	b := e.backend(func(o *nomad.Options) { o.Purge = true })
	ctx := ctxT(t)
	plan, exec := spec(dispatch.ModePlan, "l1"), spec(dispatch.ModeExecute, "l2")
	for _, s := range []dispatch.RunSpec{plan, exec} {
		if _, err := b.Submit(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	allocID, _ := e.fake.WaitAlloc(ctx, nomad.DefaultNamespace, jobIDOf(exec))
	if err := e.fake.StartAlloc(allocID); err != nil {
		t.Fatal(err)
	}
	// A new replica knows nothing but what Nomad tells it.
	fresh := e.backend(func(o *nomad.Options) { o.Purge = true })
	runs, err := fresh.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 {
		t.Fatalf("List = %+v", runs)
	}
	byID := map[string]dispatch.RunStatus{}
	for _, r := range runs {
		byID[r.Meta.TaskID] = r
	}
	if p := byID[plan.Order.TaskID]; p.State != dispatch.StatePending || p.Meta.Mode != dispatch.ModePlan || p.Meta.DeliveryID != "d-l1" {
		t.Errorf("plan run %+v", p)
	}
	if x := byID[exec.Order.TaskID]; x.State != dispatch.StateRunning || x.Meta.Repo != "acme/web" || x.Meta.Attempt != 1 {
		t.Errorf("execute run %+v", x)
	}
	if _, err := fresh.Status(ctx, "T-00000000"); !errors.Is(err, dispatch.ErrNotFound) {
		t.Errorf("Status of an unknown task = %v, want ErrNotFound", err)
	}
	if err := fresh.Cleanup(ctx, plan.Order.TaskID); err != nil {
		t.Fatal(err)
	}
	if e.fake.Job(nomad.DefaultNamespace, jobIDOf(plan)) != nil || e.fake.Var(nomad.DefaultNamespace, nomad.TokenVarPath(jobIDOf(plan))) != nil {
		t.Fatal("cleanup with purge left the job or its token behind")
	}
	if _, err := fresh.Status(ctx, plan.Order.TaskID); !errors.Is(err, dispatch.ErrNotFound) {
		t.Errorf("Status after purge = %v, want ErrNotFound", err)
	}
}

func TestSubmitNeedsTokenOutsideTaskModeAndTaskModeNeedsNone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nomadtest.Options{})
	b := e.backend()
	ctx := ctxT(t)
	s := spec(dispatch.ModeExecute, "notoken")
	s.Token = ""
	if _, err := b.Submit(ctx, s); err == nil || !strings.Contains(err.Error(), "token is required") {
		t.Fatalf("Submit without token = %v", err)
	}
	task := spec(dispatch.ModeTask, "t")
	if ok, err := b.Submit(ctx, task); err != nil || !ok {
		t.Fatalf("task-mode Submit = %v, %v", ok, err)
	}
	if vars := e.fake.Vars(nomad.DefaultNamespace, "nomad/jobs/"); len(vars) != 0 {
		t.Fatalf("task mode wrote token variables %v", vars)
	}
}

func TestACLTokenIsSentAndBadTokenExplains(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nomadtest.Options{ACLToken: "s3cr3t-nomad-acl"})
	ctx := ctxT(t)
	cfg := api.DefaultConfig()
	cfg.Address = e.fake.URL
	cfg.SecretID = "wrong"
	bad := e.backend(func(o *nomad.Options) { o.Client = nil; o.Config = cfg })
	_, err := bad.Submit(ctx, spec(dispatch.ModePlan, "acl"))
	if err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("Submit with a bad ACL token = %v", err)
	}
	good := e.backend(func(o *nomad.Options) {
		c := *cfg
		c.SecretID = "s3cr3t-nomad-acl"
		o.Client, o.Config = nil, &c
	})
	if ok, err := good.Submit(ctx, spec(dispatch.ModePlan, "acl")); err != nil || !ok {
		t.Fatalf("Submit = %v, %v", ok, err)
	}
}

// mustClient is an operator's management client in the sandboxes'
// namespace.
func mustClient(t *testing.T, e *env) *api.Client {
	c, err := e.fake.Client(nomad.DefaultNamespace)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestCloseEndsWaits(t *testing.T) {
	t.Parallel()
	r := &runner{steps: 1, hold: make(chan struct{})}
	e := newEnv(t, nomadtest.Options{Driver: r})
	b := e.backend()
	ctx := ctxT(t)
	s := spec(dispatch.ModePlan, "close")
	if _, err := b.Submit(ctx, s); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := b.Wait(ctx, s.Order.TaskID, func(dispatch.Progress) {})
		errc <- err
	}()
	waitFor(t, "the shared stream", func() bool { return b.Connects() == 1 })
	b.Close()
	if err := <-errc; err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("Wait after Close = %v", err)
	}
	waitFor(t, "the stream to close", func() bool { return e.fake.OpenEventStreams() == 0 })
	close(r.hold)
}
