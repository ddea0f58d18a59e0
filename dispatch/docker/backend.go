// Package docker is the dispatch.Backend that runs sandboxes on the local
// Docker engine: the embedded default when there is no Nomad cluster.
//
// Each run gets a task directory on the host, <data-dir>/tasks/<task-id>/:
//
//	work-order.json  the work order, mounted read-only at /sandbox/work-order.json
//	secrets/token    the repo-scoped token (0600), the directory mounted read-only
//	                 at /sandbox/secrets so an atomic rewrite reaches the sandbox
//	out/             result.json and media, mounted at /sandbox/out
//	docker/          the inner daemon's /var/lib/docker (coding modes)
//	meta.json        dispatch.Meta and what the backend needs after a restart
//
// Nothing else from the host is mounted, never the host's Docker socket. The
// container carries labels (task, repo, number, mode) so List works from
// `docker ps -a` after the bot restarts.
package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/budget"
	"github.com/sandbox-bot/sandbox-bot/dispatch/filelock"
	"github.com/sandbox-bot/sandbox-bot/dispatch/filequeue"
)

// Container labels.
const (
	labelManaged      = "org.sandbox-bot.managed"
	labelDataDir      = "org.sandbox-bot.data-dir"
	labelTask         = "org.sandbox-bot.task"
	labelMode         = "org.sandbox-bot.mode"
	labelRepo         = "org.sandbox-bot.repo"
	labelNumber       = "org.sandbox-bot.number"
	labelAttempt      = "org.sandbox-bot.attempt"
	labelInstallation = "org.sandbox-bot.installation"
	labelDelivery     = "org.sandbox-bot.delivery"
	labelRepoID       = "org.sandbox-bot.repo-id"
	// labelSet is Meta's Set, Variant and Variants as set/k/n.
	labelSet = "org.sandbox-bot.attempts"
)

// Options configures the backend.
type Options struct {
	// Image is the sandbox image (deploy/sandbox/build prints it).
	Image string
	// Isolation is the default profile (privileged when empty); a
	// RunSpec's own Isolation wins. Task mode uses neither.
	Isolation dispatch.Isolation
	// DataDir holds tasks/ and locks/. Bot replicas that share it share
	// locks. It must be on the engine's host (it is bind-mounted).
	DataDir string
	// CacheDir, if set, holds caches that survive sandboxes: images/ (the
	// operator's seed images, CacheImage, read-only to sandboxes) and one
	// directory per repository (repos/<owner%2Fname>/{images,npm,go,pip})
	// or, for images with CacheScope installation, per installation
	// (installations/<id>/images). Created when missing.
	CacheDir string
	// CacheScope is CacheScopeRepository (default) or
	// CacheScopeInstallation.
	CacheScope string
	// SetupCacheMaxBytes bounds one repository's setup cache
	// (repos/<...>/setup, setupcache.go); 0 is no bound, negative turns
	// the setup cache off. SetupCacheNodeMaxBytes bounds all of them.
	SetupCacheMaxBytes, SetupCacheNodeMaxBytes int64
	// OSVDir is the operator's offline OSV database on the engine's host,
	// bound read-only into coding sandboxes at dispatch.OSVMount; empty,
	// dependency changes are listed without advisories.
	OSVDir string
	// DenyNets are networks no sandbox may reach, on top of link-local
	// (dispatch.DefaultDenyNets), e.g. the operator's internal networks.
	DenyNets []dispatch.DenyNet
	// HostWall and HostAllow: see Bounds.
	HostWall  bool
	HostAllow []dispatch.HostAllow
	// BotListen are the bot's listen addresses (":8080"): sandboxes are
	// fenced off them on every address of this host and the sandbox
	// network's gateway.
	BotListen []string
	// StopGrace is what Cancel gives the runner to push and write its
	// interrupted receipt (default 60s).
	StopGrace time.Duration
	// ExtraHosts are --add-host entries, e.g. host.docker.internal:host-gateway.
	ExtraHosts []string
	// Network is the docker network of the sandboxes, a bridge with
	// inter-container communication off (ensureNetwork refuses any other);
	// default DefaultNetwork, created when missing.
	Network string
	// Env is given to every sandbox (proxy settings, secrets for ${VAR}).
	// It travels in an env file, never on a command line. Provider keys
	// do not belong here: they go to Gateway.
	Env map[string]string
	// Gateway holds the model providers and their keys, served inside the
	// sandbox by the init's model gateway; the agent never sees a key.
	Gateway *dispatch.GatewayConfig
	// SandboxUID and SandboxGID are the image's sandbox user (default 1000).
	SandboxUID, SandboxGID int
	// MemoryMB and CPU (millicores) bound a sandbox whose work order asks
	// for no resources (CPU no more than the engine's host has); PidsLimit bounds every sandbox's processes, inner
	// containers included. Zero leaves the engine's default (none).
	MemoryMB, CPU, PidsLimit int
	// Docker is the docker CLI (default "docker" on PATH).
	Docker string
	// Logger receives the backend's logs.
	Logger zerolog.Logger
}

