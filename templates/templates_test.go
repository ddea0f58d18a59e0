package templates

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestEmbeddedTemplatesLoad(t *testing.T) {
	t.Parallel()
	s, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"prompts/plan", "prompts/review", "prompts/execute", "prompts/repair", "prompts/continue", "prompts/revise", "prompts/rebase", "prompts/task",
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

type sampleData struct{ User, Action string }

// An override is rendered with sample data of its type: a field the type
// lacks is an error naming the file, the line and the field, wherever the
// template would have failed; a good override passes and is used.
func TestCheckOverrides(t *testing.T) {
	t.Parallel()
	samples := map[string][]any{"github/refusal": {sampleData{User: "mallory", Action: "approve"}}}
	bad := t.TempDir()
	os.MkdirAll(filepath.Join(bad, "github"), 0o755)
	path := filepath.Join(bad, "github", "refusal.tmpl")
	os.WriteFile(path, []byte("Sorry @{{.User}},\nonly writers can {{.Acton}}."), 0o644)
	s, err := Load(bad)
	if err != nil {
		t.Fatalf("the override parses; Load must not fail: %v", err)
	}
	err = s.CheckOverrides(samples)
	want := path + ": line 2, column 19, at {{.Acton}}: can't evaluate field Acton in type templates.sampleData (its data are templates.sampleData)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("CheckOverrides = %v, want it to contain %q", err, want)
	}

	good := t.TempDir()
	os.MkdirAll(filepath.Join(good, "github"), 0o755)
	os.WriteFile(filepath.Join(good, "github", "refusal.tmpl"), []byte("Sorry @{{.User}}, only writers can {{.Action}}."), 0o644)
	if s, err = Load(good); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckOverrides(samples); err != nil {
		t.Errorf("a good override failed the check: %v", err)
	}
	if got := s.Overrides(); len(got) != 1 || got[0] != "github/refusal" {
		t.Errorf("Overrides() = %v", got)
	}
	if got, _ := s.Render("github/refusal", samples["github/refusal"][0]); got != "Sorry @mallory, only writers can approve." {
		t.Errorf("override not used: %q", got)
	}
	// The embedded templates are not checked: they have their own tests,
	// and a set without overrides has nothing to check.
	if err := MustLoadEmbedded().CheckOverrides(map[string][]any{"github/refusal": {struct{}{}}}); err != nil {
		t.Errorf("embedded templates were checked: %v", err)
	}
}

// A parse error names the file and the line, without the internal name.
func TestBrokenOverrideNamesLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "github"), 0o755)
	path := filepath.Join(dir, "github", "ack.tmpl")
	os.WriteFile(path, []byte("ok\n{{.TaskID"), 0o644)
	_, err := Load(dir)
	if want := "template override " + path + ": line 2: unclosed action"; err == nil || err.Error() != want {
		t.Errorf("Load = %v, want %q", err, want)
	}
}

// With adds a template to a copy, leaving the set it came from alone, and
// a broken one is refused with its line.
func TestWithAddsToACopy(t *testing.T) {
	t.Parallel()
	base := MustLoadEmbedded()
	s, err := base.With("github/new_reply", "hi {{.Name}}")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := s.Render("github/new_reply", inner{Name: "maya"}); err != nil || out != "hi maya" {
		t.Errorf("Render = %q, %v", out, err)
	}
	if slices.Contains(base.Names(), "github/new_reply") {
		t.Error("With changed the set it copied")
	}
	if _, err := base.With("github/new_reply", "ok\n{{.Name"); err == nil || err.Error() != "template github/new_reply: line 2: unclosed action" {
		t.Errorf("With of a broken template = %v", err)
	}
}

type inner struct{ Name string }

type branchData struct {
	OK    bool
	Items []inner
	Ptr   *inner
	ByKey map[string]inner
}

func (branchData) Total() inner { return inner{} }

// A field in a branch no sample takes is found too, by following the
// data's type through with, range, variables and methods; what cannot be
// typed statically (a builtin's result) is left to the render.
func TestCheckFollowsFieldsIntoEveryBranch(t *testing.T) {
	t.Parallel()
	sample := []any{branchData{OK: true, Items: []inner{{Name: "x"}}, Ptr: &inner{}, ByKey: map[string]inner{"a": {}}}}
	for text, want := range map[string]string{
		"{{if .OK}}fine{{else}}{{.Missing}}{{end}}":                           "line 1, column 24, at {{.Missing}}: can't evaluate field Missing in type templates.branchData",
		"{{range .Items}}{{.Name}}{{.Nmae}}{{end}}":                           "at {{.Nmae}}: can't evaluate field Nmae in type templates.inner",
		"{{range $i, $it := .Items}}{{$it.Name}}{{$.Itms}}{{end}}":            "at {{$.Itms}}: can't evaluate field Itms in type templates.branchData",
		"{{with .Ptr}}{{.Name}}{{end}}\n{{with $p := .Ptr}}{{$p.Nam}}{{end}}": "line 2, column 23, at {{$p.Nam}}: can't evaluate field Nam in type templates.inner",
		"{{.Total.Name}}{{.Total.Nope}}":                                      "can't evaluate field Nope in type templates.inner",
		"{{if eq (print .OK.X) \"a\"}}{{end}}":                                "can't evaluate field X in type bool",
		"{{(.Ptr).Name}}{{.ByKey.a.Name}}{{len .Items}}":                      "",
		"{{(index .Items 0).Anything}}":                                       "can't evaluate field Anything in type templates.inner",
	} {
		dir := t.TempDir()
		os.MkdirAll(filepath.Join(dir, "github"), 0o755)
		os.WriteFile(filepath.Join(dir, "github", "refusal.tmpl"), []byte(text), 0o644)
		s, err := Load(dir)
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		err = s.CheckOverrides(map[string][]any{"github/refusal": sample})
		switch {
		case want == "" && err != nil:
			t.Errorf("%q: %v", text, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%q: got %v, want %q", text, err, want)
		}
	}
}
