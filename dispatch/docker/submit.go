package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// launcher starts runs: Submit writes a run's task directory (through
// taskFiles), its caches (caches) and its network (sandboxNetwork), then
// starts its container with the command line runArgs makes.
type launcher struct {
	*engine
	files  *taskFiles
	caches *caches
	net    *sandboxNetwork
}

// sandboxOrder is the work order as the sandbox finds it: where its
// receipt, token, gateway file and (a preview's) code are inside.
func (b *launcher) sandboxOrder(spec dispatch.RunSpec) dispatch.WorkOrder {
	order := spec.Order
	order.OutputDir, order.TokenFile, order.GatewayFile = dispatch.OutputDir, "", b.files.gatewayFile()
	if order.Mode == dispatch.ModePreview {
		order.GatewayFile = "" // a preview has no agent: no model, no provider keys
	}
	if spec.Token != "" {
		order.TokenFile = dispatch.TokenPath
	}
	if len(spec.Source) > 0 {
		order.Source = dispatch.SourcePath
	}
	return order
}

// Submit implements dispatch.Backend. It is idempotent by task id: the
// container name is derived from it, and the engine refuses a second
// container of the same name, across bot replicas too.
func (b *launcher) Submit(ctx context.Context, spec dispatch.RunSpec) (bool, error) {
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
	unlock, err := b.submitLock(ctx, m.TaskID)
	if err != nil {
		return false, fmt.Errorf("docker backend: %s: %w", m.TaskID, err)
	}
	defer unlock()
	name := containerName(m.TaskID, m.Mode)
	if _, err := b.cli.run(ctx, "container", "inspect", "--format", "{{.Id}}", name); err == nil {
		log.Info().Str("container", name).Msg("run exists already: not submitted again")
		return false, nil
	} else if !errors.Is(err, errNoSuch) {
		return false, fmt.Errorf("docker backend: %w", err)
	}

	created, err := b.create(ctx, spec, isolation, name, log)
	if err != nil {
		// Leave no task directory a restarted bot would take for a run
		// (it would count as pending, then lost): a submission cut short,
		// by the bot stopping too, is submitted afresh.
		_ = os.RemoveAll(b.TaskDir(m.TaskID))
	}
	return created, err
}

