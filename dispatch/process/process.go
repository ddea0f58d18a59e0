// Package process is the dispatch.Backend that runs `sandbox-runner run` as
// a plain child process, without any container: the fallback when no Docker
// engine is reachable, and what `sandbox-agent` uses for local runs. It
// gives no isolation at all, so New says so loudly.
//
// Each run gets a task directory, <data-dir>/tasks/<task-id>/:
//
//	work-order.json  the work order (output_dir and token_file point below)
//	secrets/token    the repo-scoped token, mode 0600, rewritten atomically
//	out/             result.json and artifacts
//	work/, state/    the runner's checkout and its agent state
//	runner.log       the runner's stdout (progress lines) and stderr (logs)
//	meta.json        dispatch.Meta, the pid and start time, for List after a restart
//	exit.json        how the process ended, once it has
//
// Locks are files created with O_EXCL under <data-dir>/locks.
package process

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/budget"
	"github.com/sandbox-bot/sandbox-bot/dispatch/dotenv"
	"github.com/sandbox-bot/sandbox-bot/dispatch/filelock"
	"github.com/sandbox-bot/sandbox-bot/dispatch/filequeue"
)

// Options configures the backend.
type Options struct {
	// Runner is the sandbox-runner binary.
	Runner string
	// DataDir holds tasks/ and locks/.
	DataDir string
	// Env is the runner's whole environment (secrets for ${VAR}, the
	// agent's API keys, OPENCODE_CONFIG); nil means MinimalEnv of this
	// process's environment without pass names. Build it with MinimalEnv:
	// the runner and the agent can read all of it.
	Env []string
	// StopGrace is what Cancel gives the runner between SIGTERM and SIGKILL
	// to push and write its interrupted receipt (default 60s).
	StopGrace time.Duration
	// Warnings receives the no-isolation warning (default os.Stderr).
	Warnings io.Writer
	// Logger receives the backend's logs.
	Logger zerolog.Logger
}

// Backend runs sandbox-runner processes on this machine.
//
// It is an adapter and nothing more: each interface it offers is served by
// a part named for what it does, the parts that act on runs pointing to
// the same task directories, built in New.
type Backend struct {
	// Locks are files under <data-dir>/locks, shared by every bot replica
	// that shares the directory. They list themselves (LockLister), so
	// review batches pending on this backend are found again after a
	// restart.
	*filelock.Locks
	// Queue is <data-dir>/queue, shared the same way, with the routine
	// books and the budget book (budget.Book).
	*filequeue.Store
	*keptSessions // KeepSession, KeptSession: plan runs' agent sessions under <data-dir>/sessions
	*tasks        // Name, TaskDir, OutputDir, LogPath: the runs' task directories
	*runners      // Submit, Cancel, Cleanup: the runner processes
	*runWatch     // Status, List, Wait, Result, Artifacts
	*tokenFiles   // RefreshToken, CurrentToken: the token file of a run
}

// TaskFiles are a run's files on this machine, which only a backend whose
// runs are local has, so no dispatch interface names them: the CLI reads a
// run's receipt in OutputDir, and tests look into the task directory and
// the runner's log.
type TaskFiles interface {
	TaskDir(taskID string) string
	OutputDir(taskID string) string
	LogPath(taskID string) string
}

// Every interface the backend offers, asserted so that a part added with a
// method of the same name as another's (which would hide both) fails to
// build rather than drop a capability the bot looks for at run time.
var (
	_ dispatch.Backend        = (*Backend)(nil)
	_ dispatch.LockLister     = (*Backend)(nil)
	_ dispatch.TokenReader    = (*Backend)(nil)
	_ dispatch.SessionKeeper  = (*Backend)(nil)
	_ dispatch.ArtifactReader = (*Backend)(nil)
	_ budget.Book             = (*Backend)(nil)
	_ TaskFiles               = (*Backend)(nil)
)

