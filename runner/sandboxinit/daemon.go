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

// startProc starts argv with env added to the init's environment (a
// later value wins), as root with group gid when gid is not 0.
func startProc(name, logPath string, env []string, gid int, argv ...string) (*proc, error) {
	return startProcFiles(name, logPath, env, gid, nil, argv...)
}

// startProcFiles is startProc with files passed on as fds 3, 4, ...
func startProcFiles(name, logPath string, env []string, gid int, files []*os.File, argv ...string) (*proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s log %s: %w", name, logPath, err)
	}
	defer f.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.ExtraFiles = files
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	// Its own process group: a Ctrl-C on an interactive sandbox must reach
	// the runner first, not tear the daemon down under it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if gid != 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: 0, Gid: uint32(gid), Groups: []uint32{}}
	}
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

// daemonConfig is what startDockerd needs.
type daemonConfig struct {
	Driver  string
	Timeout time.Duration
	// Env is added to dockerd's environment (the egress proxy), and GID,
	// when not 0, is the group it runs as (the fence's match).
	Env []string
	GID int
	// Listener, when set, is the daemon's socket, held by the init until
	// the first use (lazydaemon.go): dockerd serves it by socket activation.
	Listener *os.File
	// Nets, when set, are dockerd's own subnets (hostroutes.go).
	Nets innerNets
	// Args are more flags (netfilter.go: --iptables=false under gVisor).
	Args []string
}

// startDaemon starts containerd and dockerd and waits until dockerd
// answers (the init's --check; a sandbox start does other work between
// the two).
func startDaemon(ctx context.Context, log zerolog.Logger, cfg daemonConfig) (*daemon, error) {
	d, err := startContainerd(log)
	if err != nil {
		return nil, err
	}
	if err := d.startDockerd(ctx, cfg); err != nil {
		return nil, err
	}
	return d, nil
}

// startContainerd starts the inner containerd with its log under /var/log
// (never the container's stdout, which carries the runner's progress
// lines). Nothing waits for it: dockerd keeps dialing its socket until it
// answers, so starting containerd first and dockerd once the storage
// driver is known overlaps containerd's start with that work.
func startContainerd(log zerolog.Logger) (*daemon, error) {
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	d := &daemon{log: log}
	var err error
	d.containerd, err = startProc("containerd", filepath.Join(logDir, "containerd.log"), nil, 0,
		"containerd", "--address", containerdSocket, "--log-level", "warn")
	if err != nil {
		return nil, err
	}
	return d, nil
}

// notifySocket is where dockerd says READY=1 (sd_notify) once its API
// serves: the init wakes on that instead of polling on an interval. It is
// root's (the socket is created 0755 under /run, so the agent cannot write
// a false READY, and a ping confirms it anyway).
const notifySocket = "/run/sandbox-dockerd.notify"

// startDockerd starts dockerd and waits until it answers /_ping.
func (d *daemon) startDockerd(ctx context.Context, cfg daemonConfig) error {
	start := time.Now()
	deadline := time.Now().Add(cfg.Timeout)
	notified := make(chan struct{}, 1)
	_ = os.Remove(notifySocket)
	env := append([]string(nil), cfg.Env...)
	if conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: notifySocket, Net: "unixgram"}); err != nil {
		d.log.Debug().Err(err).Msg("no readiness socket for dockerd: polling /_ping")
	} else {
		defer os.Remove(notifySocket)
		defer conn.Close()
		env = append(env, "NOTIFY_SOCKET="+notifySocket)
		go func() {
			buf := make([]byte, 512)
			for {
				n, err := conn.Read(buf)
				if err != nil {
					return
				}
				if bytes.Contains(buf[:n], []byte("READY=1")) {
					notified <- struct{}{}
					return
				}
			}
		}()
	}
	var err error
	argv, files := []string{"dockerd", "--host", "unix://" + dockerSocket}, []*os.File(nil)
	if cfg.Listener != nil {
		// Socket activation wants LISTEN_PID to be dockerd's own pid,
		// which only a shell that execs it knows.
		argv = []string{"sh", "-c", `LISTEN_PID=$$ LISTEN_FDS=1; export LISTEN_PID LISTEN_FDS; exec "$@"`, "sh", "dockerd", "--host", "fd://"}
		files = []*os.File{cfg.Listener}
	}
	argv = append(argv, cfg.Nets.args()...)
	d.dockerd, err = startProcFiles("dockerd", filepath.Join(logDir, "dockerd.log"), env, cfg.GID, files,
		append(append(argv,
			// The socket is root's alone: the agent reaches the daemon only
			// through the filter (dockerfilter.go), whatever its groups.
			"--group", "root",
			"--containerd", containerdSocket,
			"--data-root", dockerRoot,
			"--storage-driver", cfg.Driver,
			// The outer stop grace is shared with the runner's push; services
			// are disposable, so the daemon does not wait long for them.
			"--shutdown-timeout", "2",
		), cfg.Args...)...)
	if err != nil {
		return err
	}
	if err := d.waitReady(ctx, deadline, notified); err != nil {
		return fmt.Errorf("dockerd not ready: %w", err)
	}
	d.log.Info().Str("storage_driver", cfg.Driver).Dur("took", time.Since(start)).Msg("inner dockerd ready")
	return nil
}

// waitReady returns once dockerd answers /_ping. It pings when dockerd
// says it is ready and, in case it never says so, on a short backoff; it
// gives up when either daemon exits, ctx ends or the deadline passes.
func (d *daemon) waitReady(ctx context.Context, deadline time.Time, notified <-chan struct{}) error {
	client := dockerHTTP()
	timeout := time.NewTimer(time.Until(deadline))
	defer timeout.Stop()
	interval := 20 * time.Millisecond
	for {
		if pingOK(ctx, client) {
			return nil
		}
		wait := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			wait.Stop()
			return ctx.Err()
		case <-d.dockerd.done:
			wait.Stop()
			return d.dockerd.failure()
		case <-d.containerd.done:
			wait.Stop()
			return d.containerd.failure()
		case <-timeout.C:
			wait.Stop()
			return fmt.Errorf("%s did not become ready within the deadline; last lines of %s:\n%s", d.dockerd.name, d.dockerd.log, tail(d.dockerd.log, 15))
		case <-notified:
			wait.Stop()
		case <-wait.C:
			interval = min(2*interval, 250*time.Millisecond)
		}
	}
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
