package sandboxinit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// defaultSupabaseDir is the Supabase project the init starts the local stack from.
// The repository is not cloned yet when services start (the runner clones),
// so the stack runs with the CLI's defaults and the repository's migrations
// are applied by its own lifecycle.setup (`supabase db reset --db-url
// postgresql://postgres:postgres@{supabase_db}/postgres`, or similar).
const defaultSupabaseDir = "/var/lib/sandbox/supabase"

// supabaseStack is the result of `supabase start`: placeholders and the
// variables supabase-js and the CLI expect.
type supabaseStack struct {
	Services dispatch.Services
	Env      map[string]string
}

// startSupabase runs the Supabase local stack on the inner daemon with the
// Supabase CLI. The CLI pulls its images (or finds them loaded from the
// image cache) and publishes them on the sandbox's loopback.
func startSupabase(ctx context.Context, r *serviceRunner, dir string) (supabaseStack, []string, error) {
	bin, err := exec.LookPath("supabase")
	if err != nil {
		return supabaseStack{}, nil, fmt.Errorf("supabase: true needs the supabase CLI in the sandbox image (the production image installs it; the --local image cannot download it)")
	}
	// Images cached by an earlier run spare the pulls.
	for _, ref := range r.cache.refs() {
		if strings.Contains(ref, "supabase/") {
			if _, err := r.ensureImage(ctx, ref); err != nil {
				r.log.Warn().Err(err).Str("image", ref).Msg("supabase: cached image not loaded")
			}
		}
	}
	before, _ := r.imageRefs(ctx)

	if err := os.MkdirAll(dir, 0o755); err != nil {
		return supabaseStack{}, nil, err
	}
	config := filepath.Join(dir, "supabase", "config.toml")
	if _, err := os.Stat(config); err != nil {
		if out, err := runCLI(ctx, dir, bin, "init", "--workdir", dir); err != nil {
			return supabaseStack{}, nil, fmt.Errorf("supabase init: %w: %s", err, out)
		}
	}
	if err := disableAnalytics(config); err != nil {
		return supabaseStack{}, nil, err
	}
	start := time.Now()
	if out, err := runCLI(ctx, dir, bin, "start", "--workdir", dir); err != nil {
		return supabaseStack{}, nil, fmt.Errorf("supabase start: %w: %s", err, lastLines(out, 20))
	}
	out, err := runCLI(ctx, dir, bin, "status", "--workdir", dir, "--output", "json")
	if err != nil {
		return supabaseStack{}, nil, fmt.Errorf("supabase status: %w: %s", err, lastLines(out, 20))
	}
	stack, err := parseSupabaseStatus(out)
	if err != nil {
		return supabaseStack{}, nil, err
	}
	r.log.Info().Dur("took", time.Since(start)).Interface("addrs", stack.Services).Msg("supabase local stack healthy")

	after, _ := r.imageRefs(ctx)
	var pulled []string
	for ref := range after {
		if !before[ref] {
			pulled = append(pulled, ref)
		}
	}
	return stack, pulled, nil
}

func runCLI(ctx context.Context, dir, bin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	// The CLI reads SUPABASE_<SECTION>_<KEY> over config.toml: analytics
	// stays off whatever the file says (see disableAnalytics).
	cmd.Env = append(os.Environ(), "SUPABASE_ANALYTICS_ENABLED=false")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Dir = dir
	err := cmd.Run()
	return out.String(), err
}

// disableAnalytics turns Supabase's analytics off in config.toml: its log
// collector (vector) is started with the Docker socket bound into it, and
// a container holding the inner daemon's socket is root over the sandbox
// (the agent could reach it by joining its namespaces). Studio's log
// views stay empty; everything else of the stack runs.
func disableAnalytics(config string) error {
	b, err := os.ReadFile(config)
	if err != nil {
		return fmt.Errorf("supabase: read %s: %w", config, err)
	}
	if err := os.WriteFile(config, []byte(analyticsOff(string(b))), 0o644); err != nil {
		return fmt.Errorf("supabase: turn analytics off in %s: %w", config, err)
	}
	return nil
}

