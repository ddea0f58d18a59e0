package sandboxcfg

import "cmp"

// Ceilings that hold when the operator sets none, so that a server started
// without configuration cannot be asked for an unbounded run: budget and
// timeout bound what a run may spend, memory, CPU and pids what one sandbox
// may take from its host. An operator raises (or lowers) each under
// `limits:` in the server configuration.
const (
	CeilingBudgetUSD      = 10.0
	CeilingTimeoutMinutes = 120
	CeilingMemoryMB       = 8192
	// CeilingCPU is in the unit of Resources.CPU: 4000 is 4 CPUs on the
	// docker backend (--cpus 4) and 4000 MHz on Nomad.
	CeilingCPU  = 4000
	CeilingPids = 4096
	// CeilingAttempts bounds how many execute runs one approval starts.
	CeilingAttempts = 4
)

// WithDefaults returns the limits with every unset ceiling at its default.
func (l Limits) WithDefaults() Limits {
	l.MaxBudgetUSD = cmp.Or(l.MaxBudgetUSD, CeilingBudgetUSD)
	l.MaxTimeoutMinutes = cmp.Or(l.MaxTimeoutMinutes, CeilingTimeoutMinutes)
	l.MaxMemoryMB = cmp.Or(l.MaxMemoryMB, CeilingMemoryMB)
	l.MaxCPU = cmp.Or(l.MaxCPU, CeilingCPU)
	l.PidsLimit = cmp.Or(l.PidsLimit, CeilingPids)
	l.MaxAttempts = cmp.Or(l.MaxAttempts, CeilingAttempts)
	l.MaxCIFixAttempts = cmp.Or(l.MaxCIFixAttempts, CeilingCIFixAttempts)
	return l
}
