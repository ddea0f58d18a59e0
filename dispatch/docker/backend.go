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
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/filelock"
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
	// DenyNets are networks no sandbox may reach, on top of link-local
	// (dispatch.DefaultDenyNets), e.g. the operator's internal networks.
	DenyNets []dispatch.DenyNet
	// BotListen are the bot's listen addresses (":8080"): sandboxes are
	// fenced off them on every address of this host and the sandbox
	// network's gateway.
	BotListen []string
	// StopGrace is what Cancel gives the runner to push and write its
	// interrupted receipt (default 60s).
	StopGrace time.Duration
	// ExtraHosts are --add-host entries, e.g. host.docker.internal:host-gateway.
	ExtraHosts []string
	// Network is the docker network of the sandboxes (default: the
	// engine's default bridge).
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

// Backend runs sandboxes on the local engine.
type Backend struct {
	// Locks are files under <data-dir>/locks, shared by every bot replica
	// that shares the directory.
	*filelock.Locks
	o   Options
	cli cli
	log zerolog.Logger

	denyOnce sync.Once
	deny     string // EnvDenyNets' value, worked out at the first Submit
}

var _ dispatch.Backend = (*Backend)(nil)

// New checks the options and prepares the data directory.
func New(o Options) (*Backend, error) {
	if o.Image == "" {
		return nil, errors.New("docker backend: no sandbox image (set SANDBOX_IMAGE; deploy/sandbox/build prints one)")
	}
	if o.DataDir == "" {
		return nil, errors.New("docker backend: no data directory (set SANDBOX_DATA_DIR)")
	}
	abs, err := filepath.Abs(o.DataDir)
	if err != nil {
		return nil, fmt.Errorf("docker backend: data directory %q: %w", o.DataDir, err)
	}
	o.DataDir = abs
	if o.Isolation, err = dispatch.ParseIsolation(string(o.Isolation)); err != nil {
		return nil, fmt.Errorf("docker backend: isolation %w", err)
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
		return nil, fmt.Errorf("docker backend: docker CLI %q not found: %w", o.Docker, err)
	}
	for _, d := range []string{o.DataDir, filepath.Join(o.DataDir, "tasks"), filepath.Join(o.DataDir, "locks")} {
		// 0700: task directories hold tokens.
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("docker backend: create %s: %w", d, err)
		}
	}
	if o.CacheDir != "" {
		if o.CacheDir, err = filepath.Abs(o.CacheDir); err != nil {
			return nil, fmt.Errorf("docker backend: cache directory: %w", err)
		}
		p := filepath.Join(o.CacheDir, seedImages)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return nil, fmt.Errorf("docker backend: create cache %s: %w", p, err)
		}
	}
	if o.CacheScope, err = ParseCacheScope(o.CacheScope); err != nil {
		return nil, fmt.Errorf("docker backend: %w", err)
	}
	if o.CPU > 0 {
		o.CPU = defaultCPU(o.CPU, engineCPUs(o.Docker))
	}
	log := o.Logger.With().Str("backend", "docker").Logger()
	b := &Backend{Locks: filelock.New(filepath.Join(o.DataDir, "locks"), log), o: o, cli: cli{bin: o.Docker}, log: log}
	return b, nil
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

// Name implements dispatch.Backend.
func (b *Backend) Name() string { return "docker" }

// TaskDir is the run's directory on the host.
func (b *Backend) TaskDir(taskID string) string {
	return filepath.Join(b.o.DataDir, "tasks", taskID)
}

