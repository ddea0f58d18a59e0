package sandboxinit

import (
	"os"
	"path/filepath"
	"time"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// fail ends a start that did not reach the runner: it leaves a receipt the
// bot can turn into a comment, then stops the inner daemon.
func (s *sandbox) fail(status dispatch.Status, err error) int {
	s.log.Error().Err(err).Str("status", string(status)).Msg("sandbox start failed")
	if s.order != nil {
		s.writeReceiptIfMissing(status, "sandbox start: "+err.Error())
	}
	s.saves.Wait()
	s.shutdown()
	if status == dispatch.StatusInterrupted {
		return exitInterrupted
	}
	return exitSetupFailed
}

func (s *sandbox) writeReceiptIfMissing(status dispatch.Status, msg string) {
	o := s.order
	if o.OutputDir == "" {
		return
	}
	if _, err := os.Stat(filepath.Join(o.OutputDir, dispatch.ResultFile)); err == nil {
		return
	}
	r := &dispatch.Result{
		TaskID:          o.TaskID,
		Mode:            o.Mode,
		Status:          status,
		DurationSeconds: time.Since(s.started).Seconds(),
		Branch:          o.TargetBranch,
		Error:           &dispatch.RunError{Message: msg},
	}
	if err := dispatch.WriteResult(o.OutputDir, r); err != nil {
		s.log.Error().Err(err).Msg("write fallback receipt")
		return
	}
	s.log.Info().Str("status", string(status)).Msg("fallback receipt written")
}

func (s *sandbox) shutdown() {
	s.stopDockerFilter()
	if s.egress != nil {
		s.egress.stop()
		s.egress = nil
	}
	s.stopLazy()
	if s.daemon != nil {
		_ = s.daemon.stop()
		s.daemon = nil
	}
}
