package handlers

import (
	"github.com/sandbox-bot/sandbox-bot/handlers/sanitize"
)

// SanitizeMarkdown is sanitizeMarkdown with the plan's cap, for the
// scenario tests that compare what the bot posts with it.
func SanitizeMarkdown(s string) string { return sanitize.Markdown(s, sanitize.MaxPlanBytes) }