// Backend runs sandboxes on the local engine. It is put together from
// parts, one per thing the backend does, and adds nothing of its own: a
// method is found in the part named for its work. Every part points to
// the one engine (options, CLI, logger, the runs seen ended), and the
// parts that need another's work hold it, all built in New.
type Backend struct {
	// engine is what every part shares; Name, TaskDir and OutputDir.
	*engine
	// launcher starts a run: Submit, its task directory and its
	// `docker run` command line.
	*launcher
	// taskFiles writes what a run's sandbox reads from its task
	// directory (work order, token, gateway file); CurrentToken and
	// RefreshToken.
	*taskFiles
	// caches are the directories sandboxes keep between runs; CacheImage.
	*caches
	// sandboxNetwork is the sandboxes' network and what their fence
	// denies.
	*sandboxNetwork
	// watcher follows runs and reads what they left: Status, List, Wait,
	// Result, Artifacts.
	*watcher
	// sockets reach a live run's dev server and screencast.
	*sockets
	// teardown stops runs and removes what they left: Cancel, Cleanup.
	*teardown
	// readiness checks the engine, the image and the isolation profile.
	*readiness
	// Locks are files under <data-dir>/locks, shared by every bot replica
	// that shares the directory.
	*filelock.Locks
	// Queue is <data-dir>/queue, shared the same way.
	*filequeue.Store
	// sessionFiles keeps plan runs' agent sessions under
	// <data-dir>/sessions (dispatch.SessionKeeper).
	sessionFiles
}

// sessionFiles is dispatch's session store one level further down in
// Backend: the store's OutputDir field, at the level of engine's
// OutputDir method, would make both ambiguous and drop the method.
type sessionFiles struct {
	*dispatch.SessionFiles
}

// The optional interfaces callers look for (`.(dispatch.PreviewDialer)`
// and the like): a method two parts both had would drop out of Backend's
// method set silently, and with it the capability.
var (
	_ dispatch.Backend          = (*Backend)(nil)
	_ dispatch.PreviewDialer    = (*Backend)(nil)
	_ dispatch.ScreencastDialer = (*Backend)(nil)
	_ dispatch.ArtifactReader   = (*Backend)(nil)
	_ dispatch.TokenReader      = (*Backend)(nil)
	_ dispatch.SessionKeeper    = (*Backend)(nil)
	_ dispatch.ReadinessChecker = (*Backend)(nil)
	_ dispatch.LockLister       = (*Backend)(nil)
	_ budget.Book               = (*Backend)(nil)
	_ RunDirs                   = (*Backend)(nil)
	_ ImageSeeder               = (*Backend)(nil)
)

// RunDirs are where a run's files are on the bot's host, for callers on
// that host that read or place them there directly rather than through
// dispatch.Backend: the local CLI (cmd/sandbox-agent) keeps a run's
// receipt and media from OutputDir, the session store reads a plan's
// session there, and tests plant a receipt in TaskDir. A Nomad run's
// files are on its client, out of the bot's reach, so dispatch has no
// such seam.
type RunDirs interface {
	TaskDir(taskID string) string
	OutputDir(taskID string) string
}

// ImageSeeder fills the operator's seed image cache from the host's
// engine (see caches.CacheImage). It is this backend's alone: the cache
// is a directory of the engine's host, which Nomad has none of.
type ImageSeeder interface {
	CacheImage(ctx context.Context, ref string) error
}

// New checks the options, prepares the data directory and builds the
// backend's parts.
func New(o Options) (*Backend, error) {
	o, err := checkOptions(o)
	if err != nil {
		return nil, err
	}
	log := o.Logger.With().Str("backend", "docker").Logger()
	e := &engine{o: o, cli: cli{bin: o.Docker}, log: log}
	c := &caches{engine: e}
	n := &sandboxNetwork{engine: e}
	w := &watcher{engine: e}
	f := &taskFiles{engine: e, runs: w}
	return &Backend{
		engine:         e,
		launcher:       &launcher{engine: e, files: f, caches: c, net: n},
		taskFiles:      f,
		caches:         c,
		sandboxNetwork: n,
		watcher:        w,
		sockets:        &sockets{engine: e},
		teardown:       &teardown{engine: e},
		readiness:      &readiness{engine: e},
		Locks:          filelock.New(filepath.Join(o.DataDir, "locks"), log),
		Store:          filequeue.New(filepath.Join(o.DataDir, "queue")),
		sessionFiles:   sessionFiles{&dispatch.SessionFiles{Dir: filepath.Join(o.DataDir, "sessions"), OutputDir: e.OutputDir}},
	}, nil
}

