package nomad_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad/nomadtest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// TestNomadPreviewThroughAllocExec: on Nomad the bot reaches a run's dev
// server through the allocation's exec API (`sandbox-runner pipe` to the
// socket the sandbox offers), with the real image on the real engine
// behind the fake agent; nothing in the sandbox listens on the node.
func TestNomadPreviewThroughAllocExec(t *testing.T) {
	img := testenv.SandboxImage(t)
	e := newEnv(t, nomadtest.Options{Driver: nomadtest.DockerDriver{}})
	b := e.backend()
	c, err := e.fake.Client(nomad.DefaultNamespace)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	const taskID = "T-0E0E0E77"
	jobID := "sandbox-" + strings.ToLower(taskID) + "-plan"
	job := &api.Job{ID: &jobID, Name: &jobID, Type: ptr("batch"), Datacenters: []string{"dc1"},
		Meta: map[string]string{nomad.MetaTaskID: taskID, nomad.MetaMode: "plan", nomad.MetaRepo: "acme/web"},
		TaskGroups: []*api.TaskGroup{{Name: ptr("sandbox"), Tasks: []*api.Task{{Name: nomad.TaskName, Driver: "docker",
			Config: map[string]any{"image": img, "entrypoint": []string{"sleep"}, "args": []string{"300"}}}}}}}
	if _, _, err := c.Jobs().Register(job, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _, _ = c.Jobs().Deregister(jobID, true, nil) })
	var allocID string
	for allocID == "" {
		if st, err := b.Status(ctx, taskID); err == nil && st.State == dispatch.StateRunning {
			if allocs, _, _ := c.Jobs().Allocations(jobID, false, nil); len(allocs) > 0 {
				allocID = allocs[0].ID
			}
		}
		if ctx.Err() != nil {
			t.Fatal("the job never ran")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The dev server behind the init's socket, as a run with `dev` has it.
	server := `require('http').createServer((q, s) => s.end('dev page ' + q.url)).listen('/run/sandbox-preview/dev.sock')`
	// The allocation runs before the driver has created its container.
	for {
		out, err := exec.Command("docker", "exec", "-d", nomad.TaskName+"-"+allocID, "sh", "-c",
			"mkdir -p /run/sandbox-preview && exec node -e \""+server+"\"").CombinedOutput()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("start the dev server: %v\n%s", err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return b.DialPreview(ctx, taskID) }}}
	var body string
	for !strings.Contains(body, "dev page /cart") {
		if resp, err := client.Get("http://preview/cart"); err == nil {
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(raw)
		}
		if ctx.Err() != nil {
			t.Fatalf("no answer from the dev server through the allocation's exec; last %q", body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// No run, no preview: the bot answers 404.
	if _, err := b.DialPreview(ctx, "T-00000001"); !errors.Is(err, dispatch.ErrNotFound) && !errors.Is(err, dispatch.ErrNoPreview) {
		t.Errorf("DialPreview of an unknown run: %v; want ErrNotFound or ErrNoPreview", err)
	}
	// A socket the sandbox does not offer: the pipe refuses it, the
	// session ends and the connection reads an error, not a hang.
	if out, err := exec.Command("docker", "exec", nomad.TaskName+"-"+allocID, "rm", "/run/sandbox-preview/dev.sock").CombinedOutput(); err != nil {
		t.Fatalf("remove the socket: %v\n%s", err, out)
	}
	if resp, err := client.Get("http://preview/cart"); err == nil {
		resp.Body.Close()
		t.Errorf("a preview without its socket answered %s", resp.Status)
	}
}

func ptr(s string) *string { return &s }
