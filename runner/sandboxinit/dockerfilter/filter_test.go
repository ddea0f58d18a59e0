package dockerfilter

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
)

// fakeDaemon is an engine on a unix socket: it records what reaches it,
// answers inspects, and hijacks attach like dockerd does.
type fakeDaemon struct {
	mu     sync.Mutex
	bodies map[string]string
}

func (d *fakeDaemon) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	d.mu.Lock()
	d.bodies[r.URL.Path] = string(b)
	d.mu.Unlock()
	switch {
	case strings.HasSuffix(r.URL.Path, "/json") && strings.Contains(r.URL.Path, "/containers/"):
		// The engine names a container by its full id, whatever it was
		// asked by; here a name is its own id, but alias-x's is id-x.
		seg := strings.Split(r.URL.Path, "/")
		id := seg[len(seg)-2]
		if rest, ok := strings.CutPrefix(id, "alias-"); ok {
			id = "id-" + rest
		}
		fmt.Fprintf(w, `{"Id":%q,"HostConfig":{"NetworkMode":"bridge"},"Mounts":[]}`, id)
	case strings.HasSuffix(r.URL.Path, "/containers/create"):
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"Id":"abc","Warnings":[]}`)
	case strings.HasSuffix(r.URL.Path, "/attach"):
		conn, rw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		rw.WriteString("HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n")
		rw.Flush()
		// Like a container reading stdin to its end and then answering.
		in, _ := io.ReadAll(rw)
		conn.Write([]byte("got:" + string(in)))
	default:
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"Id":"abc"}`)
	}
}

func (d *fakeDaemon) body(p string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.bodies[p]
}

func startFilter(t *testing.T) (*fakeDaemon, string, string) {
	t.Helper()
	dir := t.TempDir()
	up := filepath.Join(dir, "docker.sock")
	ln, err := net.Listen("unix", up)
	if err != nil {
		t.Fatal(err)
	}
	d := &fakeDaemon{bodies: map[string]string{}}
	srv := &http.Server{Handler: d}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o755)
	f, err := Start(Config{Socket: filepath.Join(dir, "run", "agent.sock"), Upstream: up, Workspace: ws,
		StageDir: filepath.Join(dir, "stage"), Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return d, filepath.Join(dir, "run", "agent.sock"), ws
}

func unixClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
}