// analyticsOff rewrites a config.toml with [analytics] enabled = false.
func analyticsOff(toml string) string {
	var out []string
	section, done := "", false
	closeSection := func() {
		if section == "analytics" && !done {
			out, done = append(out, "enabled = false"), true
		}
	}
	for _, l := range strings.Split(toml, "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "[") {
			closeSection()
			section = strings.Trim(t, "[] ")
		} else if k, _, ok := strings.Cut(t, "="); ok && section == "analytics" && strings.TrimSpace(k) == "enabled" {
			if !done {
				out, done = append(out, "enabled = false"), true
			}
			continue
		}
		out = append(out, l)
	}
	closeSection()
	if !done {
		out = append(out, "", "[analytics]", "enabled = false")
	}
	return strings.Join(out, "\n")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// imageRefs lists repo:tag of every image on the inner daemon.
func (r *serviceRunner) imageRefs(ctx context.Context) (map[string]bool, error) {
	out, err := r.docker.run(ctx, "images", "--format", "{{.Repository}}:{{.Tag}}")
	if err != nil {
		return nil, err
	}
	refs := map[string]bool{}
	for _, l := range strings.Fields(out) {
		if !strings.Contains(l, "<none>") {
			refs[l] = true
		}
	}
	return refs, nil
}

// supabasePlaceholders maps `supabase status -o json` fields to the
// {supabase_*} placeholders. Newer CLIs renamed Inbucket to Mailpit.
var supabasePlaceholders = []struct {
	field        string
	placeholders []string
}{
	{"API_URL", []string{"supabase_kong", "supabase_api"}},
	{"DB_URL", []string{"supabase_db"}},
	{"STUDIO_URL", []string{"supabase_studio"}},
	{"MAILPIT_URL", []string{"supabase_mail", "supabase_inbucket"}},
	{"INBUCKET_URL", []string{"supabase_mail", "supabase_inbucket"}},
}

// supabaseEnv maps status fields to the variable names apps use.
var supabaseEnv = map[string]string{
	"API_URL":          "SUPABASE_URL",
	"DB_URL":           "SUPABASE_DB_URL",
	"ANON_KEY":         "SUPABASE_ANON_KEY",
	"SERVICE_ROLE_KEY": "SUPABASE_SERVICE_ROLE_KEY",
	"PUBLISHABLE_KEY":  "SUPABASE_PUBLISHABLE_KEY",
	"SECRET_KEY":       "SUPABASE_SECRET_KEY",
	"JWT_SECRET":       "SUPABASE_JWT_SECRET",
}

// parseSupabaseStatus reads the JSON the CLI prints (possibly after a line
// of chatter such as "Stopped services: [...]").
func parseSupabaseStatus(out string) (supabaseStack, error) {
	i := strings.Index(out, "{")
	if i < 0 {
		return supabaseStack{}, fmt.Errorf("supabase status printed no JSON: %q", lastLines(out, 5))
	}
	var raw map[string]any
	if err := json.NewDecoder(strings.NewReader(out[i:])).Decode(&raw); err != nil {
		return supabaseStack{}, fmt.Errorf("supabase status: decode JSON: %w", err)
	}
	str := func(k string) string { s, _ := raw[k].(string); return s }
	stack := supabaseStack{Services: dispatch.Services{}, Env: map[string]string{}}
	for _, m := range supabasePlaceholders {
		v := str(m.field)
		if v == "" {
			continue
		}
		hp, err := hostPort(v)
		if err != nil {
			return supabaseStack{}, fmt.Errorf("supabase status %s: %w", m.field, err)
		}
		for _, p := range m.placeholders {
			if _, set := stack.Services[p]; !set {
				stack.Services[p] = hp
			}
		}
	}
	for field, name := range supabaseEnv {
		if v := str(field); v != "" {
			stack.Env[name] = v
		}
	}
	if _, ok := stack.Services["supabase_kong"]; !ok {
		return supabaseStack{}, fmt.Errorf("supabase status has no API_URL: %q", lastLines(out, 5))
	}
	return stack, nil
}

// hostPort reads host:port out of a URL such as http://127.0.0.1:54321 or
// postgresql://postgres:postgres@127.0.0.1:54322/postgres.
func hostPort(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	if u.Port() == "" {
		return "", fmt.Errorf("%q has no port", raw)
	}
	return net.JoinHostPort(u.Hostname(), u.Port()), nil
}
