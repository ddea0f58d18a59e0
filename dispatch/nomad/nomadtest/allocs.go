package nomadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"
)

// Driver runs one task of a placed allocation, as a Nomad task driver does.
// Run returns the task's exit code when it ends. When ctx is cancelled the
// allocation is being stopped: the driver sends SIGTERM, waits up to the
// task's kill timeout, then kills.
type Driver interface {
	Run(ctx context.Context, t *Task) (exitCode int, err error)
}

// DriverFunc adapts a function to Driver.
type DriverFunc func(ctx context.Context, t *Task) (int, error)

// Run implements Driver.
func (f DriverFunc) Run(ctx context.Context, t *Task) (int, error) { return f(ctx, t) }

// Task is what a driver gets: the job as registered, the rendered task
// directory and writers into the allocation's log files.
type Task struct {
	Alloc *api.Allocation
	Job   *api.Job
	Group *api.TaskGroup
	Task  *api.Task
	// AllocDir is the host path of the shared alloc/ directory (mounted at
	// /alloc in a container); TaskDir holds local/ and secrets/.
	AllocDir string
	TaskDir  string
	// Env is the task's env plus the NOMAD_* runtime variables.
	Env    map[string]string
	Stdout io.Writer
	Stderr io.Writer
}

// Alloc returns the allocation with that id, or nil.
func (s *Server) Alloc(id string) *api.Allocation {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.allocs[id]; a != nil {
		return copyAlloc(a.alloc)
	}
	return nil
}

// Allocs returns the allocations of a job, oldest first.
func (s *Server) Allocs(namespace, jobID string) []*api.Allocation {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.jobs[key{namespace, jobID}]
	if e == nil {
		return nil
	}
	var out []*api.Allocation
	for _, id := range e.allocs {
		out = append(out, copyAlloc(s.allocs[id].alloc))
	}
	return out
}

// Job returns the job as stored (after the agent's canonicalization).
func (s *Server) Job(namespace, id string) *api.Job {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.jobs[key{namespace, id}]; e != nil {
		return e.job
	}
	return nil
}

// JobIDs are the ids of the jobs registered in a namespace, sorted.
func (s *Server) JobIDs(namespace string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k := range s.jobs {
		if k.ns == namespace {
			out = append(out, k.id)
		}
	}
	sort.Strings(out)
	return out
}

// Jobs is the number of jobs registered.
func (s *Server) Jobs() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.jobs)
}

// WaitAlloc blocks until the job has an allocation and returns its id.
func (s *Server) WaitAlloc(ctx context.Context, namespace, jobID string) (string, error) {
	for {
		s.mu.Lock()
		e := s.jobs[key{namespace, jobID}]
		if e != nil && len(e.allocs) > 0 {
			id := e.allocs[len(e.allocs)-1]
			s.mu.Unlock()
			return id, nil
		}
		wake := s.evWake
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("no allocation for job %s: %w", jobID, ctx.Err())
		case <-wake:
		}
	}
}

func copyAlloc(a *api.Allocation) *api.Allocation {
	c := *a
	c.TaskStates = map[string]*api.TaskState{}
	for k, v := range a.TaskStates {
		ts := *v
		ts.Events = append([]*api.TaskEvent(nil), v.Events...)
		c.TaskStates[k] = &ts
	}
	return &c
}

func stubOf(a *api.Allocation) *api.AllocationListStub {
	c := copyAlloc(a)
	return &api.AllocationListStub{
		ID: c.ID, EvalID: c.EvalID, Name: c.Name, Namespace: c.Namespace, NodeID: c.NodeID, NodeName: c.NodeName,
		JobID: c.JobID, JobType: api.JobTypeBatch, TaskGroup: c.TaskGroup,
		DesiredStatus: c.DesiredStatus, DesiredDescription: c.DesiredDescription,
		ClientStatus: c.ClientStatus, ClientDescription: c.ClientDescription,
		TaskStates: c.TaskStates, CreateIndex: c.CreateIndex, ModifyIndex: c.ModifyIndex,
		CreateTime: c.CreateTime, ModifyTime: c.ModifyTime,
	}
}

func isPending(a *api.Allocation) bool { return a.ClientStatus == api.AllocClientStatusPending }

func isTerminal(a *api.Allocation) bool {
	switch a.ClientStatus {
	case api.AllocClientStatusComplete, api.AllocClientStatusFailed, api.AllocClientStatusLost:
		return true
	}
	return false
}