// A refusal is a 403 in the engine's error format; what passes reaches the
// engine, versioned or not.
func TestFilterForwardsAndRefuses(t *testing.T) {
	t.Parallel()
	d, sock, _ := startFilter(t)
	st, err := os.Stat(sock)
	if err != nil || st.Mode().Perm() != 0o666 {
		t.Fatalf("socket %s: %v %v, want mode 0666", sock, st.Mode(), err)
	}
	c := unixClient(sock)
	resp, err := c.Post("http://docker/v1.41/containers/create", "application/json", strings.NewReader(`{"Image":"x","HostConfig":{"Privileged":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	var e struct{ Message string }
	json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(e.Message, "HostConfig.Privileged is refused") {
		t.Errorf("privileged create: %s %q", resp.Status, e.Message)
	}
	if got := d.body("/v1.41/containers/create"); got != "" {
		t.Errorf("the refused body reached the engine: %s", got)
	}
	for _, p := range []string{"/v1.41/containers/create?name=a", "/containers/create"} {
		resp, err := c.Post("http://docker"+p, "application/json", strings.NewReader(`{"Image":"x","HostConfig":{"Memory":1048576}}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated || !strings.Contains(string(b), `"abc"`) {
			t.Errorf("%s: %s %s", p, resp.Status, b)
		}
		path, _, _ := strings.Cut(p, "?")
		if got := d.body(path); !strings.Contains(got, `"Memory":1048576`) {
			t.Errorf("%s: engine got %q", p, got)
		}
	}
	resp, err = c.Post("http://docker/v1.41/containers/x/../../swarm/init", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode < 400 {
		t.Errorf("unclean path: %s", resp.Status)
	}
}

// attach and exec are hijacked streams: the 101 upgrade passes and a
// client's half-close reaches the container before its answer comes back.
func TestFilterUpgradesAttach(t *testing.T) {
	t.Parallel()
	_, sock, _ := startFilter(t)
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "POST /v1.41/containers/abc/attach?stream=1&stdin=1 HTTP/1.1\r\nHost: docker\r\nConnection: Upgrade\r\nUpgrade: tcp\r\nContent-Length: 0\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("attach: %s", resp.Status)
	}
	io.WriteString(conn, "hello")
	conn.(*net.UnixConn).CloseWrite()
	out, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != "got:hello" {
		t.Errorf("stream = %q, want got:hello", out)
	}
}

// Staging binds the object that was checked: a path swapped for a symlink
// afterwards changes nothing, and symlinks out of the workspace are
// refused. Mounting needs root, as the init is.
func TestWorkspaceStagesWhatWasChecked(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("staging bind mounts needs root (the init runs as root)")
	}
	dir := t.TempDir()
	ws := &Workspace{Root: filepath.Join(dir, "ws"), StageDir: filepath.Join(dir, "stage")}
	t.Cleanup(func() { ws.Close() })
	os.MkdirAll(filepath.Join(ws.Root, "app"), 0o755)
	os.WriteFile(filepath.Join(ws.Root, "app", "marker"), []byte("checked"), 0o644)
	os.Symlink("/", filepath.Join(ws.Root, "root"))
	os.Symlink("../..", filepath.Join(ws.Root, "app", "up"))
	os.Symlink("app", filepath.Join(ws.Root, "inside"))

	for _, bad := range []string{"/", ws.Root + "/root", ws.Root + "/root/etc", ws.Root + "/app/up", ws.Root + "/app/up/ws/app", ws.Root + "/../ws2"} {
		if _, err := ws.Stage(bad, true); err == nil || !IsRefusal(err) {
			t.Errorf("Stage(%s) = %v, want a refusal", bad, err)
		}
	}
	staged, err := ws.Stage(ws.Root+"/inside", false)
	if err != nil {
		t.Fatal(err)
	}
	again, err := ws.Stage(ws.Root+"/app", false)
	if err != nil || again != staged {
		t.Errorf("the same directory staged twice: %s, %s (%v)", staged, again, err)
	}
	if !ws.Known(staged) || ws.Known(ws.Root+"/app") {
		t.Error("Known does not tell staged paths from others")
	}
	// The agent swaps the checked directory for a symlink to /.
	os.Rename(filepath.Join(ws.Root, "app"), filepath.Join(ws.Root, "app.old"))
	os.Symlink("/", filepath.Join(ws.Root, "app"))
	if b, err := os.ReadFile(filepath.Join(staged, "marker")); err != nil || string(b) != "checked" {
		t.Errorf("staged mount after the swap: %q %v", b, err)
	}
	// Binds create missing directories, owned like the workspace.
	made, err := ws.Stage(ws.Root+"/data/pg", true)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(ws.Root, "data", "pg")); err != nil || !st.IsDir() {
		t.Errorf("missing bind source not created: %v", err)
	}
	if err := ws.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(made); err == nil {
		t.Errorf("staged mount %s left behind", made)
	}
}

