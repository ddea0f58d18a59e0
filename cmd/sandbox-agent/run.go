package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

func (c *cli) execute(ctx context.Context, spec runCommand, o *options) int {
	b, done, err := c.newBackend(ctx, o)
	if err != nil {
		fmt.Fprintf(c.stderr, "sandbox-agent: %v\n", err)
		return exitUsage
	}
	defer done()
	if b.Name() == "docker" {
		fmt.Fprintf(c.stderr, "sandbox-agent: workspace %s (receipts stay there; sandboxes are removed after each run)\n", o.dataDir)
	} else {
		fmt.Fprintf(c.stderr, "sandbox-agent: workspace %s (runs, receipts and logs stay there)\n", o.dataDir)
	}
	if len(o.sources) > 0 {
		fmt.Fprintf(c.stderr, "sandbox-agent: configuration from %s\n", strings.Join(o.sources, ", "))
	}
	r := &runs{b: b, o: o, stdin: c.stdin, stdout: c.stdout, stderr: c.stderr, interactive: c.interactive}
	if spec.run != nil {
		return spec.run(r, ctx)
	}
	order := r.order(o.mode, "")
	if o.taskID != "" {
		// Each run is its own task in the backend; the interrupted task is
		// what this one continues.
		fmt.Fprintf(c.stderr, "sandbox-agent: continuing %s on %s as run %s\n", o.taskID, o.target, order.TaskID)
		order.Attempt = 2
	}
	res, code := r.runOne(ctx, order)
	if res != nil {
		r.report(order, res)
	}
	return code
}

// runs are one invocation's runs on its backend, followed on the
// terminal: the work orders it submits, each run's progress as it comes,
// the person's answer between a plan and its execution, and each
// receipt's essentials. execute builds them once the backend is up.
type runs struct {
	b              dispatch.Backend
	o              *options
	stdin          *bufio.Reader
	stdout, stderr io.Writer
	// interactive is whether a person answers on stdin and reads stdout.
	interactive bool
}

// create plans (when plan.required, the default), lets a person on a
// terminal execute, revise or abort, then executes the approved plan.
func (r *runs) create(ctx context.Context) int {
	o := r.o
	plan := ""
	var session *dispatch.SessionHandoff
	if o.cfg.Plan.Required {
		var feedback string
		for round := 1; ; round++ {
			po := r.order(dispatch.ModePlan, "")
			po.Plan, po.Feedback = plan, feedback
			res, code := r.runOne(ctx, po)
			if res == nil || res.Status != dispatch.StatusCompleted {
				if res != nil {
					r.report(po, res)
				}
				return code
			}
			plan, session = res.Plan, planSession(o, po.TaskID, res)
			fmt.Fprintf(r.stdout, "\n%s\n", renderMarkdown(plan, r.interactive))
			if !r.interactive || o.yes {
				fmt.Fprintln(r.stderr, "sandbox-agent: no terminal to ask: executing the plan (it is kept in the receipt)")
				break
			}
			choice, text, err := r.ask(round)
			if err != nil {
				fmt.Fprintf(r.stderr, "sandbox-agent: %v\n", err)
				return exitUsage
			}
			if choice == "abort" {
				fmt.Fprintln(r.stdout, "Aborted; nothing was changed.")
				return exitNotDone
			}
			if choice == "execute" {
				break
			}
			feedback = text
		}
	}
	eo := r.order(dispatch.ModeExecute, "")
	eo.Plan, eo.Session = plan, session
	res, code := r.runOne(ctx, eo)
	if res != nil {
		r.report(eo, res)
	}
	return code
}

// ask offers the choices after a plan; revise is offered while rounds
// remain.
func (r *runs) ask(round int) (string, string, error) {
	for {
		if round < maxPlanRounds {
			fmt.Fprintf(r.stdout, "[e]xecute this plan, [r]evise it with feedback (round %d of %d), or [a]bort? ", round, maxPlanRounds)
		} else {
			fmt.Fprint(r.stdout, "[e]xecute this plan or [a]bort (no revision rounds left)? ")
		}
		line, err := r.stdin.ReadString('\n')
		if err != nil && line == "" {
			return "", "", errors.New("no answer on stdin")
		}
		switch strings.ToLower(strings.TrimSpace(line)) {
		case "e", "execute", "y", "yes":
			return "execute", "", nil
		case "a", "abort", "q", "quit":
			return "abort", "", nil
		case "r", "revise":
			if round >= maxPlanRounds {
				continue
			}
			fmt.Fprint(r.stdout, "Feedback (one line): ")
			fb, err := r.stdin.ReadString('\n')
			if strings.TrimSpace(fb) == "" {
				if err != nil {
					return "", "", errors.New("no feedback on stdin")
				}
				continue
			}
			return "revise", strings.TrimSpace(fb), nil
		}
	}
}