// create writes the run's task directory and starts its container named
// name; Submit checked it does not exist.
func (b *launcher) create(ctx context.Context, spec dispatch.RunSpec, isolation dispatch.Isolation, name string, log zerolog.Logger) (bool, error) {
	m := spec.Meta
	order := b.sandboxOrder(spec)
	if err := order.Validate(); err != nil {
		return false, fmt.Errorf("docker backend: %s: %w", m.TaskID, err)
	}
	dir := b.TaskDir(m.TaskID)
	task := order.TaskSandbox()
	if err := b.files.writeTaskDir(dir, order, spec.Token, task); err != nil {
		return false, fmt.Errorf("docker backend: %s: %w", m.TaskID, err)
	}
	if len(spec.Source) > 0 {
		if err := os.WriteFile(filepath.Join(dir, sourceFile), spec.Source, 0o644); err != nil {
			return false, fmt.Errorf("docker backend: %s: write the preview's code: %w", m.TaskID, err)
		}
	}
	rec := record{Meta: m, Container: name, Image: b.o.Image, Isolation: isolation, SubmittedAt: time.Now().UTC()}
	if task && isolation != dispatch.IsolationGVisor {
		// Task mode uses neither profile's grants (a preview is not task
		// mode: it has the coding sandbox's); gVisor's kernel is not a
		// grant, and holds task mode too.
		rec.Isolation = ""
	}
	if err := writeJSON(filepath.Join(dir, "meta.json"), rec, 0o600); err != nil {
		return false, fmt.Errorf("docker backend: %s: %w", m.TaskID, err)
	}
	if err := b.caches.prepareCaches(m); err != nil {
		return false, fmt.Errorf("docker backend: %s: %w", m.TaskID, err)
	}
	if err := b.caches.prepareSetupCache(m); err != nil {
		return false, fmt.Errorf("docker backend: %s: setup cache: %w", m.TaskID, err)
	}
	if err := b.net.prepare(ctx); err != nil {
		return false, fmt.Errorf("docker backend: %s: %w", m.TaskID, err)
	}
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

// runLabels are the labels of a sandbox's container: the run's Meta, from
// which a bot whose task directory is gone rebuilds it (metaFromLabels).
func (b *launcher) runLabels(m dispatch.Meta) []string {
	args := []string{
		"--label", labelManaged + "=true",
		"--label", labelDataDir + "=" + b.o.DataDir,
		"--label", labelTask + "=" + m.TaskID,
		"--label", labelMode + "=" + string(m.Mode),
		"--label", labelRepo + "=" + m.Repo,
		"--label", labelNumber + "=" + strconv.Itoa(m.Number),
		"--label", labelAttempt + "=" + strconv.Itoa(m.Attempt),
		"--label", labelInstallation + "=" + strconv.FormatInt(m.InstallationID, 10),
		"--label", labelRepoID + "=" + strconv.FormatInt(m.RepoID, 10),
	}
	if m.DeliveryID != "" {
		args = append(args, "--label", labelDelivery+"="+m.DeliveryID)
	}
	if m.Set != "" {
		args = append(args, "--label", fmt.Sprintf("%s=%s/%d/%d", labelSet, m.Set, m.Variant, m.Variants))
	}
	return args
}

// runArgs is the `docker run` command line of a sandbox.
func (b *launcher) runArgs(rec record, order dispatch.WorkOrder, dir string, task bool) ([]string, error) {
	m := rec.Meta
	args := append([]string{"run", "--detach",
		"--name", rec.Container,
		"--hostname", "sandbox"}, b.runLabels(m)...)
	args = append(args,
		"--env", "SANDBOX_WORK_ORDER="+dispatch.WorkOrderPath,
		"--stop-timeout", strconv.Itoa(int(b.o.StopGrace.Round(time.Second)/time.Second)),
		// Wait follows the log, so the log driver must be readable; "local"
		// is, and rotates.
		"--log-driver", "local",
		"--mount", bind(filepath.Join(dir, "work-order.json"), dispatch.WorkOrderPath, true),
		"--mount", bind(filepath.Join(dir, "secrets"), dispatch.SecretsDir, true),
		"--mount", bind(filepath.Join(dir, "out"), dispatch.OutputDir, false),
		"--mount", bind(filepath.Join(dir, previewDir), dispatch.PreviewDir, false),
	)
	if order.Source != "" {
		args = append(args, "--mount", bind(filepath.Join(dir, sourceFile), dispatch.SourcePath, true))
	}
	if b.o.Env != nil {
		args = append(args, "--env-file", filepath.Join(dir, "env"))
	}
	args = append(args, b.net.fenceEnv(rec)...)
	args = append(args, b.caches.cacheMounts(m, task)...)
	args = append(args, b.caches.setupCacheArgs(m, task)...)
	if b.o.OSVDir != "" && !task && m.Mode != dispatch.ModePreview {
		args = append(args, "--mount", bind(b.o.OSVDir, dispatch.OSVMount, true))
	}
	args = append(args, b.isolationArgs(rec, dir, task)...)
	for _, h := range b.o.ExtraHosts {
		args = append(args, "--add-host", h)
	}
	args = append(args, b.net.networkArgs()...)
	args = append(args, b.limitArgs(order.Config.Resources.MemoryMB, order.Config.Resources.CPU)...)
	return append(args, b.o.Image), nil
}

// isolationArgs run a task sandbox behind its fence without an inner
// daemon, and any other with its Docker data directory and the isolation
// profile's runtime.
func (b *launcher) isolationArgs(rec record, dir string, task bool) []string {
	if !task {
		return append([]string{"--mount", bind(filepath.Join(dir, "docker"), "/var/lib/docker", false)}, IsolationArgs(rec.Isolation)...)
	}
	// No inner daemon. The init starts as root with the capabilities its
	// fence needs alone, installs it, and runs the runner and the agent as
	// the sandbox user with none (the bounding set emptied), so nothing the
	// agent starts can change the rules.
	args := []string{"--user", "0:0", "--cap-drop", "ALL"}
	for _, c := range dispatch.TaskFenceCaps() {
		args = append(args, "--cap-add", c)
	}
	args = append(args,
		"--security-opt", "no-new-privileges",
		"--env", fmt.Sprintf("%s=%d:%d", dispatch.EnvTaskFence, b.o.SandboxUID, b.o.SandboxGID),
	)
	if rec.Isolation == dispatch.IsolationGVisor {
		args = append(args, "--runtime", dispatch.GVisorRuntime)
	}
	return args
}

// limitArgs bound the sandbox's memory (MiB), CPU (millicores) and
// processes. The configured bound is the default and the ceiling: the bot
// checks a repository's ask against it already; the local CLI's
// repository file is held here.
func (b *launcher) limitArgs(mem, cpu int) []string {
	if mem <= 0 || (b.o.MemoryMB > 0 && mem > b.o.MemoryMB) {
		mem = b.o.MemoryMB
	}
	if cpu <= 0 || (b.o.CPU > 0 && cpu > b.o.CPU) {
		cpu = b.o.CPU
	}
	var args []string
	if mem > 0 {
		args = append(args, "--memory", strconv.Itoa(mem)+"m")
	}
	if cpu > 0 {
		args = append(args, "--cpus", strconv.FormatFloat(float64(cpu)/1000, 'f', 3, 64))
	}
	if b.o.PidsLimit > 0 {
		args = append(args, "--pids-limit", strconv.Itoa(b.o.PidsLimit))
	}
	return args
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

// submitLock serializes the submissions of one task by every bot replica
// sharing the data directory (a file lock the kernel releases when its
// holder dies). Without it two replicas given the same webhook both write
// the task directory before one finds the container the other created:
// the one that lost then revokes the token it minted, which it had just
// written over the winner's, and the running sandbox is left with a dead
// token.
func (b *launcher) submitLock(ctx context.Context, taskID string) (func(), error) {
	dir := filepath.Join(b.o.DataDir, "submit")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, taskID+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }()
	select {
	case err := <-done:
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock the submission of %s: %w", taskID, err)
		}
		return func() { f.Close() }, nil
	case <-ctx.Done():
		// Given up: close the file once the kernel hands over the lock,
		// which releases it again.
		go func() { <-done; f.Close() }()
		return nil, ctx.Err()
	}
}

// fenceEnv tells the sandbox's init what to fence off and what its
// profile is: the deny list, the host wall and its exceptions, and the
// isolation (the init checks its kernel against the gvisor profile).
func (b *sandboxNetwork) fenceEnv(rec record) []string {
	var args []string
	if b.deny != "" {
		args = append(args, "--env", dispatch.EnvDenyNets+"="+b.deny)
	}
	if b.o.HostWall {
		args = append(args, "--env", dispatch.EnvDenyHost+"=1")
	}
	if len(b.o.HostAllow) > 0 {
		args = append(args, "--env", dispatch.EnvAllowHosts+"="+dispatch.FormatHostAllow(b.o.HostAllow))
	}
	if rec.Isolation != "" {
		args = append(args, "--env", dispatch.EnvIsolation+"="+string(rec.Isolation))
	}
	return args
}
