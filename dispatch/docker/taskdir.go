package docker

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// taskFiles writes what a run's sandbox reads from its task directory:
// the work order, the token (again at RefreshToken, while the run lives),
// the model gateway's file and the preview directory; CurrentToken reads
// the token back.
type taskFiles struct {
	*engine
	// runs tells RefreshToken whether the run has ended.
	runs *watcher
}

// writeTaskDir lays the task directory out. Modes: the directory itself is
// 0700 (tokens); what the sandbox user must read or write is handed to it
// when the bot runs as root, and opened up inside the 0700 directory when
// it cannot be.
func (b *taskFiles) writeTaskDir(dir string, order dispatch.WorkOrder, token string, task bool) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	asRoot := os.Geteuid() == 0
	sameUser := os.Geteuid() == b.o.SandboxUID
	give := func(p string) {
		if asRoot {
			_ = os.Chown(p, b.o.SandboxUID, b.o.SandboxGID)
		}
	}
	secrets := filepath.Join(dir, "secrets")
	out := filepath.Join(dir, "out")
	if err := os.MkdirAll(secrets, 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	give(out)
	if !asRoot && !sameUser {
		// Neither owner nor root: the sandbox user needs write access by mode.
		if err := os.Chmod(out, 0o777); err != nil {
			return err
		}
	}
	if !task {
		if err := os.MkdirAll(filepath.Join(dir, "docker"), 0o711); err != nil {
			return err
		}
	}
	if err := b.writePreviewDir(dir, task, asRoot); err != nil {
		return err
	}
	// The work order and the token are the runner's: in a coding sandbox
	// it has its own uid, and the init moves both out of the agent's reach
	// (runner/sandboxinit/identities.go). A bot that is not root cannot
	// give files away and leaves them readable inside its 0700 directory.
	orderMode := os.FileMode(0o644)
	if asRoot {
		orderMode = 0o600
	}
	if err := writeJSON(filepath.Join(dir, "work-order.json"), order, orderMode); err != nil {
		return err
	}
	if asRoot {
		uid, gid := b.secretOwner(dir)
		if err := os.Chown(filepath.Join(dir, "work-order.json"), uid, gid); err != nil {
			return fmt.Errorf("give the work order to uid %d: %w", uid, err)
		}
	}
	if token != "" {
		if err := b.writeToken(dir, token); err != nil {
			return err
		}
	}
	if order.GatewayFile != "" {
		if err := b.writeGateway(dir, task); err != nil {
			return err
		}
	}
	if b.o.Env != nil {
		return writeEnvFile(filepath.Join(dir, "env"), sandboxEnv(b.o.Env, order))
	}
	return nil
}

// writeEnvFile writes env as docker's --env-file reads it, one NAME=value
// a line, sorted, private to the bot.
func writeEnvFile(path string, env map[string]string) error {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var sb strings.Builder
	for _, k := range keys {
		v := env[k]
		if strings.ContainsAny(k, "=\n") || strings.Contains(v, "\n") {
			return fmt.Errorf("env %s: names cannot hold = or newlines, values cannot hold newlines", k)
		}
		fmt.Fprintf(&sb, "%s=%s\n", k, v)
	}
	return writeFile(path, []byte(sb.String()), 0o600)
}

// sandboxEnv is what of the backend's environment a run's sandbox gets:
// all of it, but for a preview only the secrets its work order names
// (the base branch's dev.preview_secrets, checked by the bot against
// SANDBOX_PASS_ENV). A preview serves code an agent wrote, and nothing
// else of the bot's reaches it.
func sandboxEnv(all map[string]string, order dispatch.WorkOrder) map[string]string {
	if order.Mode != dispatch.ModePreview {
		return all
	}
	env := map[string]string{}
	for _, n := range order.SecretEnv {
		if v, ok := all[n]; ok {
			env[n] = v
		}
	}
	return env
}

// writeToken replaces secrets/token atomically: the sandbox's git
// credential helper reads it on every use and must never see half a token.
func (b *taskFiles) writeToken(dir, token string) error {
	mode := os.FileMode(0o600)
	asRoot := os.Geteuid() == 0
	if !asRoot && os.Geteuid() != b.o.SandboxUID {
		// The file cannot be given to the sandbox user; its 0700 task
		// directory still keeps other host users out.
		mode = 0o644
	}
	p := filepath.Join(dir, "secrets", "token")
	tmp, err := os.CreateTemp(filepath.Dir(p), ".token-*")
	if err != nil {
		return fmt.Errorf("write token: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(token); err != nil {
		tmp.Close()
		return fmt.Errorf("write token: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write token: %w", err)
	}
	if err := os.Chmod(tmp.Name(), mode); err != nil {
		return fmt.Errorf("write token: %w", err)
	}
	if asRoot {
		uid, gid := b.secretOwner(dir)
		if err := os.Chown(tmp.Name(), uid, gid); err != nil {
			return fmt.Errorf("write token: %w", err)
		}
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return fmt.Errorf("write token: %w", err)
	}
	return nil
}

// secretOwner is who reads the task's work order and token: the image's
// runner user in a coding sandbox (which has an inner Docker directory),
// the sandbox user in task mode, where the container runs as that user
// from the start.
func (b *taskFiles) secretOwner(dir string) (uid, gid int) {
	if _, err := os.Stat(filepath.Join(dir, "docker")); err == nil {
		return dispatch.RunnerUID, dispatch.RunnerUID
	}
	return b.o.SandboxUID, b.o.SandboxGID
}

func writeJSON(path string, v any, mode os.FileMode) error {
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFile(path, append(raw, '\n'), mode)
}

func writeFile(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), mode); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