// tasks are the runs' task directories under <data-dir>/tasks, and the
// runner processes this Backend started: what every part acting on a run
// reads.
type tasks struct {
	o   Options
	log zerolog.Logger

	mu    sync.Mutex
	procs map[string]*child // runs started by this Backend
}

// keptSessions keeps plan runs' agent sessions (dispatch.SessionKeeper).
// It wraps SessionFiles so that its OutputDir field, one level down, does
// not hide the backend's OutputDir (TaskFiles).
type keptSessions struct {
	*dispatch.SessionFiles
}

// runners start the runner processes, stop them and remove their task
// directories.
type runners struct {
	*tasks
}

// child is a runner process this Backend started and waits for.
type child struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// File names in a task directory.
const (
	workOrderFile = "work-order.json"
	tokenFile     = "secrets/token"
	outDir        = "out"
	logFile       = "runner.log"
	metaFile      = "meta.json"
	exitFile      = "exit.json"
)

// Warning is printed by New: a process run is not a sandbox.
const Warning = "WARNING: the process backend runs the agent directly on this machine, with NO isolation: " +
	"it can read and change anything your user can, including files outside the task. " +
	"Use the docker backend (a reachable Docker engine) for a real sandbox."

// New checks the options, prepares the data directory and prints Warning.
func New(o Options) (*Backend, error) {
	if o.Runner == "" {
		return nil, errors.New("process backend: no sandbox-runner binary given")
	}
	runner, err := exec.LookPath(o.Runner)
	if err != nil {
		return nil, fmt.Errorf("process backend: sandbox-runner binary %q: %w", o.Runner, err)
	}
	if o.Runner, err = filepath.Abs(runner); err != nil {
		return nil, err
	}
	if o.DataDir == "" {
		return nil, errors.New("process backend: no data directory (set SANDBOX_DATA_DIR)")
	}
	if o.DataDir, err = filepath.Abs(o.DataDir); err != nil {
		return nil, fmt.Errorf("process backend: data directory: %w", err)
	}
	for _, d := range []string{o.DataDir, filepath.Join(o.DataDir, "tasks"), filepath.Join(o.DataDir, "locks")} {
		// 0700: task directories hold tokens.
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("process backend: create %s: %w", d, err)
		}
	}
	if o.Env == nil {
		o.Env = MinimalEnv(os.Environ(), nil)
	}
	if o.StopGrace <= 0 {
		o.StopGrace = 60 * time.Second
	}
	if o.Warnings == nil {
		o.Warnings = os.Stderr
	}
	log := o.Logger.With().Str("backend", "process").Logger()
	t := &tasks{o: o, log: log, procs: map[string]*child{}}
	b := &Backend{
		Locks:        filelock.New(filepath.Join(o.DataDir, "locks"), log),
		Store:        filequeue.New(filepath.Join(o.DataDir, "queue")),
		keptSessions: &keptSessions{&dispatch.SessionFiles{Dir: filepath.Join(o.DataDir, "sessions"), OutputDir: t.OutputDir}},
		tasks:        t,
		runners:      &runners{t},
		runWatch:     &runWatch{t},
		tokenFiles:   &tokenFiles{t},
	}
	fmt.Fprintln(o.Warnings, Warning)
	log.Warn().Msg("process backend: no isolation between the agent and this machine")
	return b, nil
}

// Name implements dispatch.Backend.
func (b *tasks) Name() string { return "process" }

// TaskDir is the run's directory (TaskFiles).
func (b *tasks) TaskDir(taskID string) string { return filepath.Join(b.o.DataDir, "tasks", taskID) }

// OutputDir is where result.json and artifacts of a run are.
func (b *tasks) OutputDir(taskID string) string { return filepath.Join(b.TaskDir(taskID), outDir) }

// LogPath is the runner's combined output.
func (b *tasks) LogPath(taskID string) string { return filepath.Join(b.TaskDir(taskID), logFile) }

