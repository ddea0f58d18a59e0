// Package nomadtest is a fake Nomad agent for tests: an httptest server that
// speaks the parts of Nomad's HTTP API the nomad backend uses, so tests
// drive the real github.com/hashicorp/nomad/api client against it.
//
// It implements job registration (with EnforceIndex), job info, list and
// deregistration, allocations, the event stream (NDJSON frames, heartbeats,
// replay from an index), the client filesystem (cat and logs with follow),
// and Variables with check-and-set. Allocation directories live on disk,
// laid out like a Nomad client's, so a Driver can run a task for real (see
// DockerDriver and ScriptDriver) or a test can play the client's part with
// StartAlloc, AppendLog, WriteAllocFile, FinishAlloc and LoseAlloc.
package nomadtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"
)

// NodeID is the id of the fake's single client node.
const NodeID = "f0f0f0f0-0000-4000-8000-00000000c11e"

// Options configure a Server.
type Options struct {
	// DataDir holds allocation directories. Empty: a new temporary
	// directory, removed by Close.
	DataDir string
	// Driver runs placed allocations. Nil: allocations stay pending until
	// the test moves them with StartAlloc and FinishAlloc.
	Driver Driver
	// NoPlacement leaves registered jobs without an allocation, the way a
	// cluster without capacity does.
	NoPlacement bool
	// Heartbeat is the interval of empty frames on streams (Nomad: 10s).
	Heartbeat time.Duration
	// EventBuffer is how many event batches are kept for replay.
	EventBuffer int
	// ACLToken, when set, is a management token: X-Nomad-Token must hold
	// it, or (with ACL) a token ACL knows.
	ACLToken string
	// ACL, when set, turns on ACLs as Nomad enforces them: each token's
	// policy decides what it may do, namespace by namespace (a capability
	// missing in the namespace of a job, allocation, variable or event
	// stream is a 403, an allocation in a namespace the token may not
	// read is unknown).
	ACL map[string]*Policy
	// Namespaces exist besides "default"; a job or variable in any other
	// is refused, as by Nomad.
	Namespaces []string
	// Listener, when set, is where the server listens (e.g. the docker
	// bridge address, so containers can reach it); default loopback.
	Listener net.Listener
}

type key struct{ ns, id string }

type jobEntry struct {
	job    *api.Job
	allocs []string
}

type allocEntry struct {
	alloc *api.Allocation
	dir   string
	// cancel stops the driver's run (desired status stop, or lost).
	cancel  func(reason string)
	changed chan struct{} // closed and replaced on every change
}

// Server is the fake agent. Its methods are safe for concurrent use.
type Server struct {
	URL  string
	opts Options
	srv  *httptest.Server
	tmp  bool

	mu      sync.Mutex
	index   uint64
	jobs    map[key]*jobEntry
	allocs  map[string]*allocEntry
	vars    map[key]*api.Variable
	events  []api.Events
	eventNS []string // namespace of each batch in events
	evWake  chan struct{}
	streams map[chan struct{}]struct{}
	// paused makes new event streams fail like an agent without a leader.
	paused bool
	// sent lists, per event stream connection in order, the indexes of
	// the batches it delivered.
	sent  [][]uint64
	calls []Call
	// varWake is closed and replaced on every variable write, for
	// templates waiting on nomadVar.
	varWake chan struct{}
	// fingerprint is what the Driver reported of the node at start.
	fingerprint map[string]string
}

// Call records one request the fake served, for assertions.
type Call struct {
	Method string
	Path   string
	Query  string
}

// New starts a fake agent. Close it when done.
func New(opts Options) (*Server, error) {
	if opts.Heartbeat == 0 {
		opts.Heartbeat = 10 * time.Second
	}
	if opts.EventBuffer == 0 {
		opts.EventBuffer = 4096
	}
	s := &Server{
		opts:    opts,
		jobs:    map[key]*jobEntry{},
		allocs:  map[string]*allocEntry{},
		vars:    map[key]*api.Variable{},
		evWake:  make(chan struct{}),
		streams: map[chan struct{}]struct{}{},
		varWake: make(chan struct{}),
		index:   100,
	}
	if f, ok := opts.Driver.(fingerprinter); ok {
		attrs, err := f.Fingerprint()
		if err != nil {
			return nil, fmt.Errorf("nomadtest: %w", err)
		}
		s.fingerprint = attrs
	}
	if s.opts.DataDir == "" {
		dir, err := os.MkdirTemp("", "nomadtest-")
		if err != nil {
			return nil, fmt.Errorf("nomadtest: data dir: %w", err)
		}
		s.opts.DataDir, s.tmp = dir, true
	}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	if opts.Listener != nil {
		s.srv.Listener.Close()
		s.srv.Listener = opts.Listener
	}
	s.srv.Start()
	s.URL = s.srv.URL
	return s, nil
}

