package main

import (
	"encoding/base64"
	"strings"
)

// The repository token (--token-file, or $GITHUB_TOKEN) is for the runner
// alone: a run gets it as its token file, which the runner's git credential
// helper reads. It is never in the environment the runner passes on to the
// agent, never a --pass-env secret, never in the work order.

// errTokenPassEnv refuses handing the token variable to a sandbox as a
// secret, where the agent would read it.
const errTokenPassEnv = "the repository token reaches the runner alone, as the run's token file; the agent never gets it"

// withoutTokenVar drops the token variable from an environment a runner
// inherits (the process backend starts it with the CLI's environment).
func withoutTokenVar(env []string) []string {
	out := make([]string, 0, len(env))
	for _, e := range env {
		if !strings.HasPrefix(e, envTokenVar+"=") {
			out = append(out, e)
		}
	}
	return out
}

// gitAuthEnv makes the CLI's own git (reading .sandbox.yml from a remote)
// present the token, through the environment rather than the command line,
// where other users of the machine could see it.
func gitAuthEnv(token string) []string {
	if token == "" {
		return nil
	}
	basic := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + token))
	return []string{"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.extraHeader", "GIT_CONFIG_VALUE_0=Authorization: Basic " + basic}
}
