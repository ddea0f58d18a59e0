package handlers

import (
	"regexp"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers/sanitize"
)

// Bounds on the receipt's media notes and tool counts: the sandbox writes
// them, so they are cut to what a PR body and a dashboard can show.
const (
	maxMediaNotes = 20
	maxToolNames  = 64
)

var toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,100}$`)

// vetMediaAndTools cleans the receipt's media notes (shown in the PR
// body) and keeps only tool names that are plain identifiers with a
// positive count.
func vetMediaAndTools(cp, res *dispatch.Result, redact func(string) string) {
	cp.MediaOmitted = nil
	for i, n := range res.MediaOmitted {
		if i == maxMediaNotes {
			break
		}
		cp.MediaOmitted = append(cp.MediaOmitted, sanitize.Inline(redact(n), 200))
	}
	cp.MediaError = sanitize.Inline(redact(res.MediaError), 300)
	cp.Tools = nil
	for name, c := range res.Tools {
		if !toolNameRE.MatchString(name) || c <= 0 || len(cp.Tools) == maxToolNames {
			continue
		}
		if cp.Tools == nil {
			cp.Tools = map[string]int{}
		}
		cp.Tools[name] = c
	}
}
