package handlers

import (
	"fmt"

	"github.com/sandbox-bot/sandbox-bot/dispatch/sandboxcfg"
)

// flagOverCeiling checks a command's one-off flags against the operator's
// ceilings before anything else, so `/approve --budget 500` is answered with
// the ceiling and who can raise it, not with advice to edit .sandbox.yml.
func (s *starter) flagOverCeiling(command string, f sandboxcfg.Flags) (OverCeilingData, bool) {
	l := s.c.Limits
	switch {
	case l.MaxBudgetUSD > 0 && f.BudgetUSD > l.MaxBudgetUSD:
		return OverCeilingData{Command: command, Flag: "budget", Asked: fmt.Sprintf("$%.2f", f.BudgetUSD),
			Ceiling: fmt.Sprintf("$%.2f", l.MaxBudgetUSD), Within: fmt.Sprintf("%g", l.MaxBudgetUSD), Setting: "limits.max_budget_usd"}, true
	case l.MaxTimeoutMinutes > 0 && f.TimeoutMinutes > l.MaxTimeoutMinutes:
		return OverCeilingData{Command: command, Flag: "timeout", Asked: fmt.Sprintf("%d minutes", f.TimeoutMinutes),
			Ceiling: fmt.Sprintf("%d minutes", l.MaxTimeoutMinutes), Within: fmt.Sprint(l.MaxTimeoutMinutes), Setting: "limits.max_timeout_minutes"}, true
	case l.MaxAttempts > 0 && f.Attempts > l.MaxAttempts:
		return OverCeilingData{Command: command, Flag: "attempts", Asked: fmt.Sprintf("%d attempts", f.Attempts),
			Ceiling: fmt.Sprintf("%d attempts", l.MaxAttempts), Within: fmt.Sprint(l.MaxAttempts), Setting: "limits.max_attempts"}, true
	}
	return OverCeilingData{}, false
}