func taskEvent(typ, msg string) *api.TaskEvent {
	return &api.TaskEvent{Type: typ, Time: time.Now().UnixNano(), DisplayMessage: msg}
}

// placeLocked creates the job's allocation on the fake node, pending.
func (s *Server) placeLocked(e *jobEntry) *allocEntry {
	job := e.job
	group := job.TaskGroups[0]
	idx := s.nextIndex()
	now := time.Now().UnixNano()
	a := &api.Allocation{
		ID:            newUUID(),
		Namespace:     *job.Namespace,
		EvalID:        newUUID(),
		Name:          fmt.Sprintf("%s.%s[0]", *job.ID, *group.Name),
		NodeID:        NodeID,
		NodeName:      "nomadtest-client",
		JobID:         *job.ID,
		TaskGroup:     *group.Name,
		DesiredStatus: api.AllocDesiredStatusRun,
		ClientStatus:  api.AllocClientStatusPending,
		TaskStates:    map[string]*api.TaskState{},
		CreateIndex:   idx,
		ModifyIndex:   idx,
		CreateTime:    now,
		ModifyTime:    now,
	}
	a.AllocModifyIndex = idx
	for _, t := range group.Tasks {
		a.TaskStates[t.Name] = &api.TaskState{State: "pending", Events: []*api.TaskEvent{taskEvent(api.TaskReceived, "Task received by client")}}
	}
	dir := filepath.Join(s.opts.DataDir, "allocs", a.ID)
	for _, d := range []string{"alloc/data", "alloc/logs", "alloc/tmp"} {
		os.MkdirAll(filepath.Join(dir, d), 0o777)
	}
	for _, t := range group.Tasks {
		for _, d := range []string{"local", "secrets", "tmp"} {
			os.MkdirAll(filepath.Join(dir, t.Name, d), 0o777)
		}
	}
	// Like a client, the shared and task directories are writable by the
	// task's user whatever its uid.
	os.Chmod(filepath.Join(dir, "alloc", "data"), 0o777)
	ae := &allocEntry{alloc: a, dir: dir, changed: make(chan struct{})}
	s.allocs[a.ID] = ae
	e.allocs = append(e.allocs, a.ID)
	s.publishAllocLocked(idx, a, "PlanResult")
	return ae
}

// touchLocked bumps the allocation's index and publishes it.
func (s *Server) touchLocked(a *allocEntry, eventType string) {
	idx := s.nextIndex()
	a.alloc.ModifyIndex = idx
	a.alloc.ModifyTime = time.Now().UnixNano()
	s.publishAllocLocked(idx, a.alloc, eventType)
	close(a.changed)
	a.changed = make(chan struct{})
}

func (s *Server) publishAllocLocked(idx uint64, a *api.Allocation, typ string) {
	c := copyAlloc(a)
	c.Job = nil
	s.publishLocked(idx, api.Event{
		Topic: api.TopicAllocation, Type: typ, Key: a.ID,
		FilterKeys: []string{a.JobID, ""},
		Payload:    payload("Allocation", c),
	}, a.Namespace)
}

func (s *Server) startLocked(a *allocEntry) {
	now := time.Now()
	a.alloc.ClientStatus = api.AllocClientStatusRunning
	a.alloc.ClientDescription = "Tasks are running"
	for _, ts := range a.alloc.TaskStates {
		ts.State = "running"
		ts.StartedAt = now
		ts.Events = append(ts.Events, taskEvent(api.TaskSetup, "Building Task Directory"), taskEvent(api.TaskStarted, "Task started by client"))
	}
	s.touchLocked(a, "AllocationUpdated")
	s.updateJobStatusLocked(s.jobOfLocked(a))
}

func (s *Server) finishLocked(a *allocEntry, status string, exitCode int, killed bool) {
	now := time.Now()
	a.alloc.ClientStatus = status
	switch status {
	case api.AllocClientStatusComplete:
		a.alloc.ClientDescription = "All tasks have completed"
	case api.AllocClientStatusFailed:
		a.alloc.ClientDescription = "Failed tasks"
	}
	for _, ts := range a.alloc.TaskStates {
		if ts.State == "dead" {
			continue
		}
		if killed {
			ts.Events = append(ts.Events, taskEvent(api.TaskKilling, "Sent interrupt. Waiting before force killing"))
		}
		term := taskEvent(api.TaskTerminated, fmt.Sprintf("Exit Code: %d", exitCode))
		term.ExitCode = exitCode
		if exitCode > 128 {
			term.Signal = exitCode - 128
		}
		ts.Events = append(ts.Events, term)
		if killed {
			ts.Events = append(ts.Events, taskEvent(api.TaskKilled, "Task successfully killed"))
		}
		ts.State = "dead"
		ts.FinishedAt = now
		ts.Failed = status == api.AllocClientStatusFailed
	}
	s.touchLocked(a, "AllocationUpdated")
	s.updateJobStatusLocked(s.jobOfLocked(a))
}

