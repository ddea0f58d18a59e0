package main

import (
	"github.com/sandbox-bot/sandbox-bot/dispatch"
)

// planSession hands the agent session the plan run planTask left beside
// its receipt to the run that executes the plan, or says why there is none
// (the runner then starts a fresh session and its receipt says so).
func planSession(o *options, planTask string, res *dispatch.Result) *dispatch.SessionHandoff {
	h := &dispatch.SessionHandoff{FromTask: planTask}
	if res.Session == nil || res.Session.Archive == "" {
		h.Missing = "the plan run " + planTask + " saved no agent session"
		if res.Session != nil && res.Session.Note != "" {
			h.Missing += " (" + res.Session.Note + ")"
		}
		return h
	}
	b, err := dispatch.ReadOutputFile(o.outDir(planTask), dispatch.SessionArchiveFile, dispatch.MaxSessionArchiveBytes, dispatch.ErrBadSession)
	if err != nil {
		h.Missing = "the plan's session archive does not read: " + err.Error()
		return h
	}
	h.Harness, h.ID, h.Archive = res.Session.Harness, res.Session.ID, b
	return h
}