// order builds a work order for the invocation's options in mode; taskID
// is derived when empty.
func (r *runs) order(mode dispatch.Mode, taskID string) dispatch.WorkOrder {
	o := r.o
	if taskID == "" {
		// Unique per run: every plan round and the execution are their own
		// task in the backend, like the bot's runs of one issue.
		taskID = dispatch.NewTaskID("local/"+o.repoLabel, 0, mode, o.taskID+strconv.FormatInt(time.Now().UnixNano(), 36)+strconv.Itoa(os.Getpid()))
	}
	w := dispatch.WorkOrder{
		SchemaVersion:  dispatch.WorkOrderVersion,
		RequestedAt:    time.Now().UTC(),
		TaskID:         taskID,
		Mode:           mode,
		Attempt:        1,
		CloneURL:       o.repo,
		BaseBranch:     o.base,
		TargetBranch:   o.target,
		Task:           o.task,
		Plan:           o.plan,
		Feedback:       o.feedback,
		Config:         *o.cfg,
		BudgetUSD:      o.cfg.MaxBudgetUSD,
		TimeoutMinutes: o.cfg.TimeoutMinutes,
		OutputDir:      "set-by-the-backend",
		SecretEnv:      o.passEnv,
	}
	if mode == dispatch.ModeExecute && w.TargetBranch == "" {
		w.TargetBranch = dispatch.BranchName(taskID, o.task.Title)
	}
	if mode == dispatch.ModeTask {
		w.CloneURL = ""
	}
	return w
}

// runOne submits order and follows it to the end, printing progress. ^C
// cancels the run: the runner pushes and writes its interrupted receipt.
func (r *runs) runOne(ctx context.Context, order dispatch.WorkOrder) (*dispatch.Result, int) {
	b, o := r.b, r.o
	spec := dispatch.RunSpec{
		Meta:  dispatch.Meta{TaskID: order.TaskID, Mode: order.Mode, Repo: order.Repo, Attempt: 1},
		Order: order,
	}
	if strings.HasPrefix(order.CloneURL, "http") {
		// Delivered as the run's 0600 token file, never in the work order.
		spec.Token = o.token
	}
	fmt.Fprintf(r.stderr, "sandbox-agent: %s run %s\n", order.Mode, order.TaskID)
	if _, err := b.Submit(context.WithoutCancel(ctx), spec); err != nil {
		fmt.Fprintf(r.stderr, "sandbox-agent: %v\n", err)
		return nil, exitUsage
	}
	cancelled := false
	for {
		_, err := b.Wait(ctx, order.TaskID, func(p dispatch.Progress) {
			line := fmt.Sprintf("  [%s] %s", p.Stage, p.Message)
			if p.CostUSD > 0 {
				line += fmt.Sprintf("  ($%.4f)", p.CostUSD)
			}
			fmt.Fprintln(r.stderr, line)
		})
		if err == nil {
			break
		}
		if ctx.Err() != nil && !cancelled {
			cancelled = true
			fmt.Fprintln(r.stderr, "sandbox-agent: stopping the run; the work so far is pushed...")
			if err := b.Cancel(context.WithoutCancel(ctx), order.TaskID); err != nil {
				fmt.Fprintf(r.stderr, "sandbox-agent: %v\n", err)
			}
			ctx = context.WithoutCancel(ctx)
			continue
		}
		fmt.Fprintf(r.stderr, "sandbox-agent: %v\n", err)
		return nil, exitNotDone
	}
	res, err := b.Result(context.WithoutCancel(ctx), order.TaskID)
	if err != nil {
		fmt.Fprintf(r.stderr, "sandbox-agent: %v (the run's files are in %s)\n", err, filepath.Dir(o.outDir(order.TaskID)))
		return nil, exitNotDone
	}
	if o.afterRun != nil {
		o.afterRun(order.TaskID)
	}
	if res.Status != dispatch.StatusCompleted {
		return res, exitNotDone
	}
	return res, exitOK
}

