package sandboxinit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// engine speaks the Docker Engine API on the inner daemon's socket for the
// calls on the start's critical path (load and inspect an image, create the
// network, run and inspect a service). On a loaded host a docker CLI
// process costs more than the daemon's own work for an inspect, and a
// start made several of them one after another. Each call is logged as the
// docker command it stands for, so the log still reads as commands an
// operator can type; everything else goes through dockerCLI.
type engine struct {
	client *http.Client
	log    zerolog.Logger
}

func newEngine(log zerolog.Logger) engine { return engineAt(dockerSocket, log) }

// engineAt talks to the daemon at socket.
func engineAt(socket string, log zerolog.Logger) engine {
	return engine{log: log, client: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}}
}

// errConflict is the daemon's 409: the object exists already.
var errConflict = errors.New("already exists")

// call sends one request; out, when not nil, gets the JSON answer. as is
// the docker command the call stands for, for the log and errors.
func (e engine) call(ctx context.Context, as, method, path string, body io.Reader, contentType string, out any) error {
	start := time.Now()
	return e.done(ctx, as, start, e.do(ctx, method, path, body, contentType, out))
}

// done logs a call that started at start and names the command in its
// error.
func (e engine) done(ctx context.Context, as string, start time.Time, err error) error {
	e.log.Debug().Str("docker", as).Dur("took", time.Since(start)).Bool("ok", err == nil).Msg("docker API")
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("docker %s: %w", as, ctx.Err())
		}
		return fmt.Errorf("docker %s: %w", as, err)
	}
	return nil
}

func (e engine) do(ctx context.Context, method, path string, body io.Reader, contentType string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, "http://docker"+path, body)
	if err != nil {
		return err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode != http.StatusNotModified {
		var msg struct {
			Message string `json:"message"`
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if json.Unmarshal(b, &msg) != nil || msg.Message == "" {
			msg.Message = strings.TrimSpace(string(b))
		}
		err := fmt.Errorf("%s (HTTP %d)", msg.Message, resp.StatusCode)
		if resp.StatusCode == http.StatusConflict {
			err = fmt.Errorf("%w: %v", errConflict, err)
		}
		return err
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// imageID is `docker image inspect --format {{.Id}} ref`.
func (e engine) imageID(ctx context.Context, ref string) (string, error) {
	var img struct {
		ID string `json:"Id"`
	}
	err := e.call(ctx, "image inspect "+ref, http.MethodGet, "/images/"+ref+"/json", nil, "", &img)
	return img.ID, err
}

// loadImage is `docker load --quiet --input file`. The daemon streams its
// progress as JSON messages, and a failure as one with an error.
func (e engine) loadImage(ctx context.Context, file io.Reader, name string) error {
	as := "load --quiet --input " + name
	start := time.Now()
	err := func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://docker/images/load?quiet=1", file)
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/x-tar")
		resp, err := e.client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		dec := json.NewDecoder(resp.Body)
		for {
			var m struct {
				Error   string `json:"error"`
				Message string `json:"message"`
			}
			if err := dec.Decode(&m); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return fmt.Errorf("read the daemon's answer: %w", err)
			}
			if m.Error != "" {
				return errors.New(m.Error)
			}
			if resp.StatusCode >= 300 {
				return fmt.Errorf("%s (HTTP %d)", m.Message, resp.StatusCode)
			}
		}
		if resp.StatusCode >= 300 {
			return fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		return nil
	}()
	return e.done(ctx, as, start, err)
}

// createNetwork is `docker network create --label ... name`; a network of
// that name answers errConflict.
func (e engine) createNetwork(ctx context.Context, name string, labels map[string]string) error {
	body, _ := json.Marshal(map[string]any{"Name": name, "CheckDuplicate": true, "Labels": labels})
	return e.call(ctx, "network create "+name, http.MethodPost, "/networks/create", strings.NewReader(string(body)), "application/json", nil)
}

// serviceContainer is what `docker run -d` of a service sets.
type serviceContainer struct {
	Name, Hostname, Image, Network string
	Aliases                        []string
	Cmd, Env                       []string
	Labels                         map[string]string
	StopTimeout                    int
}

// run is `docker run -d --name ... IMAGE CMD`: create, then start.
func (e engine) run(ctx context.Context, c serviceContainer) error {
	body := map[string]any{
		"Hostname":    c.Hostname,
		"Image":       c.Image,
		"Env":         c.Env,
		"Labels":      c.Labels,
		"StopTimeout": c.StopTimeout,
		"HostConfig":  map[string]any{"NetworkMode": c.Network},
		"NetworkingConfig": map[string]any{"EndpointsConfig": map[string]any{
			c.Network: map[string]any{"Aliases": c.Aliases},
		}},
	}
	if len(c.Cmd) > 0 {
		body["Cmd"] = c.Cmd
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	// Never the environment in the logged command: values may be secrets.
	as := fmt.Sprintf("run -d --name %s --network %s %s", c.Name, c.Network, c.Image)
	var created struct {
		ID string `json:"Id"`
	}
	if err := e.call(ctx, as+" (create)", http.MethodPost, "/containers/create?name="+url.QueryEscape(c.Name), strings.NewReader(string(b)), "application/json", &created); err != nil {
		return err
	}
	return e.call(ctx, as+" (start)", http.MethodPost, "/containers/"+created.ID+"/start", nil, "", nil)
}

// containerState is what the init reads of `docker inspect NAME`.
type containerState struct {
	State struct {
		Status   string
		ExitCode int
	}
	NetworkSettings struct {
		Networks map[string]struct{ IPAddress string }
	}
}

func (e engine) inspect(ctx context.Context, name string) (containerState, error) {
	var st containerState
	err := e.call(ctx, "inspect "+name, http.MethodGet, "/containers/"+url.PathEscape(name)+"/json", nil, "", &st)
	return st, err
}

// removeImage is `docker image rm --force ref`.
func (e engine) removeImage(ctx context.Context, ref string) error {
	return e.call(ctx, "image rm --force "+ref, http.MethodDelete, "/images/"+ref+"?force=1", nil, "", nil)
}
