package cilog

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// BenchmarkCILogTail reads an Actions job's log of 4 MiB (a long test
// step whose last lines fail) for the fix run's tail, beside the floor of
// reading the same log line by line and doing nothing with it, alternately:
// the time per log (ms-tail, ms-floor, x-floor) and the bytes the fix run
// is given of it (tail-bytes, log-bytes), with the load average.
//
//	go test -run '^$' -bench CILogTail -benchtime 20x ./handlers/
func BenchmarkCILogTail(b *testing.B) {
	var sb strings.Builder
	stamp := "2026-11-27T10:00:00.1234567Z "
	sb.WriteString(stamp + "##[group]Run actions/checkout@v4\n")
	sb.WriteString(stamp + "##[group]Run go test ./...\n")
	for i := 0; sb.Len() < 4<<20; i++ {
		fmt.Fprintf(&sb, "%s=== RUN   TestCase%d\n%s--- PASS: TestCase%d (0.01s)\n", stamp, i, stamp, i)
	}
	sb.WriteString(stamp + "--- FAIL: TestGreeting (0.00s)\n" + stamp + "    greet_test.go:12: want hello, got hullo\n")
	sb.WriteString(stamp + "##[error]Process completed with exit code 1.\n" + stamp + "Post job cleanup.\n")
	log := sb.String()
	const bound = 8 << 10
	var tailTime, floorTime time.Duration
	var tail string
	var size int64
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		t, n, err := Tail(strings.NewReader(log), bound)
		tailTime += time.Since(start)
		if err != nil || !strings.Contains(t, "want hello, got hullo") {
			b.Fatalf("tail %q, %v", t, err)
		}
		tail, size = t, n
		start = time.Now()
		sc := bufio.NewScanner(strings.NewReader(log))
		lines := 0
		for sc.Scan() {
			lines++
		}
		floorTime += time.Since(start)
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return d.Seconds() * 1000 / float64(b.N) }
	b.ReportMetric(ms(tailTime), "ms-tail")
	b.ReportMetric(ms(floorTime), "ms-floor")
	b.ReportMetric(tailTime.Seconds()/floorTime.Seconds(), "x-floor")
	b.ReportMetric(float64(len(tail)), "tail-bytes")
	b.ReportMetric(float64(size), "log-bytes")
	load, _ := os.ReadFile("/proc/loadavg")
	b.Logf("load average %s", strings.TrimSpace(string(load)))
}