func (s *Server) jobOfLocked(a *allocEntry) *jobEntry {
	if e := s.jobs[key{a.alloc.Namespace, a.alloc.JobID}]; e != nil {
		return e
	}
	// Purged: a detached entry keeps status bookkeeping harmless.
	return &jobEntry{job: &api.Job{ID: ptr(a.alloc.JobID), Namespace: ptr(a.alloc.Namespace), Status: ptr("dead"), Stop: ptr(true)}}
}

// StartAlloc moves a pending allocation to running, as a client does once
// the task started. Tests use it when no Driver is set.
func (s *Server) StartAlloc(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.allocs[id]
	if a == nil {
		return fmt.Errorf("nomadtest: no allocation %s", id)
	}
	if !isPending(a.alloc) {
		return fmt.Errorf("nomadtest: allocation %s is %s, not pending", id, a.alloc.ClientStatus)
	}
	s.startLocked(a)
	return nil
}

// FinishAlloc ends a running allocation's tasks with exitCode: complete for
// 0, failed otherwise.
func (s *Server) FinishAlloc(id string, exitCode int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.allocs[id]
	if a == nil {
		return fmt.Errorf("nomadtest: no allocation %s", id)
	}
	if isTerminal(a.alloc) {
		return fmt.Errorf("nomadtest: allocation %s already ended %s", id, a.alloc.ClientStatus)
	}
	status := api.AllocClientStatusComplete
	if exitCode != 0 {
		status = api.AllocClientStatusFailed
	}
	s.finishLocked(a, status, exitCode, false)
	return nil
}

// LoseAlloc marks the allocation lost, as the servers do when its node
// stops heartbeating; a running driver is stopped without grace.
func (s *Server) LoseAlloc(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.allocs[id]
	if a == nil {
		return fmt.Errorf("nomadtest: no allocation %s", id)
	}
	if isTerminal(a.alloc) {
		return fmt.Errorf("nomadtest: allocation %s already ended %s", id, a.alloc.ClientStatus)
	}
	a.alloc.ClientStatus = api.AllocClientStatusLost
	a.alloc.ClientDescription = "alloc is lost since its node is down"
	a.alloc.DesiredStatus = api.AllocDesiredStatusStop
	if a.cancel != nil {
		a.cancel("lost")
	}
	s.touchLocked(a, "AllocationUpdated")
	s.updateJobStatusLocked(s.jobOfLocked(a))
	return nil
}

// AppendLog appends to a task's stdout or stderr log, like the client's
// logmon does.
func (s *Server) AppendLog(allocID, task, stream string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.allocs[allocID]
	if a == nil {
		return fmt.Errorf("nomadtest: no allocation %s", allocID)
	}
	return s.appendLogLocked(a, task, stream, data)
}

func (s *Server) appendLogLocked(a *allocEntry, task, stream string, data []byte) error {
	f, err := os.OpenFile(logPath(a.dir, task, stream), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	f.Close()
	close(a.changed)
	a.changed = make(chan struct{})
	return err
}

func logPath(allocDir, task, stream string) string {
	return filepath.Join(allocDir, "alloc", "logs", fmt.Sprintf("%s.%s.0", task, stream))
}

// WriteAllocFile writes a file into the allocation directory, e.g.
// "alloc/data/result.json".
func (s *Server) WriteAllocFile(allocID, path string, data []byte) error {
	s.mu.Lock()
	a := s.allocs[allocID]
	s.mu.Unlock()
	if a == nil {
		return fmt.Errorf("nomadtest: no allocation %s", allocID)
	}
	full, err := allocDirPath(a.dir, path)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return err
	}
	return os.WriteFile(full, data, 0o644)
}

// AllocDir is the host directory of an allocation.
func (s *Server) AllocDir(allocID string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.allocs[allocID]; a != nil {
		return a.dir
	}
	return ""
}

// ---- HTTP: allocations, nodes, fs -----------------------------------------