// checkOptions fills o's defaults and makes the data and cache
// directories.
func checkOptions(o Options) (Options, error) {
	if o.Image == "" {
		return o, errors.New("docker backend: no sandbox image (set SANDBOX_IMAGE; deploy/sandbox/build prints one)")
	}
	if o.DataDir == "" {
		return o, errors.New("docker backend: no data directory (set SANDBOX_DATA_DIR)")
	}
	abs, err := filepath.Abs(o.DataDir)
	if err != nil {
		return o, fmt.Errorf("docker backend: data directory %q: %w", o.DataDir, err)
	}
	o.DataDir = abs
	if o.Isolation, err = dispatch.ParseIsolation(string(o.Isolation)); err != nil {
		return o, fmt.Errorf("docker backend: isolation %w", err)
	}
	if o.StopGrace <= 0 {
		o.StopGrace = 60 * time.Second
	}
	if o.SandboxUID == 0 {
		o.SandboxUID = 1000
	}
	if o.SandboxGID == 0 {
		o.SandboxGID = 1000
	}
	if o.Docker == "" {
		o.Docker = "docker"
	}
	if _, err := exec.LookPath(o.Docker); err != nil {
		return o, fmt.Errorf("docker backend: docker CLI %q not found: %w", o.Docker, err)
	}
	for _, d := range []string{o.DataDir, filepath.Join(o.DataDir, "tasks"), filepath.Join(o.DataDir, "locks")} {
		// 0700: task directories hold tokens.
		if err := os.MkdirAll(d, 0o700); err != nil {
			return o, fmt.Errorf("docker backend: create %s: %w", d, err)
		}
	}
	if o.CacheDir != "" {
		if o.CacheDir, err = filepath.Abs(o.CacheDir); err != nil {
			return o, fmt.Errorf("docker backend: cache directory: %w", err)
		}
		p := filepath.Join(o.CacheDir, seedImages)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return o, fmt.Errorf("docker backend: create cache %s: %w", p, err)
		}
	}
	if o.CacheScope, err = ParseCacheScope(o.CacheScope); err != nil {
		return o, fmt.Errorf("docker backend: %w", err)
	}
	if o.CPU > 0 {
		o.CPU = defaultCPU(o.CPU, engineCPUs(o.Docker))
	}
	return o, nil
}

// Available reports whether a Docker engine answers, with the reason when
// none does.
func Available(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "version", "--format", "{{.Server.Version}}").CombinedOutput()
	if err != nil {
		return fmt.Errorf("no Docker engine reachable through the docker CLI: %s", strings.TrimSpace(string(out)))
	}
	return nil
}

// engine is what every part of the backend shares, set in New and never
// after: the options, the docker CLI, the logger, and the runs the engine
// reported ended. Its methods are the reads every part makes: where a
// run's files are, its record, its container, its logger.
type engine struct {
	o   Options
	cli cli
	log zerolog.Logger
	// ended spares the engine questions about runs it reported ended
	// (watcher.Status fills it, teardown.Cleanup empties it).
	ended endedRuns
}

// Name implements dispatch.Backend.
func (b *engine) Name() string { return "docker" }

// TaskDir is the run's directory on the host.
func (b *engine) TaskDir(taskID string) string {
	return filepath.Join(b.o.DataDir, "tasks", taskID)
}

// OutputDir is where result.json and the media of a run are on the host;
// the paths in result.json are relative to it.
func (b *engine) OutputDir(taskID string) string {
	return filepath.Join(b.TaskDir(taskID), "out")
}

func containerName(taskID string, mode dispatch.Mode) string {
	return "sandbox-" + taskID + "-" + string(mode)
}

// record is meta.json.
type record struct {
	Meta        dispatch.Meta      `json:"meta"`
	Container   string             `json:"container"`
	Image       string             `json:"image"`
	Isolation   dispatch.Isolation `json:"isolation,omitempty"`
	SubmittedAt time.Time          `json:"submitted_at"`
}

func (b *engine) readRecord(taskID string) (*record, error) {
	raw, err := os.ReadFile(filepath.Join(b.TaskDir(taskID), "meta.json"))
	if err != nil {
		return nil, err
	}
	var r record
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(b.TaskDir(taskID), "meta.json"), err)
	}
	return &r, nil
}

// lookup finds a run's container name: from meta.json, else by label.
func (b *engine) lookup(ctx context.Context, taskID string) (string, *record, error) {
	rec, err := b.readRecord(taskID)
	if err == nil {
		return rec.Container, rec, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", nil, fmt.Errorf("docker backend: %w", err)
	}
	out, err := b.cli.run(ctx, "ps", "-a", "--format", "{{.Names}}",
		"--filter", "label="+labelTask+"="+taskID,
		"--filter", "label="+labelDataDir+"="+b.o.DataDir)
	if err != nil {
		return "", nil, fmt.Errorf("docker backend: %w", err)
	}
	names := strings.Fields(out)
	if len(names) == 0 {
		return "", nil, dispatch.ErrNotFound
	}
	return names[0], nil, nil
}

func (b *engine) runLogger(m dispatch.Meta) zerolog.Logger {
	l := b.log.With().Str("task_id", m.TaskID).Str("mode", string(m.Mode))
	if m.Repo != "" {
		l = l.Str("repo", m.Repo)
	}
	if m.Number > 0 {
		l = l.Int("number", m.Number)
	}
	return l.Logger()
}
