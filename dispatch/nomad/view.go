package nomad

import (
	"github.com/hashicorp/nomad/api"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// allocView is what the bot keeps of one allocation: enough to tell the
// run's state and to reach the node for logs and result.json.
type allocView struct {
	ID            string
	NodeID        string
	ClientStatus  string
	DesiredStatus string
	CreateIndex   uint64
	ModifyIndex   uint64
	ModifyTime    int64
	Task          api.TaskState // the sandbox task's state; events trimmed
}

// runView is the bot's picture of one job, merged from queries and events in
// whatever order they arrive: an allocation only replaces what is known of
// it when its modify index is newer.
type runView struct {
	jobID          string
	meta           dispatch.Meta
	jobStatus      string
	jobStop        bool
	jobCreateIndex uint64
	jobModifyIndex uint64
	allocs         map[string]*allocView
}

func newRunView(jobID string) *runView {
	return &runView{jobID: jobID, allocs: map[string]*allocView{}}
}

func (v *runView) setJob(j *api.Job) {
	if j == nil {
		return
	}
	if j.ModifyIndex != nil && *j.ModifyIndex < v.jobModifyIndex {
		return
	}
	if j.ModifyIndex != nil {
		v.jobModifyIndex = *j.ModifyIndex
	}
	if j.CreateIndex != nil && *j.CreateIndex > v.jobCreateIndex {
		// A job re-created under the same id: forget the old one's
		// allocations.
		if v.jobCreateIndex != 0 {
			v.allocs = map[string]*allocView{}
		}
		v.jobCreateIndex = *j.CreateIndex
	}
	if j.Status != nil {
		v.jobStatus = *j.Status
	}
	if j.Stop != nil {
		v.jobStop = *j.Stop
	}
	if j.Meta != nil && j.Meta[MetaTaskID] != "" {
		v.meta = metaFromJob(j.Meta)
	}
}

func (v *runView) mergeStub(a *api.AllocationListStub) {
	v.merge(&allocView{
		ID: a.ID, NodeID: a.NodeID, ClientStatus: a.ClientStatus, DesiredStatus: a.DesiredStatus,
		CreateIndex: a.CreateIndex, ModifyIndex: a.ModifyIndex, ModifyTime: a.ModifyTime,
		Task: taskStateOf(a.TaskStates),
	})
}

func (v *runView) mergeAlloc(a *api.Allocation) {
	v.merge(&allocView{
		ID: a.ID, NodeID: a.NodeID, ClientStatus: a.ClientStatus, DesiredStatus: a.DesiredStatus,
		CreateIndex: a.CreateIndex, ModifyIndex: a.ModifyIndex, ModifyTime: a.ModifyTime,
		Task: taskStateOf(a.TaskStates),
	})
}

func (v *runView) merge(a *allocView) {
	if v.jobCreateIndex != 0 && a.CreateIndex < v.jobCreateIndex {
		return // belongs to an earlier job of the same id
	}
	if cur := v.allocs[a.ID]; cur != nil && cur.ModifyIndex >= a.ModifyIndex {
		return
	}
	v.allocs[a.ID] = a
}

// taskStateOf keeps the sandbox task's state with only the events the
// bot reads, so a thousand watched runs stay small.
func taskStateOf(states map[string]*api.TaskState) api.TaskState {
	ts := states[TaskName]
	if ts == nil {
		return api.TaskState{}
	}
	out := *ts
	out.Events = nil
	for _, e := range ts.Events {
		switch e.Type {
		case api.TaskTerminated, api.TaskKilled, api.TaskKilling:
			c := *e
			c.Details = nil
			if e.Details["oom_killed"] == "true" {
				c.Details = map[string]string{"oom_killed": "true"}
			}
			out.Events = append(out.Events, &c)
		}
	}
	return out
}

// latest is the newest allocation; the job has at most one, but an
// operator may have forced a reschedule.
func (v *runView) latest() *allocView {
	var best *allocView
	for _, a := range v.allocs {
		if best == nil || a.CreateIndex > best.CreateIndex {
			best = a
		}
	}
	return best
}

// status maps Nomad's view to the bot's. It is pure; classify adds the
// result.json check for killed tasks.
func (v *runView) status() dispatch.RunStatus {
	st := dispatch.RunStatus{Meta: v.meta, State: dispatch.StatePending}
	a := v.latest()
	if a == nil {
		if v.jobStatus == "dead" || v.jobStop {
			// Stopped or gave up before a node took it: nothing ran.
			st.State = dispatch.StateLost
		}
		return st
	}
	st.StartedAt = a.Task.StartedAt
	st.EndedAt = a.Task.FinishedAt
	switch a.ClientStatus {
	case api.AllocClientStatusPending:
		st.State = dispatch.StatePending
	case api.AllocClientStatusRunning, "unknown":
		// unknown: the node is disconnected and may come back.
		st.State = dispatch.StateRunning
	case api.AllocClientStatusComplete, api.AllocClientStatusFailed:
		st.State = dispatch.StateComplete
		st.ExitCode = exitCode(a.Task)
	case api.AllocClientStatusLost:
		st.State = dispatch.StateLost
		if st.EndedAt.IsZero() {
			st.EndedAt = unixNano(a.ModifyTime)
		}
	}
	return st
}

// killed reports whether the sandbox was stopped from outside (job stopped,
// allocation stopped or evicted, out of memory) rather than exiting on its
// own.
func (v *runView) killed() bool {
	a := v.latest()
	if a == nil {
		return false
	}
	if a.DesiredStatus == api.AllocDesiredStatusStop || a.DesiredStatus == api.AllocDesiredStatusEvict {
		return true
	}
	for _, e := range a.Task.Events {
		if e.Type == api.TaskKilled || e.Details["oom_killed"] == "true" {
			return true
		}
	}
	return false
}

func (v *runView) ended() bool { return v.status().State.Ended() }

func exitCode(ts api.TaskState) int {
	for i := len(ts.Events) - 1; i >= 0; i-- {
		if ts.Events[i].Type == api.TaskTerminated {
			return ts.Events[i].ExitCode
		}
	}
	if ts.Failed {
		return 1
	}
	return 0
}
