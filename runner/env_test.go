package runner_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/runner"
)

func TestParseDotenv(t *testing.T) {
	t.Parallel()
	got, err := runner.ParseDotenv(".env", []byte(`# comment
PLAIN=value
export EXPORTED=yes
SPACED = around  # trailing comment
SINGLE='no $expansion # here'
DOUBLE="line one\nline \"two\""
MULTI="first
second"
EMPTY=
URL=postgres://u:p@db:5432/x?sslmode=disable
`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"PLAIN": "value", "EXPORTED": "yes", "SPACED": "around", "SINGLE": "no $expansion # here",
		"DOUBLE": "line one\nline \"two\"", "MULTI": "first\nsecond", "EMPTY": "", "URL": "postgres://u:p@db:5432/x?sslmode=disable",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	for _, bad := range []struct{ in, err string }{
		{"NOEQUALS\n", ".env:1: expected KEY=VALUE"},
		{"OK=1\n1BAD=x\n", `.env:2: "1BAD" is not a valid variable name`},
		{"A='open\n", ".env:1: unterminated single quote"},
		{"A=1\nB=\"open\nstill open\n", ".env:2: unterminated double quote"},
	} {
		if _, err := runner.ParseDotenv(".env", []byte(bad.in)); err == nil || err.Error() != bad.err {
			t.Errorf("ParseDotenv(%q) error = %v, want %q", bad.in, err, bad.err)
		}
	}
}

func TestResolveEnvPlaceholders(t *testing.T) {
	t.Parallel()
	res, err := runner.ResolveEnv(runner.EnvSources{
		YAML:     map[string]string{"DB": "postgres://{db}/app", "JSON": `{"a":1}`, "KEY": "${API_KEY}", "MISSING": "${NOT_GIVEN}"},
		Secrets:  map[string]string{"API_KEY": "k-123456"},
		Services: dispatch.Services{"db": "172.18.0.5:5432"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Vars["DB"] != "postgres://172.18.0.5:5432/app" || res.Vars["JSON"] != `{"a":1}` || res.Vars["KEY"] != "k-123456" || res.Vars["MISSING"] != "${NOT_GIVEN}" {
		t.Fatalf("vars = %v", res.Vars)
	}
	if len(res.Unresolved) != 1 || !strings.Contains(res.Unresolved[0], "${NOT_GIVEN} is not a secret") {
		t.Fatalf("unresolved = %v", res.Unresolved)
	}
	_, err = runner.ResolveEnv(runner.EnvSources{YAML: map[string]string{"R": "{redis}"}, Services: dispatch.Services{"db": "x:1"}})
	if err == nil || !strings.Contains(err.Error(), "placeholder {redis} names no running service (running: db)") {
		t.Fatalf("unknown service: %v", err)
	}
	// Without a services file (a local run) placeholders stay, reported.
	res, err = runner.ResolveEnv(runner.EnvSources{YAML: map[string]string{"R": "{redis}"}})
	if err != nil || res.Vars["R"] != "{redis}" || len(res.Unresolved) != 1 {
		t.Fatalf("no services file: %v, %v", res, err)
	}
}

func TestRedactor(t *testing.T) {
	t.Parallel()
	r := runner.NewRedactor("", "s3cr3t-value", `quo"ted-secret`, "ab")
	if got := r.String("a s3cr3t-value and ab"); got != "a [REDACTED] and ab" {
		t.Fatalf("String = %q (values under 4 characters are not redacted)", got)
	}
	var buf bytes.Buffer
	log := zerolog.New(r.Writer(&buf))
	log.Info().Str("v", `quo"ted-secret`).Msg("has s3cr3t-value")
	if strings.Contains(buf.String(), "s3cr3t") || strings.Contains(buf.String(), "ted-secret") {
		t.Fatalf("log line leaks: %s", buf.String())
	}
}