// Close stops the server, every running task and, when the fake made it,
// removes the data directory.
func (s *Server) Close() {
	s.mu.Lock()
	for _, a := range s.allocs {
		if a.cancel != nil {
			a.cancel("agent shutdown")
		}
	}
	for ch := range s.streams {
		close(ch)
		delete(s.streams, ch)
	}
	s.mu.Unlock()
	s.srv.CloseClientConnections()
	s.srv.Close()
	if s.tmp {
		os.RemoveAll(s.opts.DataDir)
	}
}

// Client returns an api client for the fake with the management token
// (Options.ACLToken).
func (s *Server) Client(namespace string) (*api.Client, error) {
	return s.ClientAs(namespace, s.opts.ACLToken)
}

// ClientAs returns an api client for the fake that sends secretID.
func (s *Server) ClientAs(namespace, secretID string) (*api.Client, error) {
	cfg := api.DefaultConfig()
	cfg.Address = s.URL
	cfg.Namespace = namespace
	cfg.SecretID = secretID
	return api.NewClient(cfg)
}

// Calls returns the requests served so far.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// DropEventStreams closes every open event stream, as a leader election or
// a network blip would.
func (s *Server) DropEventStreams() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.streams)
	for ch := range s.streams {
		close(ch)
		delete(s.streams, ch)
	}
	return n
}

// OpenEventStreams is the number of connected event stream subscribers.
func (s *Server) OpenEventStreams() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.streams)
}

// Index is the fake's current raft index.
func (s *Server) Index() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.index
}

func (s *Server) nextIndex() uint64 {
	s.index++
	return s.index
}

func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// ---- HTTP plumbing ---------------------------------------------------------

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.calls = append(s.calls, Call{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery})
	s.mu.Unlock()
	who, ok := s.whoIs(w, r)
	if !ok {
		return
	}
	r = r.WithContext(context.WithValue(r.Context(), callerKey{}, who))
	p := r.URL.Path
	switch {
	case p == "/v1/jobs" && (r.Method == http.MethodPut || r.Method == http.MethodPost):
		s.registerJob(w, r)
	case p == "/v1/jobs" && r.Method == http.MethodGet:
		s.listJobs(w, r)
	case strings.HasPrefix(p, "/v1/job/"):
		s.jobRoutes(w, r, strings.TrimPrefix(p, "/v1/job/"))
	case strings.HasPrefix(p, "/v1/allocation/") && r.Method == http.MethodGet:
		s.allocInfo(w, r, strings.TrimPrefix(p, "/v1/allocation/"))
	case p == "/v1/nodes" && r.Method == http.MethodGet:
		s.listNodes(w, r)
	case strings.HasPrefix(p, "/v1/node/") && r.Method == http.MethodGet:
		s.nodeInfo(w, r, strings.TrimPrefix(p, "/v1/node/"))
	case strings.HasPrefix(p, "/v1/client/allocation/") && strings.HasSuffix(p, "/exec"):
		s.allocExec(w, r, strings.TrimSuffix(strings.TrimPrefix(p, "/v1/client/allocation/"), "/exec"))
	case strings.HasPrefix(p, "/v1/client/fs/cat/") && r.Method == http.MethodGet:
		s.fsCat(w, r, strings.TrimPrefix(p, "/v1/client/fs/cat/"))
	case strings.HasPrefix(p, "/v1/client/fs/ls/") && r.Method == http.MethodGet:
		s.fsList(w, r, strings.TrimPrefix(p, "/v1/client/fs/ls/"))
	case strings.HasPrefix(p, "/v1/client/fs/logs/") && r.Method == http.MethodGet:
		s.fsLogs(w, r, strings.TrimPrefix(p, "/v1/client/fs/logs/"))
	case p == "/v1/event/stream" && r.Method == http.MethodGet:
		s.eventStream(w, r)
	case strings.HasPrefix(p, "/v1/var/"):
		s.varRoutes(w, r, strings.TrimPrefix(p, "/v1/var/"))
	case p == "/v1/vars" && r.Method == http.MethodGet:
		s.listVars(w, r)
	case strings.HasPrefix(p, "/v1/namespace/") && r.Method == http.MethodGet:
		s.namespaceInfo(w, r, strings.TrimPrefix(p, "/v1/namespace/"))
	default:
		http.Error(w, "Invalid method or path: "+r.Method+" "+p, http.StatusNotFound)
	}
}

