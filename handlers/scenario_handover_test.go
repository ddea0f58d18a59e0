package handlers_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// capOne is the server configuration of the hand-over scenarios.
var capOne = map[string]string{"SANDBOX_MAX_RUNS": "1"}

// The steps of a queued run's hand-over from the queue to its sandbox at
// which the hand-over tests stop the bot (as SIGTERM does: what the bot
// does after the step runs on a cancelled context).
const (
	stepDequeued   = "the run before it left the queue"
	stepClaimed    = "its slot was claimed"
	stepSubmitting = "its submission began"
	stepSubmitted  = "it was submitted"
	stepDropped    = "its saved request was dropped"
)

// stopAt is a backend that stops the bot right after one step of one
// issue's hand-over, once: the step is done, then the bot is stopped, and
// the call returns only when the bot's context is cancelled, so what
// follows the step meets the stop. It records every run it saw created,
// and the live runs counted right after each.
type stopAt struct {
	dispatch.Backend
	step        string
	issue, prev int
	stop        func()
	// going counts the runs going at once (goingRuns).
	going func(ctx context.Context) []int

	mu      sync.Mutex
	fired   bool
	created []int // issues, in the order their runs were created
	overCap []string
}

func (s *stopAt) fire(ctx context.Context, step string, n int) bool {
	s.mu.Lock()
	if s.fired || step != s.step || n != s.issue {
		s.mu.Unlock()
		return false
	}
	s.fired = true
	s.mu.Unlock()
	s.stop()
	select {
	case <-ctx.Done():
	case <-time.After(30 * time.Second):
	}
	return true
}

func (s *stopAt) UpdateQueue(ctx context.Context, change func([]dispatch.QueueEntry) ([]dispatch.QueueEntry, error)) error {
	var before []dispatch.QueueEntry
	err := s.Backend.UpdateQueue(ctx, func(cur []dispatch.QueueEntry) ([]dispatch.QueueEntry, error) {
		before = cur
		return change(cur)
	})
	if err != nil {
		return err
	}
	after, _ := s.Backend.ReadQueue(ctx)
	has := func(q []dispatch.QueueEntry, n int, claimed bool) bool {
		return slices.ContainsFunc(q, func(e dispatch.QueueEntry) bool { return e.Number == n && (!claimed || !e.Waiting()) })
	}
	if has(before, s.prev, false) && !has(after, s.prev, false) {
		s.fire(ctx, stepDequeued, s.issue)
	}
	if !has(before, s.issue, true) && has(after, s.issue, true) {
		s.fire(ctx, stepClaimed, s.issue)
	}
	return nil
}

func (s *stopAt) Submit(ctx context.Context, spec dispatch.RunSpec) (bool, error) {
	s.fire(ctx, stepSubmitting, spec.Meta.Number)
	created, err := s.Backend.Submit(ctx, spec)
	if created {
		going := s.going(context.WithoutCancel(ctx))
		s.mu.Lock()
		s.created = append(s.created, spec.Meta.Number)
		if len(going) > 1 {
			s.overCap = append(s.overCap, fmt.Sprintf("runs of %v going once #%d was submitted", going, spec.Meta.Number))
		}
		s.mu.Unlock()
	}
	if err == nil {
		s.fire(ctx, stepSubmitted, spec.Meta.Number)
	}
	return created, err
}

func (s *stopAt) DropQueued(ctx context.Context, taskID string) error {
	err := s.Backend.DropQueued(ctx, taskID)
	if runs, lerr := s.Backend.List(context.WithoutCancel(ctx)); lerr == nil {
		for _, r := range runs {
			if r.Meta.TaskID == taskID {
				s.fire(ctx, stepDropped, r.Meta.Number)
			}
		}
	}
	return err
}