// dockerd reads its parameters from the query and from a form-encoded
// body alike (r.Form): a body that would carry them past the filter is
// refused before anything reaches the engine, however its type is
// spelled; the same parameters in the query are refused by the policy.
func TestFilterRefusesParametersInTheBody(t *testing.T) {
	t.Parallel()
	d, sock, _ := startFilter(t)
	c := unixClient(sock)
	cases := []struct{ path, ctype, body, want string }{
		{"/v1.41/images/create", "application/x-www-form-urlencoded", "fromSrc=http://198.51.100.7/x.tar&repo=x", "a body of type application/x-www-form-urlencoded on POST /v1.41/images/create is refused"},
		{"/images/create?fromImage=redis", "Application/X-WWW-Form-Urlencoded; charset=utf-8", "fromSrc=http://198.51.100.7/x.tar", "is refused"},
		{"/v1.41/build", "application/x-www-form-urlencoded;;bad", "networkmode=host&remote=client-session&session=s", "a body of type application/x-www-form-urlencoded on POST /v1.41/build is refused"},
		{"/v1.41/build", "multipart/form-data; boundary=x", "--x\r\nContent-Disposition: form-data; name=\"networkmode\"\r\n\r\nhost\r\n--x--\r\n", "a body of type multipart/form-data"},
		{"/v1.41/images/create?fromSrc=http://198.51.100.7/x.tar&repo=x", "text/plain", "", "docker import from a URL is refused"},
		{"/v1.41/build?networkmode=host", "application/x-tar", "", "docker build --network=host is refused"},
	}
	for _, tc := range cases {
		req, _ := http.NewRequest("POST", "http://docker"+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Content-Type", tc.ctype)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e struct{ Message string }
		json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(e.Message, tc.want) {
			t.Errorf("%s (%s): %s %q, want 403 with %q", tc.path, tc.ctype, resp.Status, e.Message, tc.want)
		}
		p, _, _ := strings.Cut(tc.path, "?")
		d.mu.Lock()
		_, reached := d.bodies[p]
		d.mu.Unlock()
		if reached {
			t.Errorf("%s (%s) reached the engine", tc.path, tc.ctype)
		}
	}
}

// A container created through the filter is the agent's: its namespaces
// may be joined; a container the engine has but the filter never created
// (the init's services) may not.
func TestFilterKnowsWhatItCreated(t *testing.T) {
	t.Parallel()
	_, sock, _ := startFilter(t)
	c := unixClient(sock)
	post := func(body string) (int, string) {
		resp, err := c.Post("http://docker/v1.41/containers/create", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e struct{ Message string }
		json.NewDecoder(resp.Body).Decode(&e)
		return resp.StatusCode, e.Message
	}
	if code, msg := post(`{"Image":"x","HostConfig":{"PidMode":"container:abc"}}`); code != http.StatusForbidden || !strings.Contains(msg, "did not create") {
		t.Fatalf("join before the filter created abc: %d %q", code, msg)
	}
	if code, msg := post(`{"Image":"x"}`); code != http.StatusCreated {
		t.Fatalf("create: %d %q", code, msg)
	}
	for _, mode := range []string{"PidMode", "IpcMode", "UTSMode", "NetworkMode"} {
		if code, msg := post(`{"Image":"x","HostConfig":{"` + mode + `":"container:abc"}}`); code != http.StatusCreated {
			t.Errorf("%s of the agent's own container: %d %q", mode, code, msg)
		}
		if code, msg := post(`{"Image":"x","HostConfig":{"` + mode + `":"container:svc"}}`); code != http.StatusForbidden || !strings.Contains(msg, "HostConfig."+mode+"=container:svc is refused") {
			t.Errorf("%s of a container the filter did not create: %d %q", mode, code, msg)
		}
	}
}

// The request the engine gets names the container the filter inspected by
// its full id, not by the name the agent sent.
func TestFilterForwardsTheCheckedID(t *testing.T) {
	t.Parallel()
	d, sock, _ := startFilter(t)
	resp, err := unixClient(sock).Post("http://docker/v1.41/containers/alias-a/start", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	d.mu.Lock()
	_, pinned := d.bodies["/v1.41/containers/id-a/start"]
	_, byName := d.bodies["/v1.41/containers/alias-a/start"]
	d.mu.Unlock()
	if resp.StatusCode != http.StatusOK || !pinned || byName {
		t.Errorf("start: %d; the engine got the id: %v, the name: %v", resp.StatusCode, pinned, byName)
	}
}
