package githubtest

import (
	"bytes"
	"embed"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/testkit/loadtest"
)

// Recorded payloads from @octokit/webhooks-examples (see payloads/README.md).
//
//go:embed payloads/*.json
var payloads embed.FS

// Payload loads a recorded webhook payload (e.g. "issues.labeled") and points
// it at repo on this fake: repository, installation and sender are
// replaced, then mutate may change anything else.
func (s *Server) Payload(name, repo, sender string, mutate func(map[string]any)) []byte {
	s.t.Helper()
	b, err := payloads.ReadFile("payloads/" + name + ".json")
	if err != nil {
		s.t.Fatalf("githubtest: no recorded payload %s: %v", name, err)
	}
	return s.PayloadFrom(b, repo, sender, mutate)
}

// PayloadFrom is Payload on a payload given whole (e.g. any example of
// @octokit/webhooks-examples).
func (s *Server) PayloadFrom(b []byte, repo, sender string, mutate func(map[string]any)) []byte {
	s.t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		s.t.Fatal(err)
	}
	r := s.Repo(repo)
	m["repository"] = map[string]any{
		"id": r.ID, "name": r.Name, "full_name": r.FullName(), "default_branch": r.DefaultBranch,
		"clone_url": s.GitURL(repo), "owner": map[string]any{"login": r.Owner, "type": "Organization"},
	}
	m["installation"] = map[string]any{"id": r.InstallationID}
	typ := "User"
	if strings.HasSuffix(sender, "[bot]") {
		typ = "Bot"
	}
	m["sender"] = map[string]any{"login": sender, "type": typ}
	if mutate != nil {
		mutate(m)
	}
	out, err := json.Marshal(m)
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

// Sign returns the X-Hub-Signature-256 value for body: the load
// generator's signer, the one every test signs with.
func Sign(body []byte, secret string) string { return loadtest.Sign(body, []byte(secret)) }

// Deliver posts a webhook to url the way GitHub does and returns the status.
// An empty signature sends none.
func Deliver(t testing.TB, url, event, delivery string, body []byte, signature string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "GitHub-Hookshot/test")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", delivery)
	if signature != "" {
		req.Header.Set("X-Hub-Signature-256", signature)
	}
	// Not http.DefaultClient: every httptest.Server's Close calls
	// CloseIdleConnections on the default transport, which breaks a
	// delivery of a parallel test just as it reuses a connection.
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatalf("deliver %s: %v", event, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