func namespaceOf(r *http.Request) string {
	if ns := r.URL.Query().Get("namespace"); ns != "" {
		return ns
	}
	return api.DefaultNamespace
}

// writeJSON answers like the agent: JSON body plus the index headers the
// api client parses.
func (s *Server) writeJSON(w http.ResponseWriter, status int, index uint64, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	setMetaHeaders(w, index)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}

func setMetaHeaders(w http.ResponseWriter, index uint64) {
	w.Header().Set("X-Nomad-Index", strconv.FormatUint(index, 10))
	w.Header().Set("X-Nomad-LastContact", "0")
	w.Header().Set("X-Nomad-KnownLeader", "true")
}

// ---- jobs ------------------------------------------------------------------

// enforceIndexPrefix is api.RegisterEnforceIndexErrPrefix, spelled out
// because that is what the real agent sends over the wire.
const enforceIndexPrefix = "Enforcing job modify index"

func (s *Server) registerJob(w http.ResponseWriter, r *http.Request) {
	var req api.JobRegisterRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, "failed to decode request: "+err.Error(), http.StatusBadRequest)
		return
	}
	if req.Job == nil {
		http.Error(w, "Job must be specified", http.StatusBadRequest)
		return
	}
	job := req.Job
	// The agent canonicalizes before validating and storing, as
	// command/agent/job_endpoint.go does.
	if job.Namespace == nil || *job.Namespace == "" {
		job.Namespace = ptr(namespaceOf(r))
	}
	job.Canonicalize()
	if err := validateJob(job); err != nil {
		http.Error(w, "1 error occurred:\n\t* "+err.Error(), http.StatusInternalServerError)
		return
	}
	if !s.maySubmit(w, r, job) {
		return
	}

	s.mu.Lock()
	k := key{*job.Namespace, *job.ID}
	existing := s.jobs[k]
	if req.EnforceIndex {
		switch {
		case existing != nil && req.JobModifyIndex == 0:
			s.mu.Unlock()
			http.Error(w, enforceIndexPrefix+" 0: job already exists", http.StatusInternalServerError)
			return
		case existing != nil && req.JobModifyIndex != *existing.job.JobModifyIndex:
			cur := *existing.job.JobModifyIndex
			s.mu.Unlock()
			http.Error(w, fmt.Sprintf("%s %d: job exists with conflicting job modify index: %d", enforceIndexPrefix, req.JobModifyIndex, cur), http.StatusInternalServerError)
			return
		case existing == nil && req.JobModifyIndex != 0:
			s.mu.Unlock()
			http.Error(w, fmt.Sprintf("%s %d: job does not exist", enforceIndexPrefix, req.JobModifyIndex), http.StatusInternalServerError)
			return
		}
	}
	idx := s.nextIndex()
	job.Status = ptr("pending")
	job.Stop = ptr(false)
	job.ModifyIndex = ptr(idx)
	job.JobModifyIndex = ptr(idx)
	job.SubmitTime = ptr(time.Now().UnixNano())
	if existing != nil {
		job.CreateIndex = existing.job.CreateIndex
		job.Version = ptr(*existing.job.Version + 1)
	} else {
		job.CreateIndex = ptr(idx)
		job.Version = ptr(uint64(0))
	}
	entry := &jobEntry{job: job}
	if existing != nil {
		entry.allocs = existing.allocs
	}
	s.jobs[k] = entry
	s.publishLocked(idx, api.Event{Topic: api.TopicJob, Type: "JobRegistered", Key: *job.ID, Payload: payload("Job", job)}, *job.Namespace)
	var placed *allocEntry
	if !s.opts.NoPlacement && existing == nil {
		placed = s.placeLocked(entry)
	}
	evalID := newUUID()
	s.mu.Unlock()

	if placed != nil && s.opts.Driver != nil {
		go s.runAlloc(placed)
	}
	s.writeJSON(w, http.StatusOK, idx, api.JobRegisterResponse{
		EvalID:          evalID,
		EvalCreateIndex: idx,
		JobModifyIndex:  idx,
		QueryMeta:       api.QueryMeta{LastIndex: idx},
	})
}