// meta is meta.json.
type meta struct {
	Meta       dispatch.Meta `json:"meta"`
	PID        int           `json:"pid"`
	StartTicks uint64        `json:"start_ticks"` // /proc/<pid>/stat starttime: tells a reused pid apart
	StartedAt  time.Time     `json:"started_at"`
}

// exitInfo is exit.json.
type exitInfo struct {
	ExitCode int       `json:"exit_code"`
	Signal   string    `json:"signal,omitempty"`
	EndedAt  time.Time `json:"ended_at"`
}

// Submit implements dispatch.Backend. The task directory is created with
// mkdir, which fails if it exists: a second Submit of the same task id,
// from a redelivery or another replica, is a no-op.
func (b *runners) Submit(ctx context.Context, spec dispatch.RunSpec) (bool, error) {
	id := spec.Meta.TaskID
	if id == "" {
		id = spec.Order.TaskID
	}
	if !dispatch.ValidTaskID(id) || id != spec.Order.TaskID {
		return false, fmt.Errorf("process backend: task id %q (meta) / %q (work order) is not a valid, matching task id", spec.Meta.TaskID, spec.Order.TaskID)
	}
	dir := b.TaskDir(id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, os.ErrExist) {
			return false, nil
		}
		return false, fmt.Errorf("process backend: create task directory: %w", err)
	}
	created, err := b.start(dir, spec)
	if err != nil {
		// Leave nothing half made: a retry must be able to start over.
		os.RemoveAll(dir)
		return false, err
	}
	return created, nil
}

func (b *runners) start(dir string, spec dispatch.RunSpec) (bool, error) {
	order := spec.Order
	order.OutputDir = filepath.Join(dir, outDir)
	if err := os.MkdirAll(filepath.Join(dir, "secrets"), 0o700); err != nil {
		return false, err
	}
	if err := os.MkdirAll(order.OutputDir, 0o755); err != nil {
		return false, err
	}
	if spec.Token != "" {
		order.TokenFile = filepath.Join(dir, tokenFile)
		if err := writeAtomic(order.TokenFile, []byte(spec.Token), 0o600); err != nil {
			return false, fmt.Errorf("process backend: write token: %w", err)
		}
	} else {
		order.TokenFile = ""
	}
	if err := order.Validate(); err != nil {
		return false, fmt.Errorf("process backend: %w", err)
	}
	ob, err := json.MarshalIndent(order, "", "  ")
	if err != nil {
		return false, err
	}
	orderPath := filepath.Join(dir, workOrderFile)
	if err := writeAtomic(orderPath, ob, 0o600); err != nil {
		return false, fmt.Errorf("process backend: write work order: %w", err)
	}
	logf, err := os.OpenFile(filepath.Join(dir, logFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return false, fmt.Errorf("process backend: open log: %w", err)
	}
	defer logf.Close()

	cmd := exec.Command(b.o.Runner, "run", "--work-order", orderPath)
	cmd.Dir = dir
	cmd.Env = append(dotenv.Without(b.o.Env, dispatch.EnvWorkOrder), dispatch.EnvWorkOrder+"="+orderPath)
	// Checkout and agent state are per task unless the caller shares them
	// on purpose: the CLI's plan revisions run one after the other and
	// continue one agent session, which must stay in the same checkout.
	if v, ok := lookupEnv(b.o.Env, dispatch.EnvWorkspace); !ok || v == "" {
		cmd.Env = append(cmd.Env, "SANDBOX_WORKSPACE="+filepath.Join(dir, "work"))
	}
	if v, ok := lookupEnv(b.o.Env, dispatch.EnvStateDir); !ok || v == "" {
		cmd.Env = append(cmd.Env, "SANDBOX_STATE_DIR="+filepath.Join(dir, "state"))
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group: a ^C meant for the bot or the CLI does not
	// kill the runner before it has pushed; Cancel decides.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return false, fmt.Errorf("process backend: start %s: %w", b.o.Runner, err)
	}
	m := meta{Meta: spec.Meta, PID: cmd.Process.Pid, StartTicks: startTicks(cmd.Process.Pid), StartedAt: time.Now().UTC()}
	m.Meta.TaskID = order.TaskID
	if m.Meta.Mode == "" {
		m.Meta.Mode = order.Mode
	}
	mb, _ := json.MarshalIndent(m, "", "  ")
	if err := writeAtomic(filepath.Join(dir, metaFile), mb, 0o600); err != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		return false, fmt.Errorf("process backend: write meta: %w", err)
	}
	c := &child{cmd: cmd, done: make(chan struct{})}
	b.mu.Lock()
	b.procs[order.TaskID] = c
	b.mu.Unlock()
	go b.reap(dir, order.TaskID, c)
	b.log.Info().Str("task_id", order.TaskID).Str("repo", spec.Meta.Repo).Int("issue", spec.Meta.Number).Int("pid", m.PID).Msg("runner started")
	return true, nil
}

