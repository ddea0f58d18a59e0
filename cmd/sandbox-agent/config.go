package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/sandbox-bot/sandbox-bot/dispatch/process"
	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

// loadConfig layers, lowest first: the organisation's file (--org, as the
// bot reads <owner>/.github), the repository's .sandbox.yml, the --project
// file, the global file under the user's config directory, then the flags.
// Each file is parsed strictly, so errors carry file:line:col. It returns
// the files used and which of them set each key.
func (c *cli) loadConfig(o *options, project string, fl sandboxcfg.Flags) (*sandboxcfg.Resolved, []string, sandboxcfg.Origins, error) {
	type layer struct {
		file string
		data []byte
	}
	var layers []layer
	if o.orgFile != "" {
		data, err := os.ReadFile(o.orgFile)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("--org: %w", err)
		}
		layers = append(layers, layer{o.orgFile, data})
	}
	if o.repo != "" {
		file, data, err := repoConfig(o.repo, o.token)
		if err != nil {
			return nil, nil, nil, err
		}
		if data != nil {
			layers = append(layers, layer{file, data})
		}
	}
	if project != "" {
		p := project
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			p = filepath.Join(p, sandboxcfg.FileName)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("--project: %w", err)
		}
		layers = append(layers, layer{p, data})
	}
	if g := c.globalFile(); g != "" {
		if data, err := os.ReadFile(g); err == nil {
			layers = append(layers, layer{g, data})
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, nil, nil, fmt.Errorf("global config %s: %w", g, err)
		}
	}
	var parsed []sandboxcfg.Layer
	var sources []string
	for _, l := range layers {
		cfg, err := sandboxcfg.Parse(l.file, l.data)
		if err != nil {
			return nil, nil, nil, err
		}
		parsed = append(parsed, sandboxcfg.Layer{Name: l.file, Config: cfg})
		sources = append(sources, l.file)
	}
	final, origins, err := sandboxcfg.ResolveLayers(sandboxcfg.Config{}, parsed, fl, sandboxcfg.Limits{})
	if err != nil {
		return nil, nil, nil, err
	}
	return &final, sources, origins, nil
}

func (c *cli) globalFile() string {
	if g := c.getenv(envGlobalFile); g != "" {
		return g
	}
	dir := c.getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home := c.getenv("HOME")
		if home == "" {
			return ""
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "sandbox-agent", sandboxcfg.FileName)
}

// repoConfig reads the repository's .sandbox.yml: from the working tree of
// a local repository, or from a shallow clone of a remote one.
func repoConfig(url, token string) (string, []byte, error) {
	if dir, ok := strings.CutPrefix(url, "file://"); ok {
		if out, err := exec.Command("git", "-C", dir, "rev-parse", "--is-bare-repository").Output(); err == nil && strings.TrimSpace(string(out)) == "false" {
			p := filepath.Join(dir, sandboxcfg.FileName)
			b, err := os.ReadFile(p)
			if errors.Is(err, os.ErrNotExist) {
				return p, nil, nil
			}
			return p, b, err
		}
	}
	tmp, err := os.MkdirTemp("", "sandbox-agent-config-")
	if err != nil {
		return "", nil, err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command("git", "clone", "--quiet", "--depth=1", "--no-checkout", url, tmp)
	cmd.Env = append(append(os.Environ(), "GIT_TERMINAL_PROMPT=0"), gitAuthEnv(token)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", nil, fmt.Errorf("read %s from %s: %v: %s", sandboxcfg.FileName, url, err, strings.TrimSpace(string(out)))
	}
	b, err := exec.Command("git", "-C", tmp, "show", "HEAD:"+sandboxcfg.FileName).Output()
	if err != nil {
		return url + "/" + sandboxcfg.FileName, nil, nil
	}
	return url + "/" + sandboxcfg.FileName, b, nil
}

func (c *cli) dataDir(flagValue string) (string, error) {
	d := flagValue
	if d == "" {
		d = c.getenv(envDataDir)
	}
	if d == "" {
		tmp, err := os.MkdirTemp("", "sandbox-agent-")
		if err != nil {
			return "", err
		}
		return tmp, nil
	}
	return filepath.Abs(d)
}

func (c *cli) findRunner(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	if v := c.getenv(envRunner); v != "" {
		return v, nil
	}
	if p, ok := process.FindRunner(); ok {
		return p, nil
	}
	return "", fmt.Errorf("sandbox-runner not found: install it next to sandbox-agent, put it on PATH, or pass --runner (go build -o bin/ ./cmd/...)")
}
