package nomad_test

import (
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch/backendtest"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad/nomadtest"
)

// BenchmarkQueueSubmission: the queue in Nomad Variables, through the real
// api client against the fake agent (one agent for the full queue and one
// for the empty one, so their Variables stay apart).
func BenchmarkQueueSubmission(b *testing.B) {
	newBackend := func() *nomad.Backend {
		fake, err := nomadtest.New(nomadtest.Options{Namespaces: []string{nomad.DefaultNamespace}})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(fake.Close)
		c, err := fake.Client("")
		if err != nil {
			b.Fatal(err)
		}
		nb, err := nomad.New(nomad.Options{Client: c, Image: testImage})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { nb.Close() })
		return nb
	}
	backendtest.BenchSubmission(b, newBackend(), newBackend())
}
