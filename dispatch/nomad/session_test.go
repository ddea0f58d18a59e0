package nomad_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad/nomadtest"
)

// planWithSession runs a plan job whose "sandbox" leaves archive beside
// its receipt, and returns the backend, the fake and the task id.
func planWithSession(t *testing.T, trigger string, archive []byte) (*nomad.Backend, *nomadtest.Server, string) {
	t.Helper()
	driver := leaving(func(data, _ string) error {
		return os.WriteFile(filepath.Join(data, dispatch.SessionArchiveFile), archive, 0o644)
	})
	e := newEnv(t, nomadtest.Options{Driver: driver})
	b := e.backend()
	s := spec(dispatch.ModePlan, trigger)
	if _, err := b.Submit(ctxT(t), s); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Wait(ctxT(t), s.Order.TaskID, nil); err != nil {
		t.Fatal(err)
	}
	return b, e.fake, s.Order.TaskID
}

// The plan's session leaves the allocation for Variables (cut under
// Nomad's 64 KiB each), survives the job's cleanup, and comes back whole;
// a chunk changed in the store is refused.
func TestNomadKeepsThePlanSession(t *testing.T) {
	t.Parallel()
	archive := make([]byte, 150<<10) // four chunks
	rand.Read(archive)
	b, srv, task := planWithSession(t, "session", archive)
	ctx := ctxT(t)
	kept, err := b.KeepSession(ctx, task)
	if err != nil || !kept {
		t.Fatalf("KeepSession = %v, %v", kept, err)
	}
	if err := b.Cleanup(ctx, task); err != nil {
		t.Fatal(err)
	}
	got, err := b.KeptSession(ctx, task)
	if err != nil || !bytes.Equal(got, archive) {
		t.Fatalf("KeptSession: %d bytes, %v; want the %d bytes kept", len(got), err, len(archive))
	}
	paths := srv.Vars("default", nomad.SessionPrefix+task+"/")
	if len(paths) != 4 {
		t.Fatalf("chunks %v, want 4", paths)
	}
	v := srv.Var("default", paths[1])
	v.Items["data"] = "AAAA" + v.Items["data"][4:]
	c, err := srv.Client("")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Variables().Update(v, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := b.KeptSession(ctx, task); !errors.Is(err, dispatch.ErrBadSession) {
		t.Fatalf("a tampered chunk: %v, want ErrBadSession", err)
	}
}

// A session over what a job can carry is not kept, and the reason is what
// the execute run's receipt will show; a run without one keeps nothing.
func TestNomadSessionOverTheCapSaysWhy(t *testing.T) {
	t.Parallel()
	b, _, task := planWithSession(t, "big-session", make([]byte, nomad.MaxSessionBytes+1))
	ctx := ctxT(t)
	if kept, err := b.KeepSession(ctx, task); err != nil || kept {
		t.Fatalf("KeepSession = %v, %v; want not kept, no error", kept, err)
	}
	_, err := b.KeptSession(ctx, task)
	var notKept *dispatch.SessionNotKept
	if !errors.As(err, &notKept) || !errors.Is(err, dispatch.ErrNotFound) || !strings.Contains(notKept.Reason, "over the 512 KiB the Nomad backend carries") {
		t.Fatalf("KeptSession: %v", err)
	}
	if _, err := b.KeptSession(ctx, "T-0000FFFF"); !errors.Is(err, dispatch.ErrNotFound) {
		t.Fatalf("an unknown plan: %v", err)
	}
}
