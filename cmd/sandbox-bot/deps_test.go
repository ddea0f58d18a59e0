package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// The bot's binary links nothing under runner/: the sandbox's code (the
// pipeline, the agent harnesses, the init and its Docker filter) never
// runs in the bot, so a change there cannot change the bot, and the bot's
// image carries none of it. The runner reaches the bot only through the
// contracts in dispatch/ (the work order, result.json, progress lines).
func TestBotLinksNothingOfTheRunner(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".")
	cmd.Dir = testenv.ModuleRoot(t) + "/cmd/sandbox-bot"
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/sandbox-bot: %v", err)
	}
	const module = "github.com/sandbox-bot/sandbox-bot/"
	var linked []string
	n := 0
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, module) {
			n++
		}
		if strings.HasPrefix(p, module+"runner") {
			linked = append(linked, p)
		}
	}
	if n == 0 {
		t.Fatalf("go list -deps named none of the module's packages:\n%s", out)
	}
	if len(linked) > 0 {
		t.Errorf("the bot's binary links %s; the runner's code must stay out of it (share through dispatch/)", strings.Join(linked, ", "))
	}
}
