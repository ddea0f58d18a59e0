package main

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/sandbox-bot/sandbox-bot/app"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad"
	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad/nomadtest"
	"github.com/sandbox-bot/sandbox-bot/testkit/testenv"
)

// botImageDefault is the tag deploy/bot/build --local gives the image and
// the Nomad service job runs unless told otherwise.
const botImageDefault = "sandbox-bot/bot:local"

// botImageUID is the account deploy/bot's images run as.
const botImageUID = "65532"

// hclFile parses one of deploy/nomad's files with HCL's own parser (the one
// Nomad's jobspec2 is built on), so a syntax error fails here, not on the
// operator's `nomad job run`.
type hclFile struct {
	src  []byte
	body *hclsyntax.Body
}

func parseHCL(t *testing.T, name string) hclFile {
	t.Helper()
	path := filepath.Join(testenv.ModuleRoot(t), "deploy", "nomad", name)
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, diags := hclsyntax.ParseConfig(src, path, hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatalf("%s does not parse: %s", path, diags.Error())
	}
	return hclFile{src: src, body: f.Body.(*hclsyntax.Body)}
}

// block finds the nested block of that type (and label, if given).
func block(t *testing.T, b *hclsyntax.Body, typ, label string) *hclsyntax.Body {
	t.Helper()
	for _, blk := range b.Blocks {
		if blk.Type == typ && (label == "" || slices.Contains(blk.Labels, label)) {
			return blk.Body
		}
	}
	t.Fatalf("no %s %q block", typ, label)
	return nil
}

// attr is an attribute's expression as written.
func (f hclFile) attr(t *testing.T, b *hclsyntax.Body, name string) string {
	t.Helper()
	a, ok := b.Attributes[name]
	if !ok {
		t.Fatalf("no %s attribute", name)
	}
	r := a.Expr.Range()
	return string(f.src[r.Start.Byte:r.End.Byte])
}

// The service job parses, runs the image deploy/bot builds, checks the
// bot's /healthz, and every variable it sets is one the bot reads.
func TestBotServiceJob(t *testing.T) {
	t.Parallel()
	f := parseHCL(t, "sandbox-bot.nomad.hcl")
	if got := f.attr(t, block(t, f.body, "variable", "image"), "default"); got != `"`+botImageDefault+`"` {
		t.Errorf("variable image defaults to %s, want deploy/bot/build's tag %q", got, botImageDefault)
	}
	job := block(t, f.body, "job", "sandbox-bot")
	if got := f.attr(t, job, "type"); got != `"service"` {
		t.Errorf("job type %s, want service", got)
	}
	group := block(t, job, "group", "bot")
	task := block(t, group, "task", "bot")
	if got := f.attr(t, block(t, task, "config", ""), "image"); got != "var.image" {
		t.Errorf("task image %s, want var.image", got)
	}
	check := block(t, block(t, group, "service", ""), "check", "")
	if got := f.attr(t, check, "path"); got != `"/healthz"` {
		t.Errorf("health check path %s, want /healthz", got)
	}

	// The bot's settings it asks for, recorded by asking it to load them.
	known := map[string]bool{}
	_, _ = app.LoadConfig(func(k string) (string, bool) { known[k] = true; return "", false })
	var set []string
	for name := range block(t, task, "env", "").Attributes {
		set = append(set, name)
	}
	// The secrets template renders the env file setup wrote, readable by
	// the image's non-root account, where SANDBOX_BOT_ENV_FILE points.
	tmpl := block(t, task, "template", "")
	if dest, env := f.attr(t, tmpl, "destination"), f.attr(t, block(t, task, "env", ""), "SANDBOX_BOT_ENV_FILE"); !strings.HasSuffix(strings.Trim(env, `"`), strings.TrimPrefix(strings.Trim(dest, `"`), "secrets")) {
		t.Errorf("SANDBOX_BOT_ENV_FILE = %s, but the template renders %s", env, dest)
	}
	if uid, gid := f.attr(t, tmpl, "uid"), f.attr(t, tmpl, "gid"); uid != botImageUID || gid != botImageUID {
		t.Errorf("the env file is rendered for uid %s gid %s; the bot's image runs as %s", uid, gid, botImageUID)
	}
	if len(set) < 5 {
		t.Fatalf("found only %v in the job's env and template", set)
	}
	for _, name := range set {
		if !known[name] && name != "NOMAD_ADDR" && name != "NOMAD_NAMESPACE" {
			t.Errorf("the job sets %s, which the bot never reads (typo?)", name)
		}
	}
}

// nomadVarItem and nomadVarItems are what consul-template's nomadVar
// gives a Nomad template (its dependency.NomadVarItems: a map of items
// that print as their value), so the job's template renders here as Nomad
// renders it.
type nomadVarItem struct{ Key, Value string }

func (v nomadVarItem) String() string { return v.Value }

type nomadVarItems map[string]nomadVarItem

