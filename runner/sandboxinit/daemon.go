package sandboxinit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

// Where the inner daemons keep their state. /var/lib/docker is the bind
// into the task directory; the rest lives in the container's own root
// filesystem, which survives a restart of the same container (a Nomad task
// restart, `docker start` after a kill). That is what leaves stale state.
const (
	dockerRoot       = "/var/lib/docker"
	dockerSocket     = "/var/run/docker.sock"
	containerdSocket = "/run/containerd/containerd.sock"
	logDir           = "/var/log"
)

// staleState lists what a killed sandbox leaves behind that stops the next
// start of the daemons: pid files and sockets make dockerd and containerd
// refuse to start, libnetwork's local store keeps endpoints of containers
// that no longer exist ("endpoint with name ... already exists").
var staleState = []string{
	"/var/run/docker.pid",
	dockerSocket,
	"/var/run/docker",
	"/run/containerd",
	filepath.Join(dockerRoot, "network", "files", "local-kv.db"),
}

// removeStaleState deletes what a previous start of this container left.
func removeStaleState(log zerolog.Logger) error {
	var removed []string
	paths := append([]string(nil), staleState...)
	probes, _ := filepath.Glob(filepath.Join(dockerRoot, ".storage-probe-*"))
	paths = append(paths, probes...)
	for _, p := range paths {
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("remove stale %s: %w", p, err)
		}
		removed = append(removed, p)
	}
	if len(removed) > 0 {
		log.Info().Strs("removed", removed).Msg("stale state of a previous start removed")
	}
	return nil
}

// daemon is the inner containerd and dockerd.
type daemon struct {
	log        zerolog.Logger
	containerd *proc
	dockerd    *proc
}

// proc is a started command whose end is observed once, by one goroutine,
// so both a readiness wait and the shutdown can select on it.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	log  string
}

func startProc(name, logPath string, argv ...string) (*proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s log %s: %w", name, logPath, err)
	}
	defer f.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group: a Ctrl-C on an interactive sandbox must reach
	// the runner first, not tear the daemon down under it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM and escalates to SIGKILL after grace.
func (p *proc) stop(grace time.Duration) error {
	if p.exited() {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not stop within %s and was killed", p.name, grace)
	}
}

// failure describes an early exit with the end of the daemon's log, which
// is where the reason is (bad storage driver, iptables missing, ...).
func (p *proc) failure() error {
	return fmt.Errorf("%s exited early (%v); last lines of %s:\n%s", p.name, p.err, p.log, tail(p.log, 15))
}

func tail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// daemonConfig is what startDaemon needs.
type daemonConfig struct {
	Driver  string
	Timeout time.Duration
}

// startDaemon starts containerd and dockerd with their logs in files under
// /var/log (never the container's stdout, which carries the runner's
// progress lines) and waits until dockerd answers /_ping.
func startDaemon(ctx context.Context, log zerolog.Logger, cfg daemonConfig) (*daemon, error) {
	start := time.Now()
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	d := &daemon{log: log}
	var err error
	d.containerd, err = startProc("containerd", filepath.Join(logDir, "containerd.log"),
		"containerd", "--address", containerdSocket, "--log-level", "warn")
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(cfg.Timeout)
	// dockerd keeps dialing containerd until its socket answers, so both
	// start at once; waiting for containerd first would add its start time
	// to every sandbox.
	d.dockerd, err = startProc("dockerd", filepath.Join(logDir, "dockerd.log"),
		"dockerd",
		"--host", "unix://"+dockerSocket,
		// The socket is root's alone: the agent reaches the daemon only
		// through the filter (dockerfilter.go), whatever its groups.
		"--group", "root",
		"--containerd", containerdSocket,
		"--data-root", dockerRoot,
		"--storage-driver", cfg.Driver,
		// The outer stop grace is shared with the runner's push; services
		// are disposable, so the daemon does not wait long for them.
		"--shutdown-timeout", "2",
	)
	if err != nil {
		d.stop()
		return nil, err
	}
	client := dockerHTTP()
	if err := waitFor(ctx, deadline, d.containerd, func() bool { return dialOK(containerdSocket) }); err != nil {
		d.stop()
		return nil, fmt.Errorf("containerd not ready: %w", err)
	}
	log.Debug().Dur("took", time.Since(start)).Msg("inner containerd ready")
	if err := waitFor(ctx, deadline, d.dockerd, func() bool { return pingOK(ctx, client) }); err != nil {
		d.stop()
		return nil, fmt.Errorf("dockerd not ready: %w", err)
	}
	log.Info().Str("storage_driver", cfg.Driver).Dur("took", time.Since(start)).Msg("inner dockerd ready")
	return d, nil
}

// waitFor polls ready until it holds, the process exits, ctx ends or the
// deadline passes, whichever is first.
func waitFor(ctx context.Context, deadline time.Time, p *proc, ready func() bool) error {
	interval := 10 * time.Millisecond
	for {
		if ready() {
			return nil
		}
		if p.exited() {
			return p.failure()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not become ready within the deadline; last lines of %s:\n%s", p.name, p.log, tail(p.log, 15))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.done:
		case <-time.After(interval):
		}
		if interval < 100*time.Millisecond {
			interval += 10 * time.Millisecond
		}
	}
}

func dialOK(socket string) bool {
	c, err := net.DialTimeout("unix", socket, 200*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// dockerHTTP talks to the inner daemon's socket; only /_ping uses it, the
// rest goes through the docker CLI like an operator would.
func dockerHTTP() *http.Client {
	return &http.Client{
		Timeout: time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", dockerSocket)
			},
		},
	}
}

func pingOK(ctx context.Context, c *http.Client) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker/_ping", nil)
	if err != nil {
		return false
	}
	resp, err := c.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64))
	return resp.StatusCode == http.StatusOK && bytes.Equal(bytes.TrimSpace(b), []byte("OK"))
}

// stop stops dockerd (which stops its containers) and then containerd.
func (d *daemon) stop() error {
	var errs []error
	if d.dockerd != nil {
		errs = append(errs, d.dockerd.stop(15*time.Second))
	}
	if d.containerd != nil {
		errs = append(errs, d.containerd.stop(5*time.Second))
	}
	err := errors.Join(errs...)
	if err != nil {
		d.log.Warn().Err(err).Msg("inner daemon did not stop cleanly")
	} else {
		d.log.Info().Msg("inner daemon stopped")
	}
	return err
}
