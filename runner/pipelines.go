package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func (r *run) promptData() PromptData {
	names := map[string]string{}
	for k, v := range r.services {
		names[k] = v
	}
	task := r.order.Task
	if task.Report != nil {
		task.Body = r.reportText()
	}
	return PromptData{
		TaskID:       r.order.TaskID,
		Mode:         r.order.Mode,
		Repo:         r.order.Repo,
		Number:       r.order.Number,
		Task:         task,
		CI:           r.order.CI,
		Plan:         r.order.Plan,
		PlanFiles:    r.order.PlanFiles,
		StrictPlan:   r.cfg.Plan.Strict,
		Feedback:     r.order.Feedback,
		BaseBranch:   r.baseBranch,
		TargetBranch: r.order.TargetBranch,
		WorkDir:      r.dir,
		Checks:       r.cfg.Validate,
		Skills:       r.cfg.Skills,
		Services:     names,
		Variant:      r.order.Variant,
		Variants:     r.order.Variants,
	}
}

// reportText is an outsider's vouched report (the work order's
// Task.Report) as the body the prompts show: prompts/report, which quotes
// it as the reporter's words. A template that does not render leaves the
// body empty, as for a report that is not passed, and says so in the log.
func (r *run) reportText() string {
	text, err := render(r.opts.Templates, PromptReport, PromptData{TaskID: r.order.TaskID, Mode: r.order.Mode, Repo: r.order.Repo,
		Number: r.order.Number, Task: r.order.Task})
	if err != nil {
		r.log.Warn().Err(err).Msg("the reporter's words are not shown: prompts/report does not render")
		return ""
	}
	return strings.TrimSpace(text)
}

// plan runs the agent read-only and takes the plan from its final text.
func (r *run) plan() error {
	data := r.promptData()
	spec := agentSpec{Stage: "agent", ReadOnly: r.spec.readOnly}
	if r.order.Feedback != "" {
		if s := r.loadSession(); s != "" {
			spec.SessionID = s
			data.Continuing = true
		}
	}
	if spec.SessionID == "" {
		spec.Images = r.agentImages()
	}
	prompt, err := render(r.opts.Templates, r.spec.prompt, data)
	if err != nil {
		return err
	}
	spec.Prompt = prompt
	// What setup left in the tree (installs, generated files) is not the
	// agent's doing: a local commit, never pushed, sets it aside.
	if _, err := r.git.CommitAll(r.work, "sandbox: state after setup (plan mode, not pushed)"); err != nil {
		return err
	}
	out, err := r.agent(spec)
	if err != nil {
		return err
	}
	dirty, derr := r.git.Dirty(r.work)
	if derr != nil {
		return derr
	}
	if len(dirty) > 0 {
		return failed("plan mode must not change the repository, but the agent changed %d file(s): %s", len(dirty), strings.Join(clipList(dirty, 10), ", "))
	}
	if !out.OK() {
		return failed("%s", out.Problem())
	}
	if out.FinalText == "" {
		return failed("the agent ended without writing a plan")
	}
	r.res.Plan = out.FinalText
	r.res.PlanFiles = ParsePlanFiles(out.FinalText)
	r.savePlanSession()
	return nil
}

// implement is execute, continue and revise: one agent pass with the mode's
// prompt, then validation and repairs, pushing at each milestone.
func (r *run) implement() error {
	data := r.promptData()
	if r.spec.history && r.startSHA != r.baseSHA {
		h, err := r.git.History(r.work, "origin/"+r.baseBranch, 30)
		if err != nil {
			return err
		}
		data.History = h
	}
	spec := agentSpec{Stage: "agent"}
	if r.spec.resumesPlan {
		spec.SessionID = r.resumePlanSession()
	}
	if spec.SessionID == "" {
		spec.Images = r.agentImages() // a resumed session has them
	}
	stopPush := r.periodicPush()
	defer stopPush()

	out, aerr := r.agentResuming(spec, data)
	r.res.PRSummary = out.FinalText
	if aerr != nil {
		return aerr
	}
	if err := r.milestone(r.commitMessage()); err != nil {
		return err
	}
	if err := r.validateAndRepair(out.OK()); err != nil {
		return err
	}
	if !out.OK() {
		return failed("%s", out.Problem())
	}
	// No checkpoint may commit what the reviewer does in the checkout.
	stopPush()
	r.review()
	r.captureMedia()
	head, err := r.git.Head(r.work)
	if err != nil {
		return err
	}
	if head == r.startSHA {
		if r.spec.mustChange {
			return failed("the agent made no changes")
		}
		if head == r.baseSHA {
			return failed("the agent made no changes and the branch has none")
		}
	}
	return nil
}

// commitSubject is the subject line of the run's commits.
func (r *run) commitSubject() string {
	title := strings.TrimSpace(r.order.Task.Title)
	if title == "" {
		title = "Agent task"
	}
	if len(title) > 68 {
		title = strings.TrimSpace(title[:68]) + "…"
	}
	return r.spec.subject + title
}

func (r *run) commitMessage() string {
	subject := r.commitSubject()
	trailer := "Task: " + r.order.TaskID
	if r.order.Repo != "" && r.order.Number != 0 {
		trailer += fmt.Sprintf("\nIssue: %s#%d", r.order.Repo, r.order.Number)
	}
	return r.red.String(subject + "\n\nWritten by the sandbox-bot agent (" + string(r.order.Mode) + " mode).\n\n" + trailer)
}

// task runs the agent in the artifacts directory; there is no repository.
func (r *run) task() error {
	prompt, err := render(r.opts.Templates, r.spec.prompt, r.promptData())
	if err != nil {
		return err
	}
	out, aerr := r.agent(agentSpec{Stage: "agent", Prompt: prompt, Images: r.agentImages()})
	r.res.PRSummary = out.FinalText
	r.collectArtifacts()
	if aerr != nil {
		return aerr
	}
	if err := r.validateAndRepair(out.OK()); err != nil {
		return err
	}
	r.collectArtifacts()
	if !out.OK() {
		return failed("%s", out.Problem())
	}
	return nil
}

func (r *run) collectArtifacts() {
	var arts []string
	filepath.WalkDir(r.dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if rel, err := filepath.Rel(r.order.OutputDir, p); err == nil {
			arts = append(arts, filepath.ToSlash(rel))
		}
		return nil
	})
	sort.Strings(arts)
	r.res.Artifacts = arts
}
