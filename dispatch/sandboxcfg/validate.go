package sandboxcfg

import (
	"fmt"
	"github.com/bmatcuk/doublestar/v4"
	"maps"
	"regexp"
	"slices"
	"strings"
)

var (
	serviceName    = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	placeholder    = regexp.MustCompile(`\{([a-z0-9][a-z0-9_-]*)\}`)
	envNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// Harnesses the runner knows.
var knownHarnesses = []string{"opencode", "claude-code", "command"}

// Verify checks a configuration that has no file behind it (a merged or
// layered one). Errors name the field but not a position.
func (c *Config) Verify() error {
	if errs := c.validate("", nil); len(errs) > 0 {
		return errs
	}
	return nil
}

// report records one problem with a field.
type report func(field, format string, args ...any)

func (c *Config) validate(file string, pos positions) Errors {
	var errs Errors
	bad := func(field, format string, args ...any) {
		if len(errs) < maxErrors {
			errs = append(errs, &FieldError{File: file, Pos: pos[field], Field: field, Msg: fmt.Sprintf(format, args...)})
		}
	}
	c.validateRun(bad)
	c.validateServices(bad)
	c.validateEnv(bad)
	c.validateSections(bad)
	c.validateTaskMode(bad)
	return errs
}

// validateRun checks the mode, the harness and the run's bounds.
func (c *Config) validateRun(bad report) {
	if c.Mode != "" && c.Mode != ModeCoding && c.Mode != ModeTask {
		bad("mode", "must be coding or task, got %q", c.Mode)
	}
	if c.Harness != "" && !slices.Contains(knownHarnesses, c.Harness) {
		bad("harness", "must be one of %s, got %q%s", strings.Join(knownHarnesses, ", "), c.Harness, suggest(c.Harness, knownHarnesses))
	}
	if c.Harness == "command" && strings.TrimSpace(c.Command) == "" {
		bad("command", "is required when harness is command")
	}
	if c.MaxBudgetUSD < 0 {
		bad("max_budget_usd", "must not be negative, got %g", c.MaxBudgetUSD)
	}
	if c.TimeoutMinutes < 0 {
		bad("timeout_minutes", "must be at least 1, got %d", c.TimeoutMinutes)
	}
	if c.Attempts < 0 {
		bad("attempts", "must be at least 1, got %d", c.Attempts)
	}
	if c.InactivitySeconds < 0 {
		bad("inactivity_timeout", "must be at least 1, got %d", c.InactivitySeconds)
	}
}

// validateServices checks the services and their healthchecks.
func (c *Config) validateServices(bad report) {
	for _, name := range slices.Sorted(maps.Keys(c.Services)) {
		s := c.Services[name]
		p := "services." + name
		if !serviceName.MatchString(name) {
			bad(p, "service names are lower-case letters, digits, - and _ (they become host names)")
		}
		if strings.TrimSpace(s.Image) == "" {
			bad(p+".image", "is required")
		}
		for i, port := range s.Ports {
			if port < 1 || port > 65535 {
				bad(fmt.Sprintf("%s.ports[%d]", p, i), "must be a port between 1 and 65535, got %d", port)
			}
		}
		if hc := s.Healthcheck; hc != nil {
			kinds := 0
			if hc.TCP != 0 {
				kinds++
			}
			if hc.HTTP != "" {
				kinds++
			}
			if len(hc.Command) > 0 {
				kinds++
			}
			if kinds != 1 {
				bad(p+".healthcheck", "set exactly one of tcp, http, command")
			}
			if hc.TCP < 0 || hc.TCP > 65535 {
				bad(p+".healthcheck.tcp", "must be a port between 1 and 65535, got %d", hc.TCP)
			}
			if hc.HTTP != "" && !strings.Contains(hc.HTTP, "/") {
				bad(p+".healthcheck.http", "must be a path such as /health or port:/path, got %q", hc.HTTP)
			}
		}
	}
}

// validateEnv checks that every {placeholder} names a service.
func (c *Config) validateEnv(bad report) {
	for _, k := range slices.Sorted(maps.Keys(c.Env)) {
		for _, m := range placeholder.FindAllStringSubmatch(c.Env[k], -1) {
			if !c.knowsPlaceholder(m[1]) {
				known := "no services are defined"
				if len(c.Services) > 0 {
					known = "services: " + strings.Join(slices.Sorted(maps.Keys(c.Services)), ", ")
				}
				bad("env."+k, "placeholder {%s} names no service (%s)", m[1], known)
			}
		}
	}
}

// validateSections checks validate, dev, mcp, repair, network and
// resources.
func (c *Config) validateSections(bad report) {
	for i, ch := range c.Validate {
		if strings.TrimSpace(ch.Command) == "" {
			bad("validate."+ch.Name, "command is empty")
		}
		if ch.TimeoutSeconds < 0 {
			bad(fmt.Sprintf("validate.%s.timeout_seconds", c.Validate[i].Name), "must be positive")
		}
	}
	if c.Dev.Port < 0 || c.Dev.Port > 65535 {
		bad("dev.port", "must be a port between 1 and 65535, got %d", c.Dev.Port)
	}
	if c.Dev.Port != 0 && c.Dev.Command == "" {
		bad("dev.command", "is required when dev.port is set")
	}
	for i, r := range c.Dev.Routes {
		if !strings.HasPrefix(r, "/") {
			bad(fmt.Sprintf("dev.routes[%d]", i), "must start with /, got %q", r)
		}
	}
	for i, n := range c.Dev.PreviewSecrets {
		if !envNamePattern.MatchString(n) {
			bad(fmt.Sprintf("dev.preview_secrets[%d]", i), "must be an environment variable name (letters, digits, _), got %q", n)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.MCP)) {
		m := c.MCP[name]
		if (len(m.Command) == 0) == (m.URL == "") {
			bad("mcp."+name, "set exactly one of command, url")
		}
	}
	if a := c.Repair.Attempts; a != nil && (*a < 0 || *a > 5) {
		bad("repair.attempts", "must be between 0 and 5, got %d", *a)
	}
	if s := c.Repair.BudgetShare; s < 0 || s > 1 {
		bad("repair.budget_share", "must be between 0 and 1, got %g", s)
	}
	if c.Repair.MinBudgetUSD < 0 {
		bad("repair.min_budget_usd", "must not be negative")
	}
	if s := c.Review.BudgetShare; s < 0 || s > 1 {
		bad("review.budget_share", "must be between 0 and 1, got %g", s)
	}
	for i, a := range c.Secrets.Allow {
		if err := checkAllowGlob(a.Path); err != nil {
			bad(fmt.Sprintf("secrets.allow[%d].path", i), "%v, got %q", err, a.Path)
		}
	}
	for i, h := range c.Network.Allow {
		if _, err := ParseAllowEntry(h); err != nil {
			bad(fmt.Sprintf("network.allow[%d]", i), "%v, got %q", err, h)
		}
	}
	c.Cache.validate(bad)
	c.CI.validate(bad)
	c.Reports.validate(bad)
	c.Budgets.validate(bad)
	if c.Resources.CPU < 0 {
		bad("resources.cpu", "must not be negative")
	}
	if c.Resources.MemoryMB < 0 {
		bad("resources.memory_mb", "must not be negative")
	}
}

// validateTaskMode refuses what a task sandbox cannot do: it has no inner
// Docker daemon and no privileges.
func (c *Config) validateTaskMode(bad report) {
	if c.Mode == ModeTask && len(c.Network.Allow) > 0 {
		bad("network.allow", "task mode runs without privileges, so the sandbox cannot fence its network; drop the allowlist or use mode coding")
	}
	if c.Mode == ModeTask && len(c.Services) > 0 {
		bad("services", "task mode has no inner Docker daemon, so it cannot run services")
	}
	if c.Mode == ModeTask && c.Supabase {
		bad("supabase", "task mode has no inner Docker daemon, so it cannot start the Supabase stack")
	}
}

// knowsPlaceholder reports whether {name} resolves at run time.
func (c *Config) knowsPlaceholder(name string) bool {
	if _, ok := c.Services[name]; ok {
		return true
	}
	return c.Supabase && strings.HasPrefix(name, "supabase_")
}

// checkAllowGlob refuses a secrets.allow path that matches nothing a
// repository holds, or everything: an allowlist is for named places.
func checkAllowGlob(p string) error {
	switch {
	case strings.TrimSpace(p) == "":
		return fmt.Errorf("must name files")
	case strings.HasPrefix(p, "/") || strings.Contains(p, ".."):
		return fmt.Errorf("must be relative to the repository, without ..")
	case strings.Trim(p, "*/") == "":
		return fmt.Errorf("must not match every file")
	case !doublestar.ValidatePattern(p):
		return fmt.Errorf("is not a valid glob")
	}
	return nil
}