// goingRuns are the issues whose runs go: live on the backend with no
// plan posted yet. A run whose plan is posted has ended (the bot posts
// what it read once the sandbox ended), though the docker backend counts
// its container as running while the bot removes it.
func goingRuns(ctx context.Context, h *harness, b dispatch.Backend) []int {
	live, err := dispatch.LiveRuns(ctx, b)
	if err != nil {
		h.t.Error(err)
	}
	var out []int
	for _, m := range live {
		if countMarked(h, m.Number, "plan") == 0 {
			out = append(out, m.Number)
		}
	}
	return out
}

// handoverBackend is a backend for one hand-over test and the way to end
// its runs with a plan.
type handoverBackend struct {
	backend dispatch.Backend
	finish  func(t *testing.T, taskID string)
	// env is the server configuration the backend needs beside capOne.
	env map[string]string
}

// runHandover labels four issues under a cap of one, stops the bot at
// step of the second one's hand-over, starts it again on the same
// backend, and checks every run got its plan once, in label order, and
// that no run ever went with another live.
func runHandover(t *testing.T, step string, newBackend func(t *testing.T) handoverBackend) {
	h := newHarness(t, nil, nil)
	h.stop()
	hb := newBackend(t)
	stopped := make(chan struct{})
	s := &stopAt{Backend: hb.backend, step: step, stop: func() {
		go func() { h.stop(); close(stopped) }()
	}, going: func(ctx context.Context) []int { return goingRuns(ctx, h, hb.backend) }}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("bot log:\n%s", h.logs.String())
		}
	})
	issues := newIssues(h, 4)
	s.prev, s.issue = issues[0], issues[1]
	env := maps.Clone(capOne)
	maps.Copy(env, hb.env)
	h.startWith(s, env)
	labelInTurn(h, issues, func(i, n int) { h.label(n, writer, fmt.Sprintf("d-handover-%d-%d", i, time.Now().UnixNano())) })
	restarted := false
	// restart starts the bot again once the stop is done.
	restart := func() bool {
		select {
		case <-stopped:
		default:
			return false
		}
		if !restarted {
			restarted = true
			h.startWith(s, env)
		}
		return false
	}
	ctx := t.Context()
	var done []int
	for len(done) < len(issues) {
		var next dispatch.RunStatus
		h.gh.WaitFor(2*time.Minute, fmt.Sprintf("the run after those of %v", done), func() bool {
			restart()
			runs, err := hb.backend.List(ctx)
			if err != nil {
				return false
			}
			for _, r := range runs {
				if !r.State.Ended() && !slices.Contains(done, r.Meta.Number) {
					next = r
					return true
				}
			}
			return false
		})
		if going := goingRuns(ctx, h, hb.backend); len(going) > 1 {
			t.Fatalf("runs of %v going at once under a cap of 1", going)
		}
		n := next.Meta.Number
		done = append(done, n)
		hb.finish(t, next.Meta.TaskID)
		h.gh.WaitFor(2*time.Minute, fmt.Sprintf("the plan on #%d", n), func() bool {
			restart()
			return countMarked(h, n, "plan") > 0
		})
	}
	if !restarted {
		t.Fatalf("the bot was never stopped at %q", step)
	}
	h.idle()
	if !slices.Equal(done, issues) {
		t.Errorf("runs went in the order of %v, want the label order %v", done, issues)
	}
	s.mu.Lock()
	if !slices.Equal(s.created, issues) {
		t.Errorf("runs created for %v, want one each for %v in order", s.created, issues)
	}
	for _, o := range s.overCap {
		t.Error(o)
	}
	s.mu.Unlock()
	for _, n := range issues {
		if c := countMarked(h, n, "plan"); c != 1 {
			t.Errorf("#%d has %d plans, want 1", n, c)
		}
		if labelled(h, n, "agent:queued") || !labelled(h, n, "agent:awaiting-approval") {
			t.Errorf("#%d: labels %v, want agent:awaiting-approval", n, h.gh.Issue(testRepo, n).Labels)
		}
	}
	if q, err := hb.backend.ReadQueue(ctx); err != nil || len(q) != 0 {
		t.Errorf("the queue holds %+v (%v) once every run ended", q, err)
	}
}