func (s *Server) allocInfo(w http.ResponseWriter, r *http.Request, id string) {
	s.mu.Lock()
	a := s.allocs[id]
	var c *api.Allocation
	if a != nil {
		c = copyAlloc(a.alloc)
		if e := s.jobs[key{a.alloc.Namespace, a.alloc.JobID}]; e != nil {
			c.Job = e.job
		}
	}
	idx := s.index
	s.mu.Unlock()
	// Nomad looks an allocation up by id in every namespace, and hides
	// one in a namespace the token may not read.
	if a == nil || !callerOf(r).ns(c.Namespace, "read-job") {
		http.Error(w, "Unknown allocation \""+id+"\"", http.StatusNotFound)
		return
	}
	s.writeJSON(w, http.StatusOK, idx, c)
}

func (s *Server) nodeInfo(w http.ResponseWriter, r *http.Request, id string) {
	if c := callerOf(r); !c.management() && !c.policy.allowNode() {
		permissionDenied(w)
		return
	}
	if id != NodeID {
		http.Error(w, "node not found", http.StatusNotFound)
		return
	}
	s.writeJSON(w, http.StatusOK, s.Index(), s.node())
}

// allocForClient finds the allocation a client endpoint (fs, logs, exec)
// names, and checks the capability the endpoint needs in the
// allocation's own namespace, as the client does; it answers the request
// when it cannot go on.
func (s *Server) allocForClient(w http.ResponseWriter, r *http.Request, id, capability string) *allocEntry {
	s.mu.Lock()
	a := s.allocs[id]
	ns := ""
	if a != nil {
		ns = a.alloc.Namespace
	}
	s.mu.Unlock()
	switch {
	case a == nil:
		// What a client answers for an allocation it garbage collected.
		http.Error(w, "Unknown allocation \""+id+"\"", http.StatusNotFound)
	case !callerOf(r).ns(ns, capability):
		permissionDenied(w)
		return nil
	}
	return a
}