// report prints the receipt's essentials and where the full one is.
func (r *runs) report(order dispatch.WorkOrder, res *dispatch.Result) {
	o, w := r.o, r.stdout
	fmt.Fprintf(w, "\n%s %s: %s\n", res.Mode, res.TaskID, res.Status)
	if res.Error != nil {
		fmt.Fprintf(w, "  why:      %s\n", res.Error.Message)
		if d := res.Error.Diagnostic; d != nil {
			fmt.Fprintf(w, "  agent:    last event %s, step %d (%d done), $%.4f spent\n", d.LastEventType, d.CurrentStep, d.CompletedSteps, d.CostSoFarUSD)
		}
	}
	if s := strings.TrimSpace(res.PRSummary); s != "" {
		fmt.Fprintf(w, "  summary:  %s\n", strings.ReplaceAll(s, "\n", "\n            "))
	}
	if res.HeadSHA != "" {
		fmt.Fprintf(w, "  branch:   %s at %.12s, pushed to %s\n", res.Branch, res.HeadSHA, o.repoLabel)
		fmt.Fprintf(w, "  changes:  %d file(s), +%d -%d in %d commit(s)\n", res.DiffStats.FilesChanged, res.DiffStats.Insertions, res.DiffStats.Deletions, len(res.Commits))
		if len(res.Commits) > 0 && !strings.Contains(o.repoLabel, "://") && !strings.HasPrefix(o.repoLabel, "git@") {
			fmt.Fprintf(w, "  see it:   git -C %s log -p -n %d %s\n", shellQuote(o.repoLabel), len(res.Commits), res.Branch)
		}
	}
	tu := res.TokenUsage
	took := time.Duration(res.DurationSeconds * float64(time.Second))
	if took < 10*time.Second {
		took = took.Round(time.Millisecond) // a quick run must not read as 0s
	} else {
		took = took.Round(time.Second)
	}
	if tu.TotalCostUSD == 0 && tu.Input == 0 && tu.Output == 0 && tu.Steps == 0 {
		// A command agent that reports no usage: zeros would read as a
		// measurement.
		fmt.Fprintf(w, "  usage:    none reported by the agent, %s\n", took)
	} else {
		fmt.Fprintf(w, "  usage:    $%.4f, %d input + %d output tokens, %d steps, %s\n", tu.TotalCostUSD, tu.Input, tu.Output, tu.Steps, took)
	}
	for _, ch := range res.Validation {
		mark := "passed"
		if !ch.Passed {
			mark = "FAILED"
		}
		fmt.Fprintf(w, "  check:    %s %s (%d run(s))\n", ch.Name, mark, ch.Attempts)
	}
	if len(res.Repairs) > 0 {
		fmt.Fprintf(w, "  repairs:  %d\n", len(res.Repairs))
	}
	reportChecks(w, res)
	for _, a := range res.Artifacts {
		fmt.Fprintf(w, "  artifact: %s\n", filepath.Join(o.outDir(res.TaskID), a))
	}
	fmt.Fprintf(w, "  receipt:  %s\n", filepath.Join(o.outDir(res.TaskID), dispatch.ResultFile))
	if res.Status == dispatch.StatusInterrupted || res.Status == dispatch.StatusTimeout {
		fmt.Fprintf(w, "  resume:   sandbox-agent continue --repo %s --task-id %s --target-branch %s --task %q\n", o.repoLabel, res.TaskID, res.Branch, order.Task.Title)
	}
}

// reportChecks prints the checks before the PR: secrets held or accepted,
// dependency changes and advisories, files outside the plan, the review.
func reportChecks(w io.Writer, res *dispatch.Result) {
	if s := res.SecretScan; s != nil {
		fmt.Fprintf(w, "  secrets:  %d commit(s) scanned, %d removed by repairs, %d held back, %d accepted by allowlists\n", s.Commits, s.Repaired, len(s.Findings), len(s.Allowed))
		for _, f := range s.Findings {
			fmt.Fprintf(w, "            held: %s at %s:%d\n", f.Rule, f.File, f.Line)
		}
	}
	if d := res.Dependencies; d != nil {
		for _, c := range d.Changes {
			fmt.Fprintf(w, "  dep:      %s %s %s %s → %s (%s)\n", c.Change, c.Ecosystem, c.Name, c.From, c.To, c.Manifest)
		}
		for _, a := range d.Advisories {
			fmt.Fprintf(w, "  advisory: %s %s %s: %s\n", a.ID, a.Name, a.Version, a.Summary)
		}
	}
	if p := res.PlanScope; p != nil {
		for _, o := range p.Outside {
			fmt.Fprintf(w, "  outside:  %s (outside the approved plan) %s\n", o.File, o.Reason)
		}
	}
	if r := res.Review; r != nil {
		text := strings.TrimSpace(firstNonEmptyText(r.Text, r.Error))
		fmt.Fprintf(w, "  review:   $%.4f: %s\n", r.CostUSD, strings.ReplaceAll(text, "\n", "\n            "))
	}
}

func firstNonEmptyText(s ...string) string {
	for _, v := range s {
		if strings.TrimSpace(v) != "" {
			return v
		}
	}
	return ""
}
