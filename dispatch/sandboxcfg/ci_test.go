package sandboxcfg_test

import (
	"strings"
	"testing"

	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

// ci and reports: their defaults, the file's values, and the server's
// ceilings, which bound a file that asks for more and set the value of one
// that says nothing.
func TestCIAndReportsAgainstTheCeilings(t *testing.T) {
	t.Parallel()
	no := false
	for _, tc := range []struct {
		name    string
		file    string
		limits  sandboxcfg.Limits
		want    sandboxcfg.ResolvedCI
		reports string
		err     string
	}{
		{name: "defaults", want: sandboxcfg.ResolvedCI{FixAttempts: 2}, reports: "quoted"},
		{name: "on", file: "ci: { fix: true, fix_attempts: 3 }\n", want: sandboxcfg.ResolvedCI{Fix: true, FixAttempts: 3}, reports: "quoted"},
		{name: "over the ceiling", file: "ci: { fix: true, fix_attempts: 4 }\n", limits: sandboxcfg.Limits{MaxCIFixAttempts: 3},
			err: "ci.fix_attempts: 4 is over the server ceiling of 3 (limits.max_ci_fix_attempts)"},
		{name: "a low ceiling is the default", file: "ci: { fix: true }\n", limits: sandboxcfg.Limits{MaxCIFixAttempts: 1},
			want: sandboxcfg.ResolvedCI{Fix: true, FixAttempts: 1}, reports: "quoted"},
		{name: "not allowed", file: "ci: { fix: true }\n", limits: sandboxcfg.Limits{AllowCIFix: &no}, err: "limits.allow_ci_fix"},
		{name: "strict by the file", file: "reports: { outsiders: strict }\n", want: sandboxcfg.ResolvedCI{FixAttempts: 2}, reports: "strict"},
		{name: "strict by the server", limits: sandboxcfg.Limits{OutsiderReports: "strict"}, want: sandboxcfg.ResolvedCI{FixAttempts: 2}, reports: "strict"},
		{name: "quoted over a strict server", file: "reports: { outsiders: quoted }\n", limits: sandboxcfg.Limits{OutsiderReports: "strict"},
			err: `reports.outsiders: "quoted" is over the server ceiling`},
		{name: "a bad value", file: "reports: { outsiders: loose }\n", err: "reports.outsiders"},
		{name: "too many attempts", file: "ci: { fix_attempts: 11 }\n", err: "ci.fix_attempts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var layer *sandboxcfg.Config
			if tc.file != "" {
				c, err := sandboxcfg.Parse(".sandbox.yml", []byte(tc.file))
				if err != nil {
					if tc.err != "" && strings.Contains(err.Error(), tc.err) {
						return
					}
					t.Fatal(err)
				}
				layer = c
			}
			r, err := sandboxcfg.Resolve(sandboxcfg.Config{}, layer, ".sandbox.yml", sandboxcfg.Flags{}, tc.limits)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("want an error with %q, got %v", tc.err, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.CI != tc.want || r.Reports.Outsiders != tc.reports {
				t.Errorf("ci %+v reports %q, want %+v %q", r.CI, r.Reports.Outsiders, tc.want, tc.reports)
			}
		})
	}
}
