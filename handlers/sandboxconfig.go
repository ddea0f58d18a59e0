package handlers

import (
	"context"
	"fmt"
	"strings"

	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
)

// orgConfigRepo holds an organisation's defaults for every repository, the
// way GitHub's own community files do.
const orgConfigRepo = ".github"

// loadConfig layers, lowest first: the server's defaults, the owner's
// `.github` repository's .sandbox.yml (its default branch), the
// repository's at ref, then the flags; and checks the result against the
// server's limits.
func (c *core) loadConfig(ctx context.Context, installation int64, gh hub.GitHub, ref string, flags sandboxcfg.Flags) (sandboxcfg.Resolved, error) {
	owner, repo, _ := strings.Cut(gh.FullName(), "/")
	var layers []sandboxcfg.Layer
	if repo != orgConfigRepo {
		org, err := c.Hub.Repo(installation, owner+"/"+orgConfigRepo)
		if err != nil {
			return sandboxcfg.Resolved{}, err
		}
		layer, err := readConfigLayer(ctx, org, "")
		if err != nil {
			return sandboxcfg.Resolved{}, err
		}
		layers = append(layers, layer)
	}
	own, err := readConfigLayer(ctx, gh, ref)
	if err != nil {
		return sandboxcfg.Resolved{}, err
	}
	layers = append(layers, own)
	resolved, _, err := sandboxcfg.ResolveLayers(c.Defaults, layers, flags, c.Limits)
	if err != nil {
		return sandboxcfg.Resolved{}, &ConfigError{Source: gh.FullName(), Err: err}
	}
	return resolved, nil
}

// readConfigLayer reads and parses one repository's file; a repository
// without one (or one the installation cannot read) is a layer with a nil
// Config.
func readConfigLayer(ctx context.Context, gh hub.GitHub, ref string) (sandboxcfg.Layer, error) {
	f, err := gh.ConfigFile(ctx, ref)
	if err != nil {
		return sandboxcfg.Layer{}, fmt.Errorf("read %s from %s: %w", sandboxcfg.FileName, f.Source, err)
	}
	if !f.Found {
		return sandboxcfg.Layer{Name: gh.FullName() + ":" + sandboxcfg.FileName}, nil
	}
	parsed, err := sandboxcfg.Parse(f.Path, f.Content)
	if err != nil {
		return sandboxcfg.Layer{}, &ConfigError{Source: f.Source, Err: err}
	}
	return sandboxcfg.Layer{Name: f.Source + ":" + f.Path, Config: parsed}, nil
}

// ConfigError is a .sandbox.yml that cannot be used; the bot quotes it on
// the issue instead of dispatching.
type ConfigError struct {
	Source string
	Err    error
}

func (e *ConfigError) Error() string { return e.Err.Error() }
