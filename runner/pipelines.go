package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/agentsession"
	"github.com/sandbox-bot/sandbox-bot/templates"
)

func (r *run) promptData() PromptData {
	names := map[string]string{}
	for k, v := range r.ws.services {
		names[k] = v
	}
	task := r.order.Task
	if task.Report != nil {
		task.Body = reportText(r.opts.Templates, r.order, r.log)
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
		BaseBranch:   r.ws.baseBranch,
		TargetBranch: r.order.TargetBranch,
		WorkDir:      r.ws.dir,
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
func reportText(t *templates.Set, order dispatch.WorkOrder, log zerolog.Logger) string {
	text, err := render(t, PromptReport, PromptData{TaskID: order.TaskID, Mode: order.Mode, Repo: order.Repo,
		Number: order.Number, Task: order.Task})
	if err != nil {
		log.Warn().Err(err).Msg("the reporter's words are not shown: prompts/report does not render")
		return ""
	}
	return strings.TrimSpace(text)
}

// plan runs the agent read-only and takes the plan from its final text.
func (r *run) plan() error {
	data := r.promptData()
	spec := agentSpec{Stage: "agent", ReadOnly: r.spec.readOnly}
	if r.order.Feedback != "" {
		if s := r.sessions().load(); s != "" {
			spec.SessionID = s
			data.Continuing = true
		}
	}
	if spec.SessionID == "" {
		spec.Images = r.images.forAgent()
	}
	prompt, err := render(r.opts.Templates, r.spec.prompt, data)
	if err != nil {
		return err
	}
	spec.Prompt = prompt
	// What setup left in the tree (installs, generated files) is not the
	// agent's doing: a local commit, never pushed, sets it aside.
	if _, err := r.ws.git.CommitAll(r.work, "sandbox: state after setup (plan mode, not pushed)"); err != nil {
		return err
	}
	out, err := r.ag.agent(spec)
	if err != nil {
		return err
	}
	dirty, derr := r.ws.git.Dirty(r.work)
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
	if rep := r.sessions().savePlan(r.work, r.ag.session, r.order.OutputDir, agentsession.Manifest{
		// Bound to this repository and to the plan as the receipt will
		// carry it (redacted), which is what the bot's plan comment records.
		Model: r.cfg.Model, BaseSHA: r.ws.baseSHA, RepoID: r.order.RepoID, PlanSHA256: agentsession.PlanDigest(r.red.String(r.res.Plan)),
	}); rep != nil {
		r.res.Session = rep
	}
	return nil
}

// implement is execute, continue and revise: one agent pass with the mode's
// prompt, then validation and repairs, pushing at each milestone.
func (r *run) implement() error {
	data := r.promptData()
	if r.spec.history && r.ws.startSHA != r.ws.baseSHA {
		h, err := r.ws.git.History(r.work, "origin/"+r.ws.baseBranch, 30)
		if err != nil {
			return err
		}
		data.History = h
	}
	spec := agentSpec{Stage: "agent"}
	if r.spec.resumesPlan {
		spec.SessionID, r.res.Session = r.sessions().resumePlan(r.work, r.order.Session, agentsession.Manifest{Model: r.cfg.Model, BaseSHA: r.ws.baseSHA}, r.ws.baseBranch)
	}
	if spec.SessionID == "" {
		spec.Images = r.images.forAgent() // a resumed session has them
	}
	stopPush := r.br.periodic(r.work, r.opts.PushInterval)
	defer stopPush()

	out, aerr := r.ag.agentResuming(spec, r.spec.prompt, data, r.images)
	r.res.PRSummary = out.FinalText
	if aerr != nil {
		return aerr
	}
	if err := r.br.milestone(r.work, commitMessage(r.order, r.spec.subject, r.red)); err != nil {
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
	if r.cfg.Review.Enabled && r.ws.pushes && r.work.Err() == nil {
		r.res.Review = r.reviewer().review(r.work, r.promptData())
	}
	if !r.spec.personsBranch {
		r.media().capture(r.work)
	}
	head, err := r.ws.git.Head(r.work)
	if err != nil {
		return err
	}
	if head == r.ws.startSHA {
		if r.spec.mustChange {
			return failed("the agent made no changes")
		}
		if head == r.ws.baseSHA {
			return failed("the agent made no changes and the branch has none")
		}
	}
	if r.spec.suggests {
		patch, err := suggestPatch(r.work, r.ws.git, r.ws.startSHA)
		r.res.PRPatch = patch
		return err
	}
	return nil
}

// commitSubject is the subject line of the run's commits: the mode's
// prefix and the task's title.
func commitSubject(prefix, title string) string {
	title = strings.TrimSpace(title)
	if title == "" {
		title = "Agent task"
	}
	if len(title) > 68 {
		title = strings.TrimSpace(title[:68]) + "…"
	}
	return prefix + title
}

// commitMessage is the message of the agent's work's commit.
func commitMessage(order dispatch.WorkOrder, prefix string, red *Redactor) string {
	subject := commitSubject(prefix, order.Task.Title)
	trailer := "Task: " + order.TaskID
	if order.Repo != "" && order.Number != 0 {
		trailer += fmt.Sprintf("\nIssue: %s#%d", order.Repo, order.Number)
	}
	return red.String(subject + "\n\nWritten by the sandbox-bot agent (" + string(order.Mode) + " mode).\n\n" + trailer)
}

// task runs the agent in the artifacts directory; there is no repository.
func (r *run) task() error {
	prompt, err := render(r.opts.Templates, r.spec.prompt, r.promptData())
	if err != nil {
		return err
	}
	out, aerr := r.ag.agent(agentSpec{Stage: "agent", Prompt: prompt, Images: r.images.forAgent()})
	r.res.PRSummary = out.FinalText
	r.res.Artifacts = artifacts(r.ws.dir, r.order.OutputDir)
	if aerr != nil {
		return aerr
	}
	if err := r.validateAndRepair(out.OK()); err != nil {
		return err
	}
	r.res.Artifacts = artifacts(r.ws.dir, r.order.OutputDir)
	if !out.OK() {
		return failed("%s", out.Problem())
	}
	return nil
}

// artifacts are the files a task left in dir, as paths relative to the
// output directory they are in.
func artifacts(dir, outputDir string) []string {
	var arts []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if rel, err := filepath.Rel(outputDir, p); err == nil {
			arts = append(arts, filepath.ToSlash(rel))
		}
		return nil
	})
	sort.Strings(arts)
	return arts
}
