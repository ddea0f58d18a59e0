// Package templates holds every prompt the agent sees and every text the bot
// posts on GitHub, as embedded text/template files. An operator can override
// any of them by putting a file with the same relative name in a directory
// (SANDBOX_TEMPLATES_DIR); the rest keep their embedded defaults.
package templates

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"text/template"
	"time"
)

//go:embed prompts/*.tmpl github/*.tmpl
var embedded embed.FS

// Set is a loaded set of templates, keyed by relative path without the
// .tmpl suffix ("prompts/plan", "github/plan_comment").
type Set struct {
	byName map[string]*template.Template
	// overrides maps the name of each overridden template to its file.
	overrides map[string]string
}

// Funcs available in every template.
func funcs() template.FuncMap {
	return template.FuncMap{
		"money":    func(f float64) string { return fmt.Sprintf("$%.2f", f) },
		"duration": func(s float64) string { return (time.Duration(s * float64(time.Second))).Round(time.Second).String() },
		"indent": func(n int, s string) string {
			pad := strings.Repeat(" ", n)
			return pad + strings.ReplaceAll(s, "\n", "\n"+pad)
		},
		// checkCell is a check's number of findings as a table cell:
		// "—" when it did not run (-1), ✅ when it found nothing.
		"checkCell": func(n int) string {
			switch {
			case n < 0:
				return "—"
			case n == 0:
				return "✅"
			}
			return fmt.Sprintf("❌ %d", n)
		},
		"trim":  strings.TrimSpace,
		"lower": strings.ToLower,
		"join":  strings.Join,
		"quote": func(s string) string { return "> " + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n> ") },
		"fence": func(s string) string {
			// A fence longer than any backtick run inside, so quoted output
			// can never close it early.
			f := "```"
			for strings.Contains(s, f) {
				f += "`"
			}
			return f + "\n" + strings.TrimRight(s, "\n") + "\n" + f
		},
		"add": func(a, b int) int { return a + b },
	}
}

// Load reads the embedded templates and, if overrideDir is not empty, the
// operator's overrides from it. A broken override is an error that names the
// file, so the bot refuses to start rather than posting garbage later.
func Load(overrideDir string) (*Set, error) {
	parsed, err := embeddedSet()
	if err != nil {
		return nil, err
	}
	// The parsed templates are shared; the map is the set's own, so an
	// override replaces an entry of this set alone.
	s := &Set{byName: maps.Clone(parsed.byName), overrides: map[string]string{}}
	if overrideDir == "" {
		return s, nil
	}
	err = filepath.WalkDir(overrideDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".tmpl") {
			return err
		}
		rel, err := filepath.Rel(overrideDir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if _, ok := s.byName[strings.TrimSuffix(rel, ".tmpl")]; !ok {
			return fmt.Errorf("template override %s: no embedded template %s to override (known: %s)", p, rel, strings.Join(s.Names(), ", "))
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("template override: %w", err)
		}
		if err := s.add(rel, string(b)); err != nil {
			return fmt.Errorf("template override %s: %s", p, describe(err))
		}
		s.overrides[strings.TrimSuffix(rel, ".tmpl")] = p
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// embeddedSet parses the embedded templates once a process: every server
// start (and every test that starts one) loads them, and a parsed template
// is only executed afterwards, which is safe to share.
var embeddedSet = sync.OnceValues(func() (*Set, error) {
	s := &Set{byName: map[string]*template.Template{}}
	err := fs.WalkDir(embedded, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".tmpl") {
			return err
		}
		b, err := embedded.ReadFile(p)
		if err != nil {
			return err
		}
		return s.add(p, string(b))
	})
	return s, err
})

// MustLoadEmbedded returns the embedded set; the embedded files are tested,
// so failure here is a build defect.
func MustLoadEmbedded() *Set {
	s, err := Load("")
	if err != nil {
		panic(err)
	}
	return s
}

func (s *Set) add(path, text string) error {
	name := strings.TrimSuffix(path, ".tmpl")
	t, err := template.New(name).Funcs(funcs()).Option("missingkey=error").Parse(text)
	if err != nil {
		return err
	}
	s.byName[name] = t
	return nil
}

// With is a copy of s with the template name added (or replaced) from
// text, parsed as Load parses a file: how a test sees a template a
// newcomer is about to add to the embedded ones.
func (s *Set) With(name, text string) (*Set, error) {
	c := &Set{byName: maps.Clone(s.byName), overrides: maps.Clone(s.overrides)}
	if err := c.add(name+".tmpl", text); err != nil {
		return nil, fmt.Errorf("template %s: %s", name, describe(err))
	}
	return c, nil
}

// Names lists the loaded templates.
func (s *Set) Names() []string { return slices.Sorted(maps.Keys(s.byName)) }

// Render executes the named template with data.
func (s *Set) Render(name string, data any) (string, error) {
	t, ok := s.byName[name]
	if !ok {
		return "", fmt.Errorf("no template %q", name)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return "", fmt.Errorf("render %s: %w", name, err)
	}
	return b.String(), nil
}
