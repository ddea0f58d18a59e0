package docker

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// fakeDockerScript stands in for the docker CLI: containers are files in
// STATE_DIR, `run` takes a while before it creates one and
// refuses a name in use, as the engine does; the sandboxes' network
// exists with inter-container traffic and IPv6 off, and a run without a name (the
// look at the default bridge's resolvers) prints one.
const fakeDockerScript = `#!/bin/sh
state="STATE_DIR"
case "$1" in
network)
	echo "bridge false false";;
container)
	name=""; for a in "$@"; do name="$a"; done
	if [ -e "$state/$name" ]; then echo "id-$name"; exit 0; fi
	echo "Error: No such container: $name" >&2; exit 1;;
run)
	name=""; prev=""; for a in "$@"; do [ "$prev" = "--name" ] && name="$a"; prev="$a"; done
	if [ -z "$name" ]; then echo "nameserver 192.0.2.53"; exit 0; fi
	sleep 0.3
	if ! mkdir "$state/$name" 2>/dev/null; then
		echo "docker: Error response from daemon: Conflict. The container name \"/$name\" is already in use." >&2; exit 125
	fi
	echo "id-$name";;
esac
exit 0
`

// Two replicas submitting the same task at once (a webhook delivered to
// both) make one sandbox, and the token its task directory holds is the
// one of the submission that created it: the other, which revokes its
// own, never wrote over it.
func TestConcurrentSubmissionsKeepTheWinnersToken(t *testing.T) {
	t.Parallel()
	state, data := t.TempDir(), t.TempDir()
	bin := filepath.Join(t.TempDir(), "docker")
	if err := os.WriteFile(bin, []byte(strings.ReplaceAll(fakeDockerScript, "STATE_DIR", state)), 0o755); err != nil {
		t.Fatal(err)
	}
	var replicas []*Backend
	for range 2 {
		b, err := New(Options{Image: "sandbox-bot/sandbox:test", DataDir: data, Logger: zerolog.Nop(), Docker: bin})
		if err != nil {
			t.Fatal(err)
		}
		replicas = append(replicas, b)
	}
	const task = "T-0C1F1234"
	spec := func(token string) dispatch.RunSpec {
		order := dispatch.WorkOrder{SchemaVersion: dispatch.WorkOrderVersion, TaskID: task, Mode: dispatch.ModeRevise, Attempt: 1,
			Repo: "o/r", CloneURL: "https://github.example/o/r.git", TargetBranch: "agent/t-0c1f1234-x", OutputDir: "/out"}
		return dispatch.RunSpec{Meta: dispatch.Meta{TaskID: task, Mode: dispatch.ModeRevise, Repo: "o/r", Number: 2, Attempt: 1}, Order: order, Token: token}
	}
	created := make([]bool, 2)
	var wg sync.WaitGroup
	for i, b := range replicas {
		wg.Go(func() {
			c, err := b.Submit(t.Context(), spec("ghs_token_of_replica_"+string(rune('A'+i))))
			if err != nil {
				t.Errorf("replica %d: %v", i, err)
			}
			created[i] = c
		})
	}
	wg.Wait()
	if created[0] == created[1] {
		t.Fatalf("created %v: want exactly one", created)
	}
	winner := "ghs_token_of_replica_A"
	if created[1] {
		winner = "ghs_token_of_replica_B"
	}
	got, err := os.ReadFile(filepath.Join(replicas[0].TaskDir(task), "secrets", "token"))
	if err != nil || strings.TrimSpace(string(got)) != winner {
		t.Errorf("the task's token is %q (%v), want the creator's %q", got, err, winner)
	}
}
