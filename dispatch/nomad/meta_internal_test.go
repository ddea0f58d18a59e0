package nomad

import (
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// A run's metadata comes back whole from its job's meta: a bot that
// restarts finds its runs from the jobs alone, and the receipt it keeps
// names who asked for the run and its model.
func TestJobMetaKeepsEveryField(t *testing.T) {
	m := dispatch.Meta{TaskID: "T-0000ABCD", Mode: dispatch.ModeExecute, Repo: "o/r", RepoID: 42, Number: 7, InstallationID: 9, Attempt: 2,
		DeliveryID: "d-1", HeadSHA: "abc123", Requester: "alice", Model: "anthropic/claude-sonnet-4-5"}
	order := dispatch.WorkOrder{TaskID: m.TaskID, Mode: m.Mode}
	if got := metaFromJob(jobMeta(m, order, dispatch.IsolationCaps)); got != m {
		t.Errorf("meta through the job: %+v, want %+v", got, m)
	}
}
