package githubtest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// spacedTime is how some check_run examples write times ("2018-04-25
// 20:42:10"); GitHub sends RFC 3339, which is what go-github parses (see
// payloads/README.md).
var spacedTime = regexp.MustCompile(`"(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d)"`)

// Examples reads every example payload of @octokit/webhooks-examples (the
// npm package, at the module root), by event, times in RFC 3339.
func Examples(t testing.TB) map[string][]json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.NPMPackageDir(t, "@octokit/webhooks-examples"), "api.github.com", "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var index []struct {
		Name     string            `json:"name"`
		Examples []json.RawMessage `json:"examples"`
	}
	if err := json.Unmarshal(b, &index); err != nil {
		t.Fatalf("@octokit/webhooks-examples index.json: %v", err)
	}
	out := map[string][]json.RawMessage{}
	for _, e := range index {
		for _, ex := range e.Examples {
			out[e.Name] = append(out[e.Name], spacedTime.ReplaceAll(ex, []byte(`"${1}T${2}Z"`)))
		}
	}
	return out
}
