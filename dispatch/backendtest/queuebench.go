package backendtest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// QueuedRuns is how many runs wait in BenchSubmission's full queue.
const QueuedRuns = 1000

// BenchSubmission measures what the bot does when a run is asked for under
// caps (dispatch.SubmitQueued: keep the request, enqueue, read the live
// runs, admit, answer with the place) against a queue of QueuedRuns
// waiting runs, and, interleaved with it in the same run, against an empty
// queue: the floor. full and empty are two backends with separate state
// that newBackend made. It reports the p99 of each in ms and their ratio.
func BenchSubmission(b *testing.B, full, empty dispatch.QueueBackend) {
	ctx := context.Background()
	caps := dispatch.Caps{Global: 2}
	now := time.Now()
	// Two claimed slots fill the cap, so every submission waits and the
	// full queue stays full.
	fill := func(q dispatch.QueueBackend, waiting int) {
		err := q.UpdateQueue(ctx, func([]dispatch.QueueEntry) ([]dispatch.QueueEntry, error) {
			out := []dispatch.QueueEntry{benchEntry(-1, now), benchEntry(-2, now)}
			out[0].ClaimedAt, out[1].ClaimedAt = now.UnixMilli(), now.UnixMilli()
			for n := range waiting {
				out = append(out, benchEntry(n, now))
			}
			return out, nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	fill(full, QueuedRuns)
	fill(empty, 0)
	request := []byte(`{"task_id":"x","repo":"bench-org/repository-7","number":7,"mode":"plan","trigger":"delivery-0123456789"}`)
	submit := func(q dispatch.QueueBackend, i int) time.Duration {
		e := benchEntry(1_000_000+i, now)
		start := time.Now()
		s, err := dispatch.SubmitQueued(ctx, q, e, request, caps, time.Now())
		d := time.Since(start)
		if err != nil || s.Self || s.Place == 0 {
			b.Fatalf("submission = %+v, %v; want it queued", s, err)
		}
		// Unmeasured: take it out again so the queue keeps its length.
		if _, _, err := dispatch.Dequeue(ctx, q, e.TaskID); err != nil {
			b.Fatal(err)
		}
		if err := q.DropQueued(ctx, e.TaskID); err != nil {
			b.Fatal(err)
		}
		return d
	}
	var fullTimes, floorTimes []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		floorTimes = append(floorTimes, submit(empty, 2*i))
		fullTimes = append(fullTimes, submit(full, 2*i+1))
	}
	b.StopTimer()
	p99, floor := percentile(fullTimes, 0.99), percentile(floorTimes, 0.99)
	b.ReportMetric(ms(p99), "p99-ms")
	b.ReportMetric(ms(floor), "floor-p99-ms")
	if floor > 0 {
		b.ReportMetric(float64(p99)/float64(floor), "ratio")
	}
	b.ReportMetric(ms(percentile(fullTimes, 0.5)), "p50-ms")
	b.Logf("submission with %d queued: p99 %.2f ms (p50 %.2f); empty queue (floor) p99 %.2f ms (p50 %.2f); ratio %.2f; %d samples each",
		QueuedRuns, ms(p99), ms(percentile(fullTimes, 0.5)), ms(floor), ms(percentile(floorTimes, 0.5)), float64(p99)/float64(max(floor, 1)), len(fullTimes))
}

func benchEntry(n int, now time.Time) dispatch.QueueEntry {
	return dispatch.QueueEntry{TaskID: fmt.Sprintf("T-%08X", uint32(n)*2654435761), Repo: fmt.Sprintf("bench-org/repository-%d", (n+50)%50),
		Number: 1000 + n, InstallationID: 40_000_000 + int64((n+5)%5), EnqueuedAt: now.UnixMilli() + int64(n)}
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