// The replicas take the shared database's URL from the job's Variable: the
// secrets template adds it to the env file when the Variable has one, and
// the bot started from that file reads it; without one, nothing is added.
func TestBotServiceJobTakesTheDatabaseURLFromItsVariable(t *testing.T) {
	t.Parallel()
	f := parseHCL(t, "sandbox-bot.nomad.hcl")
	tmpl := block(t, block(t, block(t, block(t, f.body, "job", "sandbox-bot"), "group", "bot"), "task", "bot"), "template", "")
	v, diags := tmpl.Attributes["data"].Expr.Value(nil)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	envFile := "GITHUB_APP_INTEGRATION_ID=1\nGITHUB_APP_WEBHOOK_SECRET=s\nGITHUB_APP_PRIVATE_KEY=\"" + strings.ReplaceAll(testKey(t), "\n", "\\n") + "\"\n"
	const url = "postgres://sandbox_bot:p%40ss@db.internal:5432/sandbox_bot"
	for _, c := range []struct {
		items nomadVarItems
		want  string
	}{
		{nomadVarItems{"env_file": {"env_file", envFile}, "database_url": {"database_url", url}}, url},
		{nomadVarItems{"env_file": {"env_file", envFile}}, ""},
	} {
		var out strings.Builder
		err := template.Must(template.New("data").Funcs(template.FuncMap{"nomadVar": func(string) nomadVarItems { return c.items }}).
			Parse(v.AsString())).Execute(&out, nil)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "sandbox-bot.env")
		if err := os.WriteFile(path, []byte(out.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := app.LoadConfig(func(k string) (string, bool) {
			if k == app.EnvFileVar {
				return path, true
			}
			return "", false
		})
		if err != nil {
			t.Fatalf("the bot started from the rendered env file:\n%s\n%v", out.String(), err)
		}
		if cfg.DatabaseURL != c.want {
			t.Errorf("rendered from %v: SANDBOX_DATABASE_URL %q, want %q\n%s", c.items, cfg.DatabaseURL, c.want, out.String())
		}
	}
}

// deploy/bot/build --local builds an image whose binary starts, reaches
// Nomad and answers /healthz, as the service job runs it.
func TestBotImageStarts(t *testing.T) {
	testenv.Docker(t)
	t.Parallel()
	root := testenv.ModuleRoot(t)
	suffix := make([]byte, 4)
	rand.Read(suffix)
	tag := "sandbox-bot/bot:test-" + hex.EncodeToString(suffix)
	build := exec.Command(filepath.Join(root, "deploy", "bot", "build"), "--local", "--tag", tag)
	out, err := build.Output()
	if err != nil {
		t.Fatalf("deploy/bot/build: %v\n%s", err, exitStderr(err))
	}
	if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); lines[len(lines)-1] != tag {
		t.Fatalf("deploy/bot/build printed %q, want the image reference last", out)
	}
	t.Cleanup(func() { exec.Command("docker", "rmi", "-f", tag).Run() })

	fake, err := nomadtest.New(nomadtest.Options{Namespaces: []string{nomad.DefaultNamespace}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	addr := freeAddr(t)
	name := "sandbox-bot-image-test-" + hex.EncodeToString(suffix)
	run := exec.Command("docker", "run", "-d", "--rm", "--name", name, "--network", "host", "--read-only",
		"-e", "GITHUB_APP_INTEGRATION_ID=1", "-e", "GITHUB_APP_WEBHOOK_SECRET=s", "-e", "GITHUB_APP_PRIVATE_KEY="+testKey(t),
		"-e", "GITHUB_V3_API_URL=http://127.0.0.1:1/", "-e", "SANDBOX_LISTEN="+addr, "-e", "SANDBOX_ADMIN_LISTEN=127.0.0.1:0",
		"-e", "SANDBOX_BACKEND=nomad", "-e", "NOMAD_ADDR="+fake.URL, "--tmpfs", "/data:uid=65532,gid=65532", tag)
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("docker run: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", name).Run() })
	logs := func() string { out, _ := exec.Command("docker", "logs", name).CombinedOutput(); return string(out) }

	deadline := time.Now().Add(30 * time.Second)
	body := waitHealthz(addr, 30*time.Second)
	if !strings.Contains(body, `"status":"ok"`) || !strings.Contains(body, `"backend":"nomad"`) {
		t.Fatalf("/healthz from the image: %q\n%s", body, logs())
	}
	inspect, _ := exec.Command("docker", "inspect", "--format", "{{.Config.User}}", tag).Output()
	if strings.TrimSpace(string(inspect)) != botImageUID+":"+botImageUID {
		t.Errorf("image user %q, want the non-root 65532:65532", inspect)
	}
	for time.Now().Before(deadline) && len(fake.Calls()) == 0 {
		time.Sleep(50 * time.Millisecond)
	}
	if len(fake.Calls()) == 0 {
		t.Errorf("the bot in the image never called Nomad at %s\n%s", fake.URL, logs())
	}
}

func exitStderr(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