func (s *Server) fsCat(w http.ResponseWriter, r *http.Request, id string) {
	p := r.URL.Query().Get("path")
	if p == "" {
		http.Error(w, "must provide a file path", http.StatusBadRequest)
		return
	}
	full, ok := s.fsPath(w, r, id, p)
	if !ok {
		return
	}
	// Streamed, as a Nomad client does: a reader that stops early (the
	// bot's cap) ends the copy when it closes the connection.
	f, err := os.Open(full)
	if errors.Is(err, os.ErrNotExist) {
		fileNotFound(w, p)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer f.Close()
	_, _ = io.Copy(w, f)
}

// fsLogs streams a task's log as JSON StreamFrames, following it until the
// task is dead and every byte was sent, as the client's logs endpoint does.
func (s *Server) fsLogs(w http.ResponseWriter, r *http.Request, id string) {
	a := s.allocForClient(w, r, id, "read-logs")
	if a == nil {
		return
	}
	q := r.URL.Query()
	task, typ := q.Get("task"), q.Get("type")
	if typ != "stdout" && typ != "stderr" {
		http.Error(w, `must provide log type (stdout or stderr)`, http.StatusBadRequest)
		return
	}
	follow := q.Get("follow") == "true"
	offset, _ := parseInt(q.Get("offset"))
	path := logPath(a.dir, task, typ)
	rel := fmt.Sprintf("alloc/logs/%s.%s.0", task, typ)
	if q.Get("origin") == "end" {
		if fi, err := os.Stat(path); err == nil {
			offset = max(fi.Size()-offset, 0)
		} else {
			offset = 0
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	enc := newFrameWriter(w, fl)
	heartbeat := time.NewTicker(s.opts.Heartbeat)
	defer heartbeat.Stop()
	buf := make([]byte, 64*1024)
	for {
		s.mu.Lock()
		changed := a.changed
		dead := true
		for name, ts := range a.alloc.TaskStates {
			if name == task && ts.State != "dead" {
				dead = false
			}
		}
		if isTerminal(a.alloc) {
			dead = true
		}
		s.mu.Unlock()
		// Read whatever is there now.
		for {
			n, err := readAt(path, buf, offset)
			if n > 0 {
				offset += int64(n)
				if err := enc.frame(api.StreamFrame{Offset: offset, Data: buf[:n], File: rel}); err != nil {
					return
				}
			}
			if n < len(buf) || err != nil {
				break
			}
		}
		if !follow || dead {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-changed:
		case <-heartbeat.C:
			if err := enc.raw([]byte("{}")); err != nil {
				return
			}
		}
	}
}

func readAt(path string, buf []byte, off int64) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n, err := f.ReadAt(buf, off)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return n, err
}

// ---- running allocations with a Driver ------------------------------------

func (s *Server) runAlloc(a *allocEntry) {
	ctx, cancel := context.WithCancel(context.Background())
	var once sync.Once
	reason := ""
	s.mu.Lock()
	a.cancel = func(why string) {
		once.Do(func() { reason = why; cancel() })
	}
	job := s.jobOfLocked(a).job
	group := job.TaskGroups[0]
	t := group.Tasks[0]
	alloc := copyAlloc(a.alloc)
	s.mu.Unlock()
	defer cancel()

	taskDir := filepath.Join(a.dir, t.Name)
	env := taskEnv(job, group, t, alloc)
	// Taken before the first rendering: a variable written from here on
	// renders again, as Nomad's template runner never misses a change.
	s.mu.Lock()
	wake := s.varWake
	s.mu.Unlock()
	if err := s.renderTemplates(ctx, t, taskDir, env); err != nil {
		s.mu.Lock()
		if !isTerminal(a.alloc) {
			ts := a.alloc.TaskStates[t.Name]
			ts.Events = append(ts.Events, taskEvent(api.TaskSetupFailure, err.Error()))
			s.finishLocked(a, api.AllocClientStatusFailed, 1, false)
		}
		s.mu.Unlock()
		return
	}

	s.mu.Lock()
	if a.alloc.DesiredStatus != api.AllocDesiredStatusRun || isTerminal(a.alloc) {
		if !isTerminal(a.alloc) {
			s.finishLocked(a, api.AllocClientStatusComplete, 0, false)
		}
		s.mu.Unlock()
		return
	}
	s.startLocked(a)
	s.mu.Unlock()
	go s.rerenderOnChange(ctx, t, taskDir, env, wake)

	code, err := s.opts.Driver.Run(ctx, &Task{
		Alloc: alloc, Job: job, Group: group, Task: t,
		AllocDir: filepath.Join(a.dir, "alloc"), TaskDir: taskDir, Env: env,
		Stdout: &logWriter{s: s, a: a, task: t.Name, stream: "stdout"},
		Stderr: &logWriter{s: s, a: a, task: t.Name, stream: "stderr"},
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		ts := a.alloc.TaskStates[t.Name]
		ts.Events = append(ts.Events, taskEvent(api.TaskDriverFailure, err.Error()))
		if code == 0 {
			code = 1
		}
	}
	if isTerminal(a.alloc) { // lost while running
		return
	}
	killed := reason != ""
	status := api.AllocClientStatusComplete
	if code != 0 && !killed {
		status = api.AllocClientStatusFailed
	}
	s.finishLocked(a, status, code, killed)
}

type logWriter struct {
	s            *Server
	a            *allocEntry
	task, stream string
}

func (l *logWriter) Write(p []byte) (int, error) {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if err := l.s.appendLogLocked(l.a, l.task, l.stream, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

func taskEnv(job *api.Job, group *api.TaskGroup, t *api.Task, a *api.Allocation) map[string]string {
	env := map[string]string{
		"NOMAD_ALLOC_ID":    a.ID,
		"NOMAD_ALLOC_NAME":  a.Name,
		"NOMAD_JOB_ID":      *job.ID,
		"NOMAD_JOB_NAME":    *job.Name,
		"NOMAD_GROUP_NAME":  *group.Name,
		"NOMAD_TASK_NAME":   t.Name,
		"NOMAD_NAMESPACE":   *job.Namespace,
		"NOMAD_ALLOC_DIR":   "/alloc",
		"NOMAD_TASK_DIR":    "/local",
		"NOMAD_SECRETS_DIR": "/secrets",
	}
	for k, v := range job.Meta {
		env["NOMAD_META_"+k] = v
	}
	for k, v := range t.Env {
		env[k] = v
	}
	return env
}

// SortedEnv renders env as KEY=VALUE lines in a stable order.
func SortedEnv(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// ListenOn returns a listener on addr (e.g. "172.17.0.1:0"), for fakes
// that containers must reach.
func ListenOn(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }

// rerenderOnChange re-renders the task's templates whenever a variable
// changes, as the client's template runner does for nomadVar; with
// change_mode noop the task is not signalled, it just finds the new file.
func (s *Server) rerenderOnChange(ctx context.Context, t *api.Task, taskDir string, env map[string]string, wake <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
		}
		// The next wake is taken before rendering, so a write during the
		// rendering is not lost.
		s.mu.Lock()
		wake = s.varWake
		s.mu.Unlock()
		// A variable that disappeared keeps the last rendering.
		rctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		s.renderTemplates(rctx, t, taskDir, env)
		cancel()
	}
}
