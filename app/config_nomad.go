package app

import (
	"fmt"
	"regexp"

	"github.com/sandbox-bot/sandbox-bot/dispatch/nomad"
)

// nomadNamespace is what Nomad accepts as a namespace name.
var nomadNamespace = regexp.MustCompile(`^[a-zA-Z0-9-]{1,128}$`)

// validateNomadNamespace refuses a sandbox namespace Nomad would refuse,
// and one that is the bot's own: the bot's policy grants alloc-exec in the
// sandboxes' namespace, which would reach the bot's own allocations too.
func (c *Config) validateNomadNamespace() error {
	if c.Backend != "nomad" {
		return nil
	}
	ns := c.Nomad.SandboxNamespace
	if ns == "" {
		ns = nomad.DefaultNamespace
	}
	own := c.Nomad.Namespace
	if own == "" {
		own = "default"
	}
	switch {
	case !nomadNamespace.MatchString(ns):
		return fmt.Errorf("SANDBOX_NOMAD_NAMESPACE: %q is not a Nomad namespace name (letters, digits and dashes, at most 128)", ns)
	case ns == own:
		return fmt.Errorf("SANDBOX_NOMAD_NAMESPACE: %q is the bot's own namespace (NOMAD_NAMESPACE); sandboxes need one of their own, where the bot's alloc-exec applies and nothing else runs", ns)
	}
	return nil
}
