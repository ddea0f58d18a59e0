package process_test

import (
	"io"
	"testing"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch/backendtest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/process"
)

// BenchmarkQueueSubmission: the file queue of the backends on one machine
// (process and docker share dispatch/filequeue), with the process
// backend's own List reading the live runs.
func BenchmarkQueueSubmission(b *testing.B) {
	newBackend := func() *process.Backend {
		pb, err := process.New(process.Options{Runner: "true", DataDir: b.TempDir(), Warnings: io.Discard, Logger: zerolog.Nop()})
		if err != nil {
			b.Fatal(err)
		}
		return pb
	}
	backendtest.BenchSubmission(b, newBackend(), newBackend())
}
