package harness

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

var _ SessionPorter = (*ClaudeCode)(nil)

// claudeMaxSessionBytes caps what a Claude Code session export may unpack
// to, as the archive's own cap does.
const claudeMaxSessionBytes = 32 << 20

var (
	claudeUnsafePath = regexp.MustCompile(`[^a-zA-Z0-9]`)
	claudeSessionID  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`)
)

// claudeProjectDir is where Claude Code keeps the sessions made in the
// checkout dir: <config dir>/projects/<dir with every character that is
// not a letter or digit turned into "-">. Longer names than 200
// characters get a hash of the CLI's own, which is not reproduced here.
func claudeProjectDir(env []string, dir string) (string, error) {
	name := claudeUnsafePath.ReplaceAllString(dir, "-")
	if len(name) > 200 {
		return "", fmt.Errorf("claude-code harness: the checkout path %q is too long for a Claude Code project directory name", dir)
	}
	cfg := lookupEnvValue(env, "CLAUDE_CONFIG_DIR")
	if cfg == "" {
		home := lookupEnvValue(env, "HOME")
		if home == "" {
			return "", errors.New("claude-code harness: neither CLAUDE_CONFIG_DIR nor HOME is set: cannot find the sessions")
		}
		cfg = filepath.Join(home, ".claude")
	}
	return filepath.Join(cfg, "projects", name), nil
}

func lookupEnvValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}

// ExportSession implements SessionPorter: a tar of the session's
// transcript (<id>.jsonl) and, when there is one, its directory (tool
// results and subagents kept beside it), made by the agent, who owns them.
func (c *ClaudeCode) ExportSession(env []string, dir, id string) (*exec.Cmd, error) {
	if !claudeSessionID.MatchString(id) {
		return nil, fmt.Errorf("claude-code harness: %q is not a session id", id)
	}
	proj, err := claudeProjectDir(env, dir)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("sh", "-c", `cd "$1" || exit 1
if [ -d "$2" ]; then exec tar -cf - -- "$2.jsonl" "$2"; fi
exec tar -cf - -- "$2.jsonl"`, "sh", proj, id)
	cmd.Dir = dir
	cmd.Env = env
	return cmd, nil
}

// RelocateSession implements SessionPorter: it reads the tar as untrusted
// (only <id>.jsonl and regular files and directories below <id>/, no
// links, no name leaving them), rewrites the checkout path in the
// transcripts, and writes a fresh tar of the same files.
func (c *ClaudeCode) RelocateSession(data []byte, id, from, to string) ([]byte, error) {
	if !claudeSessionID.MatchString(id) {
		return nil, fmt.Errorf("claude-code harness: %q is not a session id", id)
	}
	tr := tar.NewReader(bytes.NewReader(data))
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	total, transcript := int64(0), false
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("claude-code session export is not a tar archive: %w", err)
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if name != h.Name && name+"/" != h.Name && "./"+name != h.Name {
			return nil, fmt.Errorf("claude-code session export: entry %q is not a clean relative path", h.Name)
		}
		if name != id+".jsonl" && name != id && !strings.HasPrefix(name, id+"/") {
			return nil, fmt.Errorf("claude-code session export: entry %q is not part of session %s", h.Name, id)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := tw.WriteHeader(&tar.Header{Name: name + "/", Mode: 0o700, Typeflag: tar.TypeDir}); err != nil {
				return nil, err
			}
			continue
		case tar.TypeReg:
		default:
			return nil, fmt.Errorf("claude-code session export: entry %q is not a regular file or directory", h.Name)
		}
		total += h.Size
		if total > claudeMaxSessionBytes {
			return nil, fmt.Errorf("claude-code session export unpacks to more than %d bytes", claudeMaxSessionBytes)
		}
		b, err := io.ReadAll(io.LimitReader(tr, h.Size))
		if err != nil {
			return nil, fmt.Errorf("claude-code session export: read %q: %w", h.Name, err)
		}
		if strings.HasSuffix(name, ".jsonl") || strings.HasSuffix(name, ".json") {
			b = relocateJSON(b, from, to)
		}
		if name == id+".jsonl" {
			transcript = true
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(b); err != nil {
			return nil, err
		}
	}
	if !transcript {
		return nil, fmt.Errorf("claude-code session export has no transcript %s.jsonl", id)
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// SessionData implements SessionPorter: the tar of the transcripts is
// carried as it is, and looked through as it is (a tar keeps each file's
// bytes whole).
func (c *ClaudeCode) SessionData(export []byte) (data, text []byte, err error) {
	return export, export, nil
}

// ImportSession implements SessionPorter: the tar RelocateSession makes of
// the export is unpacked into the project directory of the checkout to,
// private to the agent, where `--resume <id>` finds it.
func (c *ClaudeCode) ImportSession(env []string, id, from, to string, data []byte) (*exec.Cmd, error) {
	data, err := c.RelocateSession(data, id, from, to)
	if err != nil {
		return nil, err
	}
	proj, err := claudeProjectDir(env, to)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("sh", "-c", `umask 077 && mkdir -p -- "$1" && exec tar -xf - -C "$1" --no-same-owner --no-same-permissions`, "sh", proj)
	cmd.Dir = to
	cmd.Env = env
	cmd.Stdin = bytes.NewReader(data)
	return cmd, nil
}
