package sandboxinit

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// steps times the start-up steps, so that where a slow start spends its
// time is one log line ("start steps") rather than a guess. Steps run
// concurrently; each is recorded with its offset from the init's start.
type steps struct {
	origin time.Time
	mu     sync.Mutex
	done   []stepTime
}

type stepTime struct {
	name        string
	start, took time.Duration
	failed      bool
	note        string // qualifies a step recorded after the start
}

func newSteps(origin time.Time) *steps { return &steps{origin: origin} }

// do runs f as the step name and records how long it took. A nil steps
// (a sandbox built by a test) only runs f.
func (t *steps) do(name string, f func() error) error {
	if t == nil {
		return f()
	}
	start := time.Now()
	err := f()
	t.mu.Lock()
	t.done = append(t.done, stepTime{name: name, start: start.Sub(t.origin), took: time.Since(start), failed: err != nil})
	t.mu.Unlock()
	return err
}

// parallel runs the named steps at once under a context that ends when
// the first of them fails, and returns every failure.
func (t *steps) parallel(ctx context.Context, fns map[string]func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, name := range sortedNames(fns) {
		wg.Add(1)
		go func(name string, f func(context.Context) error) {
			defer wg.Done()
			if err := t.do(name, func() error { return f(ctx) }); err != nil {
				cancel()
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}(name, fns[name])
	}
	wg.Wait()
	// A step stopped by another's failure says only "context canceled";
	// the failure that stopped it is the one to report.
	var real []error
	for _, err := range errs {
		if !errors.Is(err, context.Canceled) {
			real = append(real, err)
		}
	}
	if len(real) == 0 && len(errs) > 0 {
		real = errs
	}
	return errors.Join(real...)
}

// String lists the steps by start: "name@start+took", in milliseconds.
func (t *steps) String() string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	done := append([]stepTime(nil), t.done...)
	t.mu.Unlock()
	sort.SliceStable(done, func(i, j int) bool { return done[i].start < done[j].start })
	parts := make([]string, 0, len(done))
	for _, s := range done {
		p := fmt.Sprintf("%s@%d+%dms", s.name, s.start.Milliseconds(), s.took.Milliseconds())
		if s.failed {
			p += "(failed)"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, " ")
}
