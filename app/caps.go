package app

import (
	"fmt"
	"strconv"
	"strings"
)

// applyCapsEnv reads the caps on concurrent runs from the environment
// (SANDBOX_MAX_RUNS, SANDBOX_MAX_RUNS_PER_INSTALLATION,
// SANDBOX_MAX_RUNS_PER_REPO), over the file's `caps`.
func (c *Config) applyCapsEnv(getenv Getenv) error {
	for _, n := range []struct {
		key string
		dst *int
	}{{"SANDBOX_MAX_RUNS", &c.Caps.Global}, {"SANDBOX_MAX_RUNS_PER_INSTALLATION", &c.Caps.PerInstallation}, {"SANDBOX_MAX_RUNS_PER_REPO", &c.Caps.PerRepo}} {
		if v, ok := getenv(n.key); ok {
			i, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || i < 0 {
				return fmt.Errorf("%s: %q is not a non-negative whole number (0 is no cap)", n.key, v)
			}
			*n.dst = i
		}
	}
	return c.validateCaps()
}

// validateCaps refuses negative caps from the file, naming the key.
func (c *Config) validateCaps() error {
	for _, n := range []struct {
		key string
		v   int
	}{{"caps.global", c.Caps.Global}, {"caps.per_installation", c.Caps.PerInstallation}, {"caps.per_repo", c.Caps.PerRepo}} {
		if n.v < 0 {
			return fmt.Errorf("SANDBOX_CONFIG %s: %d is negative (0 is no cap)", n.key, n.v)
		}
	}
	return nil
}
