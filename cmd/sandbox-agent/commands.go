package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// runCommand is one CLI command that runs the runner: its mode, the flags
// of its own, what it requires of them, and how it runs when that is more
// than one run and its report (create plans first).
type runCommand struct {
	mode  dispatch.Mode
	flags func(fs *flag.FlagSet, f *flags)
	// check validates the command's inputs and gives the task a title
	// when the command has one of its own.
	check func(o *options, f flags) error
	run   func(r *runs, ctx context.Context) int
}

// runCommands is the table of commands that start runs; validate and
// quickstart run nothing and are dispatched on their own.
func runCommands() map[string]runCommand {
	targetFlag := func(fs *flag.FlagSet, f *flags, what string) {
		fs.StringVar(&f.target, "target-branch", "", what)
	}
	needTask := func(o *options, _ flags) error {
		if o.task.Title == "" {
			return errors.New("--task is required")
		}
		return nil
	}
	return map[string]runCommand{
		"create": {
			mode: dispatch.ModeExecute,
			flags: func(fs *flag.FlagSet, f *flags) {
				fs.BoolVar(&f.yes, "yes", false, "execute the first plan without asking, even on a terminal")
			},
			check: needTask,
			run:   (*runs).create,
		},
		"task": {mode: dispatch.ModeTask, check: needTask},
		"continue": {
			mode: dispatch.ModeContinue,
			flags: func(fs *flag.FlagSet, f *flags) {
				fs.StringVar(&f.taskID, "task-id", "", "the interrupted task's id (T-XXXXXXXX)")
				targetFlag(fs, f, "the branch the task was working on")
				fs.StringVar(&f.plan, "plan", "", "the approved plan (@FILE reads a file)")
			},
			check: func(o *options, f flags) error {
				if !dispatch.ValidTaskID(f.taskID) {
					return fmt.Errorf("--task-id %q is not a task id (T-XXXXXXXX, printed by create)", f.taskID)
				}
				o.taskID = f.taskID
				return needTarget(o, f, "Continue ")
			},
		},
		"revise": {
			mode: dispatch.ModeRevise,
			flags: func(fs *flag.FlagSet, f *flags) {
				targetFlag(fs, f, "the branch to revise")
				fs.StringVar(&f.feedback, "feedback", "", "the review feedback (@FILE reads a file)")
			},
			check: func(o *options, f flags) error {
				if f.target == "" || strings.TrimSpace(o.feedback) == "" {
					return errors.New("--target-branch and --feedback are required")
				}
				return needTarget(o, f, "Revise ")
			},
		},
		"rebase": {
			mode:  dispatch.ModeRebase,
			flags: func(fs *flag.FlagSet, f *flags) { targetFlag(fs, f, "the branch to rebase") },
			check: func(o *options, f flags) error { return needTarget(o, f, "Rebase ") },
		},
	}
}

// needTarget requires --target-branch and titles a task given no text
// after what is done to the branch.
func needTarget(o *options, f flags, verb string) error {
	if f.target == "" {
		return errors.New("--target-branch is required")
	}
	if o.task.Title == "" {
		o.task.Title = verb + f.target
	}
	return nil
}
