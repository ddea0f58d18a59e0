// Package schedule is the arithmetic of routines' ticks: when a five-field
// cron line in a time zone is next due, and which tick is due now. A tick
// is named by its wall-clock time in the routine's zone, and the cron
// line is read on the wall clock (robfig/cron in UTC, which has no
// daylight-saving changes), so a wall-clock time fires once: the hour a
// fall-back repeats does not fire again, and a time a spring-forward skips
// fires when the clock jumps past it.
package schedule

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
)

// TickLayout names a tick: the wall-clock minute in the routine's zone.
// Names sort as the ticks do.
const TickLayout = "2006-01-02T15:04"

// windows are where the latest due tick is looked for, nearest first, so
// a minutely routine after a year's stop steps through an hour of ticks,
// not half a million; past the last one a stop's ticks are not run.
var windows = []time.Duration{time.Hour, 25 * time.Hour, 32 * 24 * time.Hour, 400 * 24 * time.Hour}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Spec is a parsed schedule in its zone.
type Spec struct {
	cron cron.Schedule
	loc  *time.Location
}

// New is the schedule s (robfig's parse of the cron line) read in loc.
func New(s cron.Schedule, loc *time.Location) Spec { return Spec{cron: s, loc: loc} }

// Wall is t's wall-clock minute in the zone, as a time in UTC.
func (s Spec) Wall(t time.Time) time.Time {
	l := t.In(s.loc)
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), 0, 0, time.UTC)
}

// Tick is the name of the tick at wall-clock w.
func Tick(w time.Time) string { return w.Format(TickLayout) }

// Now is the name of the wall-clock minute of t: a new routine's baseline,
// after which its ticks run.
func (s Spec) Now(t time.Time) string { return Tick(s.Wall(t)) }

// Due is the latest tick after last and at or before now (wall clock),
// and whether there is one: after a stop across several ticks, only the
// latest runs.
func (s Spec) Due(last string, now time.Time) (string, bool, error) {
	lastW, err := time.Parse(TickLayout, last)
	if err != nil {
		return "", false, fmt.Errorf("tick %q: %w", last, err)
	}
	nowW := s.Wall(now)
	for _, back := range windows {
		from := later(lastW, nowW.Add(-back))
		n := s.cron.Next(from)
		if n.IsZero() || n.After(nowW) {
			if !from.After(lastW) {
				return "", false, nil // nothing since last
			}
			continue
		}
		for {
			next := s.cron.Next(n)
			if next.IsZero() || next.After(nowW) {
				return Tick(n), true, nil
			}
			n = next
		}
	}
	return "", false, nil
}

// NextWake is when to look again after last at now: the instant of the
// next wall-clock tick after both. A wall-clock time a spring-forward
// skips has no instant of its own; it is looked at the next minute, and
// runs once the clock is past it.
func (s Spec) NextWake(last string, now time.Time) (time.Time, error) {
	lastW, err := time.Parse(TickLayout, last)
	if err != nil {
		return time.Time{}, fmt.Errorf("tick %q: %w", last, err)
	}
	w := s.cron.Next(later(lastW, s.Wall(now)))
	if w.IsZero() {
		return time.Time{}, nil // never again (a 30 February)
	}
	at := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), 0, 0, s.loc)
	if !at.After(now) {
		at = now.Truncate(time.Minute).Add(time.Minute)
	}
	return at, nil
}
