package sandboxinit

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// fallbackReceipt is the receipt the init leaves when the runner left
// none: the start failed before the runner, or the runner exited without
// writing one.
type fallbackReceipt struct {
	log     zerolog.Logger
	order   *dispatch.WorkOrder // none is written without a work order
	started time.Time
}

// nothingStarted is what a start that failed before its parts were built
// has to stop.
func nothingStarted() {}

// fail ends a start that did not reach the runner: it leaves a receipt the
// bot can turn into a comment, then stops what the start started.
func (r fallbackReceipt) fail(status dispatch.Status, err error, stop func()) int {
	r.log.Error().Err(err).Str("status", string(status)).Msg("sandbox start failed")
	if r.order != nil {
		r.writeIfMissing(status, "sandbox start: "+err.Error())
	}
	stop()
	if status == dispatch.StatusInterrupted {
		return exitInterrupted
	}
	return exitSetupFailed
}

// failStart is fail for a step of the start: stopped by a signal, the
// start is interrupted rather than failed.
func (r fallbackReceipt) failStart(ctx context.Context, err error, stop func()) int {
	if ctx.Err() != nil {
		return r.fail(dispatch.StatusInterrupted, fmt.Errorf("stopped while the sandbox was starting: %w", err), stop)
	}
	return r.fail(dispatch.StatusFailed, err, stop)
}

func (r fallbackReceipt) writeIfMissing(status dispatch.Status, msg string) {
	o := r.order
	if o.OutputDir == "" {
		return
	}
	if _, err := os.Stat(filepath.Join(o.OutputDir, dispatch.ResultFile)); err == nil {
		return
	}
	res := &dispatch.Result{
		TaskID:          o.TaskID,
		Mode:            o.Mode,
		Status:          status,
		DurationSeconds: time.Since(r.started).Seconds(),
		Branch:          o.TargetBranch,
		Error:           &dispatch.RunError{Message: msg},
	}
	if err := dispatch.WriteResult(o.OutputDir, res); err != nil {
		r.log.Error().Err(err).Msg("write fallback receipt")
		return
	}
	r.log.Info().Str("status", string(status)).Msg("fallback receipt written")
}
