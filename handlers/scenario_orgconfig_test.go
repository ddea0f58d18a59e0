package handlers_test

import (
	"strings"
	"testing"
)

// The organisation's `.github` repository holds defaults beneath every
// repository's own .sandbox.yml: the repository's keys win, the org's fill
// in what it leaves out.
func TestOrgSandboxYMLIsALayerBeneathTheRepository(t *testing.T) {
	t.Parallel()
	h := newHarness(t, map[string]string{".sandbox.yml": "name: hello\nharness: opencode\nmodel: scripted/model\nenv:\n  SHARED: repo\n", "main.go": "package main\n"}, nil)
	h.gh.AddRepo("octo-org/.github", testInstallation, map[string]string{
		".sandbox.yml": "model: org/model\nmax_budget_usd: 3\nvalidate:\n  lint: make lint\nenv:\n  ORG: \"yes\"\n  SHARED: org\n",
	})
	n := h.gh.AddIssue(testRepo, writer, "Add a greeting endpoint", "")
	h.label(n, writer, "d-org-layer")
	cfg := h.waitSubmitted(1)[0].Order.Config
	if cfg.Model != "scripted/model" {
		t.Errorf("model %q: the repository's file must win over the org's", cfg.Model)
	}
	if cfg.MaxBudgetUSD != 3 || len(cfg.Validate) != 1 || cfg.Validate[0].Command != "make lint" {
		t.Errorf("budget %v validate %+v: want the org's, which the repository left out", cfg.MaxBudgetUSD, cfg.Validate)
	}
	if cfg.Env["ORG"] != "yes" || cfg.Env["SHARED"] != "repo" {
		t.Errorf("env %v: want the org's ORG and the repository's SHARED", cfg.Env)
	}
}

// A broken org file stops the run with a comment that names the file to
// fix, in the org's repository, not the one the issue is in.
func TestBadOrgSandboxYMLNamesTheOrgFile(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	h.gh.AddRepo("octo-org/.github", testInstallation, map[string]string{".sandbox.yml": "max_budget_usd: lots\n"})
	n := h.gh.AddIssue(testRepo, writer, "Anything", "")
	h.label(n, writer, "d-org-bad")
	c := h.waitComment(n, "config error comment", func(c string) bool { return strings.Contains(c, "could not use the sandbox configuration") })
	for _, want := range []string{"`octo-org/.github`", ".sandbox.yml:1:17: max_budget_usd: expected a number"} {
		if !strings.Contains(c, want) {
			t.Errorf("config error comment lacks %q:\n%s", want, c)
		}
	}
	h.idle()
	if got := len(h.backend.Specs()); got != 0 {
		t.Fatalf("a bad org file must not dispatch; runs: %d", got)
	}
}