// validateJob checks what the agent would refuse outright.
func validateJob(j *api.Job) error {
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	if j.ID == nil || *j.ID == "" {
		bad("Missing job ID")
	} else if strings.ContainsAny(*j.ID, " \x00") {
		bad("Job ID contains a space or null character")
	}
	switch *j.Type {
	case api.JobTypeBatch, api.JobTypeService, api.JobTypeSystem, api.JobTypeSysbatch:
	default:
		bad("Invalid job type: %q", *j.Type)
	}
	if *j.Priority < 1 || *j.Priority > 100 {
		bad("Job priority must be between [1, 100]")
	}
	if len(j.TaskGroups) == 0 {
		bad("Missing job task groups")
	}
	for _, g := range j.TaskGroups {
		if len(g.Tasks) == 0 {
			bad("Task group %s: missing tasks", *g.Name)
		}
		if g.MaxRunDuration != nil && *j.Type != api.JobTypeBatch && *j.Type != api.JobTypeSysbatch {
			bad("Task group %s: max_run_duration is only valid for batch jobs", *g.Name)
		}
		for _, t := range g.Tasks {
			if t.Driver == "" {
				bad("Task %s: missing driver", t.Name)
			}
			if t.Driver == "docker" {
				if img, _ := t.Config["image"].(string); img == "" {
					bad("Task %s: docker config: image is required", t.Name)
				}
			}
			if t.Resources == nil || t.Resources.MemoryMB == nil || *t.Resources.MemoryMB < 10 {
				bad("Task %s: minimum MemoryMB value is 10", t.Name)
			}
			for _, tmpl := range t.Templates {
				if (tmpl.EmbeddedTmpl == nil || *tmpl.EmbeddedTmpl == "") && (tmpl.SourcePath == nil || *tmpl.SourcePath == "") {
					bad("Task %s: template must specify a source path or have an embedded template", t.Name)
				}
				if tmpl.DestPath == nil || *tmpl.DestPath == "" {
					bad("Task %s: template must specify a destination", t.Name)
				}
			}
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "\n\t* "))
	}
	return nil
}

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) {
	ns := namespaceOf(r)
	if c := callerOf(r); ns == "*" && !c.management() || ns != "*" && !c.ns(ns, "list-jobs") {
		permissionDenied(w)
		return
	}
	prefix := r.URL.Query().Get("prefix")
	withMeta := r.URL.Query().Get("meta") == "true"
	s.mu.Lock()
	var out []*api.JobListStub
	for k, e := range s.jobs {
		if (ns != "*" && k.ns != ns) || !strings.HasPrefix(k.id, prefix) {
			continue
		}
		j := e.job
		stub := &api.JobListStub{
			ID: *j.ID, Name: *j.Name, Namespace: *j.Namespace, Datacenters: j.Datacenters,
			Type: *j.Type, Priority: *j.Priority, Stop: *j.Stop, Status: *j.Status,
			CreateIndex: *j.CreateIndex, ModifyIndex: *j.ModifyIndex, JobModifyIndex: *j.JobModifyIndex,
			SubmitTime: *j.SubmitTime,
		}
		if withMeta {
			stub.Meta = j.Meta
		}
		out = append(out, stub)
	}
	idx := s.index
	s.mu.Unlock()
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	if out == nil {
		out = []*api.JobListStub{}
	}
	s.writeJSON(w, http.StatusOK, idx, out)
}

func (s *Server) jobRoutes(w http.ResponseWriter, r *http.Request, rest string) {
	ns := namespaceOf(r)
	id, sub, _ := strings.Cut(rest, "/")
	need := "read-job"
	if r.Method == http.MethodDelete {
		need = "submit-job"
	}
	if !callerOf(r).ns(ns, need) {
		permissionDenied(w)
		return
	}
	switch {
	case sub == "" && r.Method == http.MethodGet:
		s.mu.Lock()
		e := s.jobs[key{ns, id}]
		idx := s.index
		var j *api.Job
		if e != nil {
			j = e.job
		}
		b, _ := json.Marshal(j)
		s.mu.Unlock()
		if e == nil {
			http.Error(w, "job not found", http.StatusNotFound)
			return
		}
		setMetaHeaders(w, idx)
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	case sub == "" && r.Method == http.MethodDelete:
		s.deregister(w, r, ns, id)
	case sub == "allocations" && r.Method == http.MethodGet:
		s.mu.Lock()
		e := s.jobs[key{ns, id}]
		var out []*api.AllocationListStub
		if e != nil {
			for _, aid := range e.allocs {
				if a := s.allocs[aid]; a != nil {
					out = append(out, stubOf(a.alloc))
				}
			}
		}
		idx := s.index
		s.mu.Unlock()
		if out == nil {
			out = []*api.AllocationListStub{}
		}
		s.writeJSON(w, http.StatusOK, idx, out)
	default:
		http.Error(w, "Invalid method or path: "+r.Method+" "+r.URL.Path, http.StatusNotFound)
	}
}

