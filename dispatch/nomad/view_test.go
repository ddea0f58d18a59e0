package nomad

import (
	"testing"

	"github.com/hashicorp/nomad/api"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// TestRunViewMergesOutOfOrder: events and query answers arrive in any order;
// only a newer modify index changes what the bot believes.
func TestRunViewMergesOutOfOrder(t *testing.T) {
	t.Parallel()
	v := newRunView("sandbox-t-00000001-plan")
	create, modify, status, stop := uint64(10), uint64(12), "running", false
	v.setJob(&api.Job{CreateIndex: &create, ModifyIndex: &modify, Status: &status, Stop: &stop})

	running := &api.Allocation{ID: "a1", ClientStatus: "running", DesiredStatus: "run", CreateIndex: 11, ModifyIndex: 20}
	done := &api.Allocation{ID: "a1", ClientStatus: "complete", DesiredStatus: "run", CreateIndex: 11, ModifyIndex: 30,
		TaskStates: map[string]*api.TaskState{TaskName: {State: "dead", Events: []*api.TaskEvent{{Type: api.TaskTerminated, ExitCode: 0}}}}}
	v.mergeAlloc(done)
	v.mergeAlloc(running) // late, older
	if st := v.status(); st.State != dispatch.StateComplete {
		t.Fatalf("state %s after an older update arrived late", st.State)
	}
	// An allocation of an earlier job with the same id is ignored.
	v.mergeAlloc(&api.Allocation{ID: "old", ClientStatus: "running", CreateIndex: 5, ModifyIndex: 40})
	if v.latest().ID != "a1" {
		t.Fatalf("latest %s", v.latest().ID)
	}
}

func TestRunViewStates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		client, desired string
		events          []*api.TaskEvent
		jobStatus       string
		noAlloc         bool
		want            dispatch.State
		killed          bool
		exit            int
	}{
		{noAlloc: true, jobStatus: "pending", want: dispatch.StatePending},
		{noAlloc: true, jobStatus: "dead", want: dispatch.StateLost},
		{client: "pending", desired: "run", want: dispatch.StatePending},
		{client: "running", desired: "run", want: dispatch.StateRunning},
		{client: "unknown", desired: "run", want: dispatch.StateRunning},
		{client: "complete", desired: "run", events: []*api.TaskEvent{{Type: api.TaskTerminated, ExitCode: 0}}, want: dispatch.StateComplete},
		{client: "failed", desired: "run", events: []*api.TaskEvent{{Type: api.TaskTerminated, ExitCode: 2}}, want: dispatch.StateComplete, exit: 2},
		{client: "complete", desired: "stop", events: []*api.TaskEvent{{Type: api.TaskKilling}, {Type: api.TaskTerminated, ExitCode: 143}, {Type: api.TaskKilled}}, want: dispatch.StateComplete, killed: true, exit: 143},
		{client: "failed", desired: "run", events: []*api.TaskEvent{{Type: api.TaskTerminated, ExitCode: 137, Details: map[string]string{"oom_killed": "true"}}}, want: dispatch.StateComplete, killed: true, exit: 137},
		{client: "lost", desired: "stop", want: dispatch.StateLost, killed: true},
	} {
		v := newRunView("j")
		v.jobStatus = tc.jobStatus
		if !tc.noAlloc {
			v.mergeAlloc(&api.Allocation{ID: "a", ClientStatus: tc.client, DesiredStatus: tc.desired, CreateIndex: 1, ModifyIndex: 2,
				TaskStates: map[string]*api.TaskState{TaskName: {Events: tc.events}}})
		}
		st := v.status()
		if st.State != tc.want || v.killed() != tc.killed || st.ExitCode != tc.exit {
			t.Errorf("client %q desired %q job %q: state %s killed %v exit %d; want %s %v %d", tc.client, tc.desired, tc.jobStatus, st.State, v.killed(), st.ExitCode, tc.want, tc.killed, tc.exit)
		}
	}
}
