package schedule_test

import (
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/handlers/schedule"
)

// fired steps a clock from start to end the way the scheduler does
// (sleep until NextWake, run what is Due) and returns the ticks run.
func fired(t *testing.T, spec, zone string, start, end time.Time) []string {
	t.Helper()
	c, err := sandboxcfg.Cron(spec)
	if err != nil {
		t.Fatal(err)
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	s := schedule.New(c, loc)
	last := s.Now(start)
	var out []string
	for now, wakes := start, 0; now.Before(end); wakes++ {
		if wakes > 100_000 {
			t.Fatal("the scheduler woke more than 100000 times")
		}
		tick, ok, err := s.Due(last, now)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			out = append(out, tick)
			last = tick
		}
		next, err := s.NextWake(last, now)
		if err != nil || !next.After(now) {
			t.Fatalf("NextWake(%s, %s) = %s, %v: not after now", last, now, next, err)
		}
		now = next
	}
	return out
}

func count(ticks []string, prefix string) int {
	n := 0
	for _, tk := range ticks {
		if len(tk) >= len(prefix) && tk[:len(prefix)] == prefix {
			n++
		}
	}
	return n
}

// Across New York's spring-forward (2:00 EST becomes 3:00 EDT on 8 March
// 2026) and fall-back (2:00 EDT becomes 1:00 EST on 1 November), a daily
// 2:30 and a daily 1:30 fire once a day: the skipped 2:30 when the clock
// jumps past it, the repeated 1:30 once.
func TestDaylightSavingChangesFireOnce(t *testing.T) {
	ny, _ := time.LoadLocation("America/New_York")
	for _, tc := range []struct {
		spec       string
		start, end time.Time
		day        string
	}{
		{"30 2 * * *", time.Date(2026, 3, 6, 12, 0, 0, 0, ny), time.Date(2026, 3, 10, 12, 0, 0, 0, ny), "2026-03-08"},
		{"30 1 * * *", time.Date(2026, 10, 30, 12, 0, 0, 0, ny), time.Date(2026, 11, 3, 12, 0, 0, 0, ny), "2026-11-01"},
		{"30 1 * * *", time.Date(2026, 3, 6, 12, 0, 0, 0, ny), time.Date(2026, 3, 10, 12, 0, 0, 0, ny), "2026-03-08"},
		{"30 2 * * *", time.Date(2026, 10, 30, 12, 0, 0, 0, ny), time.Date(2026, 11, 3, 12, 0, 0, 0, ny), "2026-11-01"},
	} {
		got := fired(t, tc.spec, "America/New_York", tc.start, tc.end)
		if len(got) != 4 || count(got, tc.day) != 1 {
			t.Errorf("%s from %s: fired %v; want one a day, once on %s", tc.spec, tc.start, got, tc.day)
		}
	}
	// Every half hour on Berlin's fall-back day (27 October 2026 is after
	// it; 25 October 2026 3:00 CEST becomes 2:00 CET): the repeated
	// 2:00-3:00 does not fire again, so 48 wall-clock times, 48 ticks.
	berlin, _ := time.LoadLocation("Europe/Berlin")
	got := fired(t, "*/30 * * * *", "Europe/Berlin", time.Date(2026, 10, 24, 23, 59, 0, 0, berlin), time.Date(2026, 10, 25, 23, 59, 0, 0, berlin))
	if len(got) != 48 || count(got, "2026-10-25T02:") != 2 {
		t.Errorf("every half hour across Berlin's fall-back: %d ticks, %d in the 2 o'clock hour; want 48 and 2", len(got), count(got, "2026-10-25T02:"))
	}
	// And on its spring-forward (29 March 2026, 2:00 CET becomes 3:00
	// CEST): 2:00 and 2:30 do not exist; the day has 23 hours and 46 half
	// hours, 1:30 CET then 3:00 CEST half an hour later.
	got = fired(t, "*/30 * * * *", "Europe/Berlin", time.Date(2026, 3, 28, 23, 59, 0, 0, berlin), time.Date(2026, 3, 29, 23, 59, 0, 0, berlin))
	if count(got, "2026-03-29T02:") != 0 || len(got) != 46 || count(got, "2026-03-29T03:00") != 1 {
		t.Errorf("every half hour across Berlin's spring-forward: %v; want 46 ticks, 3:00 once, none in the skipped hour", got)
	}
}

// After a stop across several ticks the latest one is due, once.
func TestCatchUpIsOneTick(t *testing.T) {
	c, _ := sandboxcfg.Cron("* * * * *")
	s := schedule.New(c, time.UTC)
	now := time.Date(2026, 11, 29, 12, 7, 30, 0, time.UTC)
	tick, ok, err := s.Due("2026-11-29T12:03", now)
	if err != nil || !ok || tick != "2026-11-29T12:07" {
		t.Errorf("Due after 4 missed ticks = %q, %v, %v; want the latest, 12:07", tick, ok, err)
	}
	if _, ok, _ := s.Due(tick, now); ok {
		t.Error("the same tick was due twice")
	}
	wake, _ := s.NextWake(tick, now)
	if want := time.Date(2026, 11, 29, 12, 8, 0, 0, time.UTC); !wake.Equal(want) {
		t.Errorf("NextWake = %s, want %s", wake, want)
	}
	// A year's stop still finds the latest tick without stepping through
	// half a million.
	tick, ok, _ = s.Due("2024-01-01T00:00", now)
	if !ok || tick != "2026-11-29T12:07" {
		t.Errorf("Due after a long stop = %q, %v", tick, ok)
	}
}
