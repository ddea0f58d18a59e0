package handlers

import (
	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers/sanitize"
)

// maxStages bounds the timings the bot keeps of a receipt.
const maxStages = 64

// vetSetupAndTimings cleans the receipt's setup report and timings: they
// are the sandbox's text like the rest, and the PR body shows them in a
// table row.
func vetSetupAndTimings(cp *dispatch.Result, redact func(string) string) {
	if s := cp.Setup; s != nil {
		v := *s
		switch v.Status {
		case dispatch.SetupRan, dispatch.SetupCached, dispatch.SetupFailed:
		default:
			v.Status = "unknown"
		}
		if !shaRE.MatchString(v.Key) {
			v.Key = ""
		}
		v.Cache = sanitize.Inline(redact(v.Cache), 300)
		cp.Setup = &v
	}
	if t := cp.Timings; t != nil {
		v := *t
		v.Stages = nil
		for i, s := range t.Stages {
			if i == maxStages {
				break
			}
			s.Stage = sanitize.Inline(redact(s.Stage), 40)
			s.Note = sanitize.Inline(redact(s.Note), 60)
			v.Stages = append(v.Stages, s)
		}
		cp.Timings = &v
	}
}
