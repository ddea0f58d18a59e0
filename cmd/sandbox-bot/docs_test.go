package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// docs/testing.md's table of features names the test that proves each
// through the assembled path: every test it names exists, so the table
// cannot drift from the code unnoticed.
func TestDocsFeatureTableNamesRealTests(t *testing.T) {
	root := testenv.ModuleRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "docs", "testing.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(readme), "### Every feature through the assembled path")
	if !ok {
		t.Fatal("docs/testing.md has no section \"Every feature through the assembled path\"")
	}
	table, _, _ = strings.Cut(table, "\n### ")
	defined := map[string]bool{}
	funcRE := regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]+)\(`)
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == ".git") {
			return filepath.SkipDir
		}
		if strings.HasSuffix(p, "_test.go") {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, m := range funcRE.FindAllStringSubmatch(string(b), -1) {
				defined[m[1]] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	named := regexp.MustCompile("`(Test[A-Za-z0-9_]+)`").FindAllStringSubmatch(table, -1)
	if len(named) < 20 {
		t.Fatalf("the feature table names %d tests; it should name one per feature", len(named))
	}
	for _, m := range named {
		if !defined[m[1]] {
			t.Errorf("docs/testing.md's feature table names %s, which no test defines", m[1])
		}
	}
}
