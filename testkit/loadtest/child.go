package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// The generator can run in a process of its own. In the server's process
// it shares the Go scheduler with the server's goroutines: a server whose
// workers keep both processors busy then delays the generator's sends, and
// since latency counts from the scheduled send, the server is blamed for
// the generator's lag. GitHub does not share the bot's scheduler either.

// Env names the variables that hand a Spec to a child and its result back.
const (
	EnvSpec   = "LOADTEST_SPEC"
	EnvResult = "LOADTEST_RESULT"
)

// Spec is a warm-up then a measured run of POSTs of one body, as a child
// process is to send them.
type Spec struct {
	URL    string            `json:"url"`
	Body   []byte            `json:"body"`
	Header map[string]string `json:"header"`
	// IDHeader gets IDPrefix plus the request's number, unique per run
	// ("warm-" is put before the warm-up's).
	IDHeader string        `json:"id_header"`
	IDPrefix string        `json:"id_prefix"`
	Warmup   Plan          `json:"warmup"`
	Run      Plan          `json:"run"`
	Timeout  time.Duration `json:"timeout_ns"`
	// Mix, when set, replaces Body: request i sends Mix[i%len(Mix)], its
	// headers over Header. A realistic load is many kinds of event.
	Mix []Message `json:"mix,omitempty"`
}

// Message is one body to send with the headers that go with it (the event
// type and the body's signature).
type Message struct {
	Body   []byte            `json:"body"`
	Header map[string]string `json:"header"`
}

// Outcome is a child's report: the warm-up's result (for totals) and the
// measured run's.
type Outcome struct {
	Warmup *Result `json:"warmup"`
	Run    *Result `json:"run"`
}

func (s Spec) requests(prefix string) RequestFunc {
	return func(i int) (*http.Request, error) {
		m := Message{Body: s.Body}
		if len(s.Mix) > 0 {
			m = s.Mix[i%len(s.Mix)]
		}
		req, err := http.NewRequest(http.MethodPost, s.URL, bytes.NewReader(m.Body))
		if err != nil {
			return nil, err
		}
		for k, v := range s.Header {
			req.Header.Set(k, v)
		}
		for k, v := range m.Header {
			req.Header.Set(k, v)
		}
		if s.IDHeader != "" {
			req.Header.Set(s.IDHeader, prefix+strconv.Itoa(i))
		}
		return req, nil
	}
}

// Execute runs the spec in this process.
func (s Spec) Execute(ctx context.Context) (*Outcome, error) {
	client := NewClient(s.Timeout)
	defer client.CloseIdleConnections()
	var out Outcome
	var err error
	if s.Warmup.Rate > 0 {
		if out.Warmup, err = Run(ctx, client, s.Warmup, s.requests("warm-"+s.IDPrefix)); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	if out.Run, err = Run(ctx, client, s.Run, s.requests(s.IDPrefix)); err != nil {
		return nil, err
	}
	return &out, nil
}

// RunChild runs spec in a child process: exe with args, which must call
// ServeChild. The child's stderr is returned in the error when it fails.
func RunChild(ctx context.Context, exe string, args []string, spec Spec) (*Outcome, error) {
	dir, err := os.MkdirTemp("", "loadtest-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	specPath, resultPath := filepath.Join(dir, "spec.json"), filepath.Join(dir, "result.json")
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(specPath, b, 0o600); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(os.Environ(), EnvSpec+"="+specPath, EnvResult+"="+resultPath)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("load generator %s: %w\n%s", exe, err, stderr.Bytes())
	}
	b, err = os.ReadFile(resultPath)
	if err != nil {
		return nil, fmt.Errorf("load generator %s wrote no result (does it call loadtest.ServeChild?): %w\n%s", exe, err, stderr.Bytes())
	}
	var out Outcome
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("load generator result %s: %w", resultPath, err)
	}
	return &out, nil
}

// ServeChild is the child's side of RunChild: when this process was started
// by RunChild it runs the spec, writes the outcome and returns true; else
// it returns false at once.
func ServeChild(ctx context.Context) (bool, error) {
	specPath, resultPath := os.Getenv(EnvSpec), os.Getenv(EnvResult)
	if specPath == "" || resultPath == "" {
		return false, nil
	}
	b, err := os.ReadFile(specPath)
	if err != nil {
		return true, fmt.Errorf("%s: %w", EnvSpec, err)
	}
	var spec Spec
	if err := json.Unmarshal(b, &spec); err != nil {
		return true, fmt.Errorf("%s %s: %w", EnvSpec, specPath, err)
	}
	out, err := spec.Execute(ctx)
	if err != nil {
		return true, err
	}
	if b, err = json.Marshal(out); err != nil {
		return true, err
	}
	return true, os.WriteFile(resultPath, b, 0o600)
}