// OutputDir is where result.json and the media of a run are on the host;
// the paths in result.json are relative to it.
func (b *Backend) OutputDir(taskID string) string {
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

func (b *Backend) readRecord(taskID string) (*record, error) {
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

func (b *Backend) runLogger(m dispatch.Meta) zerolog.Logger {
	l := b.log.With().Str("task_id", m.TaskID).Str("mode", string(m.Mode))
	if m.Repo != "" {
		l = l.Str("repo", m.Repo)
	}
	if m.Number > 0 {
		l = l.Int("number", m.Number)
	}
	return l.Logger()
}

// Submit implements dispatch.Backend. It is idempotent by task id: the
// container name is derived from it, and the engine refuses a second
// container of the same name, across bot replicas too.
func (b *Backend) Submit(ctx context.Context, spec dispatch.RunSpec) (bool, error) {
	m := spec.Meta
	if !dispatch.ValidTaskID(m.TaskID) {
		return false, fmt.Errorf("docker backend: task id %q is not of the form T-XXXXXXXX", m.TaskID)
	}
	if spec.Order.TaskID != m.TaskID || spec.Order.Mode != m.Mode {
		return false, fmt.Errorf("docker backend: work order is for %s/%s but the run is %s/%s", spec.Order.TaskID, spec.Order.Mode, m.TaskID, m.Mode)
	}
	isolation := spec.Isolation
	if isolation == "" {
		isolation = b.o.Isolation
	}
	if _, err := dispatch.ParseIsolation(string(isolation)); err != nil {
		return false, fmt.Errorf("docker backend: %s: isolation %w", m.TaskID, err)
	}
	log := b.runLogger(m)
	name := containerName(m.TaskID, m.Mode)
	if _, err := b.cli.run(ctx, "container", "inspect", "--format", "{{.Id}}", name); err == nil {
		log.Info().Str("container", name).Msg("run exists already: not submitted again")
		return false, nil
	} else if !errors.Is(err, errNoSuch) {
		return false, fmt.Errorf("docker backend: %w", err)
	}

	order := spec.Order
	order.OutputDir = dispatch.OutputDir
	order.TokenFile = ""
	if spec.Token != "" {
		order.TokenFile = dispatch.TokenPath
	}
	order.GatewayFile = b.gatewayFile()
	if err := order.Validate(); err != nil {
		return false, fmt.Errorf("docker backend: %s: %w", m.TaskID, err)
	}
	dir := b.TaskDir(m.TaskID)
	task := order.Mode == dispatch.ModeTask || order.Config.Mode == "task"
	if err := b.writeTaskDir(dir, order, spec.Token, task); err != nil {
		return false, fmt.Errorf("docker backend: %s: %w", m.TaskID, err)
	}
	rec := record{Meta: m, Container: name, Image: b.o.Image, Isolation: isolation, SubmittedAt: time.Now().UTC()}
	if task {
		rec.Isolation = ""
	}
	if err := writeJSON(filepath.Join(dir, "meta.json"), rec, 0o600); err != nil {
		return false, fmt.Errorf("docker backend: %s: %w", m.TaskID, err)
	}
	if err := b.prepareCaches(m); err != nil {
		return false, fmt.Errorf("docker backend: %s: %w", m.TaskID, err)
	}
	b.denyOnce.Do(func() { b.deny = dispatch.FormatDenyNets(b.denyNets(ctx)) })
	args, err := b.runArgs(rec, order, dir, task)
	if err != nil {
		return false, fmt.Errorf("docker backend: %s: %w", m.TaskID, err)
	}
	if _, err := b.cli.run(ctx, args...); err != nil {
		if errors.Is(err, errConflict) {
			log.Info().Str("container", name).Msg("another submission created the run first")
			return false, nil
		}
		// A container the engine created but could not start (bad mount,
		// unknown device) would block the name; remove it.
		rmCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_, _ = b.cli.run(rmCtx, "rm", "-f", name)
		// Nor leave a task directory a restarted bot would take for a run.
		_ = os.RemoveAll(dir)
		return false, fmt.Errorf("docker backend: start %s: %w", m.TaskID, err)
	}
	log.Info().Str("container", name).Str("image", b.o.Image).Str("isolation", string(rec.Isolation)).Msg("sandbox started")
	return true, nil
}

// writeTaskDir lays the task directory out. Modes: the directory itself is
// 0700 (tokens); what the sandbox user must read or write is handed to it
// when the bot runs as root, and opened up inside the 0700 directory when
// it cannot be.
func (b *Backend) writeTaskDir(dir string, order dispatch.WorkOrder, token string, task bool) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	asRoot := os.Geteuid() == 0
	sameUser := os.Geteuid() == b.o.SandboxUID
	give := func(p string) {
		if asRoot {
			_ = os.Chown(p, b.o.SandboxUID, b.o.SandboxGID)
		}
	}
	secrets := filepath.Join(dir, "secrets")
	out := filepath.Join(dir, "out")
	if err := os.MkdirAll(secrets, 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	give(out)
	if !asRoot && !sameUser {
		// Neither owner nor root: the sandbox user needs write access by mode.
		if err := os.Chmod(out, 0o777); err != nil {
			return err
		}
	}
	if !task {
		if err := os.MkdirAll(filepath.Join(dir, "docker"), 0o711); err != nil {
			return err
		}
	}
	// The work order and the token are the runner's: in a coding sandbox
	// it has its own uid, and the init moves both out of the agent's reach
	// (runner/sandboxinit/identities.go). A bot that is not root cannot
	// give files away and leaves them readable inside its 0700 directory.
	orderMode := os.FileMode(0o644)
	if asRoot {
		orderMode = 0o600
	}
	if err := writeJSON(filepath.Join(dir, "work-order.json"), order, orderMode); err != nil {
		return err
	}
	if asRoot {
		uid, gid := b.secretOwner(dir)
		if err := os.Chown(filepath.Join(dir, "work-order.json"), uid, gid); err != nil {
			return fmt.Errorf("give the work order to uid %d: %w", uid, err)
		}
	}
	if token != "" {
		if err := b.writeToken(dir, token); err != nil {
			return err
		}
	}
	if err := b.writeGateway(dir, task); err != nil {
		return err
	}
	if b.o.Env != nil {
		var sb strings.Builder
		keys := make([]string, 0, len(b.o.Env))
		for k := range b.o.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := b.o.Env[k]
			if strings.ContainsAny(k, "=\n") || strings.Contains(v, "\n") {
				return fmt.Errorf("env %s: names cannot hold = or newlines, values cannot hold newlines", k)
			}
			fmt.Fprintf(&sb, "%s=%s\n", k, v)
		}
		if err := writeFile(filepath.Join(dir, "env"), []byte(sb.String()), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// writeToken replaces secrets/token atomically: the sandbox's git
// credential helper reads it on every use and must never see half a token.
func (b *Backend) writeToken(dir, token string) error {
	mode := os.FileMode(0o600)
	asRoot := os.Geteuid() == 0
	if !asRoot && os.Geteuid() != b.o.SandboxUID {
		// The file cannot be given to the sandbox user; its 0700 task
		// directory still keeps other host users out.
		mode = 0o644
	}
	p := filepath.Join(dir, "secrets", "token")
	tmp, err := os.CreateTemp(filepath.Dir(p), ".token-*")
	if err != nil {
		return fmt.Errorf("write token: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(token); err != nil {
		tmp.Close()
		return fmt.Errorf("write token: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write token: %w", err)
	}
	if err := os.Chmod(tmp.Name(), mode); err != nil {
		return fmt.Errorf("write token: %w", err)
	}
	if asRoot {
		uid, gid := b.secretOwner(dir)
		if err := os.Chown(tmp.Name(), uid, gid); err != nil {
			return fmt.Errorf("write token: %w", err)
		}
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return fmt.Errorf("write token: %w", err)
	}
	return nil
}

// secretOwner is who reads the task's work order and token: the image's
// runner user in a coding sandbox (which has an inner Docker directory),
// the sandbox user in task mode, where the container runs as that user
// from the start.
func (b *Backend) secretOwner(dir string) (uid, gid int) {
	if _, err := os.Stat(filepath.Join(dir, "docker")); err == nil {
		return dispatch.RunnerUID, dispatch.RunnerUID
	}
	return b.o.SandboxUID, b.o.SandboxGID
}

func writeJSON(path string, v any, mode os.FileMode) error {
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFile(path, append(raw, '\n'), mode)
}

func writeFile(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), mode); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// runArgs is the `docker run` command line of a sandbox.
func (b *Backend) runArgs(rec record, order dispatch.WorkOrder, dir string, task bool) ([]string, error) {
	m := rec.Meta
	args := []string{"run", "--detach",
		"--name", rec.Container,
		"--hostname", "sandbox",
		"--label", labelManaged + "=true",
		"--label", labelDataDir + "=" + b.o.DataDir,
		"--label", labelTask + "=" + m.TaskID,
		"--label", labelMode + "=" + string(m.Mode),
		"--label", labelRepo + "=" + m.Repo,
		"--label", labelNumber + "=" + strconv.Itoa(m.Number),
		"--label", labelAttempt + "=" + strconv.Itoa(m.Attempt),
		"--label", labelInstallation + "=" + strconv.FormatInt(m.InstallationID, 10),
		"--env", "SANDBOX_WORK_ORDER=" + dispatch.WorkOrderPath,
		"--stop-timeout", strconv.Itoa(int(b.o.StopGrace.Round(time.Second) / time.Second)),
		// Wait follows the log, so the log driver must be readable; "local"
		// is, and rotates.
		"--log-driver", "local",
		"--mount", bind(filepath.Join(dir, "work-order.json"), dispatch.WorkOrderPath, true),
		"--mount", bind(filepath.Join(dir, "secrets"), dispatch.SecretsDir, true),
		"--mount", bind(filepath.Join(dir, "out"), dispatch.OutputDir, false),
	}
	if m.DeliveryID != "" {
		args = append(args, "--label", labelDelivery+"="+m.DeliveryID)
	}
	if b.o.Env != nil {
		args = append(args, "--env-file", filepath.Join(dir, "env"))
	}
	if b.deny != "" {
		args = append(args, "--env", dispatch.EnvDenyNets+"="+b.deny)
	}
	args = append(args, b.cacheMounts(m, task)...)
	if task {
		// No inner daemon, no privileges: the init and the runner run as
		// the sandbox user from the start.
		args = append(args,
			"--user", fmt.Sprintf("%d:%d", b.o.SandboxUID, b.o.SandboxGID),
			"--cap-drop", "ALL",
			"--security-opt", "no-new-privileges",
		)
	} else {
		args = append(args, "--mount", bind(filepath.Join(dir, "docker"), "/var/lib/docker", false))
		args = append(args, isolationArgs(rec.Isolation)...)
	}
	for _, h := range b.o.ExtraHosts {
		args = append(args, "--add-host", h)
	}
	if b.o.Network != "" {
		args = append(args, "--network", b.o.Network)
	}
	mem, cpu := order.Config.Resources.MemoryMB, order.Config.Resources.CPU
	if mem <= 0 {
		mem = b.o.MemoryMB
	}
	if cpu <= 0 {
		cpu = b.o.CPU
	}
	if mem > 0 {
		args = append(args, "--memory", strconv.Itoa(mem)+"m")
	}
	if cpu > 0 {
		args = append(args, "--cpus", strconv.FormatFloat(float64(cpu)/1000, 'f', 3, 64))
	}
	if b.o.PidsLimit > 0 {
		args = append(args, "--pids-limit", strconv.Itoa(b.o.PidsLimit))
	}
	return append(args, b.o.Image), nil
}

// bind is a --mount value; unlike -v it refuses a missing source instead of
// creating a root-owned directory there.
func bind(src, dst string, readOnly bool) string {
	v := "type=bind,source=" + src + ",target=" + dst
	if readOnly {
		v += ",readonly"
	}
	return v
}

// inspected is the part of `docker container inspect` the backend reads.
type inspected struct {
	Name  string `json:"Name"`
	State struct {
		Status     string    `json:"Status"`
		ExitCode   int       `json:"ExitCode"`
		OOMKilled  bool      `json:"OOMKilled"`
		StartedAt  time.Time `json:"StartedAt"`
		FinishedAt time.Time `json:"FinishedAt"`
	} `json:"State"`
	Config struct {
		Labels map[string]string `json:"Labels"`
	} `json:"Config"`
}

func (b *Backend) inspect(ctx context.Context, names ...string) ([]inspected, error) {
	out, err := b.cli.run(ctx, append([]string{"container", "inspect"}, names...)...)
	if err != nil {
		return nil, err
	}
	var got []inspected
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		return nil, fmt.Errorf("decode docker container inspect: %w", err)
	}
	return got, nil
}

// state maps the engine's container state to the run's.
func state(engine string) dispatch.State {
	switch engine {
	case "created":
		return dispatch.StatePending
	case "running", "paused", "restarting", "removing":
		return dispatch.StateRunning
	case "exited":
		return dispatch.StateComplete
	}
	return dispatch.StateLost // dead, or anything new
}

func zeroIfUnset(t time.Time) time.Time {
	if t.Year() <= 1 {
		return time.Time{}
	}
	return t
}

// metaFromLabels rebuilds Meta when the task directory is gone.
func metaFromLabels(l map[string]string) dispatch.Meta {
	n, _ := strconv.Atoi(l[labelNumber])
	a, _ := strconv.Atoi(l[labelAttempt])
	inst, _ := strconv.ParseInt(l[labelInstallation], 10, 64)
	return dispatch.Meta{
		TaskID: l[labelTask], Mode: dispatch.Mode(l[labelMode]), Repo: l[labelRepo],
		Number: n, Attempt: a, InstallationID: inst, DeliveryID: l[labelDelivery],
	}
}

func (b *Backend) status(c inspected, rec *record) dispatch.RunStatus {
	st := dispatch.RunStatus{
		State:     state(c.State.Status),
		ExitCode:  c.State.ExitCode,
		StartedAt: zeroIfUnset(c.State.StartedAt),
		EndedAt:   zeroIfUnset(c.State.FinishedAt),
	}
	if rec != nil {
		st.Meta = rec.Meta
	} else {
		st.Meta = metaFromLabels(c.Config.Labels)
	}
	if !st.State.Ended() {
		st.EndedAt = time.Time{}
	}
	return st
}

// lookup finds a run's container name: from meta.json, else by label.
func (b *Backend) lookup(ctx context.Context, taskID string) (string, *record, error) {
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

// Status implements dispatch.Backend.
func (b *Backend) Status(ctx context.Context, taskID string) (dispatch.RunStatus, error) {
	name, rec, err := b.lookup(ctx, taskID)
	if err != nil {
		return dispatch.RunStatus{}, err
	}
	got, err := b.inspect(ctx, name)
	if errors.Is(err, errNoSuch) {
		if rec == nil {
			return dispatch.RunStatus{}, dispatch.ErrNotFound
		}
		return b.orphan(rec), nil
	}
	if err != nil {
		return dispatch.RunStatus{}, fmt.Errorf("docker backend: %w", err)
	}
	return b.status(got[0], rec), nil
}

// orphanGrace is how long a task directory may exist without its container
// before the run counts as lost: Submit writes the directory first.
const orphanGrace = time.Minute

// orphan is the status of a task directory without a container.
func (b *Backend) orphan(rec *record) dispatch.RunStatus {
	st := dispatch.RunStatus{Meta: rec.Meta, State: dispatch.StateLost}
	if time.Since(rec.SubmittedAt) < orphanGrace {
		st.State = dispatch.StatePending
	}
	return st
}

// List implements dispatch.Backend: every container of this data directory
// and every task directory whose container is gone.
func (b *Backend) List(ctx context.Context) ([]dispatch.RunStatus, error) {
	out, err := b.cli.run(ctx, "ps", "-a", "--format", "{{.Names}}",
		"--filter", "label="+labelManaged+"=true",
		"--filter", "label="+labelDataDir+"="+b.o.DataDir)
	if err != nil {
		return nil, fmt.Errorf("docker backend: %w", err)
	}
	var runs []dispatch.RunStatus
	seen := map[string]bool{}
	if names := strings.Fields(out); len(names) > 0 {
		got, err := b.inspect(ctx, names...)
		if err != nil && !errors.Is(err, errNoSuch) {
			return nil, fmt.Errorf("docker backend: %w", err)
		}
		for _, c := range got {
			id := c.Config.Labels[labelTask]
			rec, _ := b.readRecord(id)
			runs = append(runs, b.status(c, rec))
			seen[id] = true
		}
	}
	entries, err := os.ReadDir(filepath.Join(b.o.DataDir, "tasks"))
	if err != nil {
		return nil, fmt.Errorf("docker backend: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() || seen[e.Name()] || !dispatch.ValidTaskID(e.Name()) {
			continue
		}
		if rec, err := b.readRecord(e.Name()); err == nil {
			runs = append(runs, b.orphan(rec))
		}
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].Meta.TaskID < runs[j].Meta.TaskID })
	return runs, nil
}

// Result implements dispatch.Backend.
func (b *Backend) Result(ctx context.Context, taskID string) (*dispatch.Result, error) {
	if _, err := os.Stat(b.TaskDir(taskID)); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("docker backend: %s: %w", taskID, dispatch.ErrNotFound)
	}
	if err := b.notRunning(ctx, taskID); err != nil {
		return nil, err
	}
	// out/ is bind-mounted into the sandbox: whatever is there, the
	// sandbox made.
	r, err := dispatch.ReadResultFile(b.TaskDir(taskID), "out/"+dispatch.ResultFile)
	if err != nil {
		return nil, fmt.Errorf("docker backend: %s: %w", taskID, err)
	}
	return r, nil
}

// Cancel implements dispatch.Backend: `docker stop -t <grace>`. The init
// passes SIGTERM to the runner, which pushes and writes its interrupted
// receipt; the engine kills what is left after the grace.
func (b *Backend) Cancel(ctx context.Context, taskID string) error {
	name, rec, err := b.lookup(ctx, taskID)
	if err != nil {
		return err
	}
	log := b.log.With().Str("task_id", taskID).Logger()
	if rec != nil {
		log = b.runLogger(rec.Meta)
	}
	grace := strconv.Itoa(int(b.o.StopGrace.Round(time.Second) / time.Second))
	log.Info().Str("container", name).Str("grace_seconds", grace).Msg("stopping sandbox")
	if _, err := b.cli.run(ctx, "stop", "--time", grace, name); err != nil {
		if errors.Is(err, errNoSuch) {
			return dispatch.ErrNotFound
		}
		return fmt.Errorf("docker backend: %w", err)
	}
	return nil
}

// notRunning returns ErrRunning while the run's container has not ended.
// A task directory whose container cannot be found is left to the caller:
// it reads what the directory holds.
func (b *Backend) notRunning(ctx context.Context, taskID string) error {
	st, err := b.Status(ctx, taskID)
	switch {
	case errors.Is(err, dispatch.ErrNotFound):
		return nil
	case err != nil:
		return err
	case !st.State.Ended():
		return fmt.Errorf("docker backend: %s is %s: %w", taskID, st.State, dispatch.ErrRunning)
	}
	return nil
}

// RefreshToken implements dispatch.Backend.
func (b *Backend) RefreshToken(ctx context.Context, taskID, token string) error {
	dir := b.TaskDir(taskID)
	if _, err := os.Stat(filepath.Join(dir, "secrets")); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("docker backend: refresh token of %s: %w", taskID, dispatch.ErrNotFound)
	}
	if st, err := b.Status(ctx, taskID); err == nil && st.State.Ended() {
		// Writing it now would leave a live token for nobody.
		return fmt.Errorf("docker backend: refresh token of %s: the run has ended (%s); nothing written", taskID, st.State)
	}
	if err := b.writeToken(dir, token); err != nil {
		return fmt.Errorf("docker backend: %s: %w", taskID, err)
	}
	return nil
}

