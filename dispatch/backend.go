package dispatch

import (
	"context"
	"errors"
	"net"
	"strconv"
	"time"
)

// Errors a Backend returns that callers act on.
var (
	// ErrNotFound: no run with that task id.
	ErrNotFound = errors.New("run not found")
	// ErrNoResult: the run ended without leaving result.json (killed, lost).
	ErrNoResult = errors.New("run left no result.json")
	// ErrLocked: another task holds the lock.
	ErrLocked = errors.New("another task is active on this issue")
	// ErrRunning: the run has not ended, so there is no result to read yet.
	ErrRunning = errors.New("run has not ended yet")
	// ErrNoPreview: the run offers no dev server (none configured, not
	// started yet, or the run has ended).
	ErrNoPreview = errors.New("the run offers no dev server")
)

// PreviewDialer is what a backend that can reach a live run's dev server
// implements (docker: a socket the sandbox's init offers in the task
// directory). Each call is one connection to the dev server; the bot
// speaks HTTP or WebSocket over it and nothing in the sandbox listens on
// the host.
type PreviewDialer interface {
	DialPreview(ctx context.Context, taskID string) (net.Conn, error)
}

// ScreencastDialer reaches a live run's screencast of the agent's browser
// the same way (a socket of the runner's, ScreencastSocket).
type ScreencastDialer interface {
	DialScreencast(ctx context.Context, taskID string) (net.Conn, error)
}

// Meta is what the bot needs to pick a run up again after a restart; the
// backend stores it with the run (Nomad job meta, a file for docker).
type Meta struct {
	TaskID string `json:"task_id"`
	Mode   Mode   `json:"mode"`
	Repo   string `json:"repo"`
	// RepoID is GitHub's id of Repo (a rename keeps it): who may watch the
	// run's live page is decided by it. 0 for runs started before it was
	// kept.
	RepoID         int64 `json:"repo_id,omitempty"`
	Number         int   `json:"number"`
	InstallationID int64 `json:"installation_id"`
	Attempt        int   `json:"attempt"`
	// DeliveryID is the webhook delivery that started the run, for logs.
	DeliveryID string `json:"delivery_id,omitempty"`
	// HeadSHA is the commit the progress Check Run hangs on, once known.
	HeadSHA string `json:"head_sha,omitempty"`
	// Requester is the GitHub login whose label, command or review asked
	// for the run, and Model the model its configuration named: the
	// receipt keeps both for the usage page.
	Requester string `json:"requester,omitempty"`
	Model     string `json:"model,omitempty"`
	// Set, Variant and Variants: the run is attempt Variant of Variants
	// execute runs one /approve started (--attempts), Set the task id the
	// approval has as a whole. The backend keeps them with the run, so a
	// restarted bot knows which attempts are in flight (attempts.go in
	// handlers). Empty for a run that is one of one.
	Set      string `json:"set,omitempty"`
	Variant  int    `json:"variant,omitempty"`
	Variants int    `json:"variants,omitempty"`
}

// RunSpec is everything a backend needs to start one run.
type RunSpec struct {
	Meta  Meta
	Order WorkOrder
	// Token is the repo-scoped installation token. The backend delivers it
	// as a file (never an env var or argument) and keeps it out of logs.
	Token string
	// Isolation is the profile of a coding sandbox; "" is the backend's
	// default, and task mode ignores it.
	Isolation Isolation
	// Source is a preview's code, a gzipped tar (ModePreview), which the
	// backend puts where the work order's Source says.
	Source []byte
}

// State is where a run is in its life.
type State string

// The states of a run.
const (
	StatePending  State = "pending"
	StateRunning  State = "running"
	StateComplete State = "complete" // the sandbox exited (result may or may not exist)
	StateLost     State = "lost"     // the sandbox vanished (node lost, killed from outside)
)

// Ended reports whether the run will not change any more.
func (s State) Ended() bool { return s == StateComplete || s == StateLost }

// RunStatus is a backend's view of one run.
type RunStatus struct {
	Meta      Meta
	State     State
	ExitCode  int
	StartedAt time.Time
	EndedAt   time.Time
}

// Backend runs sandboxes. Implementations: dispatch/docker (one machine),
// dispatch/nomad (a fleet), and an in-memory one for tests.
type Backend interface {
	// Name is "docker", "nomad" or "memory".
	Name() string
	// Submit starts a run unless one with the same task id exists already,
	// in which case it returns created=false and no error: redelivered
	// webhooks and concurrent replicas must not start a second sandbox.
	Submit(ctx context.Context, spec RunSpec) (created bool, err error)
	// Status returns the run's current state, or ErrNotFound.
	Status(ctx context.Context, taskID string) (RunStatus, error)
	// List returns every run the backend still knows, for reconciliation
	// after a restart.
	List(ctx context.Context) ([]RunStatus, error)
	// Wait blocks until the run ends, calling progress for each progress
	// line the runner prints, and returns the final status.
	Wait(ctx context.Context, taskID string, progress func(Progress)) (RunStatus, error)
	// Result reads result.json of an ended run. It returns ErrRunning
	// while the run is pending or running, ErrNoResult when it ended
	// without one, and ErrNotFound for an unknown task id.
	Result(ctx context.Context, taskID string) (*Result, error)
	// Cancel asks the run to stop, giving the runner its grace period to
	// push and write an interrupted receipt.
	Cancel(ctx context.Context, taskID string) error
	// RefreshToken replaces the token file of a live run. Once the run has
	// ended it returns an error and writes nothing: a token no sandbox
	// reads any more must not be left lying around.
	RefreshToken(ctx context.Context, taskID, token string) error
	// Cleanup removes what the run left (job, directories, token) once the
	// bot has taken the result.
	Cleanup(ctx context.Context, taskID string) error

	// Locker is the per-issue lock, shared by every bot replica using
	// this backend.
	Locker
	// Queue holds runs waiting for a slot under the server's caps, shared
	// like the lock.
	Queue
	// RoutineBooks hold what routines claimed, shared like the lock.
	RoutineBooks
}

// Locker is the per-issue lock that makes one task run per issue or PR at
// a time. Implementations: dispatch/filelock (one machine) and Nomad
// Variables (dispatch/nomad).
type Locker interface {
	// Lock takes key (owner/repo#N, see LockKey) for holder (a task id).
	// If another holder has it, it returns that holder and ErrLocked.
	// Taking a lock one already holds succeeds.
	Lock(ctx context.Context, key, holder string) (current string, err error)
	// Unlock releases key if holder holds it. Releasing a free lock, or
	// one another holder has, is not an error and leaves it as it is.
	Unlock(ctx context.Context, key, holder string) error
	// Holder returns who holds key, or "" when it is free. It takes
	// nothing: /abort asks it to find the run to stop.
	Holder(ctx context.Context, key string) (holder string, err error)
}

// LockKey is the per-issue lock name.
func LockKey(repo string, number int) string {
	return repo + "#" + strconv.Itoa(number)
}
