package handlers

// SanitizeMarkdown is sanitizeMarkdown with the plan's cap, for the
// scenario tests that compare what the bot posts with it.
func SanitizeMarkdown(s string) string { return sanitizeMarkdown(s, maxPlanBytes) }