// Cleanup implements dispatch.Backend: the container and the task
// directory go. The inner daemon's files under docker/ belong to root (and
// out/ to the sandbox user); a bot that is not root removes them through a
// throwaway container of the sandbox image.
func (b *Backend) Cleanup(ctx context.Context, taskID string) error {
	if !dispatch.ValidTaskID(taskID) {
		return fmt.Errorf("docker backend: task id %q is not of the form T-XXXXXXXX", taskID)
	}
	name, _, err := b.lookup(ctx, taskID)
	if err != nil && !errors.Is(err, dispatch.ErrNotFound) {
		return err
	}
	if name != "" {
		if _, err := b.cli.run(ctx, "rm", "--force", "--volumes", name); err != nil && !errors.Is(err, errNoSuch) {
			return fmt.Errorf("docker backend: %w", err)
		}
	}
	dir := b.TaskDir(taskID)
	if err := os.RemoveAll(dir); err == nil {
		return nil
	} else if !errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("docker backend: remove %s: %w", dir, err)
	}
	if _, err := b.cli.run(ctx, "run", "--rm", "--network", "none", "--user", "0:0",
		"--entrypoint", "find", "--mount", bind(dir, "/task", false),
		b.o.Image, "/task", "-mindepth", "1", "-delete"); err != nil {
		return fmt.Errorf("docker backend: remove the root-owned files of %s through a container: %w", dir, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("docker backend: remove %s: %w", dir, err)
	}
	return nil
}
