package media

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

// DevServer is a project's dev server to start.
type DevServer struct {
	// Command is run with sh -c in Dir, with Env plus PORT=Port.
	Command string
	Port    int
	Dir     string
	Env     []string
	// Credential, when set, is the user it runs as: it is the
	// repository's code, so it runs as the agent does.
	Credential *syscall.Credential
	// Log is the file its output goes to.
	Log string
	// StartTimeout bounds the wait for its port (default 60s).
	StartTimeout time.Duration
}

// URL is where the dev server answers, from inside the sandbox.
func (d DevServer) URL() string { return "http://127.0.0.1:" + strconv.Itoa(d.Port) }

// StartDevServer starts the command in its own process group and waits
// until the port answers HTTP. The returned stop ends the whole group.
func StartDevServer(ctx context.Context, d DevServer, log zerolog.Logger) (stop func(), err error) {
	if d.StartTimeout <= 0 {
		d.StartTimeout = 60 * time.Second
	}
	cmd := exec.Command("sh", "-c", d.Command)
	cmd.Dir = d.Dir
	cmd.Env = append(append([]string(nil), d.Env...), "PORT="+strconv.Itoa(d.Port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: d.Credential}
	logf, err := os.Create(d.Log)
	if err != nil {
		return nil, fmt.Errorf("media: dev server log: %w", err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("media: start dev server `%s`: %w", d.Command, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stop = func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		logf.Close()
	}
	url := d.URL() + "/"
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(d.StartTimeout)
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			log.Info().Str("url", url).Msg("dev server is up")
			return stop, nil
		}
		select {
		case <-exited:
			stop()
			return nil, fmt.Errorf("media: the dev server `%s` exited before answering on port %d (log: %s)", d.Command, d.Port, d.Log)
		case <-ctx.Done():
			stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("media: the dev server `%s` did not answer on port %d within %s (log: %s)", d.Command, d.Port, d.StartTimeout, d.Log)
		}
	}
}
