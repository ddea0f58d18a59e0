package sandboxinit

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
)

// fakeEngine serves the few Engine API calls the init makes, on a unix
// socket, and records them.
func fakeEngine(t *testing.T, h http.HandlerFunc) (engine, *[]string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "docker.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		calls []string
	)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls = append(calls, r.Method+" "+r.URL.RequestURI())
		mu.Unlock()
		h(w, r)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return engineAt(sock, zerolog.Nop()), &calls
}

// A service is created with its name, network alias, labels and
// environment in the request body (never a command line), then started.
func TestEngineRunCreatesThenStarts(t *testing.T) {
	t.Parallel()
	var body map[string]any
	e, calls := fakeEngine(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/containers/create"):
			json.NewDecoder(r.Body).Decode(&body)
			io.WriteString(w, `{"Id":"c0ffee"}`)
		case r.URL.Path == "/containers/c0ffee/start":
			w.WriteHeader(http.StatusNoContent)
		default:
			http.NotFound(w, r)
		}
	})
	err := e.run(context.Background(), serviceContainer{Name: "web", Hostname: "web", Image: "svc:1", Network: innerNetwork,
		Aliases: []string{"web"}, Labels: map[string]string{labelService: "web"}, StopTimeout: 2, Env: []string{"PW=hunter2"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(*calls, "\n"); got != "POST /containers/create?name=web\nPOST /containers/c0ffee/start" {
		t.Errorf("calls:\n%s", got)
	}
	b, _ := json.Marshal(body)
	for _, want := range []string{`"Env":["PW=hunter2"]`, `"NetworkMode":"sandbox"`, `"Aliases":["web"]`, `"StopTimeout":2`, `"Hostname":"web"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("create body lacks %s: %s", want, b)
		}
	}
	if strings.Contains(string(b), `"Cmd"`) {
		t.Errorf("no command given, but the body sets one (it would replace the image's): %s", b)
	}
}

// The daemon's errors come back with its message; a name taken is
// errConflict; a load that fails midway (an error in the progress stream
// after a 200) is a failure.
func TestEngineErrors(t *testing.T) {
	t.Parallel()
	e, _ := fakeEngine(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/networks/create":
			w.WriteHeader(http.StatusConflict)
			io.WriteString(w, `{"message":"network with name sandbox already exists"}`)
		case "/images/load":
			io.Copy(io.Discard, r.Body)
			io.WriteString(w, `{"stream":"Loading layer"}`+"\n"+`{"errorDetail":{"message":"unexpected EOF"},"error":"unexpected EOF"}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"message":"No such image: nope:1"}`)
		}
	})
	ctx := context.Background()
	if err := e.createNetwork(ctx, innerNetwork, nil); !errors.Is(err, errConflict) || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("createNetwork = %v, want errConflict", err)
	}
	if err := e.loadImage(ctx, strings.NewReader("not a tar"), "/cache/x.tar"); err == nil || !strings.Contains(err.Error(), "unexpected EOF") || !strings.Contains(err.Error(), "load --quiet --input /cache/x.tar") {
		t.Errorf("loadImage = %v, want the stream's error naming the command", err)
	}
	if _, err := e.imageID(ctx, "nope:1"); err == nil || !strings.Contains(err.Error(), "No such image: nope:1 (HTTP 404)") {
		t.Errorf("imageID = %v", err)
	}
}
