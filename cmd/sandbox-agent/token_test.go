package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch/gitserve"
	"github.com/sandbox-bot/sandbox-bot/runner/runtest"
)

// $GITHUB_TOKEN for a remote that needs it reaches the run as its token
// file: the runner clones and pushes with it, and the agent's environment
// does not hold it.
func TestTokenReachesTheRunnerOnly(t *testing.T) {
	t.Parallel()
	// The path is in the command: the process runner's environment is an
	// allowlist that a variable of the test's own would not pass.
	agentEnv := filepath.Join(t.TempDir(), "agent.env")
	remote := runtest.NewRemote(t, map[string]string{
		".sandbox.yml": "harness: command\ncommand: |\n  if [ -n \"$SANDBOX_READ_ONLY\" ]; then echo '## Plan'; exit 0; fi\n  env > '" + agentEnv + "'\n  echo remote > REMOTE.md; echo done\n",
	})
	srv, err := gitserve.Start(gitserve.Options{Repo: remote.Dir, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	env := append(runtest.HermeticEnv(t.TempDir()), "GITHUB_TOKEN="+srv.Token)
	r := runCLI(t, env, false, "", "create", "--repo", srv.URL, "--task", "Mark the remote", "--data-dir", t.TempDir(), "--runner", sandboxRunner(t))
	if r.code != exitOK {
		t.Fatalf("exit %d", r.code)
	}
	out := runtest.Git(t, remote.Dir, "for-each-ref", "--format=%(refname:short)", "refs/heads/agent/")
	if !strings.HasSuffix(out, "-mark-the-remote") {
		t.Fatalf("the runner did not push with the token; branches: %q", out)
	}
	seen, err := os.ReadFile(agentEnv)
	if err != nil {
		t.Fatalf("the agent did not run: %v", err)
	}
	if strings.Contains(string(seen), srv.Token) {
		t.Fatal("the repository token is in the agent's environment")
	}
	if strings.Contains(r.stderr+r.stdout, srv.Token) {
		t.Fatal("the repository token was printed")
	}

	r = runCLI(t, env, false, "", "create", "--repo", srv.URL, "--task", "x", "--pass-env", "GITHUB_TOKEN", "--data-dir", t.TempDir(), "--runner", sandboxRunner(t))
	if r.code == exitOK || !strings.Contains(r.stderr, "--pass-env GITHUB_TOKEN: "+errTokenPassEnv) {
		t.Fatalf("--pass-env GITHUB_TOKEN: exit %d\n%s", r.code, r.stderr)
	}
}