// reap waits for the child and records how it ended, so Status works from
// the files alone (another Backend, after a restart).
func (b *runners) reap(dir, taskID string, c *child) {
	err := c.cmd.Wait()
	info := exitInfo{ExitCode: c.cmd.ProcessState.ExitCode(), EndedAt: time.Now().UTC()}
	if ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		info.Signal = ws.Signal().String()
	}
	eb, _ := json.Marshal(info)
	if werr := writeAtomic(filepath.Join(dir, exitFile), eb, 0o644); werr != nil {
		b.log.Error().Err(werr).Str("task_id", taskID).Msg("could not record the runner's exit")
	}
	b.log.Info().Str("task_id", taskID).Int("exit_code", info.ExitCode).AnErr("wait", err).Msg("runner ended")
	close(c.done)
}

// Cancel implements dispatch.Backend: SIGTERM to the runner, which stops
// the agent, pushes and writes an interrupted receipt; SIGKILL to its
// process group if it is still there after StopGrace. It does not block.
func (b *runners) Cancel(_ context.Context, taskID string) error {
	st, err := b.status(taskID)
	if err != nil {
		return err
	}
	if st.State.Ended() {
		return nil
	}
	m, err := b.readMeta(taskID)
	if err != nil {
		return err
	}
	if !alive(m.PID, m.StartTicks) {
		return nil
	}
	if err := syscall.Kill(m.PID, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("process backend: stop %s (pid %d): %w", taskID, m.PID, err)
	}
	b.log.Info().Str("task_id", taskID).Int("pid", m.PID).Dur("grace", b.o.StopGrace).Msg("sent SIGTERM to the runner")
	go func() {
		deadline := time.Now().Add(b.o.StopGrace)
		for time.Now().Before(deadline) {
			if !alive(m.PID, m.StartTicks) || b.ended(taskID) {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		if alive(m.PID, m.StartTicks) && !b.ended(taskID) {
			b.log.Warn().Str("task_id", taskID).Int("pid", m.PID).Msg("the runner outlived its grace period: SIGKILL")
			syscall.Kill(-m.PID, syscall.SIGKILL)
		}
	}()
	return nil
}

// Cleanup implements dispatch.Backend. A run still going is refused: the
// caller cancels and waits first.
func (b *runners) Cleanup(_ context.Context, taskID string) error {
	st, err := b.status(taskID)
	if errors.Is(err, dispatch.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if !st.State.Ended() {
		return fmt.Errorf("process backend: %s is still %s; cancel it first", taskID, st.State)
	}
	b.mu.Lock()
	delete(b.procs, taskID)
	b.mu.Unlock()
	if err := os.RemoveAll(b.TaskDir(taskID)); err != nil {
		return fmt.Errorf("process backend: remove %s: %w", taskID, err)
	}
	return nil
}
