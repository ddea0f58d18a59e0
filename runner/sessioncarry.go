package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/dispatch/agentsession"
	"github.com/sandbox-bot/sandbox-bot/runner/harness"
)

// The plan's agent session travels to the execute run: the plan run
// copies it (as the agent, from the CLI's own storage: OpenCode's
// database, Claude Code's transcripts) into an archive beside result.json,
// the bot hands the archive over in the execute run's work order, and the
// execute run puts the files back (as the agent, where the CLI finds them)
// and resumes the session, so the agent does not read the repository
// again. Neither side starts the agent's CLI to do it. Whatever stands in the way (no archive, another harness or model,
// a base branch that moved, an archive that does not read) falls back to
// a fresh session with the plan in the prompt, and the receipt says why.

// sessionCmdTimeout bounds one copy of a session, out or in.
const sessionCmdTimeout = 2 * time.Minute

// savePlan (plan mode, after a plan was written) leaves the agent's
// session id in outputDir for the execute run, bound by m (its repository,
// model, base and the plan) and returns the receipt's report of it; nil
// when there is nothing to save. It never fails the run.
func (s *sessions) savePlan(ctx context.Context, id, outputDir string, m agentsession.Manifest) *dispatch.SessionReport {
	p, ok := s.h.(harness.SessionPorter)
	if !ok || id == "" || outputDir == "" {
		return nil
	}
	rep := &dispatch.SessionReport{Harness: s.h.Name(), ID: id}
	notSaved := func(format string, args ...any) *dispatch.SessionReport {
		rep.Note = "not saved: " + s.red.String(fmt.Sprintf(format, args...))
		s.log.Warn().Str("session", id).Msg("agent session " + rep.Note)
		return rep
	}
	cmd, err := p.ExportSession(s.env, s.dir, id)
	if err != nil {
		return notSaved("%v", err)
	}
	// The database copy and its text: twice the data's cap.
	out, err := s.cmd(ctx, cmd, 2*agentsession.MaxDataBytes+64<<10)
	if err != nil {
		return notSaved("copy: %v", err)
	}
	data, text, err := p.SessionData(out)
	if err != nil {
		return notSaved("%v", err)
	}
	if name, found := s.secretIn(text); found {
		return notSaved("it holds the value of %s, a secret of the run", name)
	}
	m.TaskID, m.Harness, m.ID, m.Dir = s.taskID, s.h.Name(), id, s.dir
	archive, err := agentsession.Encode(m, data)
	if err != nil {
		return notSaved("%v", err)
	}
	path := filepath.Join(outputDir, dispatch.SessionArchiveFile)
	if err := os.WriteFile(path, archive, 0o644); err != nil {
		return notSaved("%v", err)
	}
	rep.Archive, rep.ArchiveBytes, rep.Note = dispatch.SessionArchiveFile, int64(len(archive)), "saved for the execute run"
	s.log.Info().Str("session", id).Int("bytes", len(archive)).Msg("agent session saved for the execute run")
	return rep
}

// resumePlan (execute mode) restores the session h hands over and
// returns its id, or "" when the agent starts fresh, and the receipt's
// report, which says which and why. want is what the session must have
// been made with: this run's model, base commit and base branch.
func (s *sessions) resumePlan(ctx context.Context, h *dispatch.SessionHandoff, want agentsession.Manifest, baseBranch string) (string, *dispatch.SessionReport) {
	rep := &dispatch.SessionReport{}
	fresh := func(format string, args ...any) (string, *dispatch.SessionReport) {
		rep.Note = "fresh: " + s.red.String(fmt.Sprintf(format, args...))
		s.log.Info().Str("from", rep.From).Msg("agent session " + rep.Note)
		return "", rep
	}
	if h == nil {
		return fresh("no plan session was handed over")
	}
	rep.From = h.FromTask
	if h.Missing != "" {
		return fresh("%s", h.Missing)
	}
	if len(h.Archive) == 0 {
		return fresh("the plan run %s left no session archive", h.FromTask)
	}
	m, data, err := agentsession.Decode(h.Archive)
	if err != nil {
		return fresh("the session archive does not read: %v", err)
	}
	rep.Harness, rep.ID = m.Harness, m.ID
	if why := bindingMismatch(m, h); why != "" {
		return fresh("%s", why)
	}
	p, ok := s.h.(harness.SessionPorter)
	switch {
	case m.Harness != s.h.Name():
		return fresh("the plan ran with %s, this run uses %s", m.Harness, s.h.Name())
	case !ok:
		return fresh("the %s harness cannot resume a session", s.h.Name())
	case m.Model != want.Model:
		return fresh("the plan ran with model %q, this run uses %q", m.Model, want.Model)
	case m.BaseSHA != "" && m.BaseSHA != want.BaseSHA:
		return fresh("%s moved since the plan (%.12s, now %.12s)", baseBranch, m.BaseSHA, want.BaseSHA)
	}
	cmd, err := p.ImportSession(s.env, m.ID, m.Dir, s.dir, data)
	if err != nil {
		return fresh("the session does not fit this checkout: %v", err)
	}
	if _, err := s.cmd(ctx, cmd, 1<<20); err != nil {
		return fresh("restoring the session failed: %v", err)
	}
	rep.Resumed, rep.Note = true, "resumed from plan "+h.FromTask
	s.log.Info().Str("from", h.FromTask).Str("session", m.ID).Msg("agent session resumed from the plan run")
	return m.ID, rep
}

