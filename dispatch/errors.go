package dispatch

import (
	"context"
	"errors"
)

// Why a backend could not start a run, for the bot to tell people what to
// do. Backends wrap their errors with these where they can tell.
var (
	// ErrUnavailable: the Docker engine or Nomad did not answer. Usually
	// passing: the bot retries within its dispatch deadline.
	ErrUnavailable = errors.New("sandbox backend unreachable")
	// ErrImageMissing: the sandbox image is not there to run.
	ErrImageMissing = errors.New("sandbox image missing")
	// ErrIsolationRefused: the host refused the isolation profile (for
	// example privileged containers).
	ErrIsolationRefused = errors.New("isolation profile refused by the host")
)

// Transient reports whether err is worth retrying: anything but a problem
// an operator must fix first (image, isolation) or a cancelled context.
func Transient(err error) bool {
	return err != nil && !errors.Is(err, ErrImageMissing) && !errors.Is(err, ErrIsolationRefused) &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, ErrBadResult)
}

// ReadinessChecker is implemented by backends that can check, before any
// run, that they can start one: engine or Nomad reachable, image present,
// isolation profile accepted, somewhere to place runs. It returns one
// error per problem found (none when ready).
type ReadinessChecker interface {
	Ready(ctx context.Context) []error
}
