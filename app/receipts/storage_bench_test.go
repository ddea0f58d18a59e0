package receipts

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// BenchmarkTranscriptStorage measures what keeping transcripts costs: the
// bytes a line takes in each database (SQLite's file after a checkpoint;
// PostgreSQL's tables and indexes), beside the floor of the line's own JSON,
// and the time to keep a batch of lines as a run's follower does, over 200
// runs of a typical mix (stages, tool calls with their arguments, the
// agent's text, a check's output).
//
//	go test -run '^$' -bench TranscriptStorage -benchtime 1x -v ./app/receipts
func BenchmarkTranscriptStorage(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) {
		dir := b.TempDir()
		s, err := OpenSQLite(dir)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		size := func() int64 {
			if _, err := s.(*sqlStore).db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
				b.Fatal(err)
			}
			var n int64
			for _, f := range []string{FileName, FileName + "-wal"} {
				if fi, err := os.Stat(filepath.Join(dir, f)); err == nil {
					n += fi.Size()
				}
			}
			return n
		}
		benchStorage(b, s, size)
	})
	b.Run("postgres", func(b *testing.B) {
		s, err := OpenPostgres(context.Background(), testenv.Postgres(b))
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		size := func() int64 {
			var n int64
			if err := s.(*sqlStore).db.QueryRow(`SELECT pg_total_relation_size('transcripts') + pg_total_relation_size('transcript_lines')`).Scan(&n); err != nil {
				b.Fatal(err)
			}
			return n
		}
		benchStorage(b, s, size)
	})
}

// typicalRun is a run's lines as the runner writes them: its stages, the
// agent's tool calls (arguments shortened to 200 bytes), its text (1,200
// bytes at most) and the checks' output tails.
func typicalRun(task string) []Line {
	var lines []Line
	add := func(v map[string]any) {
		v["seq"], v["t"], v["tu"] = len(lines)+1, time.Now().UnixMilli(), time.Now().UnixMicro()
		data, _ := json.Marshal(v)
		lines = append(lines, Line{Seq: len(lines) + 1, Data: data})
	}
	for _, st := range []string{"sandbox", "clone", "setup"} {
		add(map[string]any{"stage": st, "message": st + " done in 0.4 s"})
	}
	for i := range 30 {
		add(map[string]any{"stage": "agent", "kind": "tool", "tool": "read", "step": i + 1, "tool_calls": i + 1, "tokens": 900 * (i + 1), "cost_usd": 0.004 * float64(i+1),
			"message": "tool read", "detail": fmt.Sprintf(`{"filePath":"internal/server/handlers_%d.go","offset":%d,"limit":200}`, i, i*40)})
		if i%4 == 3 {
			add(map[string]any{"stage": "agent", "kind": "text", "step": i + 1, "message": "text",
				"detail": strings.Repeat("The handler reads the config once and keeps it; the cache needs the same. ", 8)})
		}
	}
	for _, c := range []string{"test", "lint"} {
		add(map[string]any{"stage": "validate", "kind": "check", "message": c + " passed",
			"detail": strings.Repeat("ok  \tgithub.com/example/project/internal/server\t0.412s\n", 12)})
	}
	for _, st := range []string{"push", "done"} {
		add(map[string]any{"stage": st, "message": st + " " + task})
	}
	return lines
}

func benchStorage(b *testing.B, s Store, size func() int64) {
	ctx := context.Background()
	const runs = 200
	before := size()
	var lines, raw int64
	var took time.Duration
	load := testenv.LoadAverage()
	for i := range runs {
		task := fmt.Sprintf("T-%08X", 0x20000000+i)
		if err := s.Begin(ctx, Head{TaskID: task, Repo: "octo/alpha", RepoID: 101, InstallationID: 1, Number: i, Mode: "execute", Title: "Cache the client's configuration"}); err != nil {
			b.Fatal(err)
		}
		run := typicalRun(task)
		// The follower's writer takes what arrived meanwhile: batches of
		// a few lines.
		for j := 0; j < len(run); j += 5 {
			batch := run[j:min(j+5, len(run))]
			start := time.Now()
			if _, err := s.Append(ctx, task, batch); err != nil {
				b.Fatal(err)
			}
			took += time.Since(start)
		}
		if err := s.Finish(ctx, task); err != nil {
			b.Fatal(err)
		}
		for _, l := range run {
			raw += int64(len(l.Data))
		}
		lines += int64(len(run))
	}
	stored := size() - before
	perRun := float64(lines) / runs
	b.ReportMetric(float64(stored)/float64(lines), "stored-B/line")
	b.ReportMetric(float64(raw)/float64(lines), "json-B/line")
	b.ReportMetric(float64(stored)/float64(raw), "x-json")
	b.ReportMetric(float64(stored)/runs, "stored-B/run")
	b.ReportMetric(float64(took.Microseconds())/float64(lines), "write-µs/line")
	b.ReportMetric(0, "ns/op")
	b.Logf("%d runs of %.0f lines: %.0f bytes a line stored (%.2f× its JSON of %.0f bytes), %.1f KiB a run; %.0f µs a line to keep in batches of 5; load average %s → %s",
		runs, perRun, float64(stored)/float64(lines), float64(stored)/float64(raw), float64(raw)/float64(lines), float64(stored)/runs/1024,
		float64(took.Microseconds())/float64(lines), load, testenv.LoadAverage())
}