// bindingMismatch says why an archive is not this run's to resume: it
// was made in another repository, or it is not the session that wrote the
// plan people approved. What the bot expects it to be bound to comes in the
// handoff; an archive bound to nothing (an older runner's) is not trusted
// where the bot expects a binding.
func bindingMismatch(m agentsession.Manifest, h *dispatch.SessionHandoff) string {
	switch {
	case h.RepoID != 0 && m.RepoID != h.RepoID:
		return fmt.Sprintf("the plan's session was made in another repository (id %d, this run's is %d)", m.RepoID, h.RepoID)
	case h.PlanSHA256 != "" && m.PlanSHA256 != h.PlanSHA256:
		return "the session archive is not the session that wrote the approved plan"
	}
	return ""
}

// cmd runs cmd as the agent, in its own process group, and returns its
// stdout, which may not pass limit bytes.
func (s *sessions) cmd(ctx context.Context, cmd *exec.Cmd, limit int) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, sessionCmdTimeout)
	defer cancel()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	s.agent.apply(cmd)
	out := &cappedBuffer{limit: limit}
	var stderr tailBuffer
	cmd.Stdout, cmd.Stderr = out, &stderr
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var err error
	select {
	case err = <-exited:
	case <-ctx.Done():
		signalGroup(cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		err = fmt.Errorf("stopped after %s: %w", sessionCmdTimeout, ctx.Err())
	}
	signalGroup(cmd.Process.Pid, syscall.SIGKILL)
	if out.over {
		return nil, fmt.Errorf("%s printed more than %d bytes", filepath.Base(cmd.Path), limit)
	}
	if err != nil {
		if tail := strings.TrimSpace(lastLines(stderr.String(), 5, 500)); tail != "" {
			err = fmt.Errorf("%w: %s", err, tail)
		}
		return nil, fmt.Errorf("%s: %w", filepath.Base(cmd.Path), err)
	}
	return out.buf.Bytes(), nil
}

// secretIn reports the first secret of the run found in data: the token,
// the secrets given to the run, and any provider key or other credential
// in the runner's environment (the process backend and the CLI have them
// there), so a session that echoed one never leaves the sandbox.
func (s *sessions) secretIn(data []byte) (string, bool) {
	s.red.Refresh()
	if s.red.Contains(data) {
		return "the token or a secret given to the run", true
	}
	for _, kv := range s.environ {
		k, v, _ := strings.Cut(kv, "=")
		if len(v) < 8 || v == dispatch.GatewayDummyKey || !credentialName(k) {
			continue
		}
		if bytes.Contains(data, []byte(v)) {
			return k, true
		}
	}
	return "", false
}

// credentialName reports whether an environment variable's name says it
// holds a credential.
func credentialName(k string) bool {
	k = strings.ToUpper(k)
	for _, w := range []string{"KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL"} {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

// cappedBuffer keeps what is written up to limit and notes when more came.
type cappedBuffer struct {
	buf   bytes.Buffer
	limit int
	over  bool
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	if c.buf.Len()+len(p) > c.limit {
		c.over = true
		return 0, errors.New("output over the cap")
	}
	return c.buf.Write(p)
}

// agentResuming renders the mode's prompt (short when the agent resumes
// the plan's session, which holds the task already) and runs the agent.
// A resumed session the CLI cannot continue (it fails before its first
// step) gets one fresh pass with the whole prompt.
func (r *agentDriver) agentResuming(spec agentSpec, tmpl string, data PromptData, images *imageSet) (*agentOutcome, error) {
	data.Continuing = spec.SessionID != ""
	prompt, err := render(r.templates, tmpl, data)
	if err != nil {
		return &agentOutcome{}, err
	}
	spec.Prompt = prompt
	out, aerr := r.agent(spec)
	if spec.SessionID == "" || aerr != nil || out.OK() || out.Usage.Steps > 0 || r.work.Err() != nil {
		return out, aerr
	}
	rep := r.res.Session
	rep.Resumed, rep.Note = false, "fresh: resuming failed: "+r.red.String(clipString(out.Problem(), 200))
	r.log.Warn().Str("problem", out.Problem()).Msg("the resumed agent session failed at once; starting a fresh one")
	data.Continuing, spec.SessionID, spec.Images = false, "", images.forAgent()
	if spec.Prompt, err = render(r.templates, tmpl, data); err != nil {
		return out, err
	}
	return r.agent(spec)
}
