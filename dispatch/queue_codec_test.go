package dispatch_test

import (
	"slices"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

func TestQueueCodecRoundTrip(t *testing.T) {
	t.Parallel()
	q := []dispatch.QueueEntry{
		{TaskID: "T-0A1B2C3D", Repo: "acme/web", Number: 42, InstallationID: 7, EnqueuedAt: 1_732_450_000_123},
		{TaskID: "T-FFFFFFFF", Repo: "Acme/Web.js", Number: 1, InstallationID: 1 << 40, EnqueuedAt: 1, ClaimedAt: 2},
	}
	data, err := dispatch.EncodeQueue(q)
	if err != nil {
		t.Fatal(err)
	}
	got, err := dispatch.DecodeQueue(data)
	if err != nil || !slices.Equal(got, q) {
		t.Fatalf("DecodeQueue(EncodeQueue(q)) = %+v, %v; want %+v", got, err, q)
	}
	if got, err := dispatch.DecodeQueue(nil); err != nil || len(got) != 0 {
		t.Errorf("DecodeQueue(nil) = %v, %v", got, err)
	}
}

func TestQueueCodecRefuses(t *testing.T) {
	t.Parallel()
	if _, err := dispatch.EncodeQueue([]dispatch.QueueEntry{{TaskID: "T-1", Repo: "a/b\tc"}}); err == nil {
		t.Error("a tab in a repository name was encoded")
	}
	if _, err := dispatch.EncodeQueue([]dispatch.QueueEntry{{Repo: "a/b"}}); err == nil {
		t.Error("an entry without a task id was encoded")
	}
	for _, bad := range []string{"[]", "sandbox-bot-queue/1\nT-1\ta/b\t1\t2\n", "sandbox-bot-queue/1\nT-1\ta/b\tx\t2\t3\t4\n"} {
		if _, err := dispatch.DecodeQueue([]byte(bad)); err == nil {
			t.Errorf("DecodeQueue(%q) succeeded", bad)
		}
	}
}
