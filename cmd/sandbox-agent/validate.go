package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

// validate checks the configuration layers and prints the result.
func (c *cli) validate(args []string) int {
	fs := flag.NewFlagSet("sandbox-agent validate", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	project := fs.String("project", "", "a .sandbox.yml, or a directory holding one")
	repo := fs.String("repo", "", "a repository whose .sandbox.yml to check too")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	o := &options{}
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
	cfg, sources, err := c.loadConfig(o, *project, sandboxcfg.Flags{})
	if err != nil {
		fmt.Fprintf(c.stderr, "%v\n", err)
		return exitNotDone
	}
	fmt.Fprintf(c.stdout, "ok: %s\n", strings.Join(sources, ", "))
	fmt.Fprintf(c.stdout, "  harness %s, model %q, budget $%.2f, timeout %dm, inactivity %ds\n", cfg.Harness, cfg.Model, cfg.MaxBudgetUSD, cfg.TimeoutMinutes, cfg.InactivitySeconds)
	fmt.Fprintf(c.stdout, "  plan required: %v, repair attempts: %d (budget $%.2f)\n", cfg.PlanRequired(), cfg.RepairAttempts(), cfg.RepairBudgetUSD())
	for _, ch := range cfg.Validate {
		fmt.Fprintf(c.stdout, "  check %s: %s (timeout %ds)\n", ch.Name, ch.Command, ch.TimeoutSeconds)
	}
	for _, s := range cfg.Lifecycle.Setup {
		fmt.Fprintf(c.stdout, "  setup: %s\n", s)
	}
	return exitOK
}
