package handlers

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/appconfig"

	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

// orgConfigRepo holds an organisation's defaults for every repository, the
// way GitHub's own community files do.
const orgConfigRepo = ".github"

// newConfigLoader reads one repository's .sandbox.yml. go-githubapp's owner
// default is off: it only replaces a missing repository file, while the
// org's file is a layer beneath the repository's (loadConfig reads both).
func newConfigLoader() *appconfig.Loader {
	return appconfig.NewLoader([]string{sandboxcfg.FileName}, appconfig.WithOwnerDefault("", nil))
}

// loadConfig layers, lowest first: the server's defaults, the owner's
// `.github` repository's .sandbox.yml (its default branch), the
// repository's at ref, then the flags; and checks the result against the
// server's limits.
func (b *core) loadConfig(ctx context.Context, client *github.Client, owner, repo, ref string, flags sandboxcfg.Flags) (*sandboxcfg.Config, error) {
	var layers []sandboxcfg.Layer
	if repo != orgConfigRepo {
		org, err := b.readConfigLayer(ctx, client, owner, orgConfigRepo, "")
		if err != nil {
			return nil, err
		}
		layers = append(layers, org)
	}
	own, err := b.readConfigLayer(ctx, client, owner, repo, ref)
	if err != nil {
		return nil, err
	}
	layers = append(layers, own)
	resolved, _, err := sandboxcfg.ResolveLayers(b.Defaults, layers, flags, b.Limits)
	if err != nil {
		return nil, &ConfigError{Source: owner + "/" + repo, Err: err}
	}
	return resolved, nil
}

// readConfigLayer reads and parses one repository's file; a repository
// without one (or one the installation cannot read) is a layer with a nil
// Config.
func (b *core) readConfigLayer(ctx context.Context, client *github.Client, owner, repo, ref string) (sandboxcfg.Layer, error) {
	c, err := b.Loader.LoadConfig(ctx, client, owner, repo, ref)
	source := strings.TrimSuffix(c.Source, "@")
	if err != nil {
		return sandboxcfg.Layer{}, fmt.Errorf("read %s from %s: %w", sandboxcfg.FileName, source, err)
	}
	if c.IsUndefined() {
		return sandboxcfg.Layer{Name: owner + "/" + repo + ":" + sandboxcfg.FileName}, nil
	}
	name := source + ":" + c.Path
	parsed, err := sandboxcfg.Parse(c.Path, c.Content)
	if err != nil {
		return sandboxcfg.Layer{}, &ConfigError{Source: source, Err: err}
	}
	return sandboxcfg.Layer{Name: name, Config: parsed}, nil
}

// ConfigError is a .sandbox.yml that cannot be used; the bot quotes it on
// the issue instead of dispatching.
type ConfigError struct {
	Source string
	Err    error
}

func (e *ConfigError) Error() string { return e.Err.Error() }
