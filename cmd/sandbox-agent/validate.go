package main

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

// validate checks the configuration layers and prints the result.
func (c *cli) validate(args []string) int {
	fs := flag.NewFlagSet("sandbox-agent validate", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	project := fs.String("project", "", "a .sandbox.yml, or a directory holding one")
	repo := fs.String("repo", "", "a repository whose .sandbox.yml to check too")
	org := fs.String("org", "", "an organisation's .sandbox.yml (the bot reads <owner>/.github's), beneath the repository's")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	o := &options{orgFile: *org}
	if *repo != "" {
		u, err := cloneURL(*repo)
		if err != nil {
			fmt.Fprintf(c.stderr, "sandbox-agent validate: %v\n", err)
			return exitUsage
		}
		o.repo = u
	}
	if *project == "" && *repo == "" {
		*project = "."
	}
	cfg, sources, origins, err := c.loadConfig(o, *project, sandboxcfg.Flags{})
	if err != nil {
		fmt.Fprintf(c.stderr, "%v\n", err)
		return exitNotDone
	}
	fmt.Fprintf(c.stdout, "ok: %s\n", strings.Join(sources, ", "))
	fmt.Fprintf(c.stdout, "  harness %s, model %q, budget $%.2f, timeout %dm, inactivity %ds\n", cfg.Harness, cfg.Model, cfg.MaxBudgetUSD, cfg.TimeoutMinutes, cfg.InactivitySeconds)
	fmt.Fprintf(c.stdout, "  plan required: %v, repair attempts: %d (budget $%.2f)\n", cfg.Plan.Required, cfg.Repair.Attempts, cfg.RepairBudget(cfg.MaxBudgetUSD))
	for _, ch := range cfg.Validate {
		fmt.Fprintf(c.stdout, "  check %s: %s (timeout %ds)\n", ch.Name, ch.Command, ch.TimeoutSeconds)
	}
	for _, s := range cfg.Lifecycle.Setup {
		fmt.Fprintf(c.stdout, "  setup: %s\n", s)
	}
	// Which file set what: the answer to "why is this value here?" when an
	// organisation's file sits beneath the repository's.
	fmt.Fprintln(c.stdout, "set by:")
	for _, key := range slices.Sorted(maps.Keys(origins)) {
		fmt.Fprintf(c.stdout, "  %-18s %s\n", key, origins[key])
	}
	fmt.Fprintln(c.stdout, "  (every other key has its built-in default)")
	return exitOK
}
