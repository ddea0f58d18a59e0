package main

import (
	"embed"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// quickstartFS is the example project `sandbox-agent quickstart` writes:
// a tiny shell calculator whose .sandbox.yml runs offline with a demo
// agent. all: keeps .sandbox.yml and .sandbox/, which embed skips otherwise.
//
//go:embed all:quickstart
var quickstartFS embed.FS

const quickstartTask = "Document add.sh"

// quickstart writes the example project into a new directory and makes it
// a git repository with one commit.
func (c *cli) quickstart(args []string) int {
	fs := flag.NewFlagSet("sandbox-agent quickstart", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.Usage = func() {
		fmt.Fprintln(c.stderr, "usage: sandbox-agent quickstart [DIR]\n\nWrites an example project (a git repository) into DIR, default ./calc.")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 1 {
		fmt.Fprintf(c.stderr, "sandbox-agent quickstart: one directory at most, got %q\n", fs.Args())
		return exitUsage
	}
	dir := "calc"
	if fs.NArg() == 1 {
		dir = fs.Arg(0)
	}
	if err := writeQuickstart(dir); err != nil {
		fmt.Fprintf(c.stderr, "sandbox-agent quickstart: %v\n", err)
		return exitNotDone
	}
	fmt.Fprintf(c.stdout, "Wrote an example project to %s (a git repository with one commit).\n", dir)
	fmt.Fprintf(c.stdout, "Its agent is a demo script standing in for a model (see %s); next:\n\n", filepath.Join(dir, ".sandbox.yml"))
	fmt.Fprintf(c.stdout, "  %s create --repo %s --task %q\n", c.self, shellQuote(dir), quickstartTask)
	return exitOK
}

func writeQuickstart(dir string) error {
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return fmt.Errorf("%s exists and is not empty; name a new directory", dir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	err := fs.WalkDir(quickstartFS, "quickstart", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, strings.TrimPrefix(p, "quickstart"))
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := quickstartFS.ReadFile(p)
		if err != nil {
			return err
		}
		// embed keeps no modes: scripts are executable.
		mode := os.FileMode(0o644)
		if strings.HasSuffix(p, ".sh") {
			mode = 0o755
		}
		return os.WriteFile(dst, b, mode)
	})
	if err != nil {
		return fmt.Errorf("write %s: %w", dir, err)
	}
	// Identity and signing as flags, never the user's global config: the
	// commit must work on a fresh machine with no git identity.
	for _, args := range [][]string{
		{"init", "--quiet", "--initial-branch=main"},
		{"add", "--all"},
		{"-c", "user.name=sandbox-agent", "-c", "user.email=sandbox-agent@localhost", "-c", "commit.gpgsign=false",
			"commit", "--quiet", "--no-verify", "-m", "calc: an example project for sandbox-agent"},
	} {
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s in %s: %v: %s", args[0], dir, err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+:@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
