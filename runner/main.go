package runner

import "context"

// Main runs `sandbox-runner run` and returns the exit code.
func Main(ctx context.Context, args []string) int {
	return 1
}
