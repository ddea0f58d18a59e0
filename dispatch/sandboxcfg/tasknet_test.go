package sandboxcfg

import (
	"strings"
	"testing"
)

func TestTaskModeCannotFenceNetwork(t *testing.T) {
	t.Parallel()
	_, err := Parse(".sandbox.yml", []byte("mode: task\nnetwork:\n  allow: [example.com]\n"))
	if err == nil || !strings.Contains(err.Error(), ".sandbox.yml:3:10: network.allow: task mode runs without privileges") {
		t.Fatalf("want an error at network.allow, got %v", err)
	}
}
