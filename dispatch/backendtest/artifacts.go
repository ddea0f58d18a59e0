package backendtest

import (
	"errors"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// testArtifacts holds a backend that hands over task artifacts to the
// contract the bot relies on: none while the run goes on (the sandbox may
// still be writing them), no error once it has ended (a run that left no
// artifacts directory has none), ErrNotFound for an unknown task.
func testArtifacts(t *testing.T, c *check) {
	reader, ok := c.b.(dispatch.ArtifactReader)
	if !ok {
		t.Skipf("the %s backend does not hand over artifacts", c.b.Name())
	}
	caps := dispatch.DefaultArtifactCaps()
	id := c.submit(t, Hold).Meta.TaskID
	c.started(t, id)
	if _, err := reader.Artifacts(c.ctx, id, caps); !errors.Is(err, dispatch.ErrRunning) {
		t.Errorf("Artifacts while running = %v, want ErrRunning", err)
	}
	c.Release(id)
	c.wait(t, id)
	if a, err := reader.Artifacts(c.ctx, id, caps); err != nil || a == nil {
		t.Errorf("Artifacts after the end = %+v, %v; want no error", a, err)
	}
	if _, err := reader.Artifacts(c.ctx, "T-0000ABCD", caps); !errors.Is(err, dispatch.ErrNotFound) {
		t.Errorf("Artifacts of an unknown task = %v, want ErrNotFound", err)
	}
}
