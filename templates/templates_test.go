package templates

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEmbeddedTemplatesLoad(t *testing.T) {
	t.Parallel()
	s, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"prompts/plan", "prompts/execute", "prompts/repair", "prompts/continue", "prompts/revise", "prompts/rebase", "prompts/task",
		"github/ack", "github/plan_comment", "github/pr_body", "github/failure", "github/refusal"} {
		found := false
		for _, n := range s.Names() {
			found = found || n == want
		}
		if !found {
			t.Errorf("embedded template %s is missing (have %v)", want, s.Names())
		}
	}
}

func TestOverrides(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "github"), 0o755)
	os.WriteFile(filepath.Join(dir, "github", "refusal.tmpl"), []byte("Sorry @{{.User}}, writers only."), 0o644)
	s, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Render("github/refusal", map[string]any{"User": "mallory", "Action": "x"})
	if err != nil || got != "Sorry @mallory, writers only." {
		t.Fatalf("override not used: %q %v", got, err)
	}
	if _, err := s.Render("github/refusal", map[string]any{}); err == nil {
		t.Error("a missing key must be an error, not <no value> in a comment")
	}

	broken := t.TempDir()
	os.MkdirAll(filepath.Join(broken, "github"), 0o755)
	os.WriteFile(filepath.Join(broken, "github", "ack.tmpl"), []byte("{{.TaskID"), 0o644)
	if _, err := Load(broken); err == nil || !strings.Contains(err.Error(), filepath.Join(broken, "github", "ack.tmpl")) {
		t.Errorf("a broken override must fail naming the file, got %v", err)
	}
	unknown := t.TempDir()
	os.WriteFile(filepath.Join(unknown, "welcome.tmpl"), []byte("hi"), 0o644)
	if _, err := Load(unknown); err == nil || !strings.Contains(err.Error(), "no embedded template welcome.tmpl") {
		t.Errorf("an override of nothing must fail, got %v", err)
	}
}
