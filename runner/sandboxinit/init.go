// Package sandboxinit is PID 1 of the sandbox container.
package sandboxinit

import "context"

// Main runs `sandbox-runner init` and returns the exit code.
func Main(ctx context.Context, args []string) int {
	return 1
}
