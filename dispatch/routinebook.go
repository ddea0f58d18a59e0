package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// RoutineBooks keep, per repository, what its routines claimed: the tick
// each ran last, the issue it opened, what came of it. They live in the
// backend beside the lock and the queue, shared by every replica, so a
// tick runs once across replicas and restarts. Implementations:
// dispatch/filequeue (docker, process: one file per repository under an
// flock), Nomad Variables with check-and-set (dispatch/nomad), memory.
type RoutineBooks interface {
	// UpdateRoutineBook replaces repo's document by what change makes of
	// it (nil: leave it), atomically with respect to every replica's
	// update: on a conflicting write it reads again and calls change
	// again, so change must have no effect besides its result. Repository
	// names are case-insensitive.
	UpdateRoutineBook(ctx context.Context, repo string, change func(cur []byte) ([]byte, error)) error
	// ReadRoutineBook returns repo's document as last written (nil when
	// none).
	ReadRoutineBook(ctx context.Context, repo string) ([]byte, error)
}

// RoutineState is what the book keeps of one routine.
type RoutineState struct {
	// Tick is the last tick claimed: the wall-clock time in the routine's
	// zone ("2006-01-02T15:04"), which is what makes a time repeated by a
	// daylight-saving change fire once. A routine the bot first sees gets
	// the current one without running (its baseline).
	Tick string `json:"tick,omitempty"`
	// At is when the last claim was taken (Unix milliseconds), Holder by
	// which replica.
	At     int64  `json:"at,omitempty"`
	Holder string `json:"holder,omitempty"`
	// Issue is the last issue the routine opened; Result what the last
	// claim came to ("opened #12", "skipped: #12 is still open", an
	// error).
	Issue  int    `json:"issue,omitempty"`
	Result string `json:"result,omitempty"`
	// SkipNoted is the issue a skip was said on, so it is said once.
	SkipNoted int `json:"skip_noted,omitempty"`
	// Busy is when the last tick's claim began to be acted on (Unix
	// milliseconds), until its result is recorded: a tick due meanwhile
	// is skipped, so two ticks never both decide on the last issue.
	Busy int64 `json:"busy,omitempty"`
	// Triggers are the last one-off claims (a /run comment, a failing
	// head of the default branch), newest last, at most maxTriggers.
	Triggers []string `json:"triggers,omitempty"`
	// Failure is the failing checks an on: main_ci_failed issue was
	// opened for (their names, sorted), while that issue is open.
	Failure string `json:"failure,omitempty"`
}

// RoutineBook is a repository's routines by name.
type RoutineBook map[string]RoutineState

const maxTriggers = 50

// routineBookLimit bounds the document: a repository declaring hundreds
// of routines still fits a Nomad Variable (64 KiB).
const routineBookLimit = 48 << 10

// RoutineBookKey is how a repository's name is kept (GitHub's names are
// case-insensitive).
func RoutineBookKey(repo string) string { return strings.ToLower(repo) }

// ErrClaimed is a tick or trigger another replica (or an earlier run of
// this one) claimed already.
var ErrClaimed = errors.New("claimed already")

// ChangeRoutine applies change to routine name's state in repo's book,
// atomically across replicas; change returning ErrClaimed (or any error)
// writes nothing and is returned.
func ChangeRoutine(ctx context.Context, books RoutineBooks, repo, name string, change func(*RoutineState) error) (RoutineState, error) {
	var out RoutineState
	err := books.UpdateRoutineBook(ctx, RoutineBookKey(repo), func(cur []byte) ([]byte, error) {
		book, err := parseRoutineBook(repo, cur)
		if err != nil {
			return nil, err
		}
		st := book[name]
		if err := change(&st); err != nil {
			return nil, err
		}
		book[name] = st
		out = st
		data, err := json.Marshal(book)
		if err != nil {
			return nil, err
		}
		if len(data) > routineBookLimit {
			return nil, fmt.Errorf("routine book of %s: %d bytes, over %d: too many routines", repo, len(data), routineBookLimit)
		}
		return data, nil
	})
	return out, err
}

// ReadRoutines returns repo's book (empty when it has none).
func ReadRoutines(ctx context.Context, books RoutineBooks, repo string) (RoutineBook, error) {
	data, err := books.ReadRoutineBook(ctx, RoutineBookKey(repo))
	if err != nil {
		return RoutineBook{}, err
	}
	return parseRoutineBook(repo, data)
}

// parseRoutineBook decodes repo's book as stored; an empty one has no
// routines yet.
func parseRoutineBook(repo string, data []byte) (RoutineBook, error) {
	book := RoutineBook{}
	if len(data) == 0 {
		return book, nil
	}
	if err := json.Unmarshal(data, &book); err != nil {
		return nil, fmt.Errorf("routine book of %s: %w", repo, err)
	}
	return book, nil
}

// BusyFor is how long a claim being acted on keeps the next ticks off;
// past it the replica acting on it is taken to have died.
const BusyFor = 10 * time.Minute

// ErrBusy is a tick claimed while the last one is still being acted on:
// it is recorded as skipped, and nothing is to be done.
var ErrBusy = errors.New("the last tick is still being acted on")

// ClaimTick takes tick for holder unless the routine's last claimed tick
// is at or after it (ErrClaimed). Ticks compare as their wall-clock text.
// A tick claimed while the last one is still being acted on is taken and
// recorded as skipped (ErrBusy); otherwise the claim is marked busy until
// its result is recorded (Done).
func ClaimTick(ctx context.Context, books RoutineBooks, repo, name, tick, holder string, now time.Time) (RoutineState, error) {
	busy := false
	st, err := ChangeRoutine(ctx, books, repo, name, func(st *RoutineState) error {
		if st.Tick >= tick {
			return ErrClaimed
		}
		st.Tick, st.At, st.Holder = tick, now.UnixMilli(), holder
		busy = st.Busy != 0 && now.Sub(time.UnixMilli(st.Busy)) < BusyFor
		if busy {
			st.Result = "skipped: the last tick was still being acted on"
		} else {
			st.Busy = now.UnixMilli()
		}
		return nil
	})
	if err == nil && busy {
		err = ErrBusy
	}
	return st, err
}

// Done records what a claim came to and ends its busy mark.
func Done(ctx context.Context, books RoutineBooks, repo, name, result string, also func(*RoutineState)) error {
	_, err := ChangeRoutine(ctx, books, repo, name, func(st *RoutineState) error {
		st.Result, st.Busy = result, 0
		if also != nil {
			also(st)
		}
		return nil
	})
	return err
}

// ClaimTrigger takes a one-off trigger (a /run comment's id, a failing
// head) for holder, once: a trigger among the last ones is ErrClaimed.
func ClaimTrigger(ctx context.Context, books RoutineBooks, repo, name, trigger, holder string, now time.Time) (RoutineState, error) {
	return ChangeRoutine(ctx, books, repo, name, func(st *RoutineState) error {
		if slices.Contains(st.Triggers, trigger) {
			return ErrClaimed
		}
		st.Triggers = append(st.Triggers, trigger)
		if len(st.Triggers) > maxTriggers {
			st.Triggers = st.Triggers[len(st.Triggers)-maxTriggers:]
		}
		st.At, st.Holder = now.UnixMilli(), holder
		return nil
	})
}