func (s *Server) deregister(w http.ResponseWriter, r *http.Request, ns, id string) {
	purge := r.URL.Query().Get("purge") == "true"
	s.mu.Lock()
	e := s.jobs[key{ns, id}]
	if e == nil {
		s.mu.Unlock()
		http.Error(w, "job not found", http.StatusNotFound)
		return
	}
	idx := s.nextIndex()
	e.job.Stop = ptr(true)
	e.job.ModifyIndex = ptr(idx)
	if purge {
		delete(s.jobs, key{ns, id})
	}
	s.publishLocked(idx, api.Event{Topic: api.TopicJob, Type: "JobDeregistered", Key: id, Payload: payload("Job", e.job)}, ns)
	for _, aid := range e.allocs {
		a := s.allocs[aid]
		if a == nil || a.alloc.DesiredStatus != api.AllocDesiredStatusRun {
			continue
		}
		a.alloc.DesiredStatus = api.AllocDesiredStatusStop
		a.alloc.DesiredDescription = "alloc not needed due to job update"
		s.touchLocked(a, "AllocationUpdateDesiredStatus")
		switch {
		case a.cancel != nil:
			a.cancel("job deregistered")
		case isPending(a.alloc):
			// Never started: the client just drops it.
			s.finishLocked(a, api.AllocClientStatusComplete, 0, false)
		}
	}
	s.updateJobStatusLocked(e)
	s.mu.Unlock()
	s.writeJSON(w, http.StatusOK, idx, api.JobDeregisterResponse{EvalID: newUUID(), EvalCreateIndex: idx, JobModifyIndex: idx})
}

// updateJobStatusLocked derives the job status the way the scheduler
// does for batch jobs: dead once every allocation is terminal (or the job
// is stopped with none), running while one runs, pending otherwise.
func (s *Server) updateJobStatusLocked(e *jobEntry) {
	status := "pending"
	terminal, running := 0, 0
	for _, aid := range e.allocs {
		a := s.allocs[aid]
		if a == nil {
			continue
		}
		switch a.alloc.ClientStatus {
		case api.AllocClientStatusComplete, api.AllocClientStatusFailed, api.AllocClientStatusLost:
			terminal++
		case api.AllocClientStatusRunning, "unknown":
			running++
		}
	}
	switch {
	case running > 0:
		status = "running"
	case len(e.allocs) > 0 && terminal == len(e.allocs):
		status = "dead"
	case *e.job.Stop:
		status = "dead"
	}
	if *e.job.Status == status {
		return
	}
	idx := s.nextIndex()
	e.job.Status = ptr(status)
	e.job.ModifyIndex = ptr(idx)
	s.publishLocked(idx, api.Event{Topic: api.TopicJob, Type: "JobRegistered", Key: *e.job.ID, Payload: payload("Job", e.job)}, *e.job.Namespace)
}

// ---- helpers ---------------------------------------------------------------

func payload(name string, v any) map[string]any {
	// Round-trip through JSON so the payload is what a client decodes off
	// the wire, not shared pointers into the fake's state.
	b, _ := json.Marshal(v)
	var m any
	json.Unmarshal(b, &m)
	return map[string]any{name: m}
}

func ptr[T any](v T) *T { return &v }

func fileNotFound(w http.ResponseWriter, path string) {
	http.Error(w, fmt.Sprintf("stat %s: no such file or directory", path), http.StatusNotFound)
}

// allocDirPath resolves a path inside an allocation directory, refusing
// to leave it.
func allocDirPath(root, p string) (string, error) {
	clean := filepath.Clean("/" + p)
	full := filepath.Join(root, clean)
	if !strings.HasPrefix(full, filepath.Clean(root)+string(filepath.Separator)) && full != filepath.Clean(root) {
		return "", fmt.Errorf("path %q escapes the allocation directory", p)
	}
	return full, nil
}