var handoverSteps = []string{stepDequeued, stepClaimed, stepSubmitting, stepSubmitted, stepDropped}

// A bot stopped at any step of a queued run's hand-over loses nothing: on
// Nomad (the fake agent), with the queue in its Variables.
func TestQueueHandoverSurvivesStopOnNomadFake(t *testing.T) {
	t.Parallel()
	for _, step := range handoverSteps {
		t.Run(step, func(t *testing.T) {
			t.Parallel()
			runHandover(t, step, func(t *testing.T) handoverBackend {
				fake := newNomadFake(t)
				return handoverBackend{backend: nomadBackendOn(t, fake), finish: func(t *testing.T, taskID string) {
					ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
					defer cancel()
					finishOnFake(t, ctx, fake, taskID)
				}}
			})
		})
	}
}

// The same on the Docker backend with real containers: each sandbox waits
// until the test leaves its plan in its out directory.
func TestQueueHandoverSurvivesStopOnDocker(t *testing.T) {
	testenv.Long(t, "runs containers on the Docker engine")
	testenv.Docker(t)
	base := testenv.SandboxImage(t)
	image := "sandbox-test/handover:wait"
	dockerfile := "FROM " + base + "\nUSER 0\nENTRYPOINT [\"/bin/sh\", \"-c\", \"while [ ! -e /sandbox/out/result.json ]; do sleep 0.1; done\"]\n"
	build := exec.Command("docker", "build", "-q", "-t", image, "-")
	build.Stdin = strings.NewReader(dockerfile)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v\n%s", err, out)
	}
	for _, step := range handoverSteps {
		t.Run(step, func(t *testing.T) {
			runHandover(t, step, func(t *testing.T) handoverBackend {
				b := dockerBackendFor(t, image)
				return handoverBackend{backend: b, env: map[string]string{"SANDBOX_ISOLATION": "caps"}, finish: func(t *testing.T, taskID string) {
					out := filepath.Join(b.TaskDir(taskID), "out")
					if err := os.MkdirAll(out, 0o777); err != nil {
						t.Fatal(err)
					}
					if err := dispatch.WriteResult(out, planDone(taskID)); err != nil {
						t.Fatal(err)
					}
				}}
			})
		})
	}
}

// A queued run whose saved request is gone when its slot comes (a store
// wiped by hand, a request no longer readable) cannot start; its issue is
// told so, with agent:failed instead of agent:queued, and the slot goes to
// the run behind it.
func TestQueuedRunWithoutItsRequestTellsTheIssue(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, capOne)
	issues := newIssues(h, 3)
	labelInTurn(h, issues, func(i, n int) { h.label(n, writer, fmt.Sprintf("d-lostreq-%d", i)) })
	lost := h.backend.LockHolder(dispatch.LockKey(testRepo, issues[1]))
	if err := h.backend.DropQueued(t.Context(), lost); err != nil {
		t.Fatal(err)
	}
	first := h.backend.Specs()[0]
	h.backend.Finish(first.Order.TaskID, planDone(first.Order.TaskID))
	c := h.waitComment(issues[1], "the word that the queued run cannot start", func(c string) bool { return strings.Contains(c, "could not start") })
	if !strings.Contains(c, "plan run") || !strings.Contains(c, "/retry") {
		t.Errorf("the comment does not say the plan run failed to start, nor what to do:\n%s", c)
	}
	h.gh.WaitFor(10*time.Second, "agent:failed on #"+fmt.Sprint(issues[1]), func() bool {
		return labelled(h, issues[1], "agent:failed") && !labelled(h, issues[1], "agent:queued")
	})
	h.waitSubmitted(2)
	if got := submittedIssues(h); !slices.Equal(got, []int{issues[0], issues[2]}) {
		t.Errorf("runs of %v, want the first and the third", got)
	}
	h.released(issues[1])
}
