package nomadtest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"

	"github.com/gorilla/websocket"
	"github.com/hashicorp/nomad/api"
)

// Execer is a Driver that can run a command in a running task, as Nomad's
// allocation exec does.
type Execer interface {
	Exec(ctx context.Context, alloc *api.Allocation, task string, cmd []string, stdin io.Reader, stdout, stderr io.Writer) (int, error)
}

// Exec implements Execer: `docker exec -i` in the task's container.
func (d DockerDriver) Exec(ctx context.Context, alloc *api.Allocation, task string, cmd []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	bin := d.Binary
	if bin == "" {
		bin = "docker"
	}
	c := exec.CommandContext(ctx, bin, append([]string{"exec", "-i", task + "-" + alloc.ID}, cmd...)...)
	c.Stdout, c.Stderr = stdout, stderr
	// Not c.Stdin: Wait would wait for the session's stdin to end, and a
	// command that exits first (a socket nobody listens on) would hang
	// the session; Wait closes this pipe once the command has exited.
	in, err := c.StdinPipe()
	if err != nil {
		return 1, err
	}
	if err := c.Start(); err != nil {
		return 1, err
	}
	go func() {
		_, _ = io.Copy(in, stdin)
		_ = in.Close()
	}()
	err = c.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), nil
	}
	return 0, err
}

// allocExec serves /v1/client/allocation/<id>/exec: Nomad's WebSocket of
// JSON frames, stdin in, stdout and stderr out, then the exit code.
func (s *Server) allocExec(w http.ResponseWriter, r *http.Request, id string) {
	entry := s.allocForClient(w, r, id, "alloc-exec")
	if entry == nil {
		return
	}
	a := s.Alloc(id)
	ex, ok := s.opts.Driver.(Execer)
	if !ok {
		http.Error(w, "the allocation's driver cannot exec", http.StatusNotFound)
		return
	}
	var cmd []string
	if err := json.Unmarshal([]byte(r.URL.Query().Get("command")), &cmd); err != nil || len(cmd) == 0 {
		http.Error(w, "command: want a JSON list", http.StatusBadRequest)
		return
	}
	conn, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer conn.Close()
	var wmu sync.Mutex
	send := func(v api.ExecStreamingOutput) {
		wmu.Lock()
		defer wmu.Unlock()
		_ = conn.WriteJSON(v)
	}
	inR, inW := io.Pipe()
	go func() {
		for {
			var in api.ExecStreamingInput
			if err := conn.ReadJSON(&in); err != nil {
				inW.CloseWithError(err)
				return
			}
			if in.Stdin == nil {
				continue // a heartbeat, or a terminal size
			}
			if len(in.Stdin.Data) > 0 {
				if _, err := inW.Write(in.Stdin.Data); err != nil {
					return
				}
			}
			if in.Stdin.Close {
				inW.Close()
			}
		}
	}()
	stream := func(errOut bool) io.Writer {
		return writerFunc(func(p []byte) (int, error) {
			op := &api.ExecStreamingIOOperation{Data: append([]byte(nil), p...)}
			if errOut {
				send(api.ExecStreamingOutput{Stderr: op})
			} else {
				send(api.ExecStreamingOutput{Stdout: op})
			}
			return len(p), nil
		})
	}
	code, err := ex.Exec(r.Context(), a, r.URL.Query().Get("task"), cmd, inR, stream(false), stream(true))
	if err != nil {
		wmu.Lock()
		_ = conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseInternalServerErr, strings.TrimSpace(err.Error())))
		wmu.Unlock()
		return
	}
	send(api.ExecStreamingOutput{Exited: true, Result: &api.ExecStreamingExitResult{ExitCode: code}})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
